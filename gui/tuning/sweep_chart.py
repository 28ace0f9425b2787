"""Samples/s and mean step time against the first swept setting, one line per value of the second; the best of each starred.

The step time is the mean (global batch / samples/s), the one samples/s is
made from, so the two plots agree. Samples/s stars the sweep's best (the
point first to the target loss, or the most samples/s where that decides
nothing), and only when it is better beyond noise: on a tie the panel gives no
best and nothing is starred; step time stars its lowest: across batch sizes
they are different points, since a larger batch takes longer per step and does more per second.

The first setting's values sit at even spacing along x (batch sizes double,
precisions are names), labelled as the table writes them. Importing this
module imports pyqtgraph: the Sweep tab builds it on first use.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QWidget

from core.results import RunStatus
from core.tuning.sweep import SweepRow
from core.tuning.sweep_plan import SweepAxis, SweepPlan, format_setting

LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
BEST_COLOR = "#f2b600"
BEST_SIZE = 22
HEADROOM = 1.35  # room above the highest point for the legend


class SweepChart(QWidget):
    """Plots side by side: samples/s (higher is better), mean step time (lower is better) and, where the points
    measured it (an energy counter: NVML, powercap), energy per sample (lower is better)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sweepChart")
        self.rate_plot = _plot("sweepRatePlot", "Samples/s (★ best)", "samples/s")
        self.time_plot = _plot("sweepStepTimePlot", "Mean step time (★ lowest)", "ms")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.rate_plot, 1)
        layout.addWidget(self.time_plot, 1)
        self.energy_plot = _plot("sweepEnergyPlot", "Energy per sample, measured", "mJ")
        self.energy_plot.setVisible(False)  # shown only where some point measured its energy
        layout.addWidget(self.energy_plot, 1)
        self._series: dict[str, list[float | None]] = {}

    def series(self) -> dict[str, list[float | None]]:
        """Samples/s per line (named by the second setting's value, or 'samples/s'), one value per x position."""
        return {name: list(values) for name, values in self._series.items()}

    def show_sweep(self, plan: SweepPlan | None, rows: Sequence[SweepRow | None], best: int | None) -> None:
        """Redraw from the plan and the rows so far (None: not run yet); `best` is starred (None: no star, e.g. a tie)."""
        for plot in (self.rate_plot, self.time_plot, self.energy_plot):
            plot.getPlotItem().clear()
        self._series = {}
        measured = plan is not None and any(row is not None and row.result.joules_per_sample is not None for row in rows)
        self.energy_plot.setVisible(measured)
        if plan is not None:
            self._draw(plan.axes, rows, best)
            if measured:
                self._draw_energy(plan.axes, rows)

    def _draw_energy(self, axes: Sequence[SweepAxis], rows: Sequence[SweepRow | None]) -> None:
        """Each line's measured joules per sample, in mJ (points without a counter leave a gap)."""
        across = axes[0]
        lines = axes[1].values if len(axes) == 2 else (None,)
        item = self.energy_plot.getPlotItem()
        item.getAxis("bottom").setTicks([[(x, format_setting(across.name, value)) for x, value in enumerate(across.values)]])
        item.setLabel("bottom", across.title)
        item.setXRange(-0.5, len(across.values) - 0.5, padding=0)
        top = 0.0
        for line_index, line_value in enumerate(lines):
            picked = [rows[i] if i < len(rows) else None for i in (x * len(lines) + line_index for x in range(len(across.values)))]
            values = [None if (joules := _figure(row, "joules_per_sample")) is None else joules * 1000 for row in picked]
            name = format_setting(axes[1].name, line_value) if line_value is not None else None
            _line(self.energy_plot, values, LINE_COLORS[line_index % len(LINE_COLORS)], name)
            top = max([top, *filter(None, values)])
        item.setYRange(0, top * HEADROOM if top > 0 else 1.0, padding=0)

    def _draw(self, axes: Sequence[SweepAxis], rows: Sequence[SweepRow | None], best: int | None) -> None:
        across = axes[0]
        lines = axes[1].values if len(axes) == 2 else (None,)
        ticks = [[(x, format_setting(across.name, value)) for x, value in enumerate(across.values)]]
        for plot in (self.rate_plot, self.time_plot):
            plot.getPlotItem().getAxis("bottom").setTicks(ticks)
            plot.getPlotItem().setLabel("bottom", across.title)
            plot.getPlotItem().setXRange(-0.5, len(across.values) - 0.5, padding=0)
        tops = {self.rate_plot: 0.0, self.time_plot: 0.0}
        fastest = _lowest_step_index(rows)
        for line_index, line_value in enumerate(lines):
            indices = [x * len(lines) + line_index for x in range(len(across.values))]
            picked = [rows[i] if i < len(rows) else None for i in indices]
            name = format_setting(axes[1].name, line_value) if line_value is not None else None
            color = LINE_COLORS[line_index % len(LINE_COLORS)]
            for plot, figure, starred in ((self.rate_plot, "samples_per_s", best), (self.time_plot, "mean_step_ms", fastest)):
                values = [_figure(row, figure) for row in picked]
                _line(plot, values, color, name)
                tops[plot] = max([tops[plot], *filter(None, values)])
                position = indices.index(starred) if starred is not None and starred in indices else None
                starred_value = values[position] if position is not None else None
                if position is not None and starred_value is not None:
                    _star(plot, position, starred_value)
            self._series[name or "samples/s"] = [_figure(row, "samples_per_s") for row in picked]
        for plot, top in tops.items():
            plot.getPlotItem().setYRange(0, top * HEADROOM if top > 0 else 1.0, padding=0)


def _plot(object_name: str, title: str, unit: str) -> pg.PlotWidget:
    plot = pg.PlotWidget()
    plot.setObjectName(object_name)
    item = plot.getPlotItem()
    item.setTitle(title, size="10pt")
    item.setLabel("left", unit)
    item.getAxis("left").enableAutoSIPrefix(False)
    item.showGrid(x=False, y=True, alpha=0.25)
    item.setMenuEnabled(False)
    item.hideButtons()
    item.addLegend(offset=(10, 10))
    plot.setMinimumHeight(100)  # at 1024x700 the table above keeps three rows in view, even beside the autotune box
    return plot


def _figure(row: SweepRow | None, name: str) -> float | None:
    if row is None or row.status != RunStatus.COMPLETED:
        return None
    return getattr(row.result, name)


def _lowest_step_index(rows: Sequence[SweepRow | None]) -> int | None:
    """The index of the completed row with the lowest mean step time, or None."""
    times = [(value, index) for index, row in enumerate(rows) if (value := _figure(row, "mean_step_ms")) is not None]
    return min(times)[1] if times else None


def _star(plot: pg.PlotWidget, x: int, value: float) -> None:
    star = pg.ScatterPlotItem([x], [value], symbol="star", size=BEST_SIZE, brush=pg.mkBrush(BEST_COLOR), pen=pg.mkPen("k"))
    plot.getPlotItem().addItem(star)


def _line(plot: pg.PlotWidget, values: Sequence[float | None], color: str, name: str | None) -> None:
    """A line through the points that have a value (a failed point leaves a gap), each point a dot."""
    xs = [x for x, value in enumerate(values) if value is not None]
    ys = [value for value in values if value is not None]
    if xs:
        pen = pg.mkPen(color, width=2)
        plot.getPlotItem().plot(xs, ys, pen=pen, symbol="o", symbolSize=8, symbolBrush=color, symbolPen=color, name=name)

"""Live loss and step-time plots (pyqtgraph): several runs overlaid, warm-up marked, EMA smoothing.

Curves are created once per run and redrawn with `setData` from a 20 Hz timer,
from numpy arrays that grow by doubling; peak downsampling and clip-to-view keep
a million-step run smooth. Warm-up steps (tracing/compilation) get their own
marker and are left out of the y auto-range, so one slow first call does not
flatten the rest of the curve.
"""

from __future__ import annotations

import html
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gui.plot_export import save_plots
from gui.smoothing import EmaState, ema

REDRAW_INTERVAL_MS = 50
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
WARMUP_COLOR = "#ff8c00"
RAW_ALPHA = 45


class _GrowingArray:
    """A float64 array that appends in amortised O(1) by doubling its capacity."""

    def __init__(self, capacity: int = 1024):
        self._data = np.empty(capacity, dtype=np.float64)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        needed = self.size + len(values)
        if needed > len(self._data):
            grown = np.empty(max(needed, 2 * len(self._data)), dtype=np.float64)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : needed] = values
        self.size = needed

    def overwrite(self, start: int, values: np.ndarray) -> None:
        self._data[start : start + len(values)] = values

    @property
    def values(self) -> np.ndarray:
        return self._data[: self.size]


class _SteadyCurve(pg.PlotDataItem):
    """A curve whose y auto-range comes from `y_bounds` (its steady-state points), not from all points."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.y_bounds: tuple[float, float] | tuple[None, None] = (None, None)

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        if ax != 1:
            return super().dataBounds(ax, frac, orthoRange)
        low, high = self.y_bounds
        if low is None or not self.opts["logMode"][1]:
            return self.y_bounds
        if high <= 0:  # log axis (from the plot's context menu): only positive values show
            return (None, None)
        return (float(np.log10(low)) if low > 0 else float(np.log10(high)) - 1, float(np.log10(high)))


class _WarmupMarkers(pg.PlotDataItem):
    """Warm-up points: shown, but never part of the y auto-range."""

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        if ax == 1:
            return (None, None)
        return super().dataBounds(ax, frac, orthoRange)


@dataclass
class RunSeries:
    """One run's step series and its curves on both plots."""

    key: Hashable
    label: str
    color: str
    batch_size: int | None
    steps: _GrowingArray = field(default_factory=_GrowingArray)
    losses: _GrowingArray = field(default_factory=_GrowingArray)
    times_ms: _GrowingArray = field(default_factory=_GrowingArray)
    loss_smooth: _GrowingArray = field(default_factory=_GrowingArray)
    time_smooth: _GrowingArray = field(default_factory=_GrowingArray)
    loss_state: EmaState = EmaState()
    time_state: EmaState = EmaState()
    warmup_steps: int = 0
    steady_time_s: float = 0.0
    steady_count: int = 0
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    visible: bool = True
    _median: tuple[int, float | None] = (0, None)

    @property
    def size(self) -> int:
        return self.steps.size

    @property
    def samples_per_s(self) -> float | None:
        """Steady-state throughput so far (warm-up excluded), when the batch size is known."""
        if not self.batch_size or not self.steady_count or self.steady_time_s <= 0:
            return None
        return self.batch_size * self.steady_count / self.steady_time_s

    @property
    def median_step_ms(self) -> float | None:
        """Median steady-state step time; recomputed once the run grew by 1% (a million-step median costs ~10 ms)."""
        size, median = self._median
        if self.size != size and (median is None or self.size > size * 1.01 or self.size < size):
            steady = self.times_ms.values[self.warmup_steps :]
            median = float(np.median(steady)) if len(steady) else None
            self._median = (self.size, median)
        return median

    def widen_bounds(self, name: str, values: np.ndarray) -> None:
        """Grow a curve's steady-state y range to cover `values` (non-finite values ignored)."""
        finite = values[np.isfinite(values)]
        if not len(finite):
            return
        low, high = float(finite.min()), float(finite.max())
        if name in self.bounds:
            old_low, old_high = self.bounds[name]
            low, high = min(low, old_low), max(high, old_high)
        self.bounds[name] = (low, high)


class PlotsWidget(QWidget):
    """Loss and step time against step for any number of runs, with a run list and export."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("plotsWidget")
        self._runs: dict[Hashable, RunSeries] = {}
        self._dirty: set[Hashable] = set()
        self._next_color = 0
        self._smoothing = 0.6
        self._resmooth_pending = False
        self.loss_plot = self._make_plot("lossPlot", "loss", "")
        self.step_time_plot = self._make_plot("stepTimePlot", "step time", "ms")
        self.step_time_plot.setXLink(self.loss_plot)
        self.loss_plot.getPlotItem().addLegend(offset=(-10, 10), labelTextSize="9pt")
        self._build_side_panel()
        self._layout()
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._redraw)

    # --- public API ----------------------------------------------------------

    def add_run(
        self,
        key: Hashable,
        label: str,
        losses: Sequence[float] = (),
        step_times_s: Sequence[float] = (),
        warmup_steps: int = 0,
        batch_size: int | None = None,
    ) -> RunSeries:
        """Show a run (replacing one with the same key); more steps can follow via `append_steps`."""
        if key in self._runs:
            self.remove_run(key)
        series = RunSeries(key, label, PALETTE[self._next_color % len(PALETTE)], batch_size)
        self._next_color += 1
        self._create_items(series)
        self._runs[key] = series
        self._add_list_item(series)
        if len(losses):
            losses_array = np.asarray(losses, dtype=np.float64)
            self.append_steps(
                key,
                np.arange(1, len(losses_array) + 1, dtype=np.float64),
                losses_array,
                np.asarray(step_times_s, dtype=np.float64),
                np.arange(len(losses_array)) < warmup_steps,
            )
        self._redraw()
        return series

    def append_steps(
        self, key: Hashable, steps: np.ndarray, losses: np.ndarray, times_s: np.ndarray, warmup: np.ndarray
    ) -> None:
        """Add steps to a run; the curves catch up at the next redraw (at most 20 times a second)."""
        series = self._runs[key]
        if not len(steps):
            return
        times_ms = np.asarray(times_s, dtype=np.float64) * 1e3
        series.warmup_steps += int(np.count_nonzero(warmup))
        steady = ~np.asarray(warmup, dtype=bool)
        series.steady_count += int(np.count_nonzero(steady))
        series.steady_time_s += float(times_ms[steady].sum()) / 1e3
        series.steps.extend(steps)
        series.losses.extend(losses)
        series.times_ms.extend(times_ms)
        smoothed_loss, series.loss_state = ema(losses, self._smoothing, series.loss_state)
        series.loss_smooth.extend(smoothed_loss)
        smoothed_time = times_ms.copy()
        smoothed_time[steady], series.time_state = ema(times_ms[steady], self._smoothing, series.time_state)
        series.time_smooth.extend(smoothed_time)
        first_steady = max(0, series.warmup_steps - (series.size - len(steps)))
        for name, values in (("loss_raw", losses), ("loss", smoothed_loss), ("time_raw", times_ms), ("time", smoothed_time)):
            series.widen_bounds(name, np.asarray(values)[first_steady:])
        self._dirty.add(key)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Draw pending steps now instead of at the next timer tick (a run just ended)."""
        if self._dirty or self._resmooth_pending:
            self._redraw()

    def run_keys(self) -> list[Hashable]:
        return list(self._runs)

    def series(self, key: Hashable) -> RunSeries:
        """The data behind a run's curves (read-only use)."""
        return self._runs[key]

    def set_run_visible(self, key: Hashable, visible: bool) -> None:
        series = self._runs[key]
        series.visible = visible
        for item in series.items.values():
            item.setVisible(visible)
        list_item = self._list_item(key)
        if list_item is not None:
            list_item.setCheckState(Qt.CheckState.Checked if visible else Qt.CheckState.Unchecked)
        self._update_info()

    def remove_run(self, key: Hashable) -> None:
        series = self._runs.pop(key)
        self._dirty.discard(key)
        for name, item in series.items.items():
            plot = self.loss_plot if name.startswith("loss") else self.step_time_plot
            plot.removeItem(item)
        list_item = self._list_item(key)
        if list_item is not None:
            self.run_list.takeItem(self.run_list.row(list_item))
        self._update_info()

    def clear(self) -> None:
        """Remove every run from the plots."""
        for key in list(self._runs):
            self.remove_run(key)
        self._next_color = 0

    def set_smoothing(self, weight: float) -> None:
        """EMA weight 0..0.99, like TensorBoard's smoothing slider."""
        self.smoothing_slider.setValue(round(weight * 100))

    def save_image(self, path: str | Path) -> Path:
        """Export both plots, stacked, as PNG or SVG (by the file's suffix); returns the path written."""
        return save_plots([self.loss_plot.getPlotItem(), self.step_time_plot.getPlotItem()], path)

    # --- building ------------------------------------------------------------

    def _make_plot(self, name: str, y_label: str, units: str) -> pg.PlotWidget:
        plot = pg.PlotWidget(background="w")
        plot.setObjectName(name)
        item = plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("left", y_label, units=units)
        item.setLabel("bottom", "step")
        item.getAxis("left").enableAutoSIPrefix(False)
        item.getAxis("bottom").enableAutoSIPrefix(False)
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        item.setMenuEnabled(True)
        plot.setMinimumHeight(140)
        return plot

    def _build_side_panel(self) -> None:
        self.info_label = QLabel("No run yet: press Start (Ctrl+R).")
        self.info_label.setObjectName("throughputLabel")
        self.info_label.setWordWrap(True)
        self.info_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.smoothing_slider = QSlider(Qt.Orientation.Horizontal)
        self.smoothing_slider.setObjectName("smoothingSlider")
        self.smoothing_slider.setRange(0, 99)
        self.smoothing_slider.setValue(round(self._smoothing * 100))
        self.smoothing_slider.setToolTip("Exponential moving average of the curves, as in TensorBoard (0 = raw).")
        self.smoothing_value = QLabel(f"{self._smoothing:.2f}")
        self.smoothing_value.setMinimumWidth(32)
        self.smoothing_slider.valueChanged.connect(self._on_smoothing)
        self.run_list = QListWidget()
        self.run_list.setObjectName("runList")
        self.run_list.setToolTip("Tick to show a run, untick to hide it.")
        self.run_list.setWordWrap(True)
        self.run_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.run_list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.run_list.itemChanged.connect(self._on_list_item_changed)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setObjectName("clearPlotsButton")
        self.clear_button.setToolTip("Remove every run from the plots (the history keeps them).")
        self.clear_button.clicked.connect(self.clear)
        self.save_button = QPushButton("Save image…")
        self.save_button.setObjectName("savePlotsButton")
        self.save_button.setToolTip("Save both plots as a PNG or SVG file.")
        self.save_button.clicked.connect(self.ask_save)
        self.legend_note = QLabel(
            f"<span style='color:{WARMUP_COLOR}'>◆</span> warm-up steps (tracing, compilation): "
            "marked, and left out of the y range. Faint line: raw values."
        )
        self.legend_note.setObjectName("warmupNote")
        self.legend_note.setWordWrap(True)

    def _layout(self) -> None:
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.loss_plot)
        splitter.addWidget(self.step_time_plot)
        splitter.setChildrenCollapsible(False)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(QLabel("<b>Runs</b>"))
        side_layout.addWidget(self.run_list, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.clear_button)
        buttons.addWidget(self.save_button)
        side_layout.addLayout(buttons)
        smoothing_row = QHBoxLayout()
        smoothing_row.addWidget(QLabel("Smoothing"))
        smoothing_row.addWidget(self.smoothing_slider, 1)
        smoothing_row.addWidget(self.smoothing_value)
        side_layout.addLayout(smoothing_row)
        side_layout.addWidget(self.legend_note)
        side.setMinimumWidth(220)
        side.setMaximumWidth(300)
        body = QHBoxLayout()
        body.addWidget(splitter, 1)
        body.addWidget(side)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.info_label)
        layout.addLayout(body, 1)

    def _create_items(self, series: RunSeries) -> None:
        color = QColor(series.color)
        raw = QColor(color)
        raw.setAlpha(RAW_ALPHA)
        marker = dict(pen=None, symbol="d", symbolSize=9, symbolBrush=WARMUP_COLOR, symbolPen=pg.mkPen(color, width=1.5))
        series.items = {
            "loss_raw": _SteadyCurve(pen=pg.mkPen(raw, width=1)),
            "loss": _SteadyCurve(pen=pg.mkPen(color, width=2), name=series.label),
            "loss_warmup": _WarmupMarkers(**marker),
            "time_raw": _SteadyCurve(pen=pg.mkPen(raw, width=1)),
            "time": _SteadyCurve(pen=pg.mkPen(color, width=2)),
            "time_warmup": _WarmupMarkers(**marker),
        }
        for name, item in series.items.items():
            item.setZValue(-1 if name.endswith("_raw") else 1)  # every run's smoothed line above all raw ones
            (self.loss_plot if name.startswith("loss") else self.step_time_plot).addItem(item)
        self._show_raw(series)

    def _add_list_item(self, series: RunSeries) -> None:
        item = QListWidgetItem()
        item.setData(Qt.ItemDataRole.UserRole, series.key)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked)
        pixmap = QPixmap(QSize(12, 12))
        pixmap.fill(QColor(series.color))
        item.setIcon(QIcon(pixmap))
        self.run_list.blockSignals(True)
        self.run_list.addItem(item)
        self.run_list.blockSignals(False)
        self._refresh_list_item(series)

    def _refresh_list_item(self, series: RunSeries) -> None:
        item = self._list_item(series.key)
        if item is None:
            return
        rate = series.samples_per_s
        text = series.label + (f"\n{rate:,.0f} samples/s" if rate else "")
        self.run_list.blockSignals(True)
        item.setText(text)
        item.setToolTip(text)
        self.run_list.blockSignals(False)

    def _list_item(self, key: Hashable) -> QListWidgetItem | None:
        for row in range(self.run_list.count()):
            item = self.run_list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == key:
                return item
        return None

    # --- drawing -------------------------------------------------------------

    def _redraw(self) -> None:
        started = time.perf_counter()
        if self._resmooth_pending:
            self._resmooth()
        for key in list(self._dirty):
            series = self._runs.get(key)
            if series is not None:
                self._draw(series)
                self._refresh_list_item(series)
        self._dirty.clear()
        self._timer.stop()
        self._update_info()
        # Huge runs cost more per redraw: space redraws so they take at most a third of the GUI thread.
        spent_ms = (time.perf_counter() - started) * 1e3
        self._timer.setInterval(max(REDRAW_INTERVAL_MS, min(1000, int(3 * spent_ms))))

    def _draw(self, series: RunSeries) -> None:
        x = series.steps.values
        warm = series.warmup_steps
        curves = {
            "loss_raw": series.losses.values,
            "loss": series.loss_smooth.values,
            "time_raw": series.times_ms.values,
            "time": series.time_smooth.values,
        }
        for name, y in curves.items():
            item = series.items[name]
            item.y_bounds = series.bounds.get(name, (None, None))
            item.setData(x, y)
        series.items["loss_warmup"].setData(x[:warm], series.losses.values[:warm])
        series.items["time_warmup"].setData(x[:warm], series.times_ms.values[:warm])

    def _show_raw(self, series: RunSeries) -> None:
        for name in ("loss_raw", "time_raw"):
            series.items[name].setVisible(series.visible and self._smoothing > 0)

    def _update_info(self) -> None:
        visible = [s for s in self._runs.values() if s.visible and s.size]
        if not visible:
            self.info_label.setText("No run shown: press Start (Ctrl+R)." if not self._runs else "All runs hidden.")
            return
        latest = visible[-1]
        parts = [f"<b>{html.escape(latest.label)}</b>", f"{latest.size:,} steps"]
        if latest.samples_per_s:
            parts.append(f"<b>{latest.samples_per_s:,.0f} samples/s</b>")
        if latest.median_step_ms is not None:
            parts.append(f"median step {latest.median_step_ms:,.2f} ms")
        if latest.warmup_steps:
            warm_s = float(latest.times_ms.values[: latest.warmup_steps].sum()) / 1e3
            parts.append(f"warm-up {warm_s:,.2f} s ({latest.warmup_steps} step{'s' if latest.warmup_steps > 1 else ''})")
        finite = latest.losses.values[np.isfinite(latest.losses.values)]
        if len(finite):
            parts.append(f"loss {latest.losses.values[-1]:.4g}")
        self.info_label.setText(" · ".join(parts))

    # --- user actions --------------------------------------------------------

    def _on_smoothing(self, value: int) -> None:
        self._smoothing = value / 100
        self.smoothing_value.setText(f"{self._smoothing:.2f}")
        self._resmooth_pending = True
        self._dirty.update(self._runs)
        if not self._timer.isActive():
            self._timer.start()

    def _resmooth(self) -> None:
        """Smooth every run again with the current weight (once per redraw, however fast the slider moves)."""
        self._resmooth_pending = False
        for series in self._runs.values():
            warm = series.warmup_steps
            smoothed, series.loss_state = ema(series.losses.values, self._smoothing)
            series.loss_smooth.overwrite(0, smoothed)
            times = series.times_ms.values
            steady, series.time_state = ema(times[warm:], self._smoothing)
            series.time_smooth.overwrite(warm, steady)
            series.bounds.pop("loss", None)
            series.bounds.pop("time", None)
            series.widen_bounds("loss", smoothed[warm:])
            series.widen_bounds("time", steady)
            self._show_raw(series)

    def _on_list_item_changed(self, item: QListWidgetItem) -> None:
        key = item.data(Qt.ItemDataRole.UserRole)
        if key in self._runs:
            visible = item.checkState() == Qt.CheckState.Checked
            if visible != self._runs[key].visible:
                self.set_run_visible(key, visible)
                self._show_raw(self._runs[key])

    def ask_save(self) -> None:
        """Ask for a file name and save both plots there (PNG or SVG)."""
        path, chosen = QFileDialog.getSaveFileName(
            self, "Save plots", "device-lab-plots.png", "PNG image (*.png);;SVG vector image (*.svg)"
        )
        if not path:
            return
        if not Path(path).suffix:
            path += ".svg" if "svg" in chosen.lower() else ".png"
        try:
            saved = self.save_image(path)
        except OSError as exc:
            self.info_label.setText(f"Could not save the plots: {exc}")
            return
        self.info_label.setText(f"Plots saved to {saved}")

"""Live loss and step-time plots (pyqtgraph): several runs overlaid, warm-up marked, EMA smoothing.

Curves are created once per run and fed with `setData` from a timer while steps
arrive: at most 10 times a second, less when frames are slow (a frame, `setData`
and the paints after it, may take FRAME_SHARE of the time: the GUI thread shares
the GIL and the cores with training, so what the plots take, training loses),
never while the plots are hidden, and each plot paints in its own turn of the
event loop. Each curve gets one or two points per pixel from a min/max pyramid
(gui/decimation.py), so a million-step run keeps every peak without being scanned
each frame; panning and zooming redo only the curves the view has outgrown.
Warm-up steps (tracing/compilation) get their own marker and are left out of the
y auto-range, so one slow first call does not flatten the rest of the curve.

Paints stay cheap (gui/plot_view.py): 1-px cosmetic, opaque lines (a faint line
is the run's colour mixed into the background, not a translucent one), an opaque
grid under the data, and auto-range bounds the widget keeps itself, rounded out
so the axes hold still while a run grows.
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

from core.live.decimation import GrowingArray, MinMaxPyramid, envelope, pixel_envelope
from core.live.smoothing import EmaState, ema
from gui.plotting.export import save_plots
from gui.plotting.plot_view import PlotView, SteadyCurve, mix, sticky_range

REDRAW_INTERVAL_MS = 100  # at most 10 redraws a second while steps arrive
MAX_REDRAW_INTERVAL_MS = 1000
FRAME_SHARE = 0.03  # a frame (setData + paint) may take this share of the time: training pays for it (GIL, cores)
FULL_DETAIL_PER_PIXEL = 2  # a series with at most this many steps per pixel is drawn as it is
ZOOM_MARGIN = 0.5  # zoomed in, a curve is prepared this many view widths beyond each side, for panning
PAINT_STEP_GAP_MS = 5  # between the steps of a frame: timers that come due meanwhile (input, animations) go first
INFO_INTERVAL_S = 0.5  # while steps arrive, the figures above the plots change at most twice a second
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
WARMUP_COLOR = "#ff8c00"
RAW_WEIGHT = 0.2  # the faint raw line: this much of the run's colour over the background
CURVES = ("loss_raw", "loss", "time_raw", "time")


@dataclass(frozen=True)
class _Drawn:
    """What a curve holds: steps `low`..`high`, one point (`exact`) or one min/max bin per `step_per_bin` steps."""

    low: float
    high: float
    step_per_bin: float
    exact: bool
    log_x: bool


def _median(values: np.ndarray) -> float:
    """The median, as np.median takes it, without np.median's first-call import of numpy.ma (~20 ms, mid-run)."""
    middle = [(len(values) - 1) // 2, len(values) // 2]
    return float(np.partition(values, middle)[middle].mean())


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
    steps: GrowingArray = field(default_factory=GrowingArray)
    losses: GrowingArray = field(default_factory=GrowingArray)
    times_ms: GrowingArray = field(default_factory=GrowingArray)
    loss_smooth: GrowingArray = field(default_factory=GrowingArray)
    time_smooth: GrowingArray = field(default_factory=GrowingArray)
    pyramids: dict[str, MinMaxPyramid] = field(default_factory=lambda: {name: MinMaxPyramid() for name in CURVES})
    loss_state: EmaState = EmaState()
    time_state: EmaState = EmaState()
    warmup_steps: int = 0
    warmup_drawn: int = -1
    steady_time_s: float = 0.0
    steady_count: int = 0
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    drawn: dict[str, _Drawn | None] = field(default_factory=dict)
    visible: bool = True
    _median: tuple[int, float | None] = (0, None)

    @property
    def size(self) -> int:
        return self.steps.size

    def curve_values(self, name: str) -> np.ndarray:
        """The y values of curve `name` (one of CURVES)."""
        arrays = {"loss_raw": self.losses, "loss": self.loss_smooth, "time_raw": self.times_ms, "time": self.time_smooth}
        return arrays[name].values

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
            median = _median(steady) if len(steady) else None
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
        self._frame_s = 0.0
        self.loss_plot = self._make_plot("lossPlot", "loss", "")
        self.step_time_plot = self._make_plot("stepTimePlot", "step time", "ms")
        self.step_time_plot.setXLink(self.loss_plot)
        self.loss_plot.getPlotItem().addLegend(offset=(-10, 10), labelTextSize="9pt")
        self._build_side_panel()
        self._layout()
        self._interval_ms = REDRAW_INTERVAL_MS
        self._info_due = 0.0
        self._stale_text: set[Hashable] = set()
        self._held: list[PlotView] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)

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
        self.redraw_now()
        return series

    def append_steps(self, key: Hashable, steps: np.ndarray, losses: np.ndarray, times_s: np.ndarray, warmup: np.ndarray) -> None:
        """Add steps (in increasing step order) to a run; the curves catch up at the next redraw."""
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
        self._schedule()

    def redraw_now(self) -> None:
        """Bring the curves and figures up to date now (new steps, smoothing, view), as a timer tick would."""
        self._redraw(live=False)

    def flush(self) -> None:
        """Draw pending steps now instead of at the next timer tick (a run just ended)."""
        if self._dirty or self._resmooth_pending:
            self.redraw_now()

    def run_keys(self) -> list[Hashable]:
        return list(self._runs)

    def series(self, key: Hashable) -> RunSeries:
        """The data behind a run's curves (read-only use)."""
        return self._runs[key]

    def set_run_visible(self, key: Hashable, visible: bool) -> None:
        series = self._runs[key]
        series.visible = visible
        self._apply_visibility(series)
        list_item = self._list_item(key)
        if list_item is not None:
            list_item.setCheckState(Qt.CheckState.Checked if visible else Qt.CheckState.Unchecked)
        if visible:
            self._dirty.add(key)  # hidden curves are not kept up to date
            self._schedule(prompt=True)
        self._update_info()

    def remove_run(self, key: Hashable) -> None:
        series = self._runs.pop(key)
        self._dirty.discard(key)
        for name, item in series.items.items():
            self._plot_of(name).removeItem(item)
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
        self.flush()
        return save_plots([self.loss_plot.getPlotItem(), self.step_time_plot.getPlotItem()], path)

    # --- building ------------------------------------------------------------

    def _make_plot(self, name: str, y_label: str, units: str) -> PlotView:
        plot = PlotView()
        plot.setObjectName(name)
        item = plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("left", y_label, units=units)
        item.setLabel("bottom", "step")
        item.getAxis("left").enableAutoSIPrefix(False)
        item.getAxis("bottom").enableAutoSIPrefix(False)
        item.setMenuEnabled(True)
        view = item.getViewBox()
        view.sigXRangeChanged.connect(self._on_view_changed)
        view.sigResized.connect(self._on_view_changed)
        plot.background_changed.connect(self._on_background_changed)
        plot.setMinimumHeight(140)
        return plot

    def _plots(self) -> tuple[PlotView, PlotView]:
        return (self.loss_plot, self.step_time_plot)

    def _plot_of(self, name: str) -> PlotView:
        return self.loss_plot if name.startswith("loss") else self.step_time_plot

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
        marker = dict(pen=None, symbol="d", symbolSize=9, symbolBrush=WARMUP_COLOR, symbolPen=pg.mkPen(series.color, width=1.5))
        series.items = {
            "loss_raw": SteadyCurve(),
            "loss": SteadyCurve(name=series.label),
            "loss_warmup": _WarmupMarkers(**marker),
            "time_raw": SteadyCurve(),
            "time": SteadyCurve(),
            "time_warmup": _WarmupMarkers(**marker),
        }
        for name, item in series.items.items():
            item.setZValue(-1 if name.endswith("_raw") else 1)  # every run's smoothed line above all raw ones
            self._plot_of(name).addItem(item)
        self._set_pens(series)
        self._apply_visibility(series)

    def _set_pens(self, series: RunSeries) -> None:
        """1-px cosmetic, opaque pens: Qt's raster engine strokes wider lines and blends translucent ones pixel by pixel."""
        color = QColor(series.color)
        for name in CURVES:
            faint = mix(color, self._plot_of(name).background(), RAW_WEIGHT) if name.endswith("_raw") else color
            series.items[name].setPen(pg.mkPen(faint, width=1))

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

    def _schedule(self, prompt: bool = False) -> None:
        """Redraw at the next tick (`prompt`: as soon as the event loop is free); nothing while hidden."""
        if not self.isVisible():
            return
        if prompt:
            self._timer.start(0)
        elif not self._timer.isActive():
            self._timer.start(self._interval_ms)

    def _on_timer(self) -> None:
        """Timer tick: update the curves, then paint in short steps, each in its own turn of the event loop.

        A plot's axes (when its range moved), then the plot, then the other plot:
        done in one go, a frame would hold the GUI thread several times as long, and
        input and other timers would wait for all of it.
        """
        if not self.isVisible():  # hidden (another tab): `showEvent` catches up
            return
        for plot in self._plots():
            plot.setUpdatesEnabled(False)
        self._held = list(self._plots())
        self._redraw(live=True)
        QTimer.singleShot(PAINT_STEP_GAP_MS, self, self._paint_step)

    def _paint_step(self) -> None:
        """Lay out the next held plot's axes, or paint it now; then give other events a turn before the next step."""
        if not self._held:
            return
        plot = self._held[0]
        if not plot.prepare_axes():
            self._held.pop(0)
            plot.setUpdatesEnabled(True)
            plot.repaint()
        if self._held:
            QTimer.singleShot(PAINT_STEP_GAP_MS, self, self._paint_step)

    def _redraw(self, live: bool) -> None:
        """Draw what changed; `live` (a timer tick while steps arrive) refreshes the figures at most every INFO_INTERVAL_S."""
        self._timer.stop()
        started = time.perf_counter()
        paint_s = sum(plot.paint_s for plot in self._plots())
        for plot in self._plots():
            plot.paint_s = 0.0
        if self._resmooth_pending:
            self._resmooth()
        for _ in range(2):  # once more if settling the range made the view outgrow some curves
            for key in list(self._dirty):
                series = self._runs.get(key)
                if series is not None:
                    self._draw(series)
                    self._stale_text.add(key)
            self._dirty.clear()
            for plot in self._plots():  # settle auto-range and the linked x range now: one paint per plot, not two
                plot.scene().prepareForPaint()
            if not self._dirty:
                break
        if not live or started >= self._info_due:
            self._info_due = started + INFO_INTERVAL_S
            for key in self._stale_text & self._runs.keys():
                self._refresh_list_item(self._runs[key])
            self._stale_text.clear()
            self._update_info()
        # The last frame's cost is this call's work before it plus the paints since: keep frames to FRAME_SHARE.
        frame_ms = (self._frame_s + paint_s) * 1e3
        self._frame_s = time.perf_counter() - started
        self._interval_ms = int(max(REDRAW_INTERVAL_MS, min(MAX_REDRAW_INTERVAL_MS, frame_ms / FRAME_SHARE)))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty or self._resmooth_pending:
            self.redraw_now()

    def _draw(self, series: RunSeries) -> None:
        """Give every shown curve of `series` its points for the current view (hidden curves wait)."""
        for name in CURVES:
            item = series.items[name]
            item.x_bounds = (float(series.steps.values[0]), float(series.steps.values[-1])) if series.size else (None, None)
            item.y_bounds = series.bounds.get(name, (None, None))
            if item.isVisible():
                x, y, series.drawn[name] = self._points(series, name)
                item.setData(x, y)
        if series.warmup_drawn != series.warmup_steps:
            warm, x = series.warmup_steps, series.steps.values
            series.items["loss_warmup"].setData(x[:warm], series.losses.values[:warm])
            series.items["time_warmup"].setData(x[:warm], series.times_ms.values[:warm])
            series.warmup_drawn = warm

    def _points(self, series: RunSeries, name: str) -> tuple[np.ndarray, np.ndarray, _Drawn | None]:
        """Two or three points per pixel of curve `name`, over the part of the series the view shows or will show.

        Following the data (auto-range), that is the whole series; zoomed in, the
        view and ZOOM_MARGIN of it on each side. `_Drawn` is None when every step is drawn.
        """
        plot = self._plot_of(name)
        x, y = series.steps.values, series.curve_values(name)
        pixels = plot.pixels()
        if len(x) <= FULL_DETAIL_PER_PIXEL * pixels:
            return x, y, None
        view = plot.getPlotItem().getViewBox()
        log_x = bool(series.items[name].opts["logMode"][0])
        if self._following():
            low, high = self._x_extent()
            first, last = float(x[0]), float(x[-1])
        else:
            low, high = view.viewRange()[0]
            if log_x:
                low, high = 10.0 ** max(-300.0, min(300.0, low)), 10.0 ** max(-300.0, min(300.0, high))
            margin = ZOOM_MARGIN * (high - low)
            first, last = low - margin, high + margin
        if log_x:
            edges = np.geomspace(max(low, float(x[0])), max(high, float(x[0])), int(pixels) + 1)
            xs, ys = pixel_envelope(x, y, edges)
            return xs, ys, _Drawn(float(edges[0]), float(edges[-1]), 0.0, False, True)
        start = max(0, int(np.searchsorted(x, first)) - 1)
        stop = min(len(x), int(np.searchsorted(x, last, side="right")) + 1)
        step_per_pixel = (high - low) / pixels
        pyramid = series.pyramids[name]
        pyramid.update(y)  # takes in the steps that arrived since the last frame
        xs, ys = envelope(x, y, pyramid, start, stop, self._density(x, low, high) * step_per_pixel)
        exact = len(xs) == stop - start
        step_per_bin = (x[stop - 1] - x[start]) / max(1, len(xs) - 1 if exact else len(xs) // 2)
        return xs, ys, _Drawn(float(x[start]), float(x[stop - 1]), float(step_per_bin), exact, False)

    @staticmethod
    def _density(x: np.ndarray, low: float, high: float) -> float:
        """Values per step of `x` between `low` and `high` (over the whole series when fewer than two lie there)."""
        first, last = int(np.searchsorted(x, low)), int(np.searchsorted(x, high, side="right")) - 1
        if last - first < 1:
            first, last = 0, len(x) - 1
        span = float(x[last] - x[first])
        return (last - first) / span if span > 0 else float(last - first + 1)

    def _following(self) -> bool:
        """Whether the x range follows the data (auto-range on either plot; the other is linked to it)."""
        return any(plot.getPlotItem().getViewBox().autoRangeEnabled()[0] for plot in self._plots())

    def _x_extent(self) -> tuple[float, float]:
        """First and last step over the shown runs: the x range auto-range goes to."""
        shown = [s.steps.values for s in self._runs.values() if s.visible and s.size]
        if not shown:
            return (0.0, 1.0)
        return sticky_range(min(float(v[0]) for v in shown), max(float(v[-1]) for v in shown))

    def _outgrown(self, series: RunSeries) -> bool:
        """Whether the view now shows a part of `series`, or a detail, its drawn curves lack (or far more points than pixels)."""
        for name in CURVES:
            item, drawn = series.items[name], series.drawn.get(name)
            if drawn is None or not item.isVisible():
                continue
            if drawn.log_x or item.opts["logMode"][0]:
                return True
            plot = self._plot_of(name)
            low, high = plot.getPlotItem().getViewBox().viewRange()[0]
            first, last = float(series.steps.values[0]), float(series.steps.values[-1])
            if max(low, first) < drawn.low or min(high, last) > drawn.high:
                return True
            step_per_pixel = (high - low) / plot.pixels()
            if drawn.step_per_bin < step_per_pixel / 2 or (not drawn.exact and drawn.step_per_bin > 3 * step_per_pixel):
                return True
        return False

    def _on_view_changed(self, *_: object) -> None:
        """The x range or the plot's size changed: redo the curves that no longer have the detail to show."""
        outgrown = {key for key, series in self._runs.items() if key not in self._dirty and series.visible and self._outgrown(series)}
        if outgrown:
            self._dirty.update(outgrown)
            self._schedule()

    def _on_background_changed(self) -> None:
        for plot in self._plots():
            for axis in plot.axes:
                axis.restyle()
        for series in self._runs.values():
            self._set_pens(series)

    def _apply_visibility(self, series: RunSeries) -> None:
        for name, item in series.items.items():
            item.setVisible(series.visible and (self._smoothing > 0 or not name.endswith("_raw")))

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
        parts.append(f"loss {latest.losses.values[-1]:.4g}")
        self.info_label.setText(" · ".join(parts))

    # --- user actions --------------------------------------------------------

    def _on_smoothing(self, value: int) -> None:
        self._smoothing = value / 100
        self.smoothing_value.setText(f"{self._smoothing:.2f}")
        self._resmooth_pending = True
        self._dirty.update(self._runs)
        self._schedule(prompt=True)

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
            series.pyramids["loss"].clear()
            series.pyramids["time"].clear()
            self._apply_visibility(series)

    def _on_list_item_changed(self, item: QListWidgetItem) -> None:
        key = item.data(Qt.ItemDataRole.UserRole)
        if key in self._runs:
            visible = item.checkState() == Qt.CheckState.Checked
            if visible != self._runs[key].visible:
                self.set_run_visible(key, visible)

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

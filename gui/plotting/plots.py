"""Live loss and step-time plots (pyqtgraph): several runs overlaid, warm-up marked, EMA smoothing.

Curves are created once per run and fed with `setData` from a timer while steps
arrive: at most 10 times a second, less when frames are slow (a frame, `setData`
and the paints after it, may take FRAME_SHARE of the time: the GUI thread shares
the GIL and the cores with training, so what the plots take, training loses),
never while the plots are hidden, and each plot paints in its own turn of the
event loop. Each curve gets one or two points per pixel from a min/max pyramid
(gui/plotting/curves.py), so a million-step run keeps every peak without being
scanned each frame; panning and zooming redo only the curves the view has outgrown.
Warm-up steps (tracing/compilation) get their own marker and are left out of the
y auto-range, so one slow first call does not flatten the rest of the curve; nor
does a diverging run flatten the others' loss (see gui/plotting/plot_controls.py,
which also holds the loss plot's log-scale switch and the rest of the side column).

Paints stay cheap (gui/plotting/plot_view.py): 1-px cosmetic, opaque lines (a faint
line is the run's colour mixed into the background, not a translucent one), an
opaque grid under the data, and auto-range bounds the widget keeps itself, rounded
out so the axes hold still while a run grows. The step series themselves are kept
in gui/plotting/run_series.py, the run list in gui/plotting/run_list.py.
"""

from __future__ import annotations

import html
import time
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from core.formatting import format_value
from core.live.step_buffer import StepArrays
from gui.plotting.curves import create_curves, curve_points, outgrown, set_pens, show_labels
from gui.plotting.export import save_plots
from gui.plotting.plot_controls import PlotControls
from gui.plotting.plot_view import PlotView, sticky_range
from gui.plotting.run_series import CURVES, X_AXES, RunSeries
from gui.remembered import FOLDER_IMAGE, ask_save_file

REDRAW_INTERVAL_MS = 100  # at most 10 redraws a second while steps arrive
MAX_REDRAW_INTERVAL_MS = 1000
FRAME_SHARE = 0.03  # a frame (setData + paint) may take this share of the time: training pays for it (GIL, cores)
PAINT_STEP_GAP_MS = 5  # between the steps of a frame: timers that come due meanwhile (input, animations) go first
INFO_INTERVAL_S = 0.5  # while steps arrive, the figures above the plots change at most twice a second
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


class PlotsWidget(QWidget):
    """Loss and step time against step for any number of runs, with a run list and export."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("plotsWidget")
        self._runs: dict[Hashable, RunSeries] = {}
        self._dirty: set[Hashable] = set()
        self._next_color = 0
        self._smoothing = 0.6
        self.x_axis = "steps"  # one of X_AXES: what both plots' x axis counts
        self._resmooth_pending = False
        self._frame_s = 0.0
        self.loss_plot = self._make_plot("lossPlot", "loss", "")
        self.step_time_plot = self._make_plot("stepTimePlot", "step time", "ms")
        self.step_time_plot.setXLink(self.loss_plot)
        self.legend = self.loss_plot.getPlotItem().addLegend(offset=(-10, 10), labelTextSize="9pt")
        self.legend.setVisible(False)  # out of the data area unless asked for: the run list names every run
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
        create_curves(series, self._plot_of)
        self._apply_visibility(series)
        self._runs[key] = series
        self.run_list.add(series)
        self._relabel()
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
        if not len(steps):
            return
        self._runs[key].append(steps, losses, times_s, warmup, self._smoothing)
        self._dirty.add(key)
        self._schedule()

    def add_steps(self, key: Hashable, steps: StepArrays) -> None:
        """`append_steps` for a batch drained from a StepBuffer (what a job controller emits)."""
        self.append_steps(key, steps.steps, steps.losses, steps.times_s, steps.warmup)

    def redraw_now(self) -> None:
        """Bring the curves and figures up to date now (new steps, smoothing, view), as a timer tick would."""
        self._redraw(live=False)

    def flush(self) -> None:
        """Draw pending steps now instead of at the next timer tick (a run just ended)."""
        if self._dirty or self._resmooth_pending or self._stale_text:  # stale text: the last frame's figures were rate-limited
            self.redraw_now()

    def describe_run(self, key: Hashable, number: int | None, config: dict | None) -> None:
        """Give a run its history number and config: every label then says its number and what differs between the runs."""
        if key in self._runs:
            series = self._runs[key]
            series.number, series.config = number, config
            self._relabel()

    def key_of_run(self, number: int) -> Hashable | None:
        """The key of the plotted run that is history run `number` (live, compared or shown from the history), or None."""
        return next((key for key, series in self._runs.items() if series.number == number), None)

    def _relabel(self) -> None:
        for series in show_labels(list(self._runs.values()), self.loss_plot.getPlotItem().legend):
            self.run_list.refresh(series)

    def run_keys(self) -> list[Hashable]:
        """The keys of the runs shown, in the order they were added."""
        return list(self._runs)

    def series(self, key: Hashable) -> RunSeries:
        """The data behind a run's curves (read-only use)."""
        return self._runs[key]

    def set_run_visible(self, key: Hashable, visible: bool) -> None:
        """Show or hide a run's curves (its entry in the run list follows)."""
        series = self._runs[key]
        series.visible = visible
        self._apply_visibility(series)
        self.run_list.set_shown(key, visible)
        self.loss_scale.follow_runs(self._runs.values())
        if visible:
            self._dirty.add(key)  # hidden curves are not kept up to date
            self._schedule(prompt=True)
        self._update_info()

    def remove_run(self, key: Hashable) -> None:
        """Take a run's curves and its run-list entry away."""
        series = self._runs.pop(key)
        self._dirty.discard(key)
        for name, item in series.items.items():
            self._plot_of(name).removeItem(item)
        self.run_list.remove(key)
        self._relabel()
        self.loss_scale.follow_runs(self._runs.values())
        self._update_info()

    def clear(self) -> None:
        """Remove every run from the plots."""
        for key in list(self._runs):
            self.remove_run(key)
        self._next_color = 0

    def set_x_axis(self, axis: str) -> None:
        """Draw loss and step time against `axis` (one of X_AXES: steps, samples seen, seconds of training)."""
        if axis not in X_AXES or axis == self.x_axis:
            return
        self.x_axis = axis
        self.controls.x_axis_combo.setCurrentIndex(list(X_AXES).index(axis))
        title, unit = X_AXES[axis]
        for plot in self._plots():
            plot.getPlotItem().setLabel("bottom", title, units=unit)
            plot.getPlotItem().getViewBox().enableAutoRange(x=True)
        for series in self._runs.values():
            series.warmup_drawn = -1
            series.drawn.clear()
        self._dirty.update(self._runs)
        self.redraw_now()

    def save_image(self, path: str | Path) -> Path:
        """Export both plots, stacked, as PNG or SVG (by the file's suffix); returns the path written."""
        self.flush()
        return save_plots([self.loss_plot.getPlotItem(), self.step_time_plot.getPlotItem()], path)

    def ask_save(self) -> None:
        """Ask for a file name and save both plots there (PNG or SVG)."""
        path, chosen = ask_save_file(
            self, FOLDER_IMAGE, "Save plots", "device-lab-plots.png", "PNG image (*.png);;SVG vector image (*.svg)"
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
        self.controls = controls = PlotControls(self._smoothing, self.loss_plot)
        self.run_list, self.clear_button, self.save_button = controls.run_list, controls.clear_button, controls.save_button
        self.smoothing_slider, self.smoothing_value = controls.smoothing_slider, controls.smoothing_value
        self.loss_scale, self.legend_note = controls.loss_scale, controls.legend_note
        self.smoothing_slider.valueChanged.connect(self._on_smoothing)
        self.run_list.toggled.connect(self._on_run_toggled)
        self.clear_button.clicked.connect(self.clear)
        self.save_button.clicked.connect(self.ask_save)
        self.loss_scale.changed.connect(self._on_scale_changed)
        self.time_log_check, self.legend_check = controls.time_log_check, controls.legend_check
        self.time_log_check.toggled.connect(self._on_time_log)
        self.legend_check.toggled.connect(self.legend.setVisible)
        self.controls.x_axis_combo.currentIndexChanged.connect(lambda index: self.set_x_axis(list(X_AXES)[index]))

    def _layout(self) -> None:
        self._splitter = QSplitter(Qt.Orientation.Vertical)
        self._splitter.addWidget(self.loss_plot)
        self._splitter.addWidget(self.step_time_plot)
        self._splitter.setChildrenCollapsible(False)
        body = QHBoxLayout()
        body.addWidget(self._splitter, 1)
        body.addWidget(self.controls)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.info_label)
        layout.addLayout(body, 1)

    def add_below(self, widget: QWidget, linked: PlotView | None = None) -> None:
        """Put `widget` under the step-time plot (in the same splitter); `linked` shares the plots' step axis."""
        self._splitter.addWidget(widget)
        if linked is not None:
            linked.setXLink(self.step_time_plot)

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
        self._draw_dirty()
        if not live or started >= self._info_due:
            self._info_due = started + INFO_INTERVAL_S
            for key in self._stale_text & self._runs.keys():
                self.run_list.refresh(self._runs[key])
            self._stale_text.clear()
            self._update_info()
        # The last frame's cost is this call's work before it plus the paints since: keep frames to FRAME_SHARE.
        frame_ms = (self._frame_s + paint_s) * 1e3
        self._frame_s = time.perf_counter() - started
        self._interval_ms = int(max(REDRAW_INTERVAL_MS, min(MAX_REDRAW_INTERVAL_MS, frame_ms / FRAME_SHARE)))

    def _draw_dirty(self) -> None:
        """Draw the runs that changed, then settle the plots' ranges (twice if that made the view outgrow some curves)."""
        for _ in range(2):
            for key in list(self._dirty):
                series = self._runs.get(key)
                if series is not None:
                    self._draw(series)
                    self._stale_text.add(key)
            self._dirty.clear()
            self.loss_scale.follow_runs(self._runs.values())
            for plot in self._plots():  # settle auto-range and the linked x range now: one paint per plot, not two
                plot.scene().prepareForPaint()
            if not self._dirty:
                break

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty or self._resmooth_pending:
            self.redraw_now()

    def _draw(self, series: RunSeries) -> None:
        """Give every shown curve of `series` its points for the current view (hidden curves wait)."""
        follow = self._x_extent() if self._following() else None
        for name in CURVES:
            item = series.items[name]
            x_all = series.x_values(self.x_axis)
            item.x_bounds = (float(x_all[0]), float(x_all[-1])) if series.size else (None, None)
            item.y_bounds = self.loss_scale.y_bounds(series, name)
            if item.isVisible():
                x, y, series.drawn[name] = curve_points(series, name, self._plot_of(name), follow, self.x_axis)
                item.setData(x, y)
        if series.warmup_drawn != series.warmup_steps:
            warm, x = series.warmup_steps, series.x_values(self.x_axis)
            series.items["loss_warmup"].setData(x[:warm], series.losses.values[:warm])
            series.items["time_warmup"].setData(x[:warm], series.times_ms.values[:warm])
            series.warmup_drawn = warm

    def _following(self) -> bool:
        """Whether the x range follows the data (auto-range on either plot; the other is linked to it)."""
        return any(plot.getPlotItem().getViewBox().autoRangeEnabled()[0] for plot in self._plots())

    def _x_extent(self) -> tuple[float, float]:
        """First and last x over the shown runs: the x range auto-range goes to."""
        shown = [s.x_values(self.x_axis) for s in self._runs.values() if s.visible and s.size]
        if not shown:
            return (0.0, 1.0)
        return sticky_range(min(float(v[0]) for v in shown), max(float(v[-1]) for v in shown))

    def _on_view_changed(self, *_: object) -> None:
        """The x range or the plot's size changed: redo the curves that no longer have the detail to show."""
        stale = {
            key
            for key, series in self._runs.items()
            if key not in self._dirty and series.visible and outgrown(series, self._plot_of, self.x_axis)
        }
        if stale:
            self._dirty.update(stale)
            self._schedule()

    def _on_background_changed(self) -> None:
        for plot in self._plots():
            for axis in plot.axes:
                axis.restyle()
        for series in self._runs.values():
            set_pens(series, self._plot_of)

    def _apply_visibility(self, series: RunSeries) -> None:
        for name, item in series.items.items():
            item.setVisible(series.visible and (self._smoothing > 0 or not name.endswith("_raw")))

    def _update_info(self) -> None:
        newest = next(reversed(self._runs.values()), None)
        if newest is not None and newest.visible and not newest.size:  # just added: its own words, not the last run's figures
            self.info_label.setText(f"<b>{html.escape(newest.label)}</b> · no steps yet (building the model, compiling the step)…")
            return
        visible = [s for s in self._runs.values() if s.visible and s.size]
        if not visible:
            self.info_label.setText("No run shown: press Start (Ctrl+R)." if not self._runs else "All runs hidden.")
            return
        latest = visible[-1]
        parts = [f"<b>{html.escape(latest.label)}</b>", f"{format_value(latest.size, 'count')} steps"]
        if latest.samples_per_s:
            parts.append(f"<b>{format_value(latest.samples_per_s, 'rate')} samples/s</b>")
        if latest.median_step_ms is not None:
            parts.append(f"median step {format_value(latest.median_step_ms, 'ms')} ms")
        if latest.warmup_steps:
            steps = f"{latest.warmup_steps} step{'s' if latest.warmup_steps > 1 else ''}"
            parts.append(f"warm-up {format_value(latest.warmup_s, 'seconds')} s ({steps})")
        parts.append(f"loss {latest.losses.values[-1]:.4g}")
        self.info_label.setText(" · ".join(parts))

    # --- user actions --------------------------------------------------------

    def _on_smoothing(self, value: int) -> None:
        self._smoothing = value / 100
        self.smoothing_value.setText(f"{self._smoothing:.2f}")
        self._resmooth_pending = True
        self._dirty.update(self._runs)
        self._schedule(prompt=True)

    def _on_scale_changed(self) -> None:
        """Log or linear loss axis: every run's curves again, for the new scale."""
        self._dirty.update(self._runs)
        self._schedule(prompt=True)

    def _on_time_log(self, checked: bool) -> None:
        """Log or linear step-time axis."""
        self.step_time_plot.getPlotItem().setLogMode(y=checked)
        self._on_scale_changed()

    def _resmooth(self) -> None:
        """Smooth every run again with the current weight (once per redraw, however fast the slider moves)."""
        self._resmooth_pending = False
        for series in self._runs.values():
            series.resmooth(self._smoothing)
            self._apply_visibility(series)

    def _on_run_toggled(self, key: Hashable, shown: bool) -> None:
        if key in self._runs and shown != self._runs[key].visible:
            self.set_run_visible(key, shown)

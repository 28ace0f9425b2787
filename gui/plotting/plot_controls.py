"""The column beside the live plots: run list, Clear and Save, smoothing, the plots' scales, the legend switch, the warm-up note.

The run list names every run with its colour, so the plot's own legend stays
out of the data area unless asked for ("Legend in the plot"): with ten runs it
would cover the curves. Step time has its own log scale, for runs whose step
times are orders of magnitude apart (a ResNet beside an MLP).

The loss plot's scale: a log-scale switch, and a y range that one diverging run
cannot take over. Without a log scale, a run whose loss climbs to 2e7 would set
the y range for every run and flatten the others. So, on a linear scale, a run
whose highest (steady-state) loss is more than OFF_SCALE_FACTOR times the
typical run's (the lower median of the runs' highest values) is still drawn but
left out of the y range, and a note names it and points to the log scale,
which shows them all.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

from gui.plotting.curves import WARMUP_COLOR
from gui.plotting.plot_view import PlotView
from gui.plotting.run_list import RunList
from gui.plotting.run_series import RunSeries

OFF_SCALE_FACTOR = 10.0
LOSS_CURVES = ("loss_raw", "loss")


def off_scale(highs: Mapping[Hashable, float], factor: float = OFF_SCALE_FACTOR) -> set[Hashable]:
    """The runs whose highest value is more than `factor` times the typical run's (positive values only)."""
    if len(highs) < 2:
        return set()
    ordered = sorted(highs.values())
    typical = ordered[(len(ordered) - 1) // 2]
    if typical <= 0:
        return set()
    return {key for key, high in highs.items() if high > factor * typical}


class LossScale(QWidget):
    """ "Log scale" for the loss plot, and the runs kept out of its linear y range (with a note saying so).

    `changed` fires when the scale was switched: the owner redraws, and calls
    `update` with its runs after every redraw.
    """

    changed = Signal()

    def __init__(self, plot: PlotView, parent: QWidget | None = None):
        super().__init__(parent)
        self._plot = plot
        self.kept_out: set[Hashable] = set()
        self._stale = False
        self.log_check = QCheckBox("Log scale (loss)")
        self.log_check.setObjectName("lossLogCheck")
        self.log_check.setToolTip("Show the loss on a logarithmic axis: runs far apart in loss stay readable side by side.")
        self.log_check.toggled.connect(self._on_log)
        self.note = QLabel()
        self.note.setObjectName("offScaleNote")
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.log_check)
        layout.addWidget(self.note)

    @property
    def log(self) -> bool:
        return self.log_check.isChecked()

    def y_bounds(self, series: RunSeries, name: str) -> tuple[float, float] | tuple[None, None]:
        """What curve `name` of `series` offers the auto-range: nothing for a loss curve of a run kept out."""
        if name in LOSS_CURVES and series.key in self.kept_out:
            return (None, None)
        return series.bounds.get(name, (None, None))

    def follow_runs(self, runs: Iterable[RunSeries]) -> None:
        """Decide again which shown runs are kept out of the linear range; their curves and the note follow."""
        shown = [series for series in runs if series.visible and "loss_raw" in series.bounds]
        kept_out = set() if self.log else off_scale({s.key: s.bounds["loss_raw"][1] for s in shown})
        if kept_out == self.kept_out and not self._stale:
            return
        self.kept_out, self._stale = kept_out, False
        for series in shown:
            for name in LOSS_CURVES:
                item = series.items[name]
                item.y_bounds = self.y_bounds(series, name)
                item.informViewBoundsChanged()
        self._say([series for series in shown if series.key in kept_out])

    def _say(self, runs: list[RunSeries]) -> None:
        names = ", ".join(f"{series.shown_label or series.label} (loss up to {series.bounds['loss_raw'][1]:.3g})" for series in runs)
        self.note.setText(f"Off the scale, so that the other runs stay readable: {names}. Log scale shows every run." if runs else "")
        self.note.setVisible(bool(runs))

    def _on_log(self, checked: bool) -> None:
        self._plot.getPlotItem().setLogMode(y=checked)
        self._stale = True
        self.changed.emit()


class PlotControls(QWidget):
    """The side column's widgets, laid out; the plots widget connects them (`smoothing` is the starting weight)."""

    def __init__(self, smoothing: float, loss_plot: PlotView, parent: QWidget | None = None):
        super().__init__(parent)
        self.run_list = RunList()
        self.clear_button = QPushButton("Clear")
        self.clear_button.setObjectName("clearPlotsButton")
        self.clear_button.setToolTip("Remove every run from the plots (the history keeps them).")
        self.save_button = QPushButton("Save image…")
        self.save_button.setObjectName("savePlotsButton")
        self.save_button.setToolTip("Save both plots as a PNG or SVG file.")
        self.smoothing_slider = QSlider(Qt.Orientation.Horizontal)
        self.smoothing_slider.setObjectName("smoothingSlider")
        self.smoothing_slider.setRange(0, 99)
        self.smoothing_slider.setValue(round(smoothing * 100))
        self.smoothing_slider.setToolTip("Exponential moving average of the curves, as in TensorBoard (0 = raw).")
        self.smoothing_value = QLabel(f"{smoothing:.2f}")
        self.smoothing_value.setMinimumWidth(32)
        self.loss_scale = LossScale(loss_plot)
        self.x_axis_combo = QComboBox()
        self.x_axis_combo.setObjectName("xAxisCombo")
        self.x_axis_combo.addItems(["Steps", "Samples seen", "Seconds of training"])
        self.x_axis_combo.setToolTip(
            "What the x axis counts. Samples: steps × batch, so runs at different batches show what each sample taught. "
            "Seconds: the step times summed from the first step (warm-up included, pauses between rounds left out): "
            "which run got to a loss first."
        )
        self.time_log_check = QCheckBox("Log scale (step time)")
        self.time_log_check.setObjectName("stepTimeLogCheck")
        self.time_log_check.setToolTip("Show step time on a logarithmic axis: fast and slow models stay readable side by side.")
        self.legend_check = QCheckBox("Legend in the plot")
        self.legend_check.setObjectName("legendCheck")
        self.legend_check.setToolTip("The run list above names every run with its colour; the legend in the plot covers curves.")
        self.legend_note = QLabel(
            f"<span style='color:{WARMUP_COLOR}'>◆</span> warm-up steps (tracing, compilation): "
            "marked, and left out of the y range. Faint line: raw values."
        )
        self.legend_note.setObjectName("warmupNote")
        self.legend_note.setWordWrap(True)
        self._lay_out()

    def _lay_out(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("<b>Runs</b>"))
        layout.addWidget(self.run_list, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.clear_button)
        buttons.addWidget(self.save_button)
        layout.addLayout(buttons)
        smoothing_row = QHBoxLayout()
        smoothing_row.addWidget(QLabel("Smoothing"))
        smoothing_row.addWidget(self.smoothing_slider, 1)
        smoothing_row.addWidget(self.smoothing_value)
        layout.addLayout(smoothing_row)
        x_row = QHBoxLayout()
        x_row.addWidget(QLabel("x axis"))
        x_row.addWidget(self.x_axis_combo, 1)
        layout.addLayout(x_row)
        layout.addWidget(self.loss_scale)
        layout.addWidget(self.time_log_check)
        layout.addWidget(self.legend_check)
        layout.addWidget(self.legend_note)
        self.setMinimumWidth(220)
        self.setMaximumWidth(300)

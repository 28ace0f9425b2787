"""The Sweep tab: the run form's job with one or two settings varied, the rows side by side, the best one applied.

The job (model, data, target, steps, learning rate, the settings not swept)
comes from the run form; the settings varied and their values from
`SweepAxesBox`. Points run in interleaved rounds in a worker thread
(`gui.controllers.sweep`), each a normal run saved to the history under the
sweep's group. The table, the heat map (two settings) and the chart fill in as
points finish; "Use these settings" emits the picked row's settings (the best
one unless a row is selected) as RunConfig field changes for the run form.
The best is starred (table, heat map, chart) and named "best" only when it is
better beyond noise than every other point; otherwise it reads "tied", and the
notes say what the star compares (time to the target loss, or samples/s where
that decides nothing, and why).
The chart (pyqtgraph) is built when the first sweep starts, so the tab costs
nothing at start-up. The "Make it faster" box (largest batch, autotune) sits
beside the axes and works on the same job; its Apply fills the form the same way.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core.config import ConfigError, RunConfig
from core.formatting import format_value
from core.results import RunStatus
from core.tuning.sweep import BY_TIME, Sweep, SweepRow, best_by, best_index, target_decision, tied_with_best, why_not_most_samples
from core.tuning.sweep_plan import AXIS_TITLES, SweepPlan, format_setting, varied_settings
from gui.job_data import SweepJob, SweepOutcome
from gui.style import FAILED_COLOR
from gui.tuning.sweep_axes import SweepAxesBox
from gui.tuning.sweep_fit import TextArea, rows_height, whole_width
from gui.tuning.sweep_heatmap import SweepHeatMap
from gui.tuning.sweep_table import SweepTable
from gui.tuning.tuning_box import TuningBox

if TYPE_CHECKING:
    from gui.controllers.sweep import SweepController
    from gui.controllers.tuning import TuningController
    from gui.tuning.sweep_chart import SweepChart

NO_SWEEP_YET = "No sweep yet"
PLANNING = "Planning the points…"
CHART_PLACEHOLDER = "The chart appears when a sweep starts."
ROWS_IN_VIEW = 3  # the table keeps room for this many rows however short the window (1024x700 included)
TIED_WHY = "tied: not better beyond noise than the points tied with it"
PROGRESS_LINES = 2  # the progress line (or the sweep's outcome) above the table takes at most this many; it scrolls beyond
NOTES_LINES, LEAST_NOTES_LINES = 6, 3  # the notes under the chart: at most this many lines, this many in a short window


class ShownPageTabs(QTabWidget):
    """Tabs as tall as the page shown (QTabWidget asks for the tallest page's height whichever is shown)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentChanged.connect(lambda _index: self.updateGeometry())

    def sizeHint(self) -> QSize:
        return self._shown(super().sizeHint(), lambda page: page.sizeHint())

    def minimumSizeHint(self) -> QSize:
        return self._shown(super().minimumSizeHint(), lambda page: page.minimumSizeHint())

    def _shown(self, hint: QSize, page_hint) -> QSize:
        pages = [self.widget(index) for index in range(self.count())]
        if not pages or self.currentWidget() is None:
            return hint
        tallest = max(page_hint(page).height() for page in pages)
        return QSize(hint.width(), hint.height() - tallest + page_hint(self.currentWidget()).height())


class SweepPanel(QWidget):
    """Axes, Start sweep / Stop, live progress, the rows as a table, a heat map and a chart, and "Use these settings"."""

    running_changed = Signal(bool)
    settings_chosen = Signal(dict)  # RunConfig field changes, e.g. {"batch_size": 64, "precision": "bfloat16"}
    row_saved = Signal(object)  # SweepRow: a point is finished (and in the history when its run_id is set)
    message = Signal(str)  # for the status bar

    def __init__(
        self,
        controller: SweepController,
        tuning_controller: TuningController,
        config_source: Callable[[], RunConfig | None],
        errors_source: Callable[[], list[str]] | None = None,
        busy_source: Callable[[], bool] | None = None,
        parent: QWidget | None = None,
    ):
        """`controller` runs the sweeps, `tuning_controller` the largest-batch and autotune searches (both made by the window)."""
        super().__init__(parent)
        self.setObjectName("sweepPanel")
        self._config_source = config_source
        self._errors_source = errors_source or (lambda: [])
        self._busy_source = busy_source or (lambda: False)
        self.controller = controller
        self.tuning_box = TuningBox(
            tuning_controller, job_source=config_source, busy=lambda: self._busy_source() or self.controller.is_running()
        )
        self._plan: SweepPlan | None = None
        self._rows: list[SweepRow | None] = []
        self._sweep: Sweep | None = None
        self._tied: tuple[int, ...] = ()  # the rows tied with the best, as last shown
        self._chart: SweepChart | None = None
        self._build()
        self.controller.planned.connect(self._on_planned)
        self.controller.progress.connect(self._on_progress)
        self.controller.row_done.connect(self._on_row_done)
        self.controller.sweep_ready.connect(self._on_sweep_ready)
        self.controller.failed.connect(self._on_failed)
        self.controller.running_changed.connect(self._on_running_changed)
        self.tuning_box.controller.running_changed.connect(self._on_running_changed)
        self.tuning_box.settings_chosen.connect(self.settings_chosen)
        self._update_buttons()

    # --- public API ----------------------------------------------------------

    @property
    def sweep(self) -> Sweep | None:
        """The last finished sweep (None before the first, and while one runs)."""
        return self._sweep

    @property
    def best(self) -> int | None:
        """The index of the fastest completed row so far."""
        return best_index(self._rows)

    @property
    def starred(self) -> int | None:
        """The best row when it is better beyond noise than every other completed row; None when it is tied (or none ran)."""
        best = best_index(self._rows)
        return best if best is not None and not self._tied else None

    @property
    def chart(self) -> SweepChart:
        """The samples/s and step-time chart (pyqtgraph), built on first use."""
        if self._chart is None:
            from gui.tuning.sweep_chart import SweepChart

            self._chart = SweepChart()
            self._chart_layout.removeWidget(self._chart_placeholder)
            self._chart_placeholder.deleteLater()
            self._chart_layout.addWidget(self._chart)
        return self._chart

    def is_running(self) -> bool:
        """A sweep, a largest-batch search or an autotune is in flight."""
        return self.controller.is_running() or self.tuning_box.controller.is_running()

    def start_sweep(self) -> bool:
        """Sweep the run form's job over the chosen settings; False with the reason shown when it cannot start."""
        if self._busy_source() or self.is_running():
            self._show_problem("A run, comparison or search is in flight: wait for it to end (or stop it) before sweeping.")
            return False
        base = self._config_source()
        if base is None:
            self._show_problem("Fix the run form on the left first: " + (" ".join(self._errors_source()) or "it is not complete."))
            return False
        try:
            values = self.axes_box.values()
            varied_settings(values, AXIS_TITLES)
        except ConfigError as exc:
            self._show_problem(f"Not started: {exc}")
            return False
        self._plan, self._rows, self._sweep = None, [], None
        self._show()
        self.notes_label.setText("")
        self.progress_bar.setRange(0, 0)  # busy until planned: how many points depends on what this target runs usefully
        self.progress_bar.setFormat(PLANNING)
        self.progress_label.setStyleSheet("")
        self.progress_label.setText("Planning the sweep (which precisions this target runs usefully)…")
        return self.controller.start(SweepJob(base, values, self.axes_box.keep_slow()))

    def follow_in(self, bar: QProgressBar, label: QLabel) -> None:
        """Show in another bar and label (the run form's) that a sweep or search runs here, then that it has ended."""
        job = ["sweep"]  # what runs now or ran last: "sweep" or "search"

        def on_running(running: bool) -> None:
            if running:
                job[0] = "sweep" if self.controller.is_running() else "search"
            ended = f"The {job[0]} has ended: its results are in the Sweep tab."
            self.message.emit(f"A {job[0]} is running in the Sweep tab…" if running else ended)  # never left saying it runs
            bar.setRange(0, 1)
            bar.setValue(0 if running else 1)
            bar.setFormat(f"{job[0].capitalize()} running (Sweep tab)…" if running else f"{job[0].capitalize()} ended")
            label.setText(f"A {job[0]} is running: follow it in the Sweep tab (Stop or Esc ends it)." if running else ended)

        self.running_changed.connect(on_running)

    def stop(self) -> None:
        """End the point in flight after its current step call and skip the rest; stop a search too."""
        self.tuning_box.controller.stop()
        if self.controller.is_running():
            self.controller.stop()
            self.progress_label.setText(self.progress_label.text() + " · stopping…")

    def shutdown(self, timeout_s: float) -> bool:
        """Stop and wait for the sweep and search threads (closing the window)."""
        return self.controller.shutdown(timeout_s) & self.tuning_box.controller.shutdown(timeout_s)

    def chosen_index(self) -> int | None:
        """The row "Use these settings" applies: the selected completed row, else the best."""
        selected = self.table.selected_index()
        if selected is not None and selected < len(self._rows):
            row = self._rows[selected]
            if row is not None and row.status == RunStatus.COMPLETED:
                return selected
        return best_index(self._rows)

    def chosen_settings(self) -> dict[str, Any]:
        """The RunConfig field changes of the chosen row (with the scaled learning rate when asked); {} when none."""
        index = self.chosen_index()
        if index is None or self._plan is None:
            return {}
        row = self._rows[index]
        if row is None:
            return {}
        changes = dict(row.settings)
        lr = row.suggested_learning_rate
        if self.scale_lr_check.isChecked() and lr is not None and lr != self._plan.base.learning_rate:
            changes["learning_rate"] = lr
        return changes

    def use_settings(self) -> dict[str, Any]:
        """Emit the chosen row's settings for the run form; returns them."""
        changes = self.chosen_settings()
        if changes:
            self.settings_chosen.emit(changes)
            self.message.emit("Run form set to " + ", ".join(_change_text(key, value) for key, value in changes.items()) + ".")
        return changes

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        self.axes_box = SweepAxesBox()
        self.tool_tabs = ShownPageTabs()  # one at a time, as tall as the one shown: the rows keep their room
        self.tool_tabs.setObjectName("sweepToolTabs")
        self.tool_tabs.addTab(self.axes_box, "Sweep settings")
        self.tool_tabs.addTab(self.tuning_box, "Largest batch · autotune")
        self.tuning_box.setTitle("")  # its tab names it: the line a title takes goes to the rows below
        self.tool_tabs.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.tool_tabs)
        layout.addLayout(self._build_controls())
        layout.addWidget(TextArea(self.progress_label, "sweepProgressArea", PROGRESS_LINES))
        layout.addWidget(self._build_results(), 1)
        layout.addWidget(self.notes_area)
        layout.addLayout(self._build_apply_row())

    def _build_controls(self) -> QHBoxLayout:
        self.start_button = QPushButton("Start sweep")
        self.start_button.setObjectName("sweepStartButton")
        self.start_button.setToolTip(
            "Run the run form's job at every point, in interleaved rounds (every round runs each point once, in a new random order); "
            "each run is saved to the history."
        )
        self.start_button.clicked.connect(self.start_sweep)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("sweepStopButton")
        self.stop_button.setToolTip("End the point in flight after its current step call and skip the rest.")
        self.stop_button.clicked.connect(self.stop)
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("sweepProgressBar")
        self.progress_bar.setRange(0, 1)  # not Qt's 0..100: the point count is known only once the sweep is planned
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat(NO_SWEEP_YET)
        self.progress_label = QLabel("The job comes from the run form on the left; pick what to vary above.")
        self.progress_label.setObjectName("sweepProgress")
        self.progress_label.setWordWrap(True)
        self.progress_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addWidget(self.progress_bar, 1)
        return row

    def _build_results(self) -> QSplitter:
        """The table and the heat map above, the chart (built on first use) below."""
        self.table = SweepTable()
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.setMinimumHeight(rows_height(self.table, ROWS_IN_VIEW))  # the splitter gives the chart the rest
        self.heat_map = SweepHeatMap()
        tables = QSplitter(Qt.Orientation.Horizontal)
        tables.addWidget(self.table)
        tables.addWidget(self.heat_map)
        tables.setSizes([660, 280])
        tables.setChildrenCollapsible(False)
        charts = QWidget()
        self._chart_layout = QVBoxLayout(charts)
        self._chart_layout.setContentsMargins(0, 0, 0, 0)
        self._chart_placeholder = QLabel(CHART_PLACEHOLDER)
        self._chart_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._chart_layout.addWidget(self._chart_placeholder)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setObjectName("sweepSplitter")
        splitter.addWidget(tables)
        splitter.addWidget(charts)
        splitter.setChildrenCollapsible(False)
        splitter.setStretchFactor(0, 3)  # the rows first: a small window (1024x700) keeps several in view
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([330, 200])
        self.notes_label = QLabel("")
        self.notes_label.setObjectName("sweepNotes")
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_area = TextArea(self.notes_label, "sweepNotesArea", NOTES_LINES, LEAST_NOTES_LINES)
        return splitter

    def _build_apply_row(self) -> QHBoxLayout:
        self.use_button = QPushButton("Use these settings")
        self.use_button.setObjectName("sweepUseButton")
        self.use_button.clicked.connect(self.use_settings)
        self.scale_lr_check = QCheckBox("with the learning rate scaled to the batch")
        self.scale_lr_check.setObjectName("sweepScaleLr")
        self.scale_lr_check.setChecked(True)
        self.scale_lr_check.setToolTip("When the batch changes: lr x new batch / the run form's batch (the linear scaling rule).")
        self.chosen_label = QLabel("")
        self.chosen_label.setObjectName("sweepChosen")
        # what is left of the row, never more: a long point name must not widen the window past 1024 px (its tooltip is whole)
        self.chosen_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row = QHBoxLayout()
        row.addWidget(self.use_button)
        row.addWidget(self.scale_lr_check)
        row.addWidget(self.chosen_label, 1)
        return row

    # --- following -----------------------------------------------------------

    def _on_planned(self, plan: SweepPlan) -> None:
        self._plan = plan
        self._rows = [None] * len(plan.points())
        self.progress_bar.setRange(0, len(self._rows))
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("%v of %m points")
        self._show()

    def _on_progress(self, index: int, total: int, line: str) -> None:
        self.progress_label.setStyleSheet("")
        self.progress_label.setText(line)

    def _on_row_done(self, index: int, row: SweepRow) -> None:
        if index < len(self._rows):
            self._rows[index] = row
        self.progress_bar.setValue(sum(1 for item in self._rows if item is not None))
        self._show()
        self.row_saved.emit(row)

    def _on_sweep_ready(self, outcome: SweepOutcome) -> None:
        sweep = outcome.sweep
        self._sweep, self._plan, self._rows = sweep, sweep.plan, list(sweep.rows)
        self._show()
        done = sum(1 for row in sweep.rows if row.status == RunStatus.COMPLETED)
        best, tied = sweep.best, self._tied
        text = f"Sweep {'stopped' if sweep.stopped else 'done'}: {done} of {len(sweep.rows)} points completed."
        if best is not None and not tied:
            rate = format_value(sweep.rows[best].result.samples_per_s, "rate")
            text += f" Best: {sweep.rows[best].label} at {rate} samples/s."
        elif best is not None:
            names = ", ".join(sweep.rows[index].label for index in (best, *tied))
            text += f" No point is best beyond noise: {names} are tied."
        text += (
            f" {outcome.history_error}" if outcome.history_error else (f" Saved in the history as '{sweep.group}'." if sweep.group else "")
        )
        self.progress_label.setStyleSheet("")
        self.progress_label.setText(text)
        self.message.emit(text)

    def _on_failed(self, message: str) -> None:
        self._show_problem(f"The sweep did not run: {message}")

    def _on_running_changed(self, running: bool) -> None:
        if not running and self.progress_bar.maximum() == 0:  # ended before it was planned: no busy bar left behind
            self.progress_bar.setRange(0, 1)
            self.progress_bar.setFormat(NO_SWEEP_YET)
        self._update_buttons()
        self.running_changed.emit(running)

    # --- showing -------------------------------------------------------------

    def _show(self) -> None:
        self._tied = tied_with_best(self._rows)
        best, starred = best_index(self._rows), self.starred  # a star only on a best beyond noise
        self.table.show_sweep(self._plan, self._rows, best)
        self.table.setMinimumHeight(rows_height(self.table, ROWS_IN_VIEW))  # its header as filled
        self.heat_map.show_sweep(self._plan, self._rows, starred)
        self.heat_map.setVisible(self._plan is not None and len(self._plan.axes) == 2)
        self.heat_map.setMinimumWidth(whole_width(self.heat_map))  # its cells whole beside the table, at 1024 px too
        if self._chart is not None or self._plan is not None:
            self.chart.show_sweep(self._plan, self._rows, starred)
        self._show_notes()
        self._update_buttons()

    def _show_notes(self) -> None:
        plan = self._plan
        if plan is None:
            self.notes_label.setText("")
            self.notes_area.fit()
            return
        lines = [f"<b>{html.escape(plan.describe())}</b>"]
        lines += [f"Left out {html.escape(format_setting(item.axis, item.value))}: {html.escape(item.reason)}" for item in plan.left_out]
        lines += [html.escape(line) for line in self.best_notes()]
        if any(axis.name == "batch_size" for axis in plan.axes):
            lines.append(html.escape(Sweep(plan, ()).lr_note()))
        self.notes_label.setText("<br>".join(lines))
        self.notes_area.fit()  # shown (a hidden area hears of no text change)

    def best_notes(self) -> list[str]:
        """What the star compares (time to the target loss, or samples/s and why), and why the best is not the most samples/s."""
        if best_index(self._rows) is None:
            return []
        decision = target_decision(self._rows)
        if best_by(self._rows) == BY_TIME and decision.target_loss is not None:
            lines = [f"★ the point first to loss {decision.target_loss:.4g} in steady-state seconds (only when faster beyond noise)."]
        else:
            lines = [
                f"★ the point with the most samples/s (only when faster beyond noise): time to the target decides nothing ({decision.why})."
            ]
        why = why_not_most_samples(self._rows)
        return lines + ([why[0].upper() + why[1:] + "."] if why else [])

    def _show_problem(self, text: str) -> None:
        self.progress_label.setStyleSheet(f"color: {FAILED_COLOR};")
        self.progress_label.setText(text)
        self.message.emit(text)

    def _update_buttons(self) -> None:
        running = self.controller.is_running()
        self.start_button.setEnabled(not self.is_running())
        self.stop_button.setEnabled(running)
        self.axes_box.setEnabled(not running)
        index = self.chosen_index()
        self.use_button.setEnabled(index is not None)
        if index is None:
            self.chosen_label.setText("")
            self.use_button.setToolTip("Run a sweep first: the best point (or the row you select) fills the run form.")
            return
        row = self._rows[index]
        if row is None:
            return
        which, why = "selected", "the row you selected"
        if index == best_index(self._rows):
            which, why = ("best", "better beyond noise than every other point") if index == self.starred else ("tied", TIED_WHY)
        self.chosen_label.setText(f"{row.label} ({which})")
        self.chosen_label.setToolTip(f"{row.label}: {why}")
        self.use_button.setToolTip(f"Put {row.label} into the run form (select a row to pick another).")


def _change_text(key: str, value: Any) -> str:
    if key == "learning_rate":
        return f"learning rate {value:.3g}"
    return format_setting(key, value)

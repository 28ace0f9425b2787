"""The Compare tab: one job on several devices/strategies, side by side, with speed-ups against a baseline.

The job (model, data, global batch, steps, seed) comes from the run form; the
targets from checkboxes built from the detected devices plus a free-text field
(`gui.panels.compare_targets`). Runs go in interleaved rounds in a worker thread
(`gui.controllers.compare`), their curves overlaid live in the shared plots and
each saved to the history. The table (`gui.panels.compare_table`), the samples/s
bar chart and the fairness warnings fill in as runs finish; the baseline can
change at any time without re-running (`Comparison.with_baseline`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from core.compare.export import write_comparison
from core.compare.table import CompareRow, Comparison, SamplesToTarget, compare_results
from core.compare.targets import CompareTarget
from core.config import ConfigError, RunConfig
from core.jobs.rounds import DEFAULT_ROUNDS, MAX_ROUNDS
from core.machine.types import DeviceReport
from core.results import RunStatus
from core.workloads.workload import model_title
from gui.job_data import CompareJob, SavedTarget
from gui.panels.compare_notes import CompareNotes
from gui.panels.compare_table import CompareTable, default_baseline
from gui.panels.compare_targets import CompareTargetsBox, target_offers
from gui.panels.projection import ProjectionView
from gui.plotting.bar_chart import BarChart
from gui.plotting.plots import PlotsWidget
from gui.remembered import FOLDER_EXPORT, ask_save_file
from gui.style import FAILED_COLOR

if TYPE_CHECKING:
    from gui.controllers.compare import CompareController

TABLE_MIN_ROWS = 4  # the table keeps this many rows in view however small the window (1024x700 included)


class ComparePanel(QWidget):
    """Targets, Compare / Scaling sweep / Stop, the result table, bar charts and warnings."""

    running_changed = Signal(bool)
    run_saved = Signal(object)  # SavedTarget: one run of the comparison is in the history
    comparison_changed = Signal(object)  # Comparison now shown
    message = Signal(str)  # for the status bar
    show_requested = Signal(object)  # QWidget the window should bring to the front

    def __init__(
        self,
        plots: PlotsWidget,
        controller: CompareController,
        config_source: Callable[[], RunConfig | None],
        errors_source: Callable[[], list[str]] | None = None,
        parent: QWidget | None = None,
    ):
        """`controller` runs the comparisons (made by the window, its curves already wired to `plots`)."""
        super().__init__(parent)
        self.setObjectName("comparePanel")
        self._config_source = config_source
        self._errors_source = errors_source or (lambda: [])
        self._plots = plots
        self.controller = controller
        self._report = DeviceReport((), ())
        self._devices_known = False
        self._blocked = False
        self._comparison: Comparison | None = None
        self._partial: dict[int, SavedTarget] = {}
        self._planned_baseline = 0
        self._build()
        self.controller.progress.connect(self._on_progress)
        self.controller.run_saved.connect(self._on_run_saved)
        self.controller.comparison_ready.connect(self._on_comparison_ready)
        self.controller.failed.connect(self._on_failed)
        self.controller.running_changed.connect(self._on_running_changed)
        self._fill_targets()
        self._update_buttons()

    # --- public API ----------------------------------------------------------

    @property
    def comparison(self) -> Comparison | None:
        """The comparison in the table (None before the first)."""
        return self._comparison

    def is_running(self) -> bool:
        """Whether a comparison is in flight."""
        return self.controller.is_running()

    def set_devices(self, report: DeviceReport) -> None:
        """Devices detected: rebuild the target checkboxes from them."""
        self._report = report
        self._devices_known = True
        self._fill_targets()
        self._update_buttons()

    def set_blocked(self, blocked: bool) -> None:
        """A single training run is in flight (True) or over: Compare waits for it."""
        self._blocked = blocked
        self._update_buttons()

    def targets(self) -> list[CompareTarget]:
        """The ticked targets then the typed ones, each once; raises ConfigError on a bad typed target."""
        return self.targets_box.targets()

    def set_targets(self, specs: Sequence[str]) -> None:
        """Tick exactly the checkboxes whose target is in `specs` (the rest go to the text field)."""
        self.targets_box.set_targets(specs)

    def target_specs(self) -> list[str]:
        """The target texts the checkboxes offer, in order."""
        return self.targets_box.target_specs()

    def chosen_targets(self) -> list[str]:
        """The ticked target texts, then the typed ones (what `set_targets` takes back)."""
        return self.targets_box.chosen_targets()

    def start_comparison(self) -> bool:
        """Run the form's job on every chosen target; False with the reason shown when it cannot start."""
        base = self._base_config()
        if base is None:
            return False
        try:
            targets = self.targets()
        except ConfigError as exc:
            self._show_problem(f"Target {exc.given!r} is not understood. Use {exc.allowed}.")
            return False
        if not targets:
            self._show_problem("Tick at least one target, or type one (e.g. CPU:0; mirrored:CPU:0,CPU:1).")
            return False
        baseline = default_baseline([t.devices for t in targets])
        return self._start(CompareJob(base, tuple(targets), baseline, rounds=self.rounds_spin.value()), baseline)

    def start_sweep(self) -> bool:
        """Run the form's job on 1, 2, …, N devices of one kind (Mirrored for N > 1)."""
        base = self._base_config()
        kind = self._sweep_kind()
        if base is None:
            return False
        if not kind:
            self._show_problem("A scaling sweep needs two or more GPUs, or the CPU split into logical devices (Devices > Device settings).")
            return False
        return self._start(CompareJob(base, sweep_kind=kind, rounds=self.rounds_spin.value()), 0)

    def stop(self) -> None:
        """Stop the comparison: the run in flight ends after its current step, the rest are skipped."""
        if self.controller.is_running():
            self.controller.stop()
            self.progress_label.setText(self.progress_label.text() + " · stopping…")

    def shutdown(self, timeout_s: float) -> bool:
        """Stop and wait for the comparison thread (closing the window)."""
        return self.controller.shutdown(timeout_s)

    def show_comparison(self, comparison: Comparison, description: str = "") -> None:
        """Put finished runs (e.g. picked in the History tab) into the table and bring this tab forward."""
        if self.controller.is_running():
            self._show_problem("A comparison is running: compare runs from the history once it has ended.")
            return
        self._comparison = comparison
        self.job_label.setText(description or f"{len(comparison.rows)} runs from the history.")
        self.progress_label.setStyleSheet("")
        self.progress_label.setText("Finished runs side by side: nothing was run.")  # not the last comparison's outcome
        self._show()
        self.show_requested.emit(self)

    def follow_in(self, bar: QProgressBar, label: QLabel) -> None:
        """Show this tab's state in another progress bar and label too (the run panel's): comparing, then how it ended."""

        def on_running(running: bool) -> None:
            bar.setRange(0, 1)
            bar.setValue(0 if running else 1)
            bar.setFormat("Comparing…" if running else "Comparison ended")
            ended = self.progress_label.text() or "The comparison has ended: its table is in the Compare tab."
            label.setText(html.escape("A comparison is running: follow it in the Compare tab (Stop or Esc ends it)." if running else ended))

        self.running_changed.connect(on_running)
        self.controller.progress.connect(lambda line: bar.setFormat(f"Comparing: {line}"))

    def set_baseline(self, index: int) -> None:
        """Measure speed-ups against row `index` (nothing is re-run)."""
        if self._comparison is None or not 0 <= index < len(self._comparison.rows):
            return
        if index != self._comparison.baseline_index:
            self._comparison = self._comparison.with_baseline(index)
        self._show()

    def export(self, path: str | Path) -> Path:
        """Write the comparison shown to CSV or JSON (by the suffix); returns the path."""
        if self._comparison is None:
            raise ValueError("There is no comparison to export yet: run one, or compare runs from the History tab.")
        return write_comparison(self._comparison, path)

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        self.targets_box = CompareTargetsBox()
        self.targets_box.changed.connect(self._update_buttons)
        buttons = self._build_buttons()
        self._build_labels()
        results = self._build_results()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.targets_box)
        layout.addLayout(self._rounds_row())
        layout.addLayout(buttons)
        layout.addWidget(self.job_label)
        layout.addWidget(self.progress_label)
        layout.addWidget(results, 1)

    def _build_buttons(self) -> QHBoxLayout:
        """Compare, Scaling sweep, Stop, then the baseline choice and Export."""
        self.compare_button = QPushButton("Compare")
        self.compare_button.setObjectName("compareButton")
        self.compare_button.setToolTip(
            "Run the job in the run form on every target in interleaved rounds: each round runs every target once, in a new random order."
        )
        self.compare_button.clicked.connect(self.start_comparison)
        self.sweep_button = QPushButton("Scaling sweep")
        self.sweep_button.setObjectName("sweepButton")
        self.sweep_button.clicked.connect(self.start_sweep)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("compareStopButton")
        self.stop_button.setToolTip("End the run in flight after its current step and skip the rest.")
        self.stop_button.clicked.connect(self.stop)
        self.baseline_combo = QComboBox()
        self.baseline_combo.setObjectName("baselineCombo")
        self.baseline_combo.setToolTip("The row speed-ups are measured against (also: right-click a row).")
        self.baseline_combo.setMinimumContentsLength(18)
        self.baseline_combo.currentIndexChanged.connect(self._on_baseline_chosen)
        self.rounds_spin = QSpinBox()
        self.rounds_spin.setObjectName("compareRoundsSpin")
        self.rounds_spin.setRange(1, MAX_ROUNDS)
        self.rounds_spin.setValue(DEFAULT_ROUNDS)
        self.rounds_spin.setToolTip(
            "Interleaved rounds: a load that comes and goes hits every target alike, and the speed-ups' intervals come from the "
            "rounds. One round claims no difference across runs."
        )
        self.export_button = QPushButton("Export…")
        self.export_button.setObjectName("exportComparisonButton")
        self.export_button.setToolTip("Save the comparison as CSV or JSON.")
        self.export_button.clicked.connect(self._ask_export)
        buttons = QHBoxLayout()
        for widget in (self.compare_button, self.sweep_button, self.stop_button):
            buttons.addWidget(widget)
        buttons.addStretch(1)
        buttons.addWidget(QLabel("Baseline"))
        buttons.addWidget(self.baseline_combo)
        buttons.addWidget(self.export_button)
        return buttons

    def _rounds_row(self) -> QHBoxLayout:
        """Rounds [6]: how many interleaved rounds the targets are measured in."""
        row = QHBoxLayout()
        row.addWidget(QLabel("Rounds"))
        row.addWidget(self.rounds_spin)
        hint = QLabel("each runs every target once, in a new random order")
        hint.setEnabled(False)
        row.addWidget(hint)
        row.addStretch(1)
        return row

    def _build_labels(self) -> None:
        """The job line, the progress line and the notes (FLOPs per step, fairness warnings)."""
        self.job_label = QLabel("The job comes from the run form on the left (model, data, batch size, steps).")
        self.job_label.setObjectName("compareJob")
        self.job_label.setWordWrap(True)
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("compareProgress")
        self.progress_label.setWordWrap(True)
        self.progress_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes = CompareNotes()
        self.notes_label = self.notes.label

    def _build_results(self) -> QSplitter:
        """The table and notes above, the throughput and efficiency charts below."""
        self.table = CompareTable()
        self.table.baseline_requested.connect(self.set_baseline)
        self.throughput_chart = BarChart("throughputChart", "Throughput (baseline in orange)", "samples/s")
        self.efficiency_chart = BarChart("efficiencyChart", "Scaling efficiency (dashed: ideal)", "%")
        self.efficiency_chart.setVisible(False)
        self.energy_chart = BarChart("energyChart", "Energy per sample, measured (lower is better)", "mJ")
        self.energy_chart.setVisible(False)
        charts = QWidget()
        charts_layout = QHBoxLayout(charts)
        charts_layout.setContentsMargins(0, 0, 0, 0)
        charts_layout.addWidget(self.throughput_chart, 1)
        charts_layout.addWidget(self.efficiency_chart, 1)
        charts_layout.addWidget(self.energy_chart, 1)
        self.projection = ProjectionView(self._base_config, self._samples_to_target)
        lower = QTabWidget()
        lower.setObjectName("compareLowerTabs")
        lower.addTab(charts, "Measured")
        lower.addTab(self.projection, "What would … give? (projected)")
        self.table.setMinimumHeight(self._table_height(TABLE_MIN_ROWS))
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.table, 1)
        top_layout.addWidget(self.notes)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setObjectName("compareSplitter")
        splitter.addWidget(top)
        splitter.addWidget(lower)
        splitter.setChildrenCollapsible(False)
        splitter.setSizes([330, 260])
        return splitter

    def _table_height(self, rows: int) -> int:
        """Pixels for the header, `rows` rows and a horizontal scroll bar."""
        table = self.table
        bars = table.horizontalHeader().sizeHint().height() + table.horizontalScrollBar().sizeHint().height() + 2 * table.frameWidth()
        return bars + rows * table.verticalHeader().defaultSectionSize()

    def _fill_targets(self) -> None:
        self.targets_box.set_offers(target_offers(self._report, self._devices_known), self._devices_known)

    # --- starting ------------------------------------------------------------

    def _base_config(self) -> RunConfig | None:
        config = self._config_source()
        if config is None:
            errors = self._errors_source() or ["the run form is not complete."]
            self._show_problem("Fix the run form on the left first: " + " ".join(errors))
        return None if config is None else config.with_hooks()  # compared runs get no TensorBoard or profiler hooks

    def _samples_to_target(self, config: RunConfig) -> SamplesToTarget | None:
        """What the comparison in the table says of `config`'s samples to its target loss (the projection's time to target)."""
        return self._comparison.samples_to_target(config) if self._comparison else None

    def _start(self, job: CompareJob, baseline: int) -> bool:
        if self._blocked or self.controller.is_running():
            self._show_problem("A run is in flight: wait for it to end (or stop it) before comparing.")
            return False
        self._planned_baseline = baseline
        self._partial = {}
        self._comparison = None
        self._show()
        self.job_label.setText(self._job_text(job))
        self.progress_label.setStyleSheet("")
        self.progress_label.setText("Starting…")
        return self.controller.start(job)

    def _job_text(self, job: CompareJob) -> str:
        base = job.base
        length = f"{base.epochs} epochs" if base.epochs else f"{base.steps:,} steps"
        what = f"scaling sweep over 1 to N {job.sweep_kind} devices" if job.sweep_kind else f"{len(job.targets)} targets"
        precision = "" if base.precision == "off" else f", {base.precision}"
        return (
            f"<b>{html.escape(model_title(base.model))}</b> on {html.escape(Path(base.dataset).name)}, global batch {base.batch_size}, "
            f"{length}, seed {base.seed}{precision}: the same on every target ({what}). Live curves: Training tab."
        )

    def _sweep_kind(self) -> str:
        usable = [d for d in self._report.devices if d.available and d.tf_name]
        for kind in ("GPU", "CPU"):
            if sum(1 for d in usable if d.kind == kind) >= 2:
                return kind
        return ""

    def _show_problem(self, text: str) -> None:
        self.progress_label.setStyleSheet(f"color: {FAILED_COLOR};")
        self.progress_label.setText(text)
        self.message.emit(text)

    def _update_buttons(self) -> None:
        running = self.controller.is_running()
        idle = not running and not self._blocked
        try:
            has_targets = bool(self.targets())
        except ConfigError:
            has_targets = False
        self.compare_button.setEnabled(idle and has_targets)
        kind = self._sweep_kind()
        self.sweep_button.setEnabled(idle and bool(kind))
        self.sweep_button.setToolTip(
            f"The same job on 1, 2, …, N {kind} devices (Mirrored for N > 1): throughput and efficiency per count."
            if kind
            else "Needs two or more GPUs, or the CPU split into logical devices (Devices > Device settings)."
        )
        self.stop_button.setEnabled(running)
        self.export_button.setEnabled(self._comparison is not None)
        self.targets_box.setEnabled(not running)
        typed_error = self.targets_box.typed_error()
        if typed_error:
            self.compare_button.setToolTip("Fix the typed targets first (see below the field): " + typed_error)
        elif self._blocked and not running:
            self.compare_button.setToolTip("A training run is in flight: Compare is available when it ends.")
        else:
            self.compare_button.setToolTip(
                "Run the job in the run form on every target in interleaved rounds: each round runs every target once, in a new random order."
            )

    # --- following -----------------------------------------------------------

    def _on_progress(self, line: str) -> None:
        self.progress_label.setStyleSheet("")
        self.progress_label.setText(line)
        self.message.emit(line)

    def _on_run_saved(self, saved: SavedTarget) -> None:
        self._partial[saved.index] = saved
        self._plots.describe_run(self.controller.plot_key(saved.index), saved.finished.run_id, saved.finished.result.config)
        indices = sorted(self._partial)
        entries = [(self._partial[i].label, self._partial[i].finished.result) for i in indices]
        baseline = indices.index(self._planned_baseline) if self._planned_baseline in indices else 0
        self._comparison = compare_results(entries, baseline)
        self._show()
        self.run_saved.emit(saved)

    def _on_comparison_ready(self, comparison: Comparison) -> None:
        self._comparison = comparison
        self._show()
        self.comparison_changed.emit(comparison)
        errors = [s.finished.history_error for s in self._partial.values() if s.finished.history_error]
        ran = sum(1 for row in comparison.rows if row.status == RunStatus.COMPLETED)
        text = f"Comparison done: {ran} of {len(comparison.rows)} runs completed, each saved to the history."
        if errors:
            text = f"Comparison done: {ran} of {len(comparison.rows)} runs completed. {errors[0]}"
        self.progress_label.setStyleSheet("")
        self.progress_label.setText(text)
        self.message.emit(text)

    def _on_failed(self, message: str) -> None:
        self._show_problem(f"The comparison failed: {message}")

    def _on_running_changed(self, running: bool) -> None:
        self._update_buttons()
        self.running_changed.emit(running)

    # --- showing -------------------------------------------------------------

    def _show(self) -> None:
        comparison = self._comparison
        rows = comparison.rows if comparison is not None else ()
        baseline = comparison.baseline_index if comparison is not None else -1
        self.table.show_comparison(comparison)
        self._fill_baseline_combo(rows, baseline)
        self._draw_charts(rows, baseline)
        self.notes.show_comparison(comparison)
        self._update_buttons()

    def _fill_baseline_combo(self, rows: Sequence[CompareRow], baseline: int) -> None:
        self.baseline_combo.blockSignals(True)
        self.baseline_combo.clear()
        for row in rows:
            self.baseline_combo.addItem(row.label)
        self.baseline_combo.setCurrentIndex(baseline)
        self.baseline_combo.setEnabled(len(rows) > 1)
        self.baseline_combo.blockSignals(False)

    def _draw_charts(self, rows: Sequence[CompareRow], baseline: int) -> None:
        labels = [row.label for row in rows]
        self.throughput_chart.set_bars(labels, [row.samples_per_s for row in rows], baseline)
        scaling = any(row.replicas > 1 and row.scaling_efficiency is not None for row in rows)
        self.efficiency_chart.setVisible(scaling)
        if scaling:
            values = [None if row.scaling_efficiency is None else row.scaling_efficiency * 100 for row in rows]
            self.efficiency_chart.set_bars(labels, values, baseline, "{:.0f} %", reference=100.0)
        else:
            self.efficiency_chart.clear_bars()
        energy = [None if row.result.joules_per_sample is None else row.result.joules_per_sample * 1000 for row in rows]
        measured = any(value is not None for value in energy)
        self.energy_chart.setVisible(measured)  # none where no counter exists: the table says why in its tooltip
        if measured:
            self.energy_chart.set_bars(labels, energy, baseline, "{:.3g}")
        else:
            self.energy_chart.clear_bars()

    # --- user actions --------------------------------------------------------

    def _on_baseline_chosen(self, index: int) -> None:
        if index >= 0:
            self.set_baseline(index)

    def _ask_export(self) -> None:
        path, chosen = ask_save_file(
            self, FOLDER_EXPORT, "Export comparison", "device-lab-comparison.csv", "CSV table (*.csv);;JSON (*.json)"
        )
        if not path:
            return
        if not Path(path).suffix:
            path += ".json" if "json" in chosen.lower() else ".csv"
        try:
            saved = self.export(path)
        except (OSError, ValueError) as exc:
            self._show_problem(f"Could not export the comparison: {exc}")
            return
        self.message.emit(f"Comparison exported to {saved}")

"""The "Make it faster" box: find the largest batch that fits, find the fastest settings, apply them to the run form.

"Find largest batch" probes batches in child processes under a memory budget
(empty: half of the free RAM); "Find fastest settings" measures steps per call,
precision and XLA (and, if allowed, larger batches) within a time budget. Both
run off the GUI thread (`gui.controllers.tuning.TuningController`); Stop ends
the probe or point in flight. "Apply" emits `settings_chosen` with the RunConfig
fields to change: {"batch_size": N} after a largest-batch search, the best
settings (and the scaled learning rate with a new batch) after autotune. A
largest batch found for the job bounds autotune's batch stage.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.config import MAX_BATCH_SIZE, ConfigError, RunConfig
from core.formatting import format_bytes
from core.tuning.autotune import DEFAULT_BUDGET_S, AutotuneResult, TunePoint, check_budget, settings_of, settings_text
from core.tuning.max_batch import NOT_MEASURABLE, MaxBatchResult, Probe, margin_text, parse_size
from core.tuning.max_batch_probe import PROBE_STEPS
from core.tuning.sweep_plan import format_setting
from core.workloads.workload import model_title
from gui.job_data import AUTOTUNE, MAX_BATCH, TuningJob
from gui.style import ERROR_COLOR
from gui.window_words import MEMORY_BUDGET, TIME_BUDGET, window_words

if TYPE_CHECKING:
    from gui.controllers.tuning import TuningController

NO_JOB = "Choose a model in the run form first."
FORM_PROBLEM = "The run form has a problem (see under its fields): the searches start once it describes a run."
MEMORY_FIELD = MEMORY_BUDGET
UP_TO_FIELD = "Up to"
BUDGET_FIELD = TIME_BUDGET
APPLY_TEXT = "Use in the run form"
NO_SEARCH_YET = "No search yet"
NO_RESULT = "Ended without a result"


class TuningBox(QGroupBox):
    """Largest batch and fastest settings for the job given to `set_job`; `settings_chosen` carries what Apply changes."""

    settings_chosen = Signal(dict)

    def __init__(
        self,
        controller: TuningController,
        parent: QWidget | None = None,
        job_source: Callable[[], RunConfig | None] | None = None,
        busy: Callable[[], bool] | None = None,
    ):
        """`controller` runs the searches (made by the window). `job_source` (e.g. the run form's `config`), when given, is read each time a search starts, instead of `set_job`'s job;
        while `busy()` is true (a run or sweep in flight, which would share the machine) no search starts."""
        super().__init__("Make it faster", parent)
        self.setObjectName("tuningBox")
        self.controller = controller
        self._job_source = job_source
        self._busy = busy
        self._config: RunConfig | None = None
        self._changes: dict[str, Any] = {}
        self._max_batch: tuple[RunConfig, int] | None = None  # (the job's memory_key, its largest batch)
        self._problem_shown = False  # the progress line says why a search did not start or failed: kept after it ends
        self._result_shown = False  # the search in flight (or the last one) has given its result
        self._searched = False  # a search has started since the box was made
        self._build()
        self.controller.running_changed.connect(self._on_running_changed)
        self.controller.progress.connect(self._on_progress)
        self.controller.probe_done.connect(self._on_probe)
        self.controller.point_done.connect(self._on_point)
        self.controller.result_ready.connect(self._on_result)
        self.controller.failed.connect(self._on_failed)
        self._on_running_changed(False)

    def _build(self) -> None:
        self.job_label = QLabel(NO_JOB)
        self.job_label.setObjectName("tuningJobLabel")
        self.job_label.setWordWrap(True)
        self.memory_edit = _edit(
            "maxBatchMemoryEdit", "half of the free RAM", "Host memory the probes may use, e.g. 4GiB (on a GPU: a cap on its memory)"
        )
        self.up_to_edit = _edit(
            "maxBatchUpToEdit", "no limit", "The largest batch worth trying, e.g. the number of examples in the data set"
        )
        self.max_batch_button = _button("findMaxBatchButton", "Find largest batch", self._start_max_batch)
        self.max_batch_button.setToolTip(
            "Double the batch until a step runs out of memory, then narrow it down; each probe is a child process held to the budget"
        )
        self.budget_edit = _edit("autotuneBudgetEdit", "", "Seconds the search may take")
        self.budget_edit.setText(f"{DEFAULT_BUDGET_S:g}")
        self.allow_batch_check = QCheckBox("Allow batch change")
        self.allow_batch_check.setObjectName("allowBatchChangeCheck")
        self.allow_batch_check.setToolTip(
            "Also try larger batches (each at the learning rate scaled by the linear rule and at the start's); this changes the learning problem"
        )
        self.autotune_button = _button("autotuneButton", "Find fastest settings", self._start_autotune)
        self.autotune_button.setToolTip("Try precision, steps per call and XLA at this batch within the time budget, and report the gain")
        self.stop_button = _button("tuningStopButton", "Stop", self.controller.stop)
        self.stop_button.setToolTip("Stop the search: a probe is killed, an autotune point stops after its step call")
        self.apply_button = _button("tuningApplyButton", APPLY_TEXT, self._apply)
        self.apply_button.setToolTip("Put the result (the largest batch, or the fastest settings) into the run form on the left")
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("tuningProgress")
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("tuningProgressLabel")
        self.result_text = QPlainTextEdit()
        self.result_text.setObjectName("tuningResultText")
        self.result_text.setReadOnly(True)
        self.result_text.setMinimumHeight(3 * self.result_text.fontMetrics().lineSpacing() + 8)  # three lines, then it scrolls
        self.result_text.setMaximumHeight(110)  # it scrolls: the sweep rows below keep their room in a small window
        form = QFormLayout()
        form.addRow(MEMORY_FIELD, _row(self.memory_edit, QLabel("up to"), self.up_to_edit, self.max_batch_button))
        form.addRow(BUDGET_FIELD, _row(self.budget_edit, self.allow_batch_check, self.autotune_button))
        layout = QVBoxLayout(self)
        layout.addWidget(self.job_label)
        layout.addLayout(form)
        layout.addWidget(_row(self.progress_bar, self.stop_button, self.apply_button))  # one row: the rows below keep their room
        layout.addWidget(self.progress_label)
        layout.addWidget(self.result_text)

    def set_job(self, config: RunConfig) -> None:
        """The job the searches work on (the run form's): its model, data, target and settings; a new job drops what Apply had."""
        if config != self._config:
            self._changes = {}
        self._config = config
        self._say_job(config)
        self._on_running_changed(self.controller.is_running())

    def follow_form(self, config: RunConfig | None) -> None:
        """The run form now describes `config` (None: it has a problem): say the job the searches would work on."""
        if self.controller.is_running():
            return  # the search in flight keeps saying its own job
        if config is None:
            self.job_label.setText(FORM_PROBLEM)
        else:
            self._say_job(config)

    def _say_job(self, config: RunConfig) -> None:
        target = config.devices[0] if config.strategy == "one-device" and config.devices else config.strategy
        self.job_label.setText(f"{model_title(config.model)} on {target}: {settings_text(settings_of(config))}")

    def _current_job(self) -> RunConfig | None:
        """The job to search: the source's as it is now (None while its form has a problem), else the one `set_job` gave."""
        if self._busy is not None and self._busy():
            self._say_problem("A run is in flight: its training would share the machine with the search. Search when it has ended.")
            return None
        config = self._job_source() if self._job_source is not None else self._config
        if config is None:
            self._say_problem("The run form has a problem: fix it, then search again.")
            return None
        self.set_job(config)
        return config

    def _start_max_batch(self) -> None:
        config = self._current_job()
        if config is None:
            return
        try:
            memory = parse_size(self.memory_edit.text(), MEMORY_FIELD) if self.memory_edit.text().strip() else None
            up_to = _batch(self.up_to_edit.text()) if self.up_to_edit.text().strip() else MAX_BATCH_SIZE
        except ConfigError as exc:
            self._say_problem(str(exc))
            return
        job = TuningJob(MAX_BATCH, config, memory, up_to=up_to)
        self._start(job, f"Largest batch: each probe trains {PROBE_STEPS} steps in a child process.")

    def _start_autotune(self) -> None:
        config = self._current_job()
        if config is None:
            return
        try:
            budget = check_budget(_number(self.budget_edit.text()), BUDGET_FIELD)
            memory = parse_size(self.memory_edit.text(), MEMORY_FIELD) if self.memory_edit.text().strip() else None
        except ConfigError as exc:
            self._say_problem(str(exc))
            return
        allow = self.allow_batch_check.isChecked()
        bound = self._max_batch[1] if self._max_batch and self._max_batch[0] == memory_key(config) else None
        job = TuningJob(AUTOTUNE, config, memory, budget, allow, bound)
        self._start(
            job, f"Fastest settings within {budget:g} s at batch {config.batch_size}" + (" (larger batches allowed)" if allow else "")
        )

    def _start(self, job: TuningJob, heading: str) -> None:
        if job.config is None or not self.controller.start(job):
            return
        self._changes = {}
        self.result_text.setPlainText(heading)
        self._problem_shown = self._result_shown = False
        self._searched = True
        self.progress_label.setText("")

    def _say_problem(self, text: str) -> None:
        self._problem_shown = True
        self.progress_label.setText(f"<span style='color:{ERROR_COLOR}'>{html.escape(window_words(text), quote=False)}</span>")

    @Slot(bool)
    def _on_running_changed(self, running: bool) -> None:
        ready = (self._config is not None or self._job_source is not None) and not running
        for widget in (
            self.max_batch_button,
            self.autotune_button,
            self.memory_edit,
            self.up_to_edit,
            self.budget_edit,
            self.allow_batch_check,
        ):
            widget.setEnabled(ready)
        self.stop_button.setEnabled(running)
        self.apply_button.setEnabled(bool(self._changes) and not running)
        if not running:  # over: full with its result (a largest-batch search's busy bar too), never left part-way (93%)
            self.progress_bar.setRange(0, 100)
            self.progress_bar.setValue(100 if self._result_shown else 0)
            self.progress_bar.setFormat("%p%" if self._result_shown else NO_RESULT if self._searched else NO_SEARCH_YET)
            if not self._problem_shown:  # what was in flight is over: no "point 7: measuring…" left behind
                self.progress_label.setText("")
        else:
            self.progress_bar.setFormat("%p%")

    @Slot(str, float)
    def _on_progress(self, text: str, share: float) -> None:
        self._problem_shown = False
        self.progress_label.setText(text)
        if share < 0:
            self.progress_bar.setRange(0, 0)  # busy: a largest-batch search has no known length
        else:
            self.progress_bar.setRange(0, 100)
            self.progress_bar.setValue(round(share * 100))

    @Slot(object)
    def _on_probe(self, probe: Probe) -> None:
        verdict = "stopped" if probe.stopped else "fits" if probe.fits else f"does not fit ({probe.error or probe.reason})"
        self.result_text.appendPlainText(f"batch {probe.batch:,}: {verdict}, peak {format_bytes(probe.peak_bytes)}, {probe.seconds:.1f} s")

    @Slot(object)
    def _on_point(self, point: TunePoint) -> None:
        rate = f"{point.samples_per_s:,.0f} samples/s" if point.samples_per_s else point.message or point.status
        self.result_text.appendPlainText(window_words(f"{point.stage}: {settings_text(point.settings)}: {rate}"))

    @Slot(object)
    def _on_result(self, result: MaxBatchResult | AutotuneResult) -> None:
        self._result_shown = True
        if isinstance(result, MaxBatchResult):
            self._show_max_batch(result)
        else:
            self._show_autotune(result)
        self.apply_button.setEnabled(bool(self._changes) and not self.controller.is_running())

    def _show_max_batch(self, result: MaxBatchResult) -> None:
        per_example = format_bytes(int(result.bytes_per_example)) if result.bytes_per_example is not None else NOT_MEASURABLE
        lines = [f"Largest batch: {result.max_batch:,} ({margin_text(result)})"]
        lines.append(f"Memory per example: {per_example}; limit: {result.limit_kind} {format_bytes(result.memory_limit)}")
        lines += [f"Note: {note}" for note in result.notes]
        lines += ["Stopped."] if result.stopped else []
        lines += [f"The search ended early: {result.error}"] if result.error else []
        self.result_text.appendPlainText(window_words("\n".join(lines)))
        if result.max_batch >= 1 and result.finished and self._config is not None:
            self._max_batch = (memory_key(self._config), result.max_batch)
            if result.max_batch != self._config.batch_size:
                self._changes = {"batch_size": result.max_batch}

    def _show_autotune(self, result: AutotuneResult) -> None:
        gain = f"{result.gain:.2f}x" if result.gain else "n/a"
        keras = f"{result.gain_over_keras_defaults:.2f}x" if result.gain_over_keras_defaults else "n/a"
        rate = f"{result.samples_per_s:,.0f}" if result.samples_per_s else "n/a"
        lines = [
            f"Fastest: {settings_text(result.best)}: {rate} samples/s",
            f"Gain over your settings: {gain}; over Keras's defaults: {keras}",
        ]
        if result.gain_interval is not None:
            lines.append(f"How sure: {result.gain_interval.text()}; {result.gain_interval.sureness()}")
        lines.append(f"Took {result.elapsed_s:.0f} s of {result.budget_s:g} s.")
        lines += [f"Left out {format_setting('precision', value)}: {reason}" for value, reason in result.left_out]
        lines += [f"Note: {note}" for note in result.notes]
        lines += ["Stopped: the best so far is shown."] if result.stopped else []
        lines += [f"Your settings did not run: {result.error}"] if result.error else []
        self.result_text.appendPlainText(window_words("\n".join(lines)))
        self._changes = result.changes()

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._say_problem(message)

    def _apply(self) -> None:
        if self._changes:
            self.settings_chosen.emit(dict(self._changes))


def memory_key(config: RunConfig) -> RunConfig:
    """The job as far as its memory is concerned: the same model, data, target, precision and XLA, whatever the batch or steps."""
    return config.with_changes(batch_size=1, steps_per_call=1, steps=1, epochs=None, learning_rate=1e-3)


def _edit(name: str, placeholder: str, tip: str) -> QLineEdit:
    edit = QLineEdit()
    edit.setObjectName(name)
    edit.setPlaceholderText(placeholder)
    edit.setToolTip(tip)
    return edit


def _button(name: str, text: str, slot) -> QPushButton:
    button = QPushButton(text)
    button.setObjectName(name)
    button.clicked.connect(slot)
    return button


def _row(*widgets: QWidget) -> QWidget:
    holder = QWidget()
    layout = QHBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget)
    return holder


def _batch(text: str) -> int:
    """The "up to" field as a batch; ConfigError naming the field otherwise."""
    word = text.strip().replace(",", "")
    if not word.isdigit() or not 1 <= int(word) <= MAX_BATCH_SIZE:
        raise ConfigError(UP_TO_FIELD, text, f"a whole number from 1 to {MAX_BATCH_SIZE}, or nothing for no limit")
    return int(word)


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text.strip()

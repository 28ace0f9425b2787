"""The run form: what to train, where, and how; Start/Stop, progress and the last result.

Every field is checked as it is typed (a red hint under the form says what is
wrong and what to type), then again by `RunConfig`; Start stays disabled until
both accept, so nothing unvalidated reaches TensorFlow.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.config import MAX_BATCH_SIZE, MAX_STEPS, MAX_STEPS_PER_CALL, OPTIMIZERS, ConfigError, RunConfig
from core.machine.types import DeviceInfo, DeviceReport, TpuProbe
from core.training.strategies import StrategyChoice, strategy_choices
from core.workloads.models import MODELS
from gui.controllers.training_worker import FinishedRun
from gui.run_form.cluster_box import ClusterBox
from gui.run_form.fields import ParsedField, positive_number, whole_number
from gui.run_form.model_choice import ModelChoice
from gui.run_form.outcome import failure_html, final_progress_text, progress_text, result_html
from gui.run_form.placement import DevicePicker, fill_strategy_combo, unavailable_note
from gui.run_form.tpu_connect import TpuConnect

DEFAULT_STEPS = 300
DEFAULT_BATCH = 64
DEFAULT_LEARNING_RATE = "0.001"
DEFAULT_OPTIMIZER = "adam"
TPU_STEPS_PER_CALL = 100  # a TPU step is launched from the host: many steps per call hide that latency
MAX_EPOCHS = 100_000
PRECISION_LABELS = {"off": "off (float32)", "float16": "float16 (mixed)", "bfloat16": "bfloat16 (mixed)"}


def run_label(config: RunConfig) -> str:
    """A short name for a run in plots and the history: 'MLP · digits · one-device CPU:0 · batch 64'."""
    where = config.strategy + (" " + " ".join(config.devices) if config.devices else "")
    if config.strategy == "multi-worker":
        where += f" ×{config.workers}"
    extras = [f"batch {config.batch_size}"]
    if config.precision != "off":
        extras.append(config.precision)
    if config.xla:
        extras.append("XLA")
    return " · ".join([MODELS[config.model].title, config.dataset, where, *extras])


class RunPanel(QWidget):
    """The run form. Emits `start_requested(config, label)` and `stop_requested()`."""

    start_requested = Signal(object, str)
    stop_requested = Signal()
    start_enabled_changed = Signal(bool)
    tpu_probed = Signal(object)  # TpuProbe

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runPanel")
        self._devices: tuple[DeviceInfo, ...] = ()
        self._devices_known = False
        self._spc_default = "1"  # the steps per call last filled in for the strategy; any other value is the user's
        self._running = False
        self._choices: dict[str, StrategyChoice] = {}
        self._build()
        self.model_choice.fill_models()
        self._fill_strategies()
        self.model_choice.follow_model()
        self.validate()

    # --- public API ----------------------------------------------------------

    def set_devices(self, report: DeviceReport) -> None:
        """The device list changed: refill device choices and strategy availability."""
        self._devices = report.devices
        self._devices_known = True
        self.device_box.fill(self._devices)
        self._fill_strategies()
        self.validate()

    def load_param_counts(self) -> None:
        """Count the models' parameters in a worker thread (builds each model once)."""
        self.model_choice.load_param_counts()

    def add_section(self, widget: QWidget) -> None:
        """Add a box under the form fields, above Start (e.g. the logging & profiling options)."""
        self._sections.addWidget(widget)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Lay out again at the new width: QFormLayout keeps word-wrapped rows at their old heights (squashed text)."""
        super().resizeEvent(event)
        self.layout().invalidate()

    def close_down(self) -> None:
        """The window is closing: start no more background work."""
        self.model_choice.close_down()
        self.cluster_box.close_down()
        self.tpu.close_down()

    def set_running(self, running: bool) -> None:
        """A run started or ended: the form is read-only while one runs, and Stop usable."""
        self._running = running
        self.tpu.set_running(running)
        self.stop_button.setEnabled(running)
        for widget in self._form_widgets():
            widget.setEnabled(not running)
        if not running:
            self._fill_strategies()
        self.validate()

    def show_progress(self, done: int, total: int, samples_per_s: float | None, eta_s: float | None) -> None:
        """Update the progress bar: steps done of total, throughput and time left."""
        if total > 0:
            self.progress_bar.setRange(0, total)
            self.progress_bar.setValue(min(done, total))
        else:
            self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat(progress_text(done, total, samples_per_s, eta_s))

    def show_starting(self, label: str) -> None:
        """A run was handed to the worker: a busy bar until its first step."""
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat("Starting: building the model and compiling the step…")
        self.result_label.setText(f"Running {html.escape(label)}")

    def show_result(self, finished: FinishedRun) -> None:
        """The outcome of a run: headline figures, or the error and what to do."""
        result = finished.result
        if self.progress_bar.maximum() == 0:  # still the "starting" busy bar: the run ended before its first step
            self.progress_bar.setRange(0, max(1, result.steps_done))
        self.progress_bar.setValue(min(result.steps_done, self.progress_bar.maximum()))
        self.result_label.setText(result_html(finished))
        self.progress_bar.setFormat(final_progress_text(result))

    def show_error(self, message: str) -> None:
        """The run failed outside TensorFlow's hands (the worker itself): say why."""
        self.result_label.setText(failure_html("Failed", message))

    def show_not_started(self, message: str) -> None:
        """Say why Start did nothing (an option refused this run), where the result would appear."""
        self.result_label.setText(failure_html("Not started", message))

    def config(self) -> RunConfig | None:
        """The run the form describes, or None while any field is invalid."""
        config, errors = self._read_form()
        return config if not errors else None

    def errors(self) -> list[str]:
        """What is wrong with the form, each with what to type ([] when a run can be described)."""
        return self._read_form()[1]

    def is_start_enabled(self) -> bool:
        return self.start_button.isEnabled()

    def request_start(self) -> None:
        """Start a run if the form is valid and none is running (button, Ctrl+R)."""
        if self._running or not self.start_button.isEnabled():
            return
        config, errors = self._read_form()
        if config is None or errors:
            self.validate()
            return
        self.start_requested.emit(config, run_label(config))

    def request_stop(self) -> None:
        """Ask the running job to stop after its step in flight (button, Esc)."""
        if self._running:
            self.stop_requested.emit()

    def validate(self) -> bool:
        """Refresh the hint under the form and the Start button; True when a run can start."""
        config, errors = self._read_form()
        self.cluster_box.show_config(config)
        warnings = config.warnings(has_accelerator=any(d.kind != "CPU" for d in self._devices)) if config else []
        if not self._devices_known and not errors:
            warnings = ["Detecting devices… Start is enabled once TensorFlow has listed them."]
        self.hint_label.setText("\n".join(errors))
        self.hint_label.setVisible(bool(errors))
        self.warning_label.setText("\n".join(warnings))
        self.warning_label.setStyleSheet("color: #8a6d00;" if self._devices_known else "color: #555;")
        self.warning_label.setVisible(bool(warnings) and not errors)
        can_start = not errors and not self._running and self._devices_known
        if can_start != self.start_button.isEnabled():
            self.start_button.setEnabled(can_start)
            self.start_enabled_changed.emit(can_start)
        return can_start

    def strategy_choice(self, name: str) -> StrategyChoice:
        """The menu entry for `name` (available or not, and why)."""
        return self._choices[name]

    @property
    def tpu_timeout_s(self) -> float:
        """Time limit of the TPU probe, in seconds (the spin box next to Connect)."""
        return self.tpu.timeout_s

    @tpu_timeout_s.setter
    def tpu_timeout_s(self, seconds: float) -> None:
        self.tpu.timeout_s = seconds

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self._build_model_section(form)
        self._build_placement_section(form)
        self._build_training_section(form)
        self._form = form
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        self._sections = QVBoxLayout()
        layout.addLayout(self._sections)
        self._build_controls_section(layout)
        self._build_result_section(layout)
        layout.addStretch(1)
        self._connect_signals()

    def _build_model_section(self, form: QFormLayout) -> None:
        """What to train: the model, what it is, and the data set."""
        self.model_choice = ModelChoice(self)
        self.model_combo = self.model_choice.model_combo
        self.model_info = self.model_choice.model_info
        self.dataset_combo = self.model_choice.dataset_combo
        self.model_choice.add_rows(form)

    def _build_placement_section(self, form: QFormLayout) -> None:
        """Where to train: the strategy, its devices, the multi-worker cluster and the TPU."""
        self.strategy_combo = QComboBox()
        self.strategy_combo.setObjectName("strategyCombo")
        self.strategy_combo.setToolTip("The tf.distribute strategy: where and across how many devices the model trains.")
        self.strategy_reason = QLabel()
        self.strategy_reason.setObjectName("strategyReason")
        self.strategy_reason.setWordWrap(True)
        self.strategy_reason.setStyleSheet("font-size: 9pt;")
        self.strategy_reason.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.device_box = DevicePicker()
        self.device_combo = self.device_box.device_combo
        self.device_list = self.device_box.device_list
        self.device_hint = self.device_box.device_hint
        self.cluster_box = ClusterBox()
        self.workers_spin = self.cluster_box.workers_spin
        self.tpu = TpuConnect(self)
        self.tpu_address_edit = self.tpu.address_edit
        self.tpu_timeout_spin = self.tpu.timeout_spin
        self.tpu_connect_button = self.tpu.connect_button
        self.tpu_status = self.tpu.status_label
        form.addRow("Strategy", self.strategy_combo)
        form.addRow("", self.strategy_reason)
        form.addRow("Devices", self.device_box)
        form.addRow(self.cluster_box)
        self.tpu.add_rows(form)

    def _build_training_section(self, form: QFormLayout) -> None:
        """How to train: batch, length, optimizer and the speed knobs."""
        self.batch_edit = ParsedField("Batch size", whole_number(1, MAX_BATCH_SIZE, DEFAULT_BATCH), str(DEFAULT_BATCH), "batchSizeEdit")
        self.batch_edit.setToolTip("Global batch: split evenly across replicas.")
        self.steps_edit = ParsedField("Steps", whole_number(1, MAX_STEPS, DEFAULT_STEPS), str(DEFAULT_STEPS), "stepsEdit")
        self.steps_edit.setToolTip("How long to train: a number of steps (one batch each) or of epochs.")
        self.steps_unit = QComboBox()
        self.steps_unit.setObjectName("stepsUnitCombo")
        self.steps_unit.setToolTip("Count the run's length in training steps or in passes over the data set.")
        self.steps_unit.addItems(["steps", "epochs"])
        self.lr_edit = ParsedField("Learning rate", positive_number(10, "0.001"), DEFAULT_LEARNING_RATE, "learningRateEdit")
        self.lr_edit.setToolTip("The optimizer's step size, e.g. 0.001 or 1e-3.")
        self.optimizer_combo = QComboBox()
        self.optimizer_combo.setObjectName("optimizerCombo")
        self.optimizer_combo.setToolTip("The Keras optimizer that updates the weights.")
        self.optimizer_combo.addItems(OPTIMIZERS)
        self.optimizer_combo.setCurrentText(DEFAULT_OPTIMIZER)
        self.precision_combo = QComboBox()
        self.precision_combo.setObjectName("precisionCombo")
        self.precision_combo.setToolTip("Mixed precision: compute in 16-bit floats, keep weights in float32 (faster on recent GPUs/TPUs).")
        for name, label in PRECISION_LABELS.items():
            self.precision_combo.addItem(label, name)
        self.xla_check = QCheckBox("Compile the step with XLA")
        self.xla_check.setObjectName("xlaCheck")
        self.xla_check.setToolTip("Compile the training step with XLA (jit_compile): often faster, with a longer warm-up.")
        self.spc_edit = ParsedField("Steps per call", whole_number(1, MAX_STEPS_PER_CALL, 1), "1", "stepsPerCallEdit")
        self.spc_edit.setToolTip("Training steps run inside one call of the compiled function (less Python overhead).")
        form.addRow("Batch size", self.batch_edit)
        length_row = QHBoxLayout()
        length_row.addWidget(self.steps_edit, 1)
        length_row.addWidget(self.steps_unit)
        form.addRow("Length", length_row)
        form.addRow("Learning rate", self.lr_edit)
        form.addRow("Optimizer", self.optimizer_combo)
        form.addRow("Precision", self.precision_combo)
        form.addRow("XLA", self.xla_check)
        form.addRow("Steps per call", self.spc_edit)

    def _build_controls_section(self, layout: QVBoxLayout) -> None:
        """What stops a run from starting, Start and Stop, and the progress bar."""
        self.hint_label = QLabel()
        self.hint_label.setObjectName("formHint")
        self.hint_label.setWordWrap(True)
        self.hint_label.setStyleSheet("color: #c62828;")
        self.warning_label = QLabel()
        self.warning_label.setObjectName("formWarning")
        self.warning_label.setWordWrap(True)
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setToolTip("Start the run (Ctrl+R)")
        self.start_button.setEnabled(False)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("Stop after the step in flight (Esc)")
        self.stop_button.setEnabled(False)
        self.progress_bar = QProgressBar()
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setRange(0, DEFAULT_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("Idle")
        self.progress_bar.setTextVisible(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        layout.addWidget(self.hint_label)
        layout.addWidget(self.warning_label)
        layout.addLayout(buttons)
        layout.addWidget(self.progress_bar)
        self.hint_label.setVisible(False)
        self.warning_label.setVisible(False)

    def _build_result_section(self, layout: QVBoxLayout) -> None:
        """The last run's outcome (selectable, to copy figures or an error)."""
        self.result_label = QLabel()
        self.result_label.setObjectName("resultLabel")
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.result_label)

    def _connect_signals(self) -> None:
        """Wire the fields once all exist: every edit re-validates the form."""
        self.model_choice.changed.connect(self.validate)
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_changed)
        self.steps_unit.currentIndexChanged.connect(self._on_unit_changed)
        self.start_button.clicked.connect(self.request_start)
        self.stop_button.clicked.connect(self.request_stop)
        for combo in (self.dataset_combo, self.device_combo, self.optimizer_combo, self.precision_combo):
            combo.currentIndexChanged.connect(self.validate)
        for field in (self.batch_edit, self.steps_edit, self.lr_edit, self.spc_edit, self.tpu_address_edit):
            field.textChanged.connect(self.validate)
        self.device_list.itemChanged.connect(self.validate)
        self.cluster_box.changed.connect(self.validate)
        self.batch_edit.textChanged.connect(self._show_device_hint)
        self.xla_check.toggled.connect(self.validate)
        self.tpu.probed.connect(self._on_tpu_probed)

    def _form_widgets(self) -> list[QWidget]:
        return [
            self.model_combo, self.dataset_combo, self.strategy_combo, self.device_box, *self.cluster_box.input_widgets(),
            *self.tpu.input_widgets(), self.batch_edit, self.steps_edit, self.steps_unit, self.lr_edit,
            self.optimizer_combo, self.precision_combo, self.xla_check, self.spc_edit,
        ]  # fmt: skip

    # --- choices -------------------------------------------------------------

    def _strategy(self) -> str:
        return self.strategy_combo.currentData() or "default"

    def _fill_strategies(self) -> None:
        if self._running:
            return
        choices = strategy_choices(self._devices, self.tpu.connected)
        fill_strategy_combo(self.strategy_combo, choices)
        self._choices = {c.name: c for c in choices}
        self._on_strategy_changed()

    def _on_strategy_changed(self) -> None:
        strategy = self._strategy()
        note = unavailable_note(list(self._choices.values())) if self._devices_known else ""
        self.strategy_reason.setText(note)
        self.strategy_reason.setVisible(bool(note))
        self.device_box.show_strategy(strategy)
        self._form.setRowVisible(self.cluster_box, strategy == "multi-worker")
        if self.spc_edit.text().strip() == self._spc_default:
            self._spc_default = str(TPU_STEPS_PER_CALL if strategy == "tpu" else 1)
            self.spc_edit.setText(self._spc_default)
        self._show_device_hint()
        self.validate()

    def _show_device_hint(self) -> None:
        cores = sum(1 for d in self._devices if d.kind == "TPU" and d.available) or self.tpu.cores
        batch = None if self.batch_edit.error() else int(self.batch_edit.value())
        self.device_box.show_hint(self._strategy(), cores, batch)

    def _on_tpu_probed(self, probe: TpuProbe) -> None:
        self._fill_strategies()
        self.tpu_probed.emit(probe)

    def _on_unit_changed(self) -> None:
        epochs = self.steps_unit.currentText() == "epochs"
        self.steps_edit.label = "Epochs" if epochs else "Steps"
        parse = whole_number(1, MAX_EPOCHS, 1) if epochs else whole_number(1, MAX_STEPS, DEFAULT_STEPS)
        self.steps_edit.set_parser(parse)
        self.validate()

    # --- reading the form ----------------------------------------------------

    def _read_form(self) -> tuple[RunConfig | None, list[str]]:
        errors = [e for e in (f.error() for f in (self.batch_edit, self.steps_edit, self.lr_edit, self.spc_edit)) if e]
        strategy = self._strategy()
        choice = self._choices.get(strategy)
        if choice is not None and not choice.available:
            errors.append(f"Strategy {choice.label}: {choice.reason}")
        errors.extend(self.device_box.errors(strategy))
        if strategy == "multi-worker":
            errors.extend(self.cluster_box.errors())
        if errors:
            return None, errors
        epochs = self.steps_unit.currentText() == "epochs"
        length = int(self.steps_edit.value())
        try:
            config = RunConfig(
                model=self.model_choice.model(),
                dataset=self.model_choice.dataset(),
                strategy=strategy,
                devices=self.device_box.selected(strategy),
                batch_size=int(self.batch_edit.value()),
                steps=DEFAULT_STEPS if epochs else length,
                epochs=length if epochs else None,
                learning_rate=float(self.lr_edit.value()),
                optimizer=self.optimizer_combo.currentText(),
                precision=self.precision_combo.currentData(),
                xla=self.xla_check.isChecked(),
                steps_per_call=int(self.spc_edit.value()),
                workers=self.cluster_box.workers(),
                tpu_address=self.tpu.address(),
                tpu_timeout_s=self.tpu_timeout_s,
                cluster_hosts=self.cluster_box.hosts() if strategy == "multi-worker" else (),
                cluster_timeout_s=self.cluster_box.timeout_s(),
                allow_network_workers=strategy == "multi-worker" and self.cluster_box.allow_network_workers(),
            )
        except ConfigError as exc:
            return None, [f"Settings rejected: {exc}"]
        return config, []

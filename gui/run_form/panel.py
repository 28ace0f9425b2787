"""The run form: what to train, where, and how; Start/Stop, progress and the last result.

Every field is checked as it is typed (a red hint under the form says what is
wrong and what to type), then again by `RunConfig`; Start stays disabled until
both accept, so nothing unvalidated reaches TensorFlow.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette, QResizeEvent, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from core.config import MAX_BATCH_SIZE, MAX_STEPS, MAX_STEPS_PER_CALL, OPTIMIZERS, ConfigError, RunConfig
from core.formatting import format_duration
from core.machine.tpu import probe_tpu
from core.machine.types import DeviceInfo, DeviceReport, TpuProbe
from core.results import RunStatus
from core.training.strategies import StrategyChoice, strategy_choices
from core.workloads.data import DATASETS
from core.workloads.models import MODELS
from gui.controllers.training_worker import FinishedRun
from gui.qt_threads import FunctionWorker, start_worker
from gui.run_form.cluster_box import ClusterBox
from gui.run_form.fields import ParsedField, positive_number, whole_number

DEFAULT_MODEL = "mlp"
DEFAULT_DATASET = "digits"
DEFAULT_STEPS = 300
DEFAULT_BATCH = 64
DEFAULT_LEARNING_RATE = "0.001"
DEFAULT_OPTIMIZER = "adam"
TPU_PROBE_TIMEOUT_S = 30
MAX_TPU_PROBE_TIMEOUT_S = 600
TPU_STEPS_PER_CALL = 100  # a TPU step is launched from the host: many steps per call hide that latency
TPU_BEST_PER_CORE = 128
MAX_EPOCHS = 100_000
PRECISION_LABELS = {"off": "off (float32)", "float16": "float16 (mixed)", "bfloat16": "bfloat16 (mixed)"}
DEVICE_HINTS = {
    "default": "TensorFlow places ops itself (the first GPU if there is one, else the CPU).",
    "multi-worker": "Each worker process trains on its share of its machine's CPU/GPU.",
    "tpu": "All cores of the connected TPU.",
}


def _count_parameters(name: str) -> tuple[str, int]:
    """(name, parameter count) of a sample model; builds it, so TensorFlow is imported."""
    from core.workloads.models import param_count

    return name, param_count(name)


def tpu_batch_note(batch_size: int, cores: int) -> str:
    """How a global batch splits over TPU cores, and the size that keeps them busy."""
    best = f"use a multiple of {cores} × {TPU_BEST_PER_CORE} = {cores * TPU_BEST_PER_CORE:,} for best TPU use"
    if batch_size % cores:
        return f"Global batch {batch_size:,} does not split evenly over {cores} cores: {best}."
    return f"Global batch {batch_size:,} = {batch_size // cores:,} per core on {cores} cores; {best}."


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
        self._tpu_connected = False
        self._tpu_cores = 0
        self._spc_default = "1"  # the steps per call last filled in for the strategy; any other value is the user's
        self._probing = False
        self._running = False
        self._params: dict[str, int] = {}
        self._choices: dict[str, StrategyChoice] = {}
        self._closed = False
        self._build()
        self._fill_models()
        self._fill_strategies()
        self._on_model_changed()
        self.validate()

    # --- public API ----------------------------------------------------------

    def set_devices(self, report: DeviceReport) -> None:
        """The device list changed: refill device choices and strategy availability."""
        self._devices = report.devices
        self._devices_known = True
        self._fill_devices()
        self._fill_strategies()
        self.validate()

    def load_param_counts(self) -> None:
        """Count the models' parameters in a worker thread, the selected model first (builds each once)."""
        missing = [name for name in MODELS if name not in self._params]
        if not missing or self._closed:
            return
        current = self.model_combo.currentData()
        name = current if current in missing else missing[0]
        worker = FunctionWorker(_count_parameters, name)
        worker.done.connect(self._on_param_count)
        worker.failed.connect(self._on_param_count_failed)
        start_worker(worker, "param-count")

    def _on_param_count(self, counted: tuple[str, int]) -> None:
        name, count = counted
        self._params[name] = count
        self._show_model_info()
        self.load_param_counts()

    def _on_param_count_failed(self, message: str) -> None:
        self.model_info.setText(f"{MODELS[self.model_combo.currentData()].description}\nparameters unknown: {message}")

    def add_section(self, widget: QWidget) -> None:
        """Add a box under the form fields, above Start (e.g. the logging & profiling options)."""
        self._sections.addWidget(widget)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Lay out again at the new width: QFormLayout keeps word-wrapped rows at their old heights (squashed text)."""
        super().resizeEvent(event)
        self.layout().invalidate()

    def close_down(self) -> None:
        """The window is closing: start no more background work."""
        self._closed = True
        self.cluster_box.close_down()

    def set_running(self, running: bool) -> None:
        self._running = running
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
        parts = [f"{done:,} / {total:,} steps" if total else f"{done:,} steps"]
        if samples_per_s:
            parts.append(f"{samples_per_s:,.0f} samples/s")
        if eta_s is not None and done < total:
            parts.append(f"ETA {format_duration(eta_s)}")
        self.progress_bar.setFormat(" · ".join(parts))

    def show_starting(self, label: str) -> None:
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat("Starting: building the model and compiling the step…")
        self.result_label.setText(f"Running {html.escape(label)}")

    def show_result(self, finished: FinishedRun) -> None:
        """The outcome of a run: headline figures, or the error and what to do."""
        result = finished.result
        if self.progress_bar.maximum() == 0:  # still the "starting" busy bar: the run ended before its first step
            self.progress_bar.setRange(0, max(1, result.steps_done))
        self.progress_bar.setValue(min(result.steps_done, self.progress_bar.maximum()))
        figures = [f"{result.steps_done:,} steps"]
        if result.samples_per_s:
            figures.append(f"<b>{result.samples_per_s:,.0f} samples/s</b>")
        if result.step_time_median_ms is not None:
            figures.append(f"median step {result.step_time_median_ms:,.2f} ms (p95 {result.step_time_p95_ms:,.2f} ms)")
        if result.warmup_s is not None:
            figures.append(f"warm-up {result.warmup_s:,.2f} s")
        if result.final_loss is not None:
            figures.append(f"final loss {result.final_loss:.4g}")
        if result.replicas > 1:
            figures.append(f"{result.replicas} replicas")
        saved = f"Saved to the history as run #{finished.run_id}." if finished.run_id is not None else finished.history_error
        if result.status == RunStatus.COMPLETED:
            head, color = "Completed", "#1b5e20"
        elif result.status == RunStatus.STOPPED:
            head, color = "Stopped", "#8a6d00"
        else:
            head, color = "Failed", "#b00020"
        lines = [f"<b style='color:{color}'>{head}</b>: " + " · ".join(figures)]
        if result.message:
            lines.append(f"<span style='color:{color}'>{html.escape(result.message)}</span>")
        lines.extend(html.escape(w) for w in result.warnings)
        if saved:
            lines.append(html.escape(saved))
        self.result_label.setText("<br>".join(lines))
        self.progress_bar.setFormat(f"{head}: {result.steps_done:,} steps" + (f" · {result.samples_per_s:,.0f} samples/s" if result.samples_per_s else ""))

    def show_error(self, message: str) -> None:
        self.result_label.setText(f"<b style='color:#b00020'>Failed</b>: {html.escape(message)}")

    def show_not_started(self, message: str) -> None:
        """Say why Start did nothing (an option refused this run), where the result would appear."""
        self.result_label.setText(f"<b style='color:#b00020'>Not started</b>: {html.escape(message)}")

    def config(self) -> RunConfig | None:
        """The run the form describes, or None while any field is invalid."""
        config, errors = self._read_form()
        return config if not errors else None

    def errors(self) -> list[str]:
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

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setToolTip("The sample model to train (hover an entry for what it is).")
        self.model_info = QLabel()
        self.model_info.setObjectName("modelInfo")
        self.model_info.setWordWrap(True)
        self.model_info.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # muted, in light and dark themes
        self.dataset_combo = QComboBox()
        self.dataset_combo.setObjectName("datasetCombo")
        self.dataset_combo.setToolTip("Synthetic data measures the device alone; real data sets load from disk or download once.")
        self.strategy_combo = QComboBox()
        self.strategy_combo.setObjectName("strategyCombo")
        self.strategy_combo.setToolTip("The tf.distribute strategy: where and across how many devices the model trains.")
        self.strategy_reason = QLabel()
        self.strategy_reason.setObjectName("strategyReason")
        self.strategy_reason.setWordWrap(True)
        self.strategy_reason.setStyleSheet("font-size: 9pt;")
        self.strategy_reason.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.device_combo = QComboBox()
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setToolTip("The one device to train on.")
        self.device_list = QListWidget()
        self.device_list.setObjectName("deviceList")
        self.device_list.setToolTip("Tick the devices to mirror the model on (two or more of one kind).")
        self.device_list.setMaximumHeight(90)
        self.device_hint = QLabel()
        self.device_hint.setObjectName("deviceHint")
        self.device_hint.setWordWrap(True)
        self.device_box = QWidget()
        device_layout = QVBoxLayout(self.device_box)
        device_layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.device_combo, self.device_list, self.device_hint):
            device_layout.addWidget(widget)
        self.cluster_box = ClusterBox()
        self.workers_spin = self.cluster_box.workers_spin
        self.tpu_address_edit = QLineEdit("local")
        self.tpu_address_edit.setObjectName("tpuAddressEdit")
        self.tpu_address_edit.setToolTip("Where the TPU is: 'local' on a TPU VM, a Cloud TPU name, or grpc://host:8470.")
        self.tpu_address_edit.setPlaceholderText("local, a TPU name, or grpc://host:8470")
        self.tpu_connect_button = QPushButton("Connect")
        self.tpu_connect_button.setObjectName("tpuConnectButton")
        self.tpu_connect_button.setToolTip("Try to initialise the TPU at this address, in a child process (gives up after the time limit).")
        self.tpu_timeout_spin = QSpinBox()
        self.tpu_timeout_spin.setObjectName("tpuTimeoutSpin")
        self.tpu_timeout_spin.setRange(1, MAX_TPU_PROBE_TIMEOUT_S)
        self.tpu_timeout_spin.setValue(TPU_PROBE_TIMEOUT_S)
        self.tpu_timeout_spin.setSuffix(" s")
        self.tpu_timeout_spin.setToolTip("Time limit of the TPU probe: an address where nothing answers can otherwise hang for minutes.")
        self.tpu_status = QLabel("Not connected.")
        self.tpu_status.setObjectName("tpuStatusLabel")
        self.tpu_status.setWordWrap(True)
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
        self.result_label = QLabel()
        self.result_label.setObjectName("resultLabel")
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Model", self.model_combo)
        form.addRow("", self.model_info)
        form.addRow("Data set", self.dataset_combo)
        form.addRow("Strategy", self.strategy_combo)
        form.addRow("", self.strategy_reason)
        form.addRow("Devices", self.device_box)
        form.addRow(self.cluster_box)
        tpu_row = QHBoxLayout()
        tpu_row.addWidget(self.tpu_address_edit, 1)
        tpu_row.addWidget(self.tpu_timeout_spin)
        tpu_row.addWidget(self.tpu_connect_button)
        form.addRow("TPU address", tpu_row)
        form.addRow("", self.tpu_status)
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
        self._form = form
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        self._sections = QVBoxLayout()
        layout.addLayout(self._sections)
        layout.addWidget(self.hint_label)
        layout.addWidget(self.warning_label)
        layout.addLayout(buttons)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.result_label)
        layout.addStretch(1)
        self.hint_label.setVisible(False)
        self.warning_label.setVisible(False)

        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_changed)
        self.steps_unit.currentIndexChanged.connect(self._on_unit_changed)
        self.tpu_connect_button.clicked.connect(self._connect_tpu)
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

    def _form_widgets(self) -> list[QWidget]:
        return [
            self.model_combo, self.dataset_combo, self.strategy_combo, self.device_box, *self.cluster_box.input_widgets(),
            self.tpu_address_edit, self.tpu_timeout_spin, self.tpu_connect_button, self.batch_edit, self.steps_edit,
            self.steps_unit, self.lr_edit, self.optimizer_combo, self.precision_combo, self.xla_check, self.spc_edit,
        ]  # fmt: skip

    # --- choices -------------------------------------------------------------

    def _fill_models(self) -> None:
        for spec in MODELS.values():
            self.model_combo.addItem(spec.title, spec.name)
            self.model_combo.setItemData(self.model_combo.count() - 1, spec.description, Qt.ItemDataRole.ToolTipRole)
        self.model_combo.setCurrentIndex(self.model_combo.findData(DEFAULT_MODEL))

    def _on_model_changed(self) -> None:
        spec = MODELS[self.model_combo.currentData()]
        previous = self.dataset_combo.currentData()
        self.dataset_combo.blockSignals(True)
        self.dataset_combo.clear()
        for dataset in DATASETS.values():
            if spec.accepts(dataset):
                title = dataset.title + ("" if dataset.offline else " (download)")
                self.dataset_combo.addItem(title, dataset.name)
                self.dataset_combo.setItemData(self.dataset_combo.count() - 1, dataset.description, Qt.ItemDataRole.ToolTipRole)
        preferred = previous if self.dataset_combo.findData(previous) >= 0 else None
        if spec.name == DEFAULT_MODEL and previous is None:
            preferred = DEFAULT_DATASET
        index = self.dataset_combo.findData(preferred or spec.default_dataset)
        self.dataset_combo.setCurrentIndex(max(0, index))
        self.dataset_combo.blockSignals(False)
        self._show_model_info()
        self.validate()

    def _show_model_info(self) -> None:
        name = self.model_combo.currentData()
        spec = MODELS[name]
        params = f"{self._params[name]:,} parameters" if name in self._params else "parameters: counting once TensorFlow has loaded…"
        self.model_info.setText(f"{spec.description}\n{params}")

    def _fill_strategies(self) -> None:
        if self._running:
            return
        current = self.strategy_combo.currentData() or "default"
        choices = strategy_choices(self._devices, self._tpu_connected)
        self.strategy_combo.blockSignals(True)
        self.strategy_combo.clear()
        model = self.strategy_combo.model()
        for choice in choices:
            self.strategy_combo.addItem(choice.label, choice.name)
            index = self.strategy_combo.count() - 1
            self.strategy_combo.setItemData(index, choice.reason or choice.label, Qt.ItemDataRole.ToolTipRole)
            if not choice.available and isinstance(model, QStandardItemModel):
                model.item(index).setEnabled(False)
        chosen = next((c for c in choices if c.name == current and c.available), choices[0])
        self.strategy_combo.setCurrentIndex(self.strategy_combo.findData(chosen.name))
        self.strategy_combo.blockSignals(False)
        self._choices = {c.name: c for c in choices}
        self._on_strategy_changed()

    def strategy_choice(self, name: str) -> StrategyChoice:
        """The menu entry for `name` (available or not, and why)."""
        return self._choices[name]

    def _on_strategy_changed(self) -> None:
        strategy = self.strategy_combo.currentData() or "default"
        unavailable = [c for c in self._choices.values() if not c.available] if self._devices_known else []
        self.strategy_reason.setText("\n".join(f"{c.label.split(' (')[0]} unavailable: {c.reason}" for c in unavailable))
        self.strategy_reason.setVisible(bool(unavailable))
        self.device_combo.setVisible(strategy == "one-device")
        self.device_list.setVisible(strategy == "mirrored")
        self.device_hint.setVisible(strategy not in ("one-device", "mirrored"))
        self._form.setRowVisible(self.cluster_box, strategy == "multi-worker")
        if self.spc_edit.text().strip() == self._spc_default:
            self._spc_default = str(TPU_STEPS_PER_CALL if strategy == "tpu" else 1)
            self.spc_edit.setText(self._spc_default)
        self._show_device_hint()
        self.validate()

    def _show_device_hint(self) -> None:
        strategy = self.strategy_combo.currentData() or "default"
        hint = DEVICE_HINTS.get(strategy, "")
        cores = sum(1 for d in self._devices if d.kind == "TPU" and d.available) or self._tpu_cores
        if strategy == "tpu" and cores and not self.batch_edit.error():
            hint += " " + tpu_batch_note(int(self.batch_edit.value()), cores)
        self.device_hint.setText(hint)

    def _fill_devices(self) -> None:
        usable = [d for d in self._devices if d.available and d.tf_name]
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for device in usable:
            self.device_combo.addItem(f"{device.tf_name} — {device.name}", device.tf_name)
        gpu_index = next((i for i, d in enumerate(usable) if d.kind == "GPU"), 0)
        self.device_combo.setCurrentIndex(gpu_index if usable else -1)
        self.device_combo.blockSignals(False)
        self.device_list.blockSignals(True)
        self.device_list.clear()
        gpus = [d for d in usable if d.kind == "GPU"]
        preferred_kind = "GPU" if len(gpus) >= 2 else "CPU"
        for device in usable:
            item = QListWidgetItem(f"{device.tf_name} — {device.name}")
            item.setData(Qt.ItemDataRole.UserRole, device.tf_name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if device.kind == preferred_kind else Qt.CheckState.Unchecked)
            self.device_list.addItem(item)
        self.device_list.blockSignals(False)

    def _selected_devices(self, strategy: str) -> tuple[str, ...]:
        if strategy == "one-device":
            name = self.device_combo.currentData()
            return (name,) if name else ()
        if strategy == "mirrored":
            return tuple(
                self.device_list.item(row).data(Qt.ItemDataRole.UserRole)
                for row in range(self.device_list.count())
                if self.device_list.item(row).checkState() == Qt.CheckState.Checked
            )
        return ()

    def _on_unit_changed(self) -> None:
        epochs = self.steps_unit.currentText() == "epochs"
        self.steps_edit.label = "Epochs" if epochs else "Steps"
        parse = whole_number(1, MAX_EPOCHS, 1) if epochs else whole_number(1, MAX_STEPS, DEFAULT_STEPS)
        self.steps_edit.set_parser(parse)
        self.validate()

    # --- reading the form ----------------------------------------------------

    def _read_form(self) -> tuple[RunConfig | None, list[str]]:
        errors = [e for e in (f.error() for f in (self.batch_edit, self.steps_edit, self.lr_edit, self.spc_edit)) if e]
        strategy = self.strategy_combo.currentData() or "default"
        choice = self._choices.get(strategy)
        if choice is not None and not choice.available:
            errors.append(f"Strategy {choice.label}: {choice.reason}")
        devices = self._selected_devices(strategy)
        if strategy == "one-device" and not devices:
            errors.append("Devices: pick the device to train on.")
        if strategy == "mirrored" and len(devices) < 2:
            errors.append("Devices: tick two or more devices of one kind for mirrored.")
        if strategy == "multi-worker":
            errors.extend(self.cluster_box.errors())
        if errors:
            return None, errors
        epochs = self.steps_unit.currentText() == "epochs"
        length = int(self.steps_edit.value())
        try:
            config = RunConfig(
                model=self.model_combo.currentData(),
                dataset=self.dataset_combo.currentData(),
                strategy=strategy,
                devices=devices,
                batch_size=int(self.batch_edit.value()),
                steps=DEFAULT_STEPS if epochs else length,
                epochs=length if epochs else None,
                learning_rate=float(self.lr_edit.value()),
                optimizer=self.optimizer_combo.currentText(),
                precision=self.precision_combo.currentData(),
                xla=self.xla_check.isChecked(),
                steps_per_call=int(self.spc_edit.value()),
                workers=self.cluster_box.workers(),
                tpu_address=self.tpu_address_edit.text().strip(),
                cluster_hosts=self.cluster_box.hosts() if strategy == "multi-worker" else (),
                cluster_timeout_s=self.cluster_box.timeout_s(),
            )
        except ConfigError as exc:
            return None, [f"Settings rejected: {exc}"]
        return config, []

    # --- TPU -----------------------------------------------------------------

    @property
    def tpu_timeout_s(self) -> float:
        """Time limit of the TPU probe, in seconds (the spin box next to Connect)."""
        return float(self.tpu_timeout_spin.value())

    @tpu_timeout_s.setter
    def tpu_timeout_s(self, seconds: float) -> None:
        self.tpu_timeout_spin.setValue(round(seconds))

    def _connect_tpu(self) -> None:
        if self._probing or self._closed:
            return
        address = self.tpu_address_edit.text().strip() or "local"
        self._probing = True
        self.tpu_connect_button.setEnabled(False)
        self.tpu_status.setText(f"Connecting to {address!r}… (gives up after {self.tpu_timeout_s:g} s)")
        worker = FunctionWorker(probe_tpu, address, self.tpu_timeout_s)
        worker.done.connect(self._on_tpu_probed)
        worker.failed.connect(self._on_tpu_probe_failed)
        worker.finished.connect(self._on_tpu_probe_finished)
        start_worker(worker, "tpu-probe")

    def _on_tpu_probed(self, probe: TpuProbe) -> None:
        self._tpu_connected = probe.ok
        self._tpu_cores = len(probe.devices) if probe.ok else 0
        prefix = "Connected" if probe.ok else "Not connected"
        self.tpu_status.setText(f"{prefix} ({probe.elapsed_s:.1f} s): {probe.message}")
        self.tpu_status.setStyleSheet("" if probe.ok else "color: #b00020;")
        self._fill_strategies()
        self.tpu_probed.emit(probe)

    def _on_tpu_probe_failed(self, message: str) -> None:
        self.tpu_status.setText(f"TPU probe failed: {message}")

    def _on_tpu_probe_finished(self) -> None:
        self._probing = False
        self.tpu_connect_button.setEnabled(not self._running)


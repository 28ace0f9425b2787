"""The run form: what to train, where, and how; Start/Stop, progress and the last result.

The form's choices live in its state (`gui.state.run_form`, no Qt): the widgets
show it and write the user's edits into it, and every change of it checks the
form again. Every field is checked as it is typed (a red hint under the form
says what is wrong and what to type), then by `RunConfig`; Start stays disabled
until both accept, so nothing unvalidated reaches TensorFlow. The fields scroll;
the hint, Start/Stop, the progress bar and the last result stay below them, in
view however short the window is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from psygnal import EmissionInfo
from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from core.config import RunConfig
from core.jobs import run_label
from core.machine.types import DeviceInfo, DeviceReport, TpuProbe
from core.training.strategies import strategy_choices
from core.workloads.workload import is_model_file, model_title
from gui.job_data import FinishedRun
from gui.run_form.backend_choice import BackendCombo
from gui.run_form.bindings import bind_choice
from gui.run_form.cluster_box import ClusterBox
from gui.run_form.controls import RunControls
from gui.run_form.fields import TrainingFields
from gui.run_form.model_choice import ModelChoice
from gui.run_form.placement import DevicePicker, fill_strategy_combo, strategy_widgets, unavailable_note
from gui.run_form.tpu_connect import TpuConnect
from gui.settings import open_settings
from gui.state.run_form import RunFormState
from gui.window_words import window_words


class RunPanel(QWidget):
    """The run form over its state (`state`). Emits `start_requested(config, label)` and `stop_requested()`."""

    start_requested = Signal(object, str)
    stop_requested = Signal()
    start_enabled_changed = Signal(bool)
    form_changed = Signal(object)  # the RunConfig the form now describes, or None while it has a problem
    model_changed = Signal(str)  # another model was chosen (its title): what the form said of the last job is stale
    tpu_probed = Signal(object)  # TpuProbe

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runPanel")
        self._settings = settings if settings is not None else open_settings()
        self.state = RunFormState()
        self._devices: tuple[DeviceInfo, ...] = ()
        self._devices_known = False
        self._running = False
        self._model_shown: str | None = None  # the model the result line and bar last spoke of
        self._build()
        self.model_choice.fill_models()
        self._fill_strategies()
        self.model_choice.follow_model()
        self.validate()

    # --- public API ----------------------------------------------------------

    def set_devices(self, report: DeviceReport) -> None:
        """The device list changed (or was read again, F5): refill device choices, strategy availability and the backends."""
        self._devices = report.devices
        self._devices_known = True
        self.backend_combo.refresh()  # a backend installed since the app started becomes a choice
        self.device_box.fill(self._devices, self.state.device, self.state.mirrored_devices)
        self.state.device, self.state.mirrored_devices = self.device_box.chosen_device(), self.device_box.ticked_devices()
        self._fill_strategies()
        self.validate()

    def load_param_counts(self) -> None:
        """Count the models' parameters in a worker thread (builds each model once)."""
        self.model_choice.load_param_counts()

    def add_section(self, widget: QWidget) -> None:
        """Add a box under the form fields, above Start (the logging & profiling box, bound to the same state)."""
        self._sections.addWidget(widget)

    def open_model_file(self, path: str) -> None:
        """Open the user's model file (what Model → Open model… does once a file is chosen); described in the background."""
        self.model_choice.open_model_file(path)

    def apply_settings(self, changes: dict[str, Any]) -> None:
        """Fill the fields from RunConfig field names (batch_size, precision, xla, steps_per_call, learning_rate, …):
        what a sweep or autotune found best. None leaves a field as it is; ValueError for a name the form lacks."""
        self.state.apply(changes)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Lay out again at the new width: QFormLayout keeps word-wrapped rows at their old heights (squashed text)."""
        super().resizeEvent(event)
        self._form.invalidate()
        if (layout := self.layout()) is not None:
            layout.invalidate()

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
        self.controls.show_progress(done, total, samples_per_s, eta_s)

    def show_diagnosing(self, what: str) -> None:
        """A completed run is being diagnosed (short probe runs; Stop ends them): a busy bar saying what it does."""
        self.controls.show_diagnosing(what)

    def show_starting(self, label: str) -> None:
        """A run was handed to the worker: a busy bar until its first step."""
        self.controls.show_starting(label)

    def show_result(self, finished: FinishedRun) -> None:
        """The outcome of a run: headline figures, or the error and what to do; a model file's details add what it measured."""
        self.controls.show_result(finished)
        self.model_choice.show_measured(finished.result)

    def show_error(self, message: str) -> None:
        """The run failed outside TensorFlow's hands (the worker itself): say why."""
        self.controls.show_failure("Failed", message)

    def show_not_started(self, message: str) -> None:
        """Say why Start did nothing (an option refused this run), where the result would appear."""
        self.controls.show_failure("Not started", message)

    def config(self) -> RunConfig | None:
        """The run the form describes, or None while any field is invalid."""
        return self.state.config()

    def errors(self) -> list[str]:
        """What is wrong with the form, each with what to type ([] when a run can be described)."""
        return self.state.errors()

    def request_start(self) -> None:
        """Start a run if the form is valid and none is running (button, Ctrl+R)."""
        if self._running or not self.start_button.isEnabled():
            return
        config, errors = self.state.check()
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
        config, errors = self.state.check()
        self.cluster_box.show_config(config)
        warnings = config.warnings(has_accelerator=any(d.kind != "CPU" for d in self._devices)) if config else []
        pending = self.model_choice.pending()
        if pending and errors == [pending]:  # opening a model file: a wait, not a mistake
            errors, warnings = [], [f"{pending} Start is enabled once it is read."]
        if not self._devices_known:  # nothing is wrong yet: a device or strategy "not usable" may be one not listed yet
            warnings = ["Detecting devices… Start is enabled once TensorFlow has listed them.", *errors]
            errors = []
        self.controls.show_hints(errors, warnings, muted=not self._devices_known)
        self.form_changed.emit(config)
        can_start = config is not None and not self._running and self._devices_known
        if can_start != self.start_button.isEnabled():
            self.start_button.setEnabled(can_start)
            self.start_enabled_changed.emit(can_start)
        return can_start

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
        fields = QWidget()
        fields.setObjectName("runFormFields")
        fields_layout = QVBoxLayout(fields)
        fields_layout.setContentsMargins(0, 0, 0, 0)
        fields_layout.addLayout(form)
        self._sections = QVBoxLayout()
        fields_layout.addLayout(self._sections)
        fields_layout.addStretch(1)
        self.fields_scroll = QScrollArea()
        self.fields_scroll.setObjectName("runFormScroll")
        self.fields_scroll.setWidget(fields)
        self.fields_scroll.setWidgetResizable(True)
        self.fields_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.fields_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # always there, so the fields' width (and the height of their wrapped text) does not change when it appears
        self.fields_scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.fields_scroll.setMinimumHeight(80)
        self.controls = RunControls()
        self.hint_label, self.warning_label = self.controls.hint_label, self.controls.warning_label
        self.start_button, self.stop_button = self.controls.start_button, self.controls.stop_button
        self.progress_bar, self.result_label = self.controls.progress_bar, self.controls.result_label
        layout = QVBoxLayout(self)
        layout.addWidget(self.fields_scroll, 1)
        layout.addWidget(self.controls)
        self._connect_signals()

    def _build_model_section(self, form: QFormLayout) -> None:
        """What to train: the model, what it is, and the data set."""
        self.model_choice = ModelChoice(self._settings, self.state, self)
        self.model_combo = self.model_choice.model_combo
        self.model_info = self.model_choice.model_info
        self.dataset_combo = self.model_choice.dataset_combo
        self.model_choice.add_rows(form)

    def _build_placement_section(self, form: QFormLayout) -> None:
        """Where to train: the strategy, its devices, the multi-worker cluster and the TPU."""
        self.strategy_combo, self.strategy_reason = strategy_widgets()
        self.device_box = DevicePicker()
        self.device_combo = self.device_box.device_combo
        self.device_list = self.device_box.device_list
        self.device_hint = self.device_box.device_hint
        self.cluster_box = ClusterBox(self.state)
        self.workers_spin = self.cluster_box.workers_spin
        self.tpu = TpuConnect(self.state, self)
        self.tpu_address_edit = self.tpu.address_edit
        self.tpu_timeout_spin = self.tpu.timeout_spin
        self.tpu_connect_button = self.tpu.connect_button
        self.tpu_status = self.tpu.status_label
        self.backend_combo = BackendCombo()
        form.addRow("Backend", self.backend_combo)
        form.addRow("Strategy", self.strategy_combo)
        form.addRow("", self.strategy_reason)
        form.addRow("Devices", self.device_box)
        form.addRow(self.cluster_box)
        self.tpu.add_rows(form)

    def _build_training_section(self, form: QFormLayout) -> None:
        """How to train: batch, length, optimizer and the speed knobs."""
        self.training = TrainingFields(self.state, self)
        self.batch_edit = self.training.batch_edit
        self.steps_edit = self.training.steps_edit
        self.steps_unit = self.training.steps_unit
        self.lr_edit = self.training.lr_edit
        self.optimizer_combo = self.training.optimizer_combo
        self.precision_combo = self.training.precision_combo
        self.xla_check = self.training.xla_check
        self.spc_edit = self.training.spc_edit
        self.training.add_rows(form)

    def _connect_signals(self) -> None:
        """Wire the fields once all exist: each edit goes into the state, and every change of the state re-validates the form."""
        self.model_choice.changed.connect(self.validate)
        self.model_choice.changed.connect(self._on_model_changed)
        bind_choice(self.state, "backend", self.backend_combo)
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_chosen)
        self.state.events.strategy.connect(self._on_state_strategy)
        self.device_combo.currentIndexChanged.connect(self._on_device_chosen)
        self.device_list.itemChanged.connect(self._on_devices_ticked)
        self.state.events.device.connect(self.device_box.show_device)
        self.state.events.mirrored_devices.connect(self.device_box.show_ticked)
        self.state.events.batch_size.connect(self._show_device_hint)
        self.state.events.all.connect(self._on_state_changed)
        self.start_button.clicked.connect(self.request_start)
        self.stop_button.clicked.connect(self.request_stop)
        self.tpu.probed.connect(self._on_tpu_probed)

    def _form_widgets(self) -> list[QWidget]:
        return [
            *self.model_choice.input_widgets(), self.backend_combo, self.strategy_combo, self.device_box, *self.cluster_box.input_widgets(),
            *self.tpu.input_widgets(), *self.training.input_widgets(),
        ]  # fmt: skip

    def _on_model_changed(self) -> None:
        """A different model: the last job's line and bar were about another one (its results stay in their tabs)."""
        model = self.model_choice.model()
        self.training.offer_file_optimizer(is_model_file(model))
        if model == self._model_shown:
            return
        first = self._model_shown is None
        self._model_shown = model
        if not first and not self._running:
            self.controls.show_model_changed(model_title(model))
            self.model_changed.emit(model_title(model))

    def _on_state_changed(self, _change: EmissionInfo) -> None:
        self.validate()

    # --- choices -------------------------------------------------------------

    def _fill_strategies(self) -> None:
        """List the strategies this machine offers; the state's stays chosen while it is available (or the devices are unknown)."""
        if self._running:
            return
        choices = tuple(replace(c, reason=window_words(c.reason)) for c in strategy_choices(self._devices, self.tpu.connected))
        fill_strategy_combo(self.strategy_combo, choices, self.state.strategy, keep_unavailable=not self._devices_known)
        self.state.strategies = choices
        self.state.strategy = self.strategy_combo.currentData()
        self._show_strategy()

    def _on_strategy_chosen(self) -> None:
        self.state.strategy = self.strategy_combo.currentData() or "default"

    def _on_state_strategy(self, strategy: str) -> None:
        index = self.strategy_combo.findData(strategy)
        if index >= 0 and index != self.strategy_combo.currentIndex():
            self.strategy_combo.blockSignals(True)
            self.strategy_combo.setCurrentIndex(index)
            self.strategy_combo.blockSignals(False)
        self._show_strategy()

    def _show_strategy(self) -> None:
        """The rows that follow the strategy: why some cannot run here, the Devices row, the cluster box."""
        note = unavailable_note(self.state.strategies) if self._devices_known else ""
        self.strategy_reason.setText(note)
        self.strategy_reason.setVisible(bool(note))
        self.device_box.show_strategy(self.state.strategy)
        self._form.setRowVisible(self.cluster_box, self.state.strategy == "multi-worker")
        self._show_device_hint()

    def _on_device_chosen(self) -> None:
        self.state.device = self.device_box.chosen_device()

    def _on_devices_ticked(self) -> None:
        self.state.mirrored_devices = self.device_box.ticked_devices()

    def _show_device_hint(self) -> None:
        cores = sum(1 for d in self._devices if d.kind == "TPU" and d.available) or self.tpu.cores
        batch = None if self.batch_edit.error() else int(self.batch_edit.value())
        self.device_box.show_hint(self.state.strategy, cores, batch)

    def _on_tpu_probed(self, probe: TpuProbe) -> None:
        self._fill_strategies()
        self.tpu_probed.emit(probe)

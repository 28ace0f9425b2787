"""The run form's fields: text fields that parse and explain, and the training rows built from them.

A `ParsedField` validator never blocks a keystroke (so the user can see why
"abc" is wrong); it marks the field invalid and `error()` says what to type.
`TrainingFields` lays out how to train (batch, length, learning rate, optimizer,
speed knobs), each row bound to its field of the form's state
(`gui.state.run_form`), which reads them into a `RunConfig`.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLineEdit, QWidget

from core.config import FILE_OPTIMIZER, OPTIMIZERS
from gui.run_form.bindings import bind_check, bind_choice, bind_text
from gui.state.numbers import Parser, text_error
from gui.state.run_form import BATCH_SIZE, LEARNING_RATE, LENGTH_UNITS, STEPS_PER_CALL, RunFormState
from gui.style import INVALID_FIELD_STYLE

FILE_OPTIMIZER_TITLE = "the file's own"
FILE_OPTIMIZER_TIP = "The optimizer the model file was compiled with, with its settings (Adam when it has none), as the CLI uses."
PRECISION_LABELS = {"off": "off (float32)", "float16": "float16 (mixed)", "bfloat16": "bfloat16 (mixed)"}


class _ParserValidator(QValidator):
    """Acceptable when the parser takes the text; Intermediate (never Invalid) otherwise."""

    def __init__(self, parse: Parser, parent: QWidget | None = None):
        super().__init__(parent)
        self._parse = parse

    def validate(self, text: str, pos: int):
        try:
            self._parse(text)
        except ValueError:
            return QValidator.State.Intermediate, text, pos
        return QValidator.State.Acceptable, text, pos


class ParsedField(QLineEdit):
    """A line edit holding one number; `value()` parses it, `error()` explains why it cannot."""

    def __init__(self, label: str, parse: Parser, object_name: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = label
        self._parse = parse
        self.setObjectName(object_name)
        self.setValidator(_ParserValidator(parse, self))
        self.textChanged.connect(self._restyle)

    def set_parser(self, parse: Parser) -> None:
        """Switch what the field accepts (e.g. steps <-> epochs) and re-check the text."""
        self._parse = parse
        self.setValidator(_ParserValidator(parse, self))
        self._restyle()

    def value(self) -> float | int:
        return self._parse(self.text())

    def error(self) -> str:
        """'' when the text is valid, else "<label>: <why>; <what to type>"."""
        return text_error(self.label, self._parse, self.text())

    def _restyle(self) -> None:
        self.setStyleSheet(INVALID_FIELD_STYLE if self.error() else "")


class TrainingFields(QObject):
    """The training rows of the run form, bound to the form's state."""

    def __init__(self, state: RunFormState, parent: QObject | None = None):
        super().__init__(parent)
        self._state = state
        self.batch_edit = ParsedField("Batch size", BATCH_SIZE, "batchSizeEdit")
        self.batch_edit.setToolTip("Global batch: split evenly across replicas.")
        self.steps_edit = ParsedField(state.length_label, state.length_parser, "stepsEdit")
        self.steps_edit.setToolTip("How long to train: a number of steps (one batch each) or of epochs.")
        self.steps_unit = QComboBox()
        self.steps_unit.setObjectName("stepsUnitCombo")
        self.steps_unit.setToolTip("Count the run's length in training steps or in passes over the data set.")
        for unit in LENGTH_UNITS:
            self.steps_unit.addItem(unit, unit)
        self.lr_edit = ParsedField("Learning rate", LEARNING_RATE, "learningRateEdit")
        self.lr_edit.setToolTip("The optimizer's step size, e.g. 0.001 or 1e-3.")
        self.optimizer_combo = QComboBox()
        self.optimizer_combo.setObjectName("optimizerCombo")
        self.optimizer_combo.setToolTip("The Keras optimizer that updates the weights.")
        for name in OPTIMIZERS:
            self.optimizer_combo.addItem(name, name)
        self.precision_combo = QComboBox()
        self.precision_combo.setObjectName("precisionCombo")
        self.precision_combo.setToolTip("Mixed precision: compute in 16-bit floats, keep weights in float32 (faster on recent GPUs/TPUs).")
        for name, label in PRECISION_LABELS.items():
            self.precision_combo.addItem(label, name)
        self.xla_check = QCheckBox("Compile the step with XLA")
        self.xla_check.setObjectName("xlaCheck")
        self.xla_check.setToolTip("Compile the training step with XLA (jit_compile): often faster, with a longer warm-up.")
        self.spc_edit = ParsedField("Steps per call", STEPS_PER_CALL, "stepsPerCallEdit")
        self.spc_edit.setToolTip("Training steps run inside one call of the compiled function (less Python overhead).")
        state.events.length_unit.connect(self._on_unit_changed)
        bind_choice(state, "length_unit", self.steps_unit)
        for name, edit in (("batch_size", self.batch_edit), ("length", self.steps_edit), ("learning_rate", self.lr_edit),
                           ("steps_per_call", self.spc_edit)):  # fmt: skip
            bind_text(state, name, edit)
        bind_choice(state, "optimizer", self.optimizer_combo)
        bind_choice(state, "precision", self.precision_combo)
        bind_check(state, "xla", self.xla_check)

    def add_rows(self, form: QFormLayout) -> None:
        """Lay out the rows: batch, length (with its unit), learning rate, optimizer, precision, XLA, steps per call."""
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

    def input_widgets(self) -> list[QWidget]:
        return [
            self.batch_edit,
            self.steps_edit,
            self.steps_unit,
            self.lr_edit,
            self.optimizer_combo,
            self.precision_combo,
            self.xla_check,
            self.spc_edit,
        ]

    def offer_file_optimizer(self, offered: bool) -> None:
        """A model file is chosen (True): offer its own compiled optimizer, chosen by default as the CLI does; else take it away."""
        index = self.optimizer_combo.findData(FILE_OPTIMIZER)
        if offered and index < 0:
            self.optimizer_combo.addItem(FILE_OPTIMIZER_TITLE, FILE_OPTIMIZER)
            self.optimizer_combo.setItemData(self.optimizer_combo.count() - 1, FILE_OPTIMIZER_TIP, Qt.ItemDataRole.ToolTipRole)
            self.optimizer_combo.setCurrentIndex(self.optimizer_combo.count() - 1)
        elif not offered and index >= 0:
            chosen = index == self.optimizer_combo.currentIndex()
            self.optimizer_combo.removeItem(index)
            if chosen:
                self.optimizer_combo.setCurrentIndex(self.optimizer_combo.findData(RunFormState.optimizer))

    def _on_unit_changed(self) -> None:
        self.steps_edit.label = self._state.length_label
        self.steps_edit.set_parser(self._state.length_parser)

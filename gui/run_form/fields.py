"""The run form's fields: text fields that parse and explain, and the training rows built from them.

A `ParsedField` validator never blocks a keystroke (so the user can see why
"abc" is wrong); it marks the field invalid and `error()` says what to type.
`TrainingFields` holds how to train (batch, length, learning rate, optimizer,
speed knobs): `values()` gives them as `RunConfig` keyword arguments, and
`apply(changes)` fills them from `RunConfig` field names (what a sweep or
autotune found best: "Use these settings").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLineEdit, QWidget

from core.config import FILE_OPTIMIZER, MAX_BATCH_SIZE, MAX_STEPS, MAX_STEPS_PER_CALL, OPTIMIZERS, PRECISIONS, RunConfig
from core.formatting import format_value
from gui.style import INVALID_FIELD_STYLE

Parser = Callable[[str], float | int]

# The form's defaults are RunConfig's, as the CLI's are: one source.
DEFAULT_STEPS = RunConfig.steps
DEFAULT_BATCH = RunConfig.batch_size
DEFAULT_LEARNING_RATE = f"{RunConfig.learning_rate:g}"
DEFAULT_OPTIMIZER = RunConfig.optimizer
FILE_OPTIMIZER_TITLE = "the file's own"
FILE_OPTIMIZER_TIP = "The optimizer the model file was compiled with, with its settings (Adam when it has none), as the CLI uses."
MAX_EPOCHS = 100_000
PRECISION_LABELS = {"off": "off (float32)", "float16": "float16 (mixed)", "bfloat16": "bfloat16 (mixed)"}
STEPS_UNIT, EPOCHS_UNIT = "steps", "epochs"
# RunConfig fields `apply` can fill.
APPLICABLE = ("batch_size", "precision", "xla", "steps_per_call", "learning_rate", "optimizer", "steps", "epochs")


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

    def __init__(self, label: str, parse: Parser, text: str, object_name: str, parent: QWidget | None = None):
        super().__init__(text, parent)
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
        try:
            self._parse(self.text())
        except ValueError as exc:
            return f"{self.label}: {exc}"
        return ""

    def _restyle(self) -> None:
        self.setStyleSheet(INVALID_FIELD_STYLE if self.error() else "")


def whole_number(low: int, high: int, example: int) -> Parser:
    """A parser for whole numbers in [low, high] (thousands separators allowed)."""

    def parse(text: str) -> int:
        cleaned = text.strip().replace(",", "").replace("_", "")
        if not cleaned:
            raise ValueError(f"empty; type a whole number such as {example}")
        try:
            value = int(cleaned)
        except ValueError:
            raise ValueError(f"{text.strip()!r} is not a whole number; use e.g. {example}") from None
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range; use a whole number from {low} to {format_value(high, 'count')}, e.g. {example}")
        return value

    return parse


def positive_number(high: float, example: str) -> Parser:
    """A parser for real numbers in (0, high]: '0.001', '1e-3'."""

    def parse(text: str) -> float:
        cleaned = text.strip()
        if not cleaned:
            raise ValueError(f"empty; type a number such as {example}")
        try:
            value = float(cleaned)
        except ValueError:
            raise ValueError(f"{cleaned!r} is not a number; use e.g. {example}") from None
        if math.isnan(value):  # float() reads "nan", but it is not a number to train with
            raise ValueError(f"{cleaned!r} is not a number; use e.g. {example}")
        if not math.isfinite(value) or value <= 0 or value > high:
            raise ValueError(f"{cleaned} is out of range; use a number above 0 and at most {high:g}, e.g. {example}")
        return value

    return parse


class TrainingFields(QObject):
    """The training rows of the run form; `changed` fires on any edit."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.batch_edit = ParsedField("Batch size", whole_number(1, MAX_BATCH_SIZE, DEFAULT_BATCH), str(DEFAULT_BATCH), "batchSizeEdit")
        self.batch_edit.setToolTip("Global batch: split evenly across replicas.")
        self.steps_edit = ParsedField("Steps", whole_number(1, MAX_STEPS, DEFAULT_STEPS), str(DEFAULT_STEPS), "stepsEdit")
        self.steps_edit.setToolTip("How long to train: a number of steps (one batch each) or of epochs.")
        self.steps_unit = QComboBox()
        self.steps_unit.setObjectName("stepsUnitCombo")
        self.steps_unit.setToolTip("Count the run's length in training steps or in passes over the data set.")
        self.steps_unit.addItems([STEPS_UNIT, EPOCHS_UNIT])
        self.lr_edit = ParsedField("Learning rate", positive_number(10, DEFAULT_LEARNING_RATE), DEFAULT_LEARNING_RATE, "learningRateEdit")
        self.lr_edit.setToolTip("The optimizer's step size, e.g. 0.001 or 1e-3.")
        self.optimizer_combo = QComboBox()
        self.optimizer_combo.setObjectName("optimizerCombo")
        self.optimizer_combo.setToolTip("The Keras optimizer that updates the weights.")
        for name in OPTIMIZERS:
            self.optimizer_combo.addItem(name, name)
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
        self.steps_unit.currentIndexChanged.connect(self._on_unit_changed)
        for combo in (self.optimizer_combo, self.precision_combo):
            combo.currentIndexChanged.connect(self.changed)
        for field in (self.batch_edit, self.steps_edit, self.lr_edit, self.spc_edit):
            field.textChanged.connect(self.changed)
        self.xla_check.toggled.connect(self.changed)

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

    def errors(self) -> list[str]:
        """What is wrong with the fields, each with what to type."""
        return [e for e in (f.error() for f in (self.batch_edit, self.steps_edit, self.lr_edit, self.spc_edit)) if e]

    def values(self) -> dict[str, Any]:
        """The fields as RunConfig keyword arguments (call only when `errors()` is empty)."""
        epochs = self.steps_unit.currentText() == EPOCHS_UNIT
        length = int(self.steps_edit.value())
        return {
            "batch_size": int(self.batch_edit.value()),
            "steps": DEFAULT_STEPS if epochs else length,
            "epochs": length if epochs else None,
            "learning_rate": float(self.lr_edit.value()),
            "optimizer": str(self.optimizer_combo.currentData()),
            "precision": self.precision_combo.currentData(),
            "xla": self.xla_check.isChecked(),
            "steps_per_call": int(self.spc_edit.value()),
        }

    def apply(self, changes: dict[str, Any]) -> None:
        """Fill the fields from RunConfig field names (None leaves a field as it is).

        Raises ValueError, before changing anything, for a name the form has no
        field for or a choice it does not offer.
        """
        unknown = sorted(set(changes) - set(APPLICABLE))
        if unknown:
            raise ValueError(f"the run form has no field for {', '.join(unknown)}; it fills {', '.join(APPLICABLE)}")
        wanted = {key: value for key, value in changes.items() if value is not None}
        if "precision" in wanted and wanted["precision"] not in PRECISIONS:
            raise ValueError(f"precision {wanted['precision']!r} is not one of {', '.join(PRECISIONS)}")
        if "optimizer" in wanted and wanted["optimizer"] not in OPTIMIZERS:
            raise ValueError(f"optimizer {wanted['optimizer']!r} is not one of {', '.join(OPTIMIZERS)}")
        texts = {"batch_size": self.batch_edit, "steps_per_call": self.spc_edit, "learning_rate": self.lr_edit}
        for key, field in texts.items():
            if key in wanted:
                field.setText(repr(float(wanted[key])) if key == "learning_rate" else str(int(wanted[key])))
        if "precision" in wanted:
            self.precision_combo.setCurrentIndex(self.precision_combo.findData(wanted["precision"]))
        if "optimizer" in wanted:
            if (index := self.optimizer_combo.findData(wanted["optimizer"])) >= 0:
                self.optimizer_combo.setCurrentIndex(index)
        if "xla" in wanted:
            self.xla_check.setChecked(bool(wanted["xla"]))
        if "epochs" in wanted or "steps" in wanted:
            self.steps_unit.setCurrentText(EPOCHS_UNIT if "epochs" in wanted else STEPS_UNIT)
            self.steps_edit.setText(str(int(wanted["epochs"] if "epochs" in wanted else wanted["steps"])))

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
                self.optimizer_combo.setCurrentIndex(self.optimizer_combo.findData(DEFAULT_OPTIMIZER))

    def _on_unit_changed(self) -> None:
        epochs = self.steps_unit.currentText() == EPOCHS_UNIT
        self.steps_edit.label = "Epochs" if epochs else "Steps"
        self.steps_edit.set_parser(whole_number(1, MAX_EPOCHS, 1) if epochs else whole_number(1, MAX_STEPS, DEFAULT_STEPS))
        self.changed.emit()

"""Which settings a sweep varies and their values: two rows of (setting, values), and whether slow precisions run too."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QGridLayout, QGroupBox, QLabel, QLineEdit, QWidget

from core.config import ConfigError
from core.tuning.sweep_plan import AXES, AXIS_TITLES, parse_values

NO_AXIS = ""
DEFAULT_VALUES = {"batch_size": "16,32,64,128", "steps_per_call": "1,4,16,64", "precision": "off,bfloat16,float16", "xla": "off,on"}
VALUE_HINTS = {
    "batch_size": "global batch sizes, comma-separated",
    "steps_per_call": "steps per tf.function call, comma-separated",
    "precision": "off (float32), bfloat16, float16",
    "xla": "off, on",
}
SECOND_EMPTY = " (empty: vary the first setting only)"


class SweepAxesBox(QGroupBox):
    """Vary [setting] over [values], and [setting or nothing] over [values]; everything else comes from the run form."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("What to vary (everything else as in the run form)", parent)
        self.setObjectName("sweepAxesBox")
        self.first_combo, self.first_values = self._axis_row(with_none=False)
        self.second_combo, self.second_values = self._axis_row(with_none=True)
        self.slow_check = QCheckBox("Run precisions that are slow on this target too")
        self.slow_check.setObjectName("sweepKeepSlow")
        self.slow_check.setToolTip(
            "Off: float16 on a CPU-only target, and bfloat16 on a CPU without AVX-512 or AMX, are left out with the reason. "
            "On: they run anyway, to measure how slow they are."
        )
        layout = QGridLayout(self)
        layout.addWidget(QLabel("Vary"), 0, 0)
        layout.addWidget(self.first_combo, 0, 1)
        layout.addWidget(self.first_values, 0, 2)
        layout.addWidget(QLabel("and"), 1, 0)
        layout.addWidget(self.second_combo, 1, 1)
        layout.addWidget(self.second_values, 1, 2)
        layout.addWidget(self.slow_check, 2, 1, 1, 2)
        layout.setColumnStretch(2, 1)
        self.set_axes("batch_size", DEFAULT_VALUES["batch_size"], "precision", DEFAULT_VALUES["precision"])

    def set_axes(self, first: str, first_values: str, second: str = NO_AXIS, second_values: str = "") -> None:
        """Choose the settings and their values (as text, e.g. '16,32')."""
        for combo, values, name, text in ((self.first_combo, self.first_values, first, first_values),
                                          (self.second_combo, self.second_values, second, second_values)):  # fmt: skip
            combo.blockSignals(True)
            combo.setCurrentIndex(combo.findData(name))
            combo.blockSignals(False)
            self._on_axis_changed(combo, values)
            values.setText(text)

    def values(self) -> dict[str, tuple[Any, ...]]:
        """{setting: values} for the chosen rows; ConfigError naming the row when a value is not understood.

        A second row left empty (its values cleared with ⊗) varies nothing, as "nothing else" does."""
        chosen = {}
        for combo, edit, row in ((self.first_combo, self.first_values, "first"), (self.second_combo, self.second_values, "second")):
            name = combo.currentData()
            if name == NO_AXIS or (edit is self.second_values and not edit.text().strip()):
                continue
            if name in chosen:
                raise ConfigError("settings varied", AXIS_TITLES[name], "two different settings (or nothing in the second row)")
            chosen[name] = parse_values(name, edit.text(), f"{AXIS_TITLES[name]} values ({row} row)")
        return chosen

    def keep_slow(self) -> bool:
        return self.slow_check.isChecked()

    def _axis_row(self, with_none: bool) -> tuple[QComboBox, QLineEdit]:
        combo = QComboBox()
        combo.setObjectName("sweepSecondAxis" if with_none else "sweepFirstAxis")
        combo.setToolTip(
            "An optional second setting to vary: every value of the first is run with every value of this one (a heat map)"
            if with_none
            else "The setting to vary; everything else stays as in the run form"
        )
        if with_none:
            combo.addItem("nothing else", NO_AXIS)
        for name in AXES:
            combo.addItem(AXIS_TITLES[name], name)
        edit = QLineEdit()
        edit.setObjectName("sweepSecondValues" if with_none else "sweepFirstValues")
        edit.setClearButtonEnabled(True)
        combo.currentIndexChanged.connect(lambda _index: self._on_axis_changed(combo, edit))
        edit.textChanged.connect(self.changed)
        return combo, edit

    def _on_axis_changed(self, combo: QComboBox, edit: QLineEdit) -> None:
        name = combo.currentData()
        edit.setEnabled(name != NO_AXIS)
        edit.setText(DEFAULT_VALUES.get(name, ""))
        second = edit.objectName() == "sweepSecondValues" and name != NO_AXIS
        edit.setPlaceholderText(VALUE_HINTS.get(name, "") + (SECOND_EMPTY if second else ""))
        edit.setToolTip(VALUE_HINTS.get(name, "Vary one setting only."))
        self.changed.emit()

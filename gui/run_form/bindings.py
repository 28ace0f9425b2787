"""Widgets bound to a field of the run form's state (`gui.state.run_form`): they show it and write the user's edits.

Each `bind_*` shows the field's value now, writes every edit of the widget into the state and follows the field's
change events (a restore, "Use these settings", a field that follows another). The state emits only when a value
changes, and a widget shown the value it holds emits nothing, so the two never chase each other.
"""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton, QComboBox, QLineEdit, QPlainTextEdit, QSpinBox

from gui.state.run_form import RunFormState


def bind_text(state: RunFormState, name: str, edit: QLineEdit) -> None:
    """A line edit holding a text field (as typed: the state says what is wrong with it)."""

    def show(text: str) -> None:
        if edit.text() != text:
            edit.setText(text)

    show(getattr(state, name))
    edit.textChanged.connect(lambda text: setattr(state, name, text))
    state.events[name].connect(show)


def bind_plain_text(state: RunFormState, name: str, edit: QPlainTextEdit) -> None:
    """A multi-line edit holding a text field."""

    def show(text: str) -> None:
        if edit.toPlainText() != text:
            edit.setPlainText(text)

    show(getattr(state, name))
    edit.textChanged.connect(lambda: setattr(state, name, edit.toPlainText()))
    state.events[name].connect(show)


def bind_check(state: RunFormState, name: str, button: QAbstractButton) -> None:
    """A check box holding a yes/no field."""

    def show(checked: bool) -> None:
        button.setChecked(checked)

    show(getattr(state, name))
    button.toggled.connect(lambda checked: setattr(state, name, checked))
    state.events[name].connect(show)


def bind_spin(state: RunFormState, name: str, spin: QSpinBox) -> None:
    """A spin box holding a whole-number field (a value out of its range is shown, and kept, at the nearest end)."""

    def show(value: int) -> None:
        spin.setValue(value)

    show(getattr(state, name))
    spin.valueChanged.connect(lambda value: setattr(state, name, value))
    state.events[name].connect(show)
    if spin.value() != getattr(state, name):
        setattr(state, name, spin.value())


def bind_choice(state: RunFormState, name: str, combo: QComboBox) -> None:
    """A menu whose entries' data are the field's values; a value it does not offer (now) gives way to its current entry."""

    def show(value: str) -> None:
        index = combo.findData(value)
        if index >= 0:
            combo.setCurrentIndex(index)
        elif combo.currentIndex() >= 0:
            setattr(state, name, combo.currentData())

    show(getattr(state, name))
    combo.currentIndexChanged.connect(lambda index: setattr(state, name, combo.itemData(index)) if index >= 0 else None)
    state.events[name].connect(show)

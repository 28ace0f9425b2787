"""Text fields that parse and explain: each turns its text into a value or a message the user can act on.

A `ParsedField` validator never blocks a keystroke (so the user can see why
"abc" is wrong); it marks the field invalid and `error()` says what to type.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QLineEdit, QWidget

from core.formatting import format_value

Parser = Callable[[str], float | int]

INVALID_STYLE = "QLineEdit { border: 1px solid #c62828; background: #fff3f3; color: #1a1a1a; }"  # readable in dark themes too


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
        self.setStyleSheet(INVALID_STYLE if self.error() else "")


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
        if not math.isfinite(value) or value <= 0 or value > high:
            raise ValueError(f"{cleaned} is out of range; use a number above 0 and at most {high:g}, e.g. {example}")
        return value

    return parse

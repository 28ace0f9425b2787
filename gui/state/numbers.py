"""The form's numbers read from text as typed: whole numbers and positive reals, each refusal saying what to type.

A parser returns the number or raises ValueError whose text is "why; what to type" ("'abc' is not a number;
use e.g. 0.001"): the run form's state reads its fields with them and its line edits colour themselves by them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from core.formatting import format_value

Parser = Callable[[str], float | int]


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


def text_error(label: str, parse: Parser, text: str) -> str:
    """'' when `parse` takes `text`, else "<label>: <why>; <what to type>"."""
    try:
        parse(text)
    except ValueError as exc:
        return f"{label}: {exc}"
    return ""

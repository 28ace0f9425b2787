"""The line protocol between a supervised worker process and the app.

The worker writes one JSON event per line on stdout (`{"event": START, ...}`);
the app writes control lines on the worker's stdin (`STOP_LINE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.results import StepRecord

START, CALL, STEPS, RESULT, ERROR = "start", "call", "steps", "result", "error"
STOP_LINE = "stop"


def encode_records(records: Sequence[StepRecord]) -> list[list[Any]]:
    """Step records as compact JSON rows: [step, loss, seconds, warmup]."""
    return [[r.step, r.loss, r.step_time_s, r.warmup] for r in records]


def decode_records(rows: Sequence[Sequence[Any]]) -> list[StepRecord]:
    """The inverse of `encode_records`."""
    return [StepRecord(int(step), float(loss), float(seconds), bool(warmup)) for step, loss, seconds, warmup in rows]

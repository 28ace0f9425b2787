"""The line protocol between a supervised worker process and the app.

The worker sends one event per message of `core.child_process`'s protocol
(`{"event": START, ...}`); the app asks it to stop on its control pipe
(`Child.stop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.results import StepRecord

START, CALL, STEPS, RESULT, ERROR = "start", "call", "steps", "result", "error"


def encode_records(records: Sequence[StepRecord]) -> list[list[Any]]:
    """Step records as compact JSON rows: [step, loss, seconds, warmup]."""
    return [[r.step, r.loss, r.step_time_s, r.warmup] for r in records]


def decode_records(rows: Sequence[Sequence[Any]]) -> list[StepRecord]:
    """The inverse of `encode_records`."""
    return [StepRecord(int(step), float(loss), float(seconds), bool(warmup)) for step, loss, seconds, warmup in rows]

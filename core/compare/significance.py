"""Whether a comparison's differences are real: each speed-up's 95% interval, and the rows measured under contention.

The interval is a block bootstrap over the two runs' steady-state calls
(`core.training.noise`); a speed-up whose interval holds 1 is "no difference
beyond noise", whichever number is bigger. A row whose run was measured while
other work used the machine says so (`core.machine.conditions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.formatting import MISSING
from core.results import RunResult
from core.training.noise import Interval, runs_ratio

NO_DIFFERENCE = "no difference beyond noise"
CONTENDED_MARK = "(busy)"
"""Beside a target, label or point measured while other processes used the machine."""


class _Row(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def result(self) -> RunResult: ...
    @property
    def speedup_ci(self) -> tuple[float, float] | None: ...
    @property
    def beyond_noise(self) -> bool | None: ...


def speedup_interval(result: RunResult, base: RunResult) -> Interval | None:
    """`result`'s samples/s over `base`'s with its 95% interval; None without enough steady-state calls in either."""
    if result is base or not result.step_times_s or not base.step_times_s:
        return None
    return runs_ratio(base, result)


def interval_cell(row: _Row, is_base: bool) -> str:
    """ "0.97–1.04 (noise)" / "1.71–1.94" for a table cell; "" for the baseline, the missing mark without an interval."""
    if is_base:
        return ""
    if row.speedup_ci is None:
        return MISSING
    low, high = row.speedup_ci
    return f"{low:.2f}–{high:.2f}" + ("" if row.beyond_noise else " (noise)")


def contended_label(label: str, result: RunResult) -> str:
    """The label with the busy mark when the run was measured under contention."""
    return f"{label} {CONTENDED_MARK}" if result.contended else label


def noise_warnings(rows: Sequence[_Row], base: _Row | None) -> list[str]:
    """Rows measured under contention, and speed-ups that are no difference beyond noise, in words."""
    notes = [
        f"{row.label}: measured while {row.result.conditions.get('reason')}: figures are low and noisy; re-run on a quiet machine."
        for row in rows
        if row.result.contended
    ]
    if base is not None:
        notes += [
            f"{row.label} against {base.label}: {NO_DIFFERENCE} (the speed-up's 95% interval {row.speedup_ci[0]:.2f}–"
            f"{row.speedup_ci[1]:.2f} holds 1)."
            for row in rows
            if row is not base and row.speedup_ci is not None and not row.beyond_noise
        ]
    return notes

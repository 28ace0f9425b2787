"""Whether a comparison's differences are real: each speed-up's 95% interval, and the rows measured under contention.

The interval comes from the interleaved rounds the runs were measured in,
never narrower than the block bootstrap over their steady-state calls
(`core.training.noise.between_runs`); a speed-up whose interval holds 1 is "no
difference beyond noise", whichever number is bigger, and runs measured one
after another (one round) are never told apart. A row whose run was measured
while other work used the machine says so (`core.machine.conditions`), and a
load that changed between rounds is named when it leaves the answer open.

So a `speedup_ci` that excludes 1 can still come with `beyond_noise` false:
the runs shared fewer than two rounds, and the interval is the calls' own
(`speedup_ci_from` "calls"), which cannot see a load that changed between
them. `beyond_noise_reason` says which ("one_round", or "holds_1" where the
interval holds 1), and the tables mark such an interval "(1 round)", not "(noise)".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.formatting import MISSING
from core.results import RunResult
from core.training.noise import Interval, between_runs

NO_DIFFERENCE = "no difference beyond noise"
LOAD_CHANGE = 0.25
"""Other processes' CPU share differing by this much between rounds: the load changed while the rounds ran."""
ONE_ROUND_MARK = "(1 round)"
"""Beside an interval from runs measured one after another: the calls' own interval, nothing claimed across the runs."""
HOLDS_ONE = "holds_1"
ONE_ROUND = "one_round"
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
    @property
    def interval_rounds(self) -> int | None: ...


def speedup_interval(result: RunResult, base: RunResult) -> Interval | None:
    """`result`'s samples/s over `base`'s with its 95% interval (from rounds); None without enough steady-state calls in either."""
    if result is base or not result.step_times_s or not base.step_times_s:
        return None
    return between_runs(base, result)


def round_loads(result: RunResult) -> list[float]:
    """Other processes' CPU share during each of the run's turns (the readable ones)."""
    return [share for share in result.rounds.get("other_share") or [] if share is not None]


def interval_source(row: _Row) -> str | None:
    """Where the row's `speedup_ci` comes from: "rounds" (two or more shared rounds), "calls" (one round: the runs' own
    calls, measured one after another), None without an interval."""
    if row.speedup_ci is None:
        return None
    return "rounds" if (row.interval_rounds or 1) >= 2 else "calls"


def noise_reason(row: _Row) -> str | None:
    """Why the speed-up is not beyond noise: ONE_ROUND (measured one after another: nothing is claimed across runs,
    whatever the calls' interval), HOLDS_ONE (the interval holds 1); "" when it is beyond noise; None without an interval."""
    if row.speedup_ci is None or row.beyond_noise is None:
        return None
    if row.beyond_noise:
        return ""
    return ONE_ROUND if (row.interval_rounds or 1) < 2 else HOLDS_ONE


def interval_cell(row: _Row, is_base: bool) -> str:
    """ "0.97–1.04 (noise)" / "1.71–1.94" / "4.58–7.84 (1 round)" for a table cell; "" for the baseline, the missing mark without an interval."""
    if is_base:
        return ""
    if row.speedup_ci is None:
        return MISSING
    low, high = row.speedup_ci
    mark = {"": "", ONE_ROUND: f" {ONE_ROUND_MARK}", HOLDS_ONE: " (noise)"}[noise_reason(row) or ""]
    return f"{low:.2f}–{high:.2f}{mark}"


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
        for row in rows:
            if row is base or row.speedup_ci is None or row.beyond_noise:
                continue
            if (row.interval_rounds or 1) < 2:
                notes.append(
                    f"{row.label} against {base.label}: measured one after another, not in interleaved rounds: a load that "
                    "changed between the runs would read as a difference, so none is claimed; compare them in 6 or more interleaved rounds (Rounds in the window, --rounds on the command line)."
                )
                continue
            notes.append(
                f"{row.label} against {base.label}: {NO_DIFFERENCE} (the speed-up's 95% interval {row.speedup_ci[0]:.2f}–"
                f"{row.speedup_ci[1]:.2f} over {row.interval_rounds} rounds holds 1)."
            )
            notes.extend(load_change_note(row.result, base.result, row.interval_rounds or 1))
    return notes


def load_change_note(result: RunResult, base: RunResult, rounds: int) -> list[str]:
    """Words for a load that changed between the rounds two runs shared, when it left their difference open."""
    loads = round_loads(result) + round_loads(base)
    if not loads or max(loads) - min(loads) < LOAD_CHANGE:
        return []
    return [
        f"The load changed between rounds (other processes used {min(loads):.0%}–{max(loads):.0%} of the CPU): {rounds} rounds "
        f"are not enough to tell; re-run with --rounds {min(rounds * 2, 100)} or on a quiet machine."
    ]

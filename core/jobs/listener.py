"""`JobListener`: the one channel through which a job tells its caller how it goes.

A listener is a `RunCallback` (the run's start, each call's steps, its end, in
the thread that trains) with the job's own events added: which run of a
comparison or sweep starts, that a completed run is being diagnosed, and where
each run ended up (a `RecordedRun`). Override what you need; every method
defaults to nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.results import RunResult
from core.training.callbacks import RunCallback


@dataclass(frozen=True)
class RecordedRun:
    """A job's run as it ended: its result, its id in the history (None: not saved), why not saved, and whether it started."""

    result: RunResult
    run_id: int | None
    history_error: str = ""
    started: bool = True


class JobListener(RunCallback):
    """Follows a job: the run hooks of `RunCallback`, plus the job's start, diagnosis and end of each run."""

    def on_job_start(self, index: int, total: int, label: str) -> None:
        """Run `index` (0-based) of `total` is about to start: a comparison's target, a sweep's point."""

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        """Run `index` has the turn in interleaved rounds (`core.jobs.rounds`): the steps that follow are its own.

        `round_index` is -1 (`WARMUP_ROUND`) for its set-up and warm-up call, else 0 .. rounds - 1.
        """

    def on_diagnosing(self, what: str) -> None:
        """The completed run is being diagnosed: what the diagnosis does now ("" as it begins)."""

    def on_job_end(self, index: int, recorded: RecordedRun) -> None:
        """Run `index` of a comparison ended (one that never started too, but not a skipped one): its result and history id."""

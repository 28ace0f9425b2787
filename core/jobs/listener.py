"""`JobListener`: the one channel through which a job tells its caller how it goes.

A listener is a hook (`RunHook`: the run's start, each call's steps, its
end, in the thread that trains) with the job's own events added: the run's
hooks once they are built, which run of a comparison or sweep starts, that a
completed run is being diagnosed, and where each run ended up (a
`RecordedRun`). Override what you need; every method defaults to nothing.
`announcing` makes a listener hear the jobs of interleaved rounds start and
take their turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.jobs.rounds import WARMUP_ROUND, OnTurn
from core.results import RunResult
from core.training.hooks import RunHook

if TYPE_CHECKING:
    from core.jobs.run_hooks import RunHooks


@dataclass(frozen=True)
class RecordedRun:
    """A job's run as it ended: its result, its id in the history (None: not saved), why not saved, and whether it started."""

    result: RunResult
    run_id: int | None
    history_error: str = ""
    started: bool = True


class JobListener(RunHook):
    """Follows a job: what every hook hears (`RunHook`), plus its run's hooks once built, the job's start, diagnosis and end of each run."""

    def on_run_hooks(self, hooks: RunHooks) -> None:
        """The run's hooks are built, before it starts: a view may follow one (`hooks.device_use`), a report read one after
        the run (`hooks.profiler`). The hooks are the run's: they are ended with it, whatever happens."""

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


def announcing(listener: JobListener | None, labels: Sequence[str]) -> OnTurn:
    """An `on_turn` for `core.jobs.rounds` that tells `listener` each job's start (on_job_start, before its set-up) and then
    each of its turns."""
    started: set[int] = set()

    def on_turn(index: int, round_index: int, rounds: int) -> None:
        if listener is None:
            return
        if round_index == WARMUP_ROUND and index not in started:
            started.add(index)
            listener.on_job_start(index, len(labels), labels[index])
        listener.on_turn(index, round_index, rounds)

    return on_turn

"""The hook API into a run, in the spirit of Keras callbacks: `RunHook`, a hook.

Hooks are called in the thread that trains, between calls of the compiled
training function, so they never slow a step down. Subclass `RunHook` and
override what you need; all methods default to doing nothing. A hook that
measured something of its own (device use) or disturbed some steps on purpose
(the profiler) says so in `amend_result`, before any hook sees the result.

An engine (the TensorFlow engine, a backend's child run, a cluster's supervisor)
calls the hooks it is given and ends them all (`end_run`); it adds none of its
own. Which hooks a run carries is its owner's choice: the job service builds
every standard one (conditions, TensorBoard, profiler, device use, energy,
FLOPs, verdict) from the run's config (`core.jobs.run_hooks`), and ends them
even when the run fails before it starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.config import RunConfig
    from core.results import RunResult, StepRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """What a hook may want to know once the run is set up."""

    config: RunConfig
    total_steps: int
    replicas: int
    device_names: tuple[str, ...]
    model: Any
    input_shapes: tuple[tuple[int | None, ...], ...] = ()  # the data's shape per example of each model input (in model.inputs order)
    process_id: int | None = None  # the process that trains on the devices where it is another (a backend job's child); None: this one


class RunHook:
    """Base class: override any of the hooks below.

    `takes_turns`: the hook holds the run in `wait_turn` (a gate of interleaved rounds); a run in
    another process (a backend job) then asks before each turn, and `turn_grant` says how far it may go.
    """

    takes_turns = False

    def on_run_start(self, context: RunContext) -> None:
        """Model, strategy and data are ready; no step has run yet."""

    def wait_turn(self, next_step: int) -> None:
        """Before the call that starts at `next_step`: a hook may hold the run here (its turn in interleaved rounds).

        The run's clock does not count the time spent here: a step's time is its training only.
        """

    def turn_grant(self) -> dict[str, float] | None:
        """After `wait_turn`: what the turn now held covers, {"until_step": N} (calls starting at N at most) or
        {"seconds": S} (of training); None: no limit."""
        return None

    def on_call_begin(self, first_step: int, steps: int) -> None:
        """The next call will run steps first_step .. first_step + steps - 1 (1-based)."""

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        """One call finished; its per-step records, in order."""

    def amend_result(self, result: RunResult) -> RunResult:
        """The run ended: return `result` with what this hook adds or corrects (default: unchanged)."""
        return result

    def on_run_end(self, result: RunResult) -> None:
        """The run ended (completed, stopped or failed); called even after a failure."""


def waited_for_turn(hooks: Sequence[RunHook], next_step: int) -> float:
    """Let every hook hold the run before the call starting at `next_step`; the seconds they held it (left out of step times)."""
    start = time.perf_counter()
    for hook in hooks:
        hook.wait_turn(next_step)
    return time.perf_counter() - start


def granted_turn(hooks: Sequence[RunHook], next_step: int) -> dict[str, float]:
    """For a run in another process: let every hook hold it before the call at `next_step`, then the turn they grant
    (the narrowest of their grants; {} for no limit)."""
    waited_for_turn(hooks, next_step)
    grant: dict[str, float] = {}
    for hook in hooks:
        for key, value in (hook.turn_grant() or {}).items():
            grant[key] = min(grant.get(key, value), value)
    return grant


def amended_result(result: RunResult, hooks: Sequence[RunHook]) -> RunResult:
    """`result` passed through every hook's `amend_result`, in order; a hook that fails leaves it as it was."""
    for hook in hooks:
        try:
            result = hook.amend_result(result)
        except Exception:  # a hook's extra figure must not cost the run its result
            log.exception("%s could not add to the run's result", type(hook).__name__)
    return result


def end_run(hooks: Sequence[RunHook], result: RunResult) -> None:
    """Tell every hook the run ended (`on_run_end`); one that fails is logged, and the others still end."""
    for hook in hooks:
        try:
            hook.on_run_end(result)
        except Exception:  # a hook that cannot close must not keep the others open
            log.exception("%s could not end cleanly", type(hook).__name__)

"""A small hook API into a run, in the spirit of Keras callbacks, and the hook every run carries: its conditions.

Hooks are called in the thread that trains, between calls of the compiled
training function, so they never slow a step down. Subclass `RunCallback` and
override what you need; all methods default to doing nothing. A hook that
measured something of its own (device use) or disturbed some steps on purpose
(the profiler) says so in `amend_result`, before any hook sees the result.

Every engine (the TensorFlow engine, a backend's child run) adds `ConditionsHook`
to every run it trains, as Keras's `fit` adds its History: so a run from the CLI,
the window, a comparison, a sweep, autotune or a verdict's probe carries a
`conditions` record without its caller asking: other processes' CPU share,
steal, CPU pressure, load and frequency over the steady state (after the
warm-up call, to the end of the last call), and on GPUs the other processes,
clocks and throttle reasons (`core.machine.conditions`). The result's warnings
then say when the measurement was contended, and when its step times were
spread so widely that one figure cannot stand for them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from core.machine.conditions import ConditionsSampler, contention_warning, gpu_conditions, own_pids
from core.training.metrics import noise_warning

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


class RunCallback:
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


def waited_for_turn(listeners: Sequence[RunCallback], next_step: int) -> float:
    """Let every hook hold the run before the call starting at `next_step`; the seconds they held it (left out of step times)."""
    start = time.perf_counter()
    for listener in listeners:
        listener.wait_turn(next_step)
    return time.perf_counter() - start


def granted_turn(listeners: Sequence[RunCallback], next_step: int) -> dict[str, float]:
    """For a run in another process: let every hook hold it before the call at `next_step`, then the turn they grant
    (the narrowest of their grants; {} for no limit)."""
    waited_for_turn(listeners, next_step)
    grant: dict[str, float] = {}
    for listener in listeners:
        for key, value in (listener.turn_grant() or {}).items():
            grant[key] = min(grant.get(key, value), value)
    return grant


def amended_result(result: RunResult, listeners: Sequence[RunCallback]) -> RunResult:
    """`result` passed through every hook's `amend_result`, in order; a hook that fails leaves it as it was."""
    for listener in listeners:
        try:
            result = listener.amend_result(result)
        except Exception:  # a hook's extra figure must not cost the run its result
            log.exception("%s could not add to the run's result", type(listener).__name__)
    return result


FindGpus = Callable[[Any, Sequence[str]], list[tuple[str, Any]]]


def _run_gpus(device_names: Sequence[str]) -> tuple[Any, list[tuple[str, Any]]]:
    """(NVML, the run's GPUs as (TF name, handle)); (None, []) for a run on no GPU or with no driver."""
    if not any(name.startswith("GPU") for name in device_names):
        return None, []
    from core.machine.gpu import load_nvml, run_gpu_handles

    nvml, _ = load_nvml()
    return (nvml, run_gpu_handles(nvml, device_names)) if nvml is not None else (None, [])


class ConditionsHook(RunCallback):
    """Snapshots the machine's counters at the run's start, after its warm-up call and after its last call."""

    def __init__(self, nvml: Any = None, find_gpus: FindGpus | None = None) -> None:
        self._nvml = nvml
        self._find_gpus = find_gpus
        self._sampler = ConditionsSampler()
        self._gpus: list[tuple[str, Any]] = []
        self._total_steps = 0

    def on_run_start(self, context: RunContext) -> None:
        self._total_steps = context.total_steps
        if self._find_gpus is not None:
            self._gpus = self._find_gpus(self._nvml, context.device_names)
        else:
            self._nvml, self._gpus = _run_gpus(context.device_names)
        self._sampler.start()

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if not records:
            return
        if records[0].warmup:
            self._sampler.steady()
        elif records[-1].step >= self._total_steps:
            self._sampler.stop()

    def amend_result(self, result: RunResult) -> RunResult:
        if self._sampler.run_start is None:
            return result  # set-up failed: nothing was measured
        if self._sampler.end is self._sampler.steady_start or self._sampler.end is self._sampler.run_start:
            self._sampler.stop()  # stopped or failed before the last call
        gpus = gpu_conditions(self._nvml, self._gpus, own_pids()) if self._gpus else []
        conditions = self._sampler.conditions(gpus)
        if conditions is None:
            return result
        notes = [note for note in (contention_warning(conditions), noise_warning(result.step_time_spread)) if note]
        return replace(result, conditions=conditions.to_dict(), warnings=(*result.warnings, *notes))

"""The measurements a single run needs for its verdict: a few short extra runs, and the input pipeline timed alone.

Probe runs are ordinary runs through `core.runner.run_training` of the same
job with one setting changed (a smaller batch, more steps per call, synthetic
data in memory), so a sweep that already made such runs can stand in for them
(`core.diagnosis.evidence`). Each probe is short: sized from the run's own
step time to about PROBE_BUDGET_S of steady-state steps, plus its warm-up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import MAX_STEPS_PER_CALL, RunConfig
from core.diagnosis.evidence import evidence_from_runs, matching_points, model_only_step_s, point
from core.diagnosis.verdict import INPUT_MODERATE_SHARE, OVERHEAD_CALL_SHARE, Verdict, fixed_share, verdict
from core.hooks.conditions import ConditionsHook
from core.hooks.flops import FlopsCounter
from core.machine.peaks import PeaksReport
from core.results import RunResult
from core.runner import run_training
from core.workloads.workload import open_workload

_log = logging.getLogger(__name__)

BATCH_DIVISOR = 8
"""The smaller-batch probe runs at the run's batch / 8 (or x 8 when the batch is too small to divide)."""
CALL_FACTOR = 8
"""The steps-per-call probe runs 8 times the run's steps per call."""
PROBE_BUDGET_S = 2.0
"""About this many seconds of steady-state steps per probe (estimated from the run's step time)."""
PROBE_MIN_CALLS = 5
PROBE_MAX_CALLS = 30
PIPELINE_BATCHES = 200
PIPELINE_TIMEOUT_S = 10.0
"""Timing the pipeline alone stops after this long, with the batches delivered by then."""
PIPELINE_WARMUP_BATCHES = 2


@dataclass(frozen=True)
class PipelineTiming:
    """The input pipeline alone: batches timed after its warm-up, in how many seconds, and whether time ran out."""

    batches: int
    seconds: float
    timed_out: bool = False

    @property
    def per_batch_s(self) -> float | None:
        return self.seconds / self.batches if self.batches else None


def probe_steps(step_s: float | None, steps_per_call: int) -> int:
    """Steps for a probe: one warm-up call plus enough calls for about PROBE_BUDGET_S (within the call limits)."""
    per_call = (step_s or 0.0) * steps_per_call
    calls = PROBE_MAX_CALLS if per_call <= 0 else round(PROBE_BUDGET_S / per_call)
    return steps_per_call * (1 + max(PROBE_MIN_CALLS, min(PROBE_MAX_CALLS, calls)))


def smaller_batch_config(config: RunConfig, replicas: int, step_s: float | None) -> RunConfig:
    """The job at batch / BATCH_DIVISOR (a multiple of the replicas), or x BATCH_DIVISOR when it cannot get smaller."""
    smaller = (config.batch_size // BATCH_DIVISOR) // replicas * replicas
    batch = smaller if replicas <= smaller < config.batch_size else config.batch_size * BATCH_DIVISOR
    # Sized as if the step scaled with the batch: a step dominated by overhead then runs PROBE_MAX_CALLS calls at most.
    guess = step_s * batch / config.batch_size if step_s else None
    return config.with_changes(batch_size=batch, steps=probe_steps(guess, config.steps_per_call), epochs=None)


def more_calls_config(config: RunConfig, step_s: float | None) -> RunConfig:
    """The job with CALL_FACTOR times the steps per call."""
    per_call = min(MAX_STEPS_PER_CALL, config.steps_per_call * CALL_FACTOR)
    return config.with_changes(steps_per_call=per_call, steps=probe_steps(step_s, per_call), epochs=None)


def model_only_config(config: RunConfig, step_s: float | None) -> RunConfig:
    """The job on synthetic data: batches of the same shapes, cached in memory, so the input pipeline costs ~nothing."""
    return config.with_changes(dataset="synthetic", steps=probe_steps(step_s, config.steps_per_call), epochs=None)


def run_probes(
    config: RunConfig,
    result: RunResult,
    pipeline_s: float | None = None,
    stop_event: threading.Event | None = None,
    others: Sequence[RunResult] = (),
    announce: Callable[[str], None] | None = None,
) -> list[RunResult]:
    """The probe runs `result` still needs beside `others` (runs of the same job already made, e.g. by a sweep).

    A smaller batch, unless `others` hold another batch size. More steps per
    call, unless `others` hold some, or the batch evidence shows a fixed share
    below OVERHEAD_CALL_SHARE: the per-call cost is part of the fixed cost, so
    it could not reach its threshold. The job on synthetic data when the
    pipeline alone took >= INPUT_MODERATE_SHARE of the step and `others` hold
    no such run. Stops between probes when `stop_event` is set; `run` is
    `run_training` unless the caller records its runs its own way; `announce`
    hears each probe as it starts.
    """
    own = point(result)
    step_s = own.step_s if own else None
    made: list[RunResult] = []

    def probe(changed: RunConfig, what: str) -> None:
        if announce is not None:
            announce(f"probe run {len(made) + 1}: {what}, {changed.steps} steps")
        made.append(run_training(changed, stop_event=stop_event, hooks=[ConditionsHook()]))  # a noisy probe is said in the verdict

    if not matching_points(result, others, "batch_size"):
        smaller = smaller_batch_config(config, result.replicas, step_s)
        probe(smaller, f"batch {smaller.batch_size} instead of {config.batch_size}")
    share = fixed_share(own, matching_points(result, [*others, *made], "batch_size")) if own else None
    wants_calls = share is None or share[0] >= OVERHEAD_CALL_SHARE
    if wants_calls and not matching_points(result, others, "steps_per_call") and not _stopped(stop_event):
        more = more_calls_config(config, step_s)
        probe(more, f"{more.steps_per_call} steps per call instead of {config.steps_per_call}")
    input_matters = pipeline_s is not None and step_s and pipeline_s / step_s >= INPUT_MODERATE_SHARE
    if config.dataset != "synthetic" and input_matters and model_only_step_s(result, others) is None and not _stopped(stop_event):
        probe(model_only_config(config, step_s), "the same model on synthetic data in memory")
    return made


def _stopped(stop_event: threading.Event | None) -> bool:
    return stop_event is not None and stop_event.is_set()


def run_pipeline(config: RunConfig) -> Any:
    """The `tf.data` pipeline a run of `config` trains on (the engine's own `make_dataset` of the data set's arrays)."""
    workload = open_workload(config.model_ref, config.dataset, config.seed)
    return workload.make_dataset(config.batch_size, config.seed)


def time_pipeline(
    dataset: Any, batches: int = PIPELINE_BATCHES, timeout_s: float = PIPELINE_TIMEOUT_S, warmup_batches: int = PIPELINE_WARMUP_BATCHES
) -> PipelineTiming:
    """Time `dataset` alone: its iterator drained inside a tf.function (as the engine does), no model.

    The first `warmup_batches` start the pipeline and are not timed. Batches
    are drained in calls that grow to about 0.25 s, so time is checked
    between calls: after `timeout_s` the timing stops with what it has.
    """
    import tensorflow as tf

    @tf.function
    def drain(iterator, n):
        for _ in tf.range(n):
            next(iterator)
        return n

    iterator = iter(dataset)
    if warmup_batches:
        drain(iterator, tf.constant(warmup_batches)).numpy()
    done, chunk, spent, start = 0, 1, 0.0, time.perf_counter()
    while done < batches:
        count = min(chunk, batches - done)
        began = time.perf_counter()
        drain(iterator, tf.constant(count)).numpy()
        took = time.perf_counter() - began
        done, spent = done + count, spent + took
        if time.perf_counter() - start > timeout_s:
            return PipelineTiming(done, spent, done < batches)
        chunk = chunk * 2 if took < 0.25 else chunk
    return PipelineTiming(done, spent)


def diagnose(
    config: RunConfig,
    result: RunResult,
    peaks: PeaksReport | None = None,
    counter: FlopsCounter | None = None,
    stop_event: threading.Event | None = None,
    others: Sequence[RunResult] = (),
    announce: Callable[[str], None] | None = None,
    probe: bool = True,
) -> tuple[Verdict, list[RunResult]]:
    """The verdict for a finished run of `config`, and the probe runs made for it.

    `counter` is the FlopsCounter that rode along with the run (None: FLOP/s
    unknown); `others` are runs of the same job already made (a sweep's), used
    beside the probes. `announce` hears each step (for progress lines);
    `probe=False` runs nothing more (the verdict rests on `others` and the
    pipeline timed alone).
    """
    if announce is not None:
        announce("timing the input pipeline alone")
    pipeline_s = _pipeline_s(config, min(PIPELINE_BATCHES, max(10, result.steps_done)))
    wanted = probe and point(result) is not None and not _stopped(stop_event)
    probe_runs = run_probes(config, result, pipeline_s, stop_event, others, announce=announce) if wanted else []
    evidence = evidence_from_runs(
        result,
        [*others, *probe_runs],
        flops_per_step=counter.flops if counter else None,
        model_params=counter.params if counter else None,
        peaks=peaks,
        pipeline_s=pipeline_s,
    )
    return verdict(evidence), probe_runs


def _pipeline_s(config: RunConfig, batches: int) -> float | None:
    """Seconds per batch of the run's pipeline alone; None when it cannot be built here (the verdict goes on without it).

    Another backend's job feeds NumPy batches through Keras's own data adapter, not a tf.data pipeline: None.
    """
    if config.backend != "tensorflow":
        return None
    try:
        return time_pipeline(run_pipeline(config), batches).per_batch_s
    except Exception as exc:  # a diagnosis must never fail a finished run
        _log.warning("The input pipeline of %s/%s could not be timed alone: %s: %s", config.model, config.dataset, type(exc).__name__, exc)
        return None

"""Step-time statistics: warm-up kept apart, steady state summarised honestly.

Step time is the wall time between the ends of consecutive calls of the
compiled training function, divided by the steps of the call
(`steps_per_call`). A call ends when its losses have reached the host, so the
device work is inside the timing, and so is everything the app does between
calls (hooks, bookkeeping): samples/s is what a stopwatch outside would see.
samples/s = global batch / mean steady-state step time (the steady steps'
total time over their number), so it is shown beside the mean step time
(`mean_step_ms`); the median step time is the typical step, less moved by
the odd slow call, and on a noisy machine can lie well below the mean.
A job whose calls' ends are seen some together (a JAX or PyTorch job reads
each call's loss while later calls run: calls found done together share the
time since the last ones) gives its median, p95 and spread over windows of
that many steps (`window_steps`), each window's steps per its time: a single
step's time there is not known, and the shared times would read as a spread
the steps do not have. The mean, and so samples/s, is the same either way.
Steps a hook disturbed on purpose (the profiler's calls, and the call that
paid for stopping it) are set apart like warm-up: counted, timed, and left out
of the steady state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from core.config import RunConfig
from core.results import RunResult, RunStatus


class StepFigures(TypedDict):
    """`StepStats` under `RunResult`'s field names (what `result_fields` returns)."""

    warmup_s: float | None
    warmup_steps: int
    step_time_median_ms: float | None
    step_time_p95_ms: float | None
    step_time_spread: float | None
    samples_per_s: float | None
    mean_step_ms: float | None


@dataclass(frozen=True)
class StepStats:
    """Warm-up (first call: tracing and compilation) and steady-state figures.

    `spread` is (p90 - p10) / median of the steady-state step times: 0.1 means
    the middle 80% of steps lie within 10% of the median's width (of windows' step times where a
    job's calls are read some together; None with fewer than MIN_WINDOWS windows). `apart_steps`
    and `apart_s` are the steps set apart (profiled) and the time they took.
    """

    warmup_s: float | None
    warmup_steps: int
    steady_steps: int
    median_ms: float | None
    p95_ms: float | None
    spread: float | None
    samples_per_s: float | None
    apart_steps: int = 0
    apart_s: float | None = None
    mean_ms: float | None = None

    def result_fields(self) -> StepFigures:
        """These statistics under `RunResult`'s field names."""
        return StepFigures(
            warmup_s=self.warmup_s,
            warmup_steps=self.warmup_steps,
            step_time_median_ms=self.median_ms,
            step_time_p95_ms=self.p95_ms,
            step_time_spread=self.spread,
            samples_per_s=self.samples_per_s,
            mean_step_ms=self.mean_ms,
        )


StepRange = tuple[int, int]  # first and last step, 1-based, inclusive


MIN_WINDOWS = 3
"""Fewer whole windows than this (a short JAX run): no p95 and no spread, which a window or two cannot show."""


def summarize(
    step_times_s: Sequence[float],
    warmup_steps: int,
    global_batch_size: int,
    set_apart: Sequence[StepRange] = (),
    window_steps: int = 1,
) -> StepStats:
    """Statistics of a run's step times: the first `warmup_steps` are warm-up, the `set_apart` ranges kept out too.

    `window_steps` > 1: the median, p95 and spread are of consecutive windows of that many steady steps.
    """
    times = np.asarray(step_times_s, dtype=np.float64)
    warmup_steps = min(warmup_steps, len(times))
    warmup_s = float(times[:warmup_steps].sum()) if warmup_steps else None
    apart = np.zeros(len(times), dtype=bool)
    for first, last in set_apart:
        apart[max(first - 1, warmup_steps) : max(last, 0)] = True
    apart_steps = int(np.count_nonzero(apart))
    apart_s = float(times[apart].sum()) if apart_steps else None
    steady = times[warmup_steps:][~apart[warmup_steps:]]
    if not len(steady):
        return StepStats(warmup_s, warmup_steps, 0, None, None, None, None, apart_steps, apart_s)
    typical = _windows(steady, window_steps)
    median = typical_step_s(steady, window_steps)
    p95_ms = spread = None
    if len(typical) >= (MIN_WINDOWS if window_steps > 1 else 1):
        p10, p90, p95 = (float(v) for v in np.percentile(typical, [10, 90, 95]))
        p95_ms, spread = p95 * 1e3, (p90 - p10) / median if median > 0 else None
    total = float(steady.sum())
    return StepStats(
        warmup_s=warmup_s,
        warmup_steps=warmup_steps,
        steady_steps=len(steady),
        median_ms=median * 1e3,
        p95_ms=p95_ms,
        spread=spread,
        samples_per_s=global_batch_size * len(steady) / total if total > 0 else None,
        apart_steps=apart_steps,
        apart_s=apart_s,
        mean_ms=total / len(steady) * 1e3,
    )


def typical_step_s(steady_times_s: Sequence[float] | np.ndarray, window_steps: int = 1) -> float:
    """The median steady-state step time, as every view shows it: of the steps, or of whole windows of `window_steps`
    steps (each window's time per step) where a job's calls are read some together; with no whole window, the mean.

    The live header computes it as it goes, `summarize` once at the end: one definition, so they agree. Taken with
    np.partition, not np.median (whose first call imports numpy.ma, ~20 ms in the middle of a live run).
    """
    steady = np.asarray(steady_times_s, dtype=np.float64)
    typical = _windows(steady, window_steps)
    if not len(typical):
        return float(steady.mean()) if len(steady) else float("nan")
    middle = [(len(typical) - 1) // 2, len(typical) // 2]
    return float(np.partition(typical, middle)[middle].mean())


def _windows(steady: np.ndarray, window_steps: int) -> np.ndarray:
    """Each whole window's time per step (the steps themselves for windows of 1); a part window at the end left out."""
    if window_steps <= 1:
        return steady
    whole = len(steady) // window_steps * window_steps
    return steady[:whole].reshape(-1, window_steps).mean(axis=1)


@dataclass(frozen=True)
class Measured:
    """What an engine measured in one run, whatever trained it: the TensorFlow engine or a backend's child."""

    times: Sequence[float]
    warmup_steps: int
    losses: Sequence[float]
    replicas: int
    devices: Sequence[str]
    memory: dict[str, Any]  # peak_memory_bytes and its source (and what the run added, where known)
    memory_estimate: dict[str, Any]
    environment: dict[str, Any]
    notes: Sequence[str]
    window_steps: int = 1  # steps whose calls' ends may be seen together (`summarize`)


def measured_result(config: RunConfig, status: RunStatus, message: str, measured: Measured, started_at: str, wall_s: float) -> RunResult:
    """The run's `RunResult` from what it measured: one definition of its figures and warnings for every engine."""
    stats = summarize(measured.times, measured.warmup_steps, config.batch_size, window_steps=measured.window_steps)
    has_accelerator = any(not d.startswith("CPU") for d in measured.devices)
    return RunResult(
        status=status,
        config=config.to_dict(),
        message=message,
        steps_done=len(measured.losses),
        replicas=measured.replicas,
        **stats.result_fields(),
        final_loss=measured.losses[-1] if measured.losses else None,
        **measured.memory,
        memory_estimate=dict(measured.memory_estimate),
        wall_s=wall_s,
        started_at=started_at,
        environment=measured.environment,
        losses=tuple(measured.losses),
        step_times_s=tuple(measured.times),
        warnings=(*config.warnings(has_accelerator=has_accelerator), *measured.notes, *loss_rise_warnings(measured.losses, config)),
    )


LOSS_ROSE = "the loss rose"
"""How the warning of a run whose loss ended above where it began starts (`loss_rise_warnings`)."""
MIN_RISE = 0.02
"""The least rise, as a share of the first loss, that counts: a run that ends 1% above its start has not clearly risen."""
RISE_P = 0.01
"""The sign test's level: under no rise, the last steps' losses lie above or below the first alike."""


@dataclass(frozen=True)
class LossRise:
    """A run whose loss ended above where it began, beyond noise: the `first` step's loss, the median of the `last_steps`
    steps' (`last`), and how many of those lay above the first (`above`)."""

    first: float
    last: float
    last_steps: int
    above: int


def loss_rise(losses: Sequence[float]) -> LossRise | None:
    """The rise of a run's loss from its first step to its end, or None when it did not rise beyond noise.

    The first step's loss is the untrained model's (its forward pass comes before any update), so it is the start,
    not an early mean: a learning rate too high throws the loss up by orders of magnitude within steps. The end is the
    median of the last fifth of the steps (8 at least). Beyond noise: the median is MIN_RISE above the start and so
    many of those steps lie above it that, were the end no higher than the start, a sign test would give that less
    than RISE_P of the time. A run that went up and came back down has not risen.
    """
    values = np.asarray(losses, dtype=np.float64)
    last_steps = max(8, len(values) // 5)
    if len(values) <= last_steps or not np.isfinite(values).all():
        return None
    first, tail = float(values[0]), values[-last_steps:]
    last, above = float(np.median(tail)), int(np.count_nonzero(tail > first))
    if last - first <= MIN_RISE * abs(first) or _sign_test_p(above, last_steps) >= RISE_P:
        return None
    return LossRise(first, last, last_steps, above)


def _sign_test_p(above: int, count: int) -> float:
    """P(at least `above` of `count` fair coin flips come up heads): the one-sided sign test."""
    return sum(math.comb(count, k) for k in range(above, count + 1)) / 2**count


def loss_rise_warnings(losses: Sequence[float], config: RunConfig) -> tuple[str, ...]:
    """The warning of a run whose loss rose (`loss_rise`), naming the learning rate it trained with; () otherwise."""
    rise = loss_rise(losses)
    if rise is None:
        return ()
    return (
        f"{LOSS_ROSE} from {rise.first:.4g} at the first step to {rise.last:.4g} (the median of the last {rise.last_steps} steps, "
        f"{rise.above} of them above the start): the model ended worse than it began. A learning rate too high (this run's: "
        f"{config.learning_rate:g}) is the usual cause; lower it, or check the data.",
    )


NOISY_SPREAD = 0.5
"""A steady state whose (p90 - p10) / median reaches this is too noisy for one figure to stand for it."""


def noise_warning(spread: float | None) -> str:
    """The warning a run with a wide step-time spread carries, or ""."""
    if spread is None or spread < NOISY_SPREAD:
        return ""
    return (
        f"step times are noisy: the middle 80% spread over {spread:.0%} of the median (at least {NOISY_SPREAD:.0%} is noisy); "
        "compare runs only beyond noise and re-run on a quiet machine"
    )


def call_size(steps_per_call: int, total_steps: int) -> tuple[int, str | None]:
    """The steps per call to use, and why when it differs from `steps_per_call` or leaves no steady state.

    The first call is warm-up (tracing, compilation). A call as long as the
    whole run would make every step warm-up and leave no step-time figures at
    all, so such a call is halved to the run's length: the first half warms
    up, the second is measured. The result says so, and the run records the
    call size it really used.
    """
    if total_steps < 2:
        return steps_per_call, (
            "A 1-step run is all warm-up (tracing and compilation), so it has no steady-state figures "
            "(median, p95, samples/s): run 2 or more steps."
        )
    if steps_per_call < total_steps:
        return steps_per_call, None
    used = total_steps // 2
    return used, (
        f"Steps per call lowered from {steps_per_call} to {used}: with {steps_per_call} steps per call the first call "
        f"would cover all {total_steps} steps, all of them warm-up, and the run would have no steady-state figures. "
        f"To measure {steps_per_call} steps per call, run {2 * steps_per_call} or more steps."
    )

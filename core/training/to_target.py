"""Time to a target loss: when a run's smoothed loss first reached it, in steps, samples and seconds.

Samples per second is the hardware's answer; a user waits for a model that has
learned. So beside it, each compared run says when its loss came down to one
target: the loss smoothed first (TensorBoard's debiased EMA, weight
SMOOTHING), so that one lucky batch does not count, then the first step whose
smoothed loss is at or below the target. Its time is the sum of the step times
up to that step, from the first step (the warm-up included, as the user waits
for it) with the steady part beside it; pauses between interleaved rounds are
no step's time, so they count for no run.

Without a target given, runs compared together take the common one: the
highest of the smoothed final losses of the runs whose loss fell beyond noise,
which each of those reached.

A time to a loss decides something only where getting there took learning
(`decide`). A run whose smoothed loss is not below its starting loss (the mean
of its first steps) by more than the noise of one step's loss allows (95%,
the noise from successive differences, so a falling trend does not count as
noise) did not fall beyond noise: it reached the target by luck, if at all,
and counts as not reaching it (random labels, or too few steps). A target
reached within a run's warm-up (its first call: tracing, compiling) has no
steady time to it. Either way time to the target decides nothing, and the
caller falls back to samples/s, saying why (`TargetDecision.reason`, `.why`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.live.smoothing import ema
from core.results import RunResult

SMOOTHING = 0.9
"""The EMA weight the loss is smoothed with before asking when it reached the target (about the last 10 steps)."""
COMMON_TARGET_HOW = (
    "the highest of the smoothed final losses (EMA {weight:g}) of the runs whose loss fell beyond noise, which each of them reached"
)
GIVEN_TARGET_HOW = "given (--target-loss), smoothed losses (EMA {weight:g})"
START_STEPS = 10
"""A run's starting loss is the mean of its first this many steps' losses (a quarter of a shorter run, at least 2)."""
MIN_JUDGED_STEPS = 4
"""Fewer finite losses than this: too few to tell whether the loss fell beyond noise."""
FALL_Z = 1.959964
"""The normal 97.5% quantile: a fall beyond noise is one the 95% noise bound of the starting and the smoothed loss excludes."""
EMA_NOISE_SHARE = (1 - SMOOTHING) / (1 + SMOOTHING)
"""The variance of a long EMA (weight SMOOTHING) of independent values, as a share of one value's variance."""
NO_LOSS = "no_loss"
NO_FALL = "no_fall"
IN_WARMUP = "in_warmup"
NOT_REACHED = "not_reached"
UNDECIDED = (NO_LOSS, NO_FALL, IN_WARMUP, NOT_REACHED)
"""Why time to a target decides nothing (`TargetDecision.reason`): no run has a finite loss; no run's loss fell beyond
noise to the target; a run reached it within its warm-up; no run reached a given target."""


@dataclass(frozen=True)
class ToTarget:
    """When one run's smoothed loss reached `target_loss`: steps, samples, seconds (None with `reason` where it did not)."""

    target_loss: float | None
    steps: int | None = None
    samples: int | None = None
    seconds: float | None = None
    steady_seconds: float | None = None
    reason: str = ""
    in_warmup: bool = False  # reached within the run's warm-up (its first call): no steady time to it

    @property
    def reached(self) -> bool:
        return self.seconds is not None

    def to_dict(self) -> dict[str, Any]:
        """The keys every compared row carries: target_loss, steps/samples/time to it, and why not where it was not reached."""
        return {
            "target_loss": self.target_loss,
            "steps_to_target": self.steps,
            "samples_to_target": self.samples,
            "time_to_target_s": self.seconds,
            "time_to_target_steady_s": self.steady_seconds,
            "target_reason": self.reason,
            "target_in_warmup": self.in_warmup,
        }


def to_target_text(to: ToTarget) -> str:
    """'2.62 s, 376,832 samples' for a table cell; 'not reached' where the run did not get there."""
    if to.seconds is None:
        return "not reached" if to.target_loss is not None else "-"
    samples = f", {to.samples:,} samples" if to.samples is not None else ""
    return f"{to.seconds:.3g} s{samples}"


def smoothed_losses(result: RunResult) -> np.ndarray:
    """The run's per-step losses smoothed (EMA SMOOTHING, debiased; a non-finite loss stays as it is)."""
    return ema(np.asarray(result.losses, dtype=np.float64), SMOOTHING)[0]


def smoothed_final_loss(result: RunResult) -> float | None:
    """The smoothed loss at the run's last step (None for a run without a finite one)."""
    smoothed = smoothed_losses(result)
    return float(smoothed[-1]) if len(smoothed) and math.isfinite(smoothed[-1]) else None


def reach(result: RunResult, target_loss: float | None) -> ToTarget:
    """When `result`'s smoothed loss first reached `target_loss` (at or below it)."""
    if target_loss is None:
        return ToTarget(None, reason="no target: no run has a finite loss")
    if not result.losses:
        return ToTarget(target_loss, reason=f"no steps ({result.status.value})")
    smoothed = smoothed_losses(result)
    reached = np.flatnonzero(np.isfinite(smoothed) & (smoothed <= target_loss))
    if not len(reached):
        return ToTarget(target_loss, reason=f"not reached in {len(smoothed)} steps")
    step = int(reached[0]) + 1
    times = np.asarray(result.step_times_s[:step], dtype=np.float64)
    batch = int(result.config.get("batch_size") or 0)
    return ToTarget(
        target_loss,
        steps=step,
        samples=step * batch if batch else None,
        seconds=float(times.sum()),
        steady_seconds=float(times[result.warmup_steps :].sum()),
        in_warmup=step <= result.warmup_steps,
    )


@dataclass(frozen=True)
class LossStart:
    """Where a run's loss began: a line fitted to its first `steps` losses, read at the first step (a mean of them would
    sit below the start of a loss that falls within them), and the noise (standard deviation) of one step's loss."""

    level: float
    noise: float
    steps: int

    @property
    def margin(self) -> float:
        """How far below `level` a smoothed loss must lie to be below it beyond noise (95%): the line's value at the
        first step has the variance noise² × (1/k + x̄²/Sxx) over k steps at x = 0..k-1."""
        k = self.steps
        mean_x = (k - 1) / 2
        sxx = sum((x - mean_x) ** 2 for x in range(k)) or 1.0
        return FALL_Z * self.noise * math.sqrt(1 / k + mean_x**2 / sxx + EMA_NOISE_SHARE)

    def below(self, loss: float) -> bool:
        """`loss` (a smoothed loss) lies below the start beyond noise."""
        return loss < self.level - self.margin

    def text(self) -> str:
        return f"{self.level:.4g} ± {self.margin:.2g}"


def loss_start(result: RunResult) -> LossStart | None:
    """The run's starting loss and one step's noise (from successive differences: a falling trend is not noise); None when
    it has fewer than MIN_JUDGED_STEPS finite losses."""
    losses = np.asarray(result.losses, dtype=np.float64)
    losses = losses[np.isfinite(losses)]
    if len(losses) < MIN_JUDGED_STEPS:
        return None
    steps = min(START_STEPS, max(2, len(losses) // 4))
    noise = math.sqrt(float(np.mean(np.diff(losses) ** 2)) / 2)
    slope, intercept = np.polyfit(np.arange(steps, dtype=np.float64), losses[:steps], 1)
    return LossStart(float(intercept), noise, steps)


def fell_beyond_noise(result: RunResult, target_loss: float | None = None) -> bool:
    """The run's loss fell beyond noise from its start to `target_loss` (default: its own smoothed final loss)."""
    start = loss_start(result)
    loss = smoothed_final_loss(result) if target_loss is None else target_loss
    return start is not None and loss is not None and start.below(loss)


def no_fall_reason(result: RunResult, target_loss: float) -> str:
    """Why a run's reaching `target_loss` counts for nothing: the loss did not fall beyond noise from its start to it."""
    start = loss_start(result)
    if start is None:
        return f"too few steps ({len(result.losses)}) to tell whether the loss fell beyond noise"
    return f"its loss did not fall beyond noise to {target_loss:.4g} (it started at {start.text()})"


def judged_reach(result: RunResult, target_loss: float | None) -> ToTarget:
    """`reach`, but a run whose loss did not fall beyond noise from its start to the target has not reached it (luck is no time)."""
    to = reach(result, target_loss)
    if to.reached and target_loss is not None and not fell_beyond_noise(result, target_loss):
        return ToTarget(target_loss, reason=no_fall_reason(result, target_loss))
    return to


@dataclass(frozen=True)
class TargetDecision:
    """Whether time to one target loss can rank some runs, and each run's (judged) time to it.

    `reason` "" when it decides; else one of UNDECIDED, `why` in words, and the runs are to be ranked by samples/s.
    """

    target_loss: float | None
    reached: tuple[ToTarget, ...]
    reason: str = ""
    why: str = ""

    @property
    def decides(self) -> bool:
        return not self.reason

    def to_dict(self) -> dict[str, Any]:
        """`target_decides`, `target_undecided` (a reason code, "" when it decides) and `target_undecided_why` (words)."""
        return {"target_decides": self.decides, "target_undecided": self.reason, "target_undecided_why": self.why}


def decide(results: Sequence[RunResult], given: float | None = None, labels: Sequence[str] | None = None) -> TargetDecision:
    """The target the runs are timed to (`given`, else the highest smoothed final loss of those whose loss fell beyond
    noise), each run's judged time to it, and whether that time decides (see the module docstring); `labels` name the runs."""
    names = list(labels) if labels is not None else [f"run {index + 1}" for index in range(len(results))]
    if given is None:
        learned = [loss for result in results if (loss := smoothed_final_loss(result)) is not None and fell_beyond_noise(result)]
        target = max(learned) if learned else common_target(results)
    else:
        target = given
    reached = tuple(judged_reach(result, target) for result in results)
    if target is None:
        return TargetDecision(None, reached, NO_LOSS, "no run has a finite loss")
    if not any(to.reached for to in reached):
        if given is not None and not any(reach(result, target).reached for result in results):
            return TargetDecision(target, reached, NOT_REACHED, f"no run reached the given loss {target:.4g}")
        return TargetDecision(
            target,
            reached,
            NO_FALL,
            f"no run's loss fell beyond noise to {target:.4g} (random labels, or too few steps): reaching it is luck",
        )
    early = [(name, to) for name, to in zip(names, reached, strict=True) if to.in_warmup]
    if early:
        name, to = early[0]
        return TargetDecision(
            target,
            reached,
            IN_WARMUP,
            f"{name} reached loss {target:.4g} within its warm-up (step {to.steps}): its steady time to it is not measured; "
            "of the runs that reached it, samples/s decides",
        )
    return TargetDecision(target, reached)


def common_target(results: Sequence[RunResult]) -> float | None:
    """The loss every run reached: the highest of their smoothed final losses (runs without one left out)."""
    finals = [loss for loss in map(smoothed_final_loss, results) if loss is not None]
    return max(finals) if finals else None


def target_how(given: float | None) -> str:
    """How the target was chosen, in words."""
    return (GIVEN_TARGET_HOW if given is not None else COMMON_TARGET_HOW).format(weight=SMOOTHING)

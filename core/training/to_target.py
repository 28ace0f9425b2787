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
highest of their smoothed final losses, which every one of them reached.
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
COMMON_TARGET_HOW = "the highest of the runs' smoothed final losses (EMA {weight:g}), which each reached"
GIVEN_TARGET_HOW = "given (--target-loss), smoothed losses (EMA {weight:g})"


@dataclass(frozen=True)
class ToTarget:
    """When one run's smoothed loss reached `target_loss`: steps, samples, seconds (None with `reason` where it did not)."""

    target_loss: float | None
    steps: int | None = None
    samples: int | None = None
    seconds: float | None = None
    steady_seconds: float | None = None
    reason: str = ""

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
    )


def common_target(results: Sequence[RunResult]) -> float | None:
    """The loss every run reached: the highest of their smoothed final losses (runs without one left out)."""
    finals = [loss for loss in map(smoothed_final_loss, results) if loss is not None]
    return max(finals) if finals else None


def target_how(given: float | None) -> str:
    """How the target was chosen, in words."""
    return (GIVEN_TARGET_HOW if given is not None else COMMON_TARGET_HOW).format(weight=SMOOTHING)

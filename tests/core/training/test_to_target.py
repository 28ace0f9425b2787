"""Time to a target loss: the smoothed loss's first step at or below it, in steps, samples and seconds; the common target."""

from __future__ import annotations

import math

import pytest

from core import RunConfig, RunStatus, run_training
from core.live.smoothing import ema
from core.results import RunResult
from core.training.to_target import SMOOTHING, common_target, reach, smoothed_final_loss


def a_run(losses: list[float], step_s: float, batch: int, warmup_steps: int = 1) -> RunResult:
    """A finished run's record with these per-step losses, every step `step_s` long (the warm-up 10× that)."""
    times = [step_s * 10] * warmup_steps + [step_s] * (len(losses) - warmup_steps)
    return RunResult(
        RunStatus.COMPLETED,
        {"batch_size": batch},
        steps_done=len(losses),
        losses=tuple(losses),
        step_times_s=tuple(times),
        warmup_steps=warmup_steps,
    )


def test_the_first_step_whose_smoothed_loss_is_at_or_below_the_target_with_its_samples_and_seconds():
    losses = [2.0 * 0.97**step for step in range(200)]
    run = a_run(losses, step_s=0.01, batch=64)
    smoothed = ema(losses, SMOOTHING)[0]
    target = 1.0
    step = next(index for index, loss in enumerate(smoothed) if loss <= target) + 1
    reached = reach(run, target)
    assert reached.steps == step and reached.samples == step * 64
    assert reached.seconds == pytest.approx(0.1 + (step - 1) * 0.01)  # from the first step: the warm-up included
    assert reached.steady_seconds == pytest.approx((step - 1) * 0.01)
    assert smoothed[step - 1] <= target < smoothed[step - 2]  # smoothed: later than the raw loss got there
    assert step > next(index for index, loss in enumerate(losses) if loss <= target) + 1


def test_one_lucky_batch_does_not_reach_the_target_and_a_run_that_never_gets_there_says_so():
    losses = [2.0] * 50
    losses[10] = 0.1  # one lucky batch
    reached = reach(a_run(losses, 0.01, 32), 1.0)
    assert not reached.reached and reached.seconds is None and reached.reason == "not reached in 50 steps"
    assert reached.to_dict()["time_to_target_s"] is None and reached.to_dict()["target_loss"] == 1.0


def test_the_common_target_is_the_highest_smoothed_final_loss_which_every_run_reached():
    slow_learner = a_run([2.0 * 0.99**step for step in range(100)], 0.001, 4096)
    fast_learner = a_run([2.0 * 0.95**step for step in range(100)], 0.002, 64)
    target = common_target([slow_learner, fast_learner])
    assert target == smoothed_final_loss(slow_learner) > smoothed_final_loss(fast_learner)  # type: ignore[operator]
    slow, fast = reach(slow_learner, target), reach(fast_learner, target)
    assert slow.steps == 100 and fast.steps is not None and fast.steps < 40
    assert fast.samples is not None and slow.samples is not None and slow.samples / fast.samples > 100
    assert fast.seconds is not None and slow.seconds is not None and fast.seconds < slow.seconds  # twice the step time, still first


@pytest.mark.slow
def test_a_real_run_reaches_its_own_smoothed_final_loss_at_the_latest_on_its_last_step():
    result = run_training(RunConfig(model="mlp", dataset="digits", steps=40, batch_size=32))
    assert result.status == RunStatus.COMPLETED, result.message
    final = smoothed_final_loss(result)
    assert final is not None and math.isfinite(final)
    reached = reach(result, final)
    assert reached.steps is not None and reached.steps <= 40 and reached.samples == reached.steps * 32
    assert reached.seconds == pytest.approx(sum(result.step_times_s[: reached.steps]))


@pytest.mark.slow
def test_two_runs_of_one_setting_learn_the_same_curve_and_steps_per_call_changes_no_step():
    """Same seed, weights and data order: any difference between compared curves is the settings', not luck's."""
    first = run_training(RunConfig(model="mlp", dataset="digits", steps=30, batch_size=32))
    again = run_training(RunConfig(model="mlp", dataset="digits", steps=30, batch_size=32))
    grouped = run_training(RunConfig(model="mlp", dataset="digits", steps=30, batch_size=32, steps_per_call=6))
    assert len(first.losses) == 30
    assert again.losses == pytest.approx(first.losses, rel=1e-6, abs=1e-7)
    assert grouped.losses == pytest.approx(first.losses, rel=1e-6, abs=1e-7), "each step's own loss, whatever the call size"

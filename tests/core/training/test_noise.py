"""Is a difference real: the block-bootstrap interval of two runs' speed ratio, from per-call timings (numbers, and real runs)."""

from __future__ import annotations

import numpy as np
import pytest

from core.compare.table import compare_results
from core.config import RunConfig
from core.runner import run_training
from core.training.metrics import NOISY_SPREAD, noise_warning
from core.training.noise import bootstrap_ratio, call_times, runs_ratio


def _calls(mean_s: float, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.gamma(25.0, mean_s / 25.0, count), np.ones(count)  # about 20% spread, as steps on a busy CPU


def test_the_same_speed_is_no_difference_beyond_noise_and_a_real_gain_is_beyond_it():
    same = bootstrap_ratio(_calls(0.01, 200, 1), _calls(0.01, 200, 2))
    assert same is not None and same.low < 1 < same.high and not same.beyond_noise
    assert same.text().endswith("no difference beyond noise")
    faster = bootstrap_ratio(_calls(0.01, 200, 1), _calls(0.008, 200, 2))  # B's calls take 20% less: 1.25x the samples/s
    assert faster is not None and faster.beyond_noise and 1.15 < faster.low < faster.ratio < faster.high < 1.35
    assert faster.sureness().startswith("at least") and "faster" in faster.sureness()


def test_the_interval_is_reproducible_and_needs_enough_calls():
    a, b = _calls(0.01, 50, 3), _calls(0.011, 50, 4)
    assert bootstrap_ratio(a, b) == bootstrap_ratio(a, b)  # seeded
    assert bootstrap_ratio(_calls(0.01, 2, 5), b) is None


def test_neighbouring_calls_that_move_together_widen_the_interval():
    # A slow patch of 50 calls (other work for a while): blocks keep it together, so the interval is wider than
    # resampling single calls would make it, and still holds the true ratio of 1.
    rng = np.random.default_rng(7)
    drift = np.repeat(rng.choice([0.008, 0.012], size=8), 50)
    a, b = (
        (drift * rng.gamma(50, 1 / 50, drift.size), np.ones(drift.size)),
        (drift * rng.gamma(50, 1 / 50, drift.size), np.ones(drift.size)),
    )
    found = bootstrap_ratio(a, b)
    assert found is not None and found.low < 1 < found.high


def test_calls_are_rebuilt_from_the_step_times_and_the_warm_up_is_left_out():
    seconds, steps = call_times([5.0, 5.0, 0.1, 0.1, 0.2, 0.2, 0.3], warmup_steps=2, steps_per_call=2)
    assert seconds.tolist() == pytest.approx([0.2, 0.4, 0.3]) and steps.tolist() == [2, 2, 1]


def test_a_wide_spread_is_a_noise_warning():
    assert noise_warning(None) == "" and noise_warning(NOISY_SPREAD - 0.01) == ""
    said = noise_warning(1.36)
    assert said.startswith("step times are noisy") and "136%" in said and "quiet machine" in said  # the spread, and what to do


@pytest.mark.slow
def test_the_same_target_twice_is_no_difference_and_more_steps_per_call_are_faster_beyond_noise(two_cpus):
    """The calls' interval tells these runs apart; a comparison of runs measured one after another still claims nothing."""
    job = RunConfig(model="mlp", strategy="one-device", devices=("CPU:0",), steps=300)
    first, again = run_training(job), run_training(job)
    batched = run_training(job.with_changes(steps=1200, steps_per_call=16))
    assert first.ok and again.ok and batched.ok
    same, gain = runs_ratio(first, again), runs_ratio(first, batched)
    comparison = compare_results([("1 step per call", first), ("again", again), ("16 steps per call", batched)])
    rows = comparison.to_rows_dict()
    # runs measured one after another: the comparison shows the calls' interval and claims nothing across them
    assert rows[2]["speedup_ci"] == [gain.low, gain.high] and rows[2]["beyond_noise"] is False and rows[2]["interval_rounds"] == 1
    if any(run.contended for run in (first, again, batched)):
        # Another process took the CPU during a run (the suite runs two workers): its figures are low and noisy, and the
        # comparison says so instead of a verdict on the difference.
        assert any("figures are low and noisy" in warning for warning in comparison.warnings)
        return
    assert same is not None  # the calls' interval of two runs one after another: no decision (a drifting load can move it)
    assert rows[1]["beyond_noise"] is False and any("not in interleaved rounds" in w for w in comparison.warnings)
    assert gain is not None and gain.beyond_noise and gain.low > 1, gain

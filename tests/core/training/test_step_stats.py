"""Step statistics: warm-up and the steps a hook set apart (the profiler's) stay out of the steady state."""

from __future__ import annotations

import pytest

from core.training.metrics import summarize

# step:   1 (warm-up)  2     3     4 (profiled) 5 (profiled) 6 (stop paid) 7     8
TIMES = [2.0, 0.010, 0.012, 0.300, 0.310, 0.500, 0.011, 0.013]


def test_set_apart_steps_are_counted_and_timed_but_left_out_of_the_steady_state():
    stats = summarize(TIMES, warmup_steps=1, global_batch_size=16, set_apart=[(4, 5), (6, 6)])
    steady = [0.010, 0.012, 0.011, 0.013]
    assert (stats.warmup_steps, stats.warmup_s) == (1, 2.0)
    assert stats.apart_steps == 3 and stats.apart_s == pytest.approx(1.11)
    assert stats.steady_steps == 4
    assert stats.median_ms == pytest.approx(11.5)
    assert stats.samples_per_s == pytest.approx(16 * 4 / sum(steady))
    assert set(stats.result_fields()) == {
        "warmup_s",
        "warmup_steps",
        "step_time_median_ms",
        "step_time_p95_ms",
        "step_time_spread",
        "samples_per_s",
        "mean_step_ms",
    }


def test_samples_per_s_is_the_global_batch_over_the_mean_step_shown_beside_it():
    # A noisy run: one slow call pulls the mean far above the median, as on a busy machine.
    stats = summarize([1.0, 0.002, 0.002, 0.002, 0.002, 0.012], warmup_steps=1, global_batch_size=32)
    assert stats.mean_ms == pytest.approx(4.0) and stats.median_ms == pytest.approx(2.0)
    assert stats.samples_per_s == pytest.approx(32 / (stats.mean_ms / 1e3))  # 8,000, not batch / median = 16,000


def test_a_range_over_the_warm_up_does_not_count_it_twice_and_nothing_set_apart_changes_nothing():
    stats = summarize(TIMES, warmup_steps=1, global_batch_size=16, set_apart=[(1, 2)])
    assert (stats.warmup_steps, stats.apart_steps, stats.steady_steps) == (1, 1, 6)
    plain = summarize(TIMES, warmup_steps=1, global_batch_size=16)
    assert plain.apart_steps == 0 and plain.apart_s is None and plain.steady_steps == 7
    everything = summarize(TIMES, warmup_steps=1, global_batch_size=16, set_apart=[(2, 8)])
    assert everything.steady_steps == 0 and everything.samples_per_s is None and everything.apart_steps == 7


def test_times_read_in_clumps_give_the_windows_spread_not_the_clumps():
    """A JAX job sees calls done some together: three share a short gap, the fourth carries the rest (same 1 ms mean)."""
    clumped = [2.0] + [0.0005, 0.0005, 0.0005, 0.0025] * 8  # warm-up, then 32 steps at 1 ms each on average
    per_step = summarize(clumped, warmup_steps=1, global_batch_size=64)
    windows = summarize(clumped, warmup_steps=1, global_batch_size=64, window_steps=8)
    assert per_step.spread is not None and per_step.spread >= 1.0  # the clumps read as a 400% spread
    assert windows.spread == pytest.approx(0.0) and windows.median_ms == pytest.approx(1.0)
    assert windows.p95_ms == pytest.approx(1.0) and windows.samples_per_s == per_step.samples_per_s


def test_too_few_windows_give_no_spread_and_no_p95():
    stats = summarize([2.0] + [0.001] * 20, warmup_steps=1, global_batch_size=64, window_steps=8)  # 2 whole windows
    assert stats.spread is None and stats.p95_ms is None
    assert stats.median_ms == pytest.approx(1.0) and stats.samples_per_s == pytest.approx(64_000)

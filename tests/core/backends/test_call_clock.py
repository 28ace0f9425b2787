"""The backend job's call clock: each call's time and own loss, sent in batches, and read one call late in a real fit."""

from __future__ import annotations

import threading

import pytest

from core.backends.call_timer import CALLS_IN_FLIGHT, CallClock
from core.config import RunConfig
from core.job_messages import Steps
from core.results import StepRecord
from core.runner import run_training
from core.training.metrics import summarize
from tests.step_hooks import StepsTo


def clock_with(sent: list[Steps], steps_per_call: int = 2) -> CallClock:
    clock = CallClock(steps_per_call, sent.append, threading.Event())
    clock.previous_end = 100.0
    return clock


def records(sent: list[Steps]) -> list[StepRecord]:
    return [record for message in sent for record in message.records]


def test_each_calls_time_is_shared_by_its_steps_and_the_first_call_is_the_warmup() -> None:
    sent: list[Steps] = []
    clock = clock_with(sent)
    clock.calls_ended([(1, 4.0)], 101.0)
    clock.calls_ended([(3, 3.5)], 101.4)
    clock.flush()
    steps = records(sent)
    assert [r.step for r in steps] == [1, 2, 3, 4]
    assert [r.warmup for r in steps] == [True, True, False, False]
    assert [r.step_time_s for r in steps] == pytest.approx([0.5, 0.5, 0.2, 0.2])


def test_a_calls_loss_is_its_own_mean_taken_from_the_epochs_running_mean_and_reset_each_epoch() -> None:
    sent: list[Steps] = []
    clock = clock_with(sent, steps_per_call=2)
    clock.calls_ended([(1, 4.0)], 101.0)  # steps 1-2 mean 4
    clock.calls_ended([(3, 3.0)], 102.0)  # running mean 3 over 4 steps: this call's mean is (12 - 8) / 2 = 2
    clock.calls_ended([(1, 1.5)], 103.0)  # a new epoch: Keras's running mean starts again
    clock.flush()
    assert [r.loss for r in records(sent)] == pytest.approx([4.0, 4.0, 2.0, 2.0, 1.5, 1.5])


def test_steps_are_sent_together_between_intervals_and_all_of_them_at_the_flush() -> None:
    sent: list[Steps] = []
    clock = clock_with(sent, steps_per_call=1)
    clock.calls_ended([(0, 1.0)], 101.0)  # the warm-up goes at once
    assert len(sent) == 1
    clock._last_send = 101.0
    for step in range(1, 6):
        clock.calls_ended([(step, 1.0)], 101.0 + step * 0.001)  # 1 ms apart: under the send interval
    assert len(sent) == 1
    clock.flush()
    assert len(sent) == 2 and [r.step for r in sent[1].records] == [2, 3, 4, 5, 6]
    assert sent[1].peak_rss_bytes is not None and sent[1].peak_rss_bytes > 0


def test_calls_seen_done_together_share_the_time_since_the_last_ones_evenly() -> None:
    """Nothing tells when each of several calls read at one moment ended: none reads ~0 ms beside one that carries all."""
    sent: list[Steps] = []
    clock = clock_with(sent, steps_per_call=1)
    clock.calls_ended([(0, 1.0)], 101.0)  # the warm-up, read alone
    clock.calls_ended([(1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0)], 101.008)
    clock.flush()
    assert [r.step_time_s for r in records(sent)[1:]] == pytest.approx([0.002] * 4)


def test_a_stop_sends_the_steps_at_once() -> None:
    sent: list[Steps] = []
    clock = clock_with(sent, steps_per_call=1)
    clock.calls_ended([(0, 1.0)], 101.0)
    clock._last_send = 101.0
    clock.stop.set()
    clock.calls_ended([(1, 1.0)], 101.001)
    assert len(sent) == 2


@pytest.mark.slow
def test_a_jax_run_over_several_epochs_reports_every_step_once_with_a_time_and_the_losses_of_each_call() -> None:
    """Calls read late across epoch ends and the run's end: the one-call warm-up fit, then 3 epochs of 64 calls and 7 more, every step there once.

    The warm-up is the first call and the second fit's first 8 calls (its set-up, and slower calls as a fit starts).
    """
    seen: list = []
    result = run_training(RunConfig(model="mlp", backend="jax", steps=200, steps_per_call=1), hooks=[StepsTo(seen.extend)])
    assert result.ok, result.message
    assert [r.step for r in seen] == list(range(1, 201))
    assert all(r.step_time_s > 0 for r in seen[1:]) and [r.warmup for r in seen[:10]] == [True] * 9 + [False]
    assert len(set(result.losses)) > 100  # each call's own loss, not a running mean repeated
    windows = summarize(result.step_times_s, result.warmup_steps, 64, window_steps=CALLS_IN_FLIGHT)  # calls read some together
    assert (result.step_time_median_ms, result.step_time_spread) == (windows.median_ms, windows.spread)

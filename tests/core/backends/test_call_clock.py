"""The backend job's call clock: calls back in order, ends never before the previous one, each call's own loss."""

from __future__ import annotations

import threading

import pytest

from core.backends.call_timer import CallClock


def clock_with(sent: list[dict], steps_per_call: int = 2, calls_per_epoch: int = 3) -> CallClock:
    clock = CallClock(steps_per_call, calls_per_epoch, sent.append, threading.Event())
    clock.previous_end = 100.0
    return clock


def records(sent: list[dict]) -> list[list]:
    return [record for message in sent for record in message["records"]]


def test_calls_that_end_out_of_order_are_recorded_in_order_and_never_end_before_the_previous_call() -> None:
    sent: list[dict] = []
    clock = clock_with(sent)
    clock.call_ended(0, 1, 4.0, 101.0)  # warm-up: steps 1-2
    clock.call_ended(0, 5, 3.0, 101.3)  # the third call's callback ran before the second's
    assert [r[0] for r in records(sent)] == [1, 2]
    clock.call_ended(0, 3, 3.5, 101.4)  # the second call, read after the third (the pool's threads swapped)
    clock.flush()
    steps = records(sent)
    assert [r[0] for r in steps] == [1, 2, 3, 4, 5, 6]
    assert [r[3] for r in steps] == [True, True, False, False, False, False]
    assert steps[0][2] == pytest.approx(0.5)  # the warm-up call: 1 s over its 2 steps
    assert steps[2][2] == pytest.approx(0.2)  # the second call ended at 101.4
    assert steps[4][2] == pytest.approx(0.0)  # the third cannot end before the second: its end is taken as 101.4
    assert sum(r[2] for r in steps[2:]) == pytest.approx(0.4)


def test_a_calls_loss_is_its_own_mean_taken_from_the_epochs_running_mean_and_reset_each_epoch() -> None:
    sent: list[dict] = []
    clock = clock_with(sent, steps_per_call=2, calls_per_epoch=2)
    clock.call_ended(0, 1, 4.0, 101.0)  # steps 1-2 mean 4
    clock.call_ended(0, 3, 3.0, 102.0)  # running mean 3 over 4 steps: this call's mean is (12 - 8) / 2 = 2
    clock.call_ended(1, 1, 1.5, 103.0)  # a new epoch: Keras's running mean starts again
    clock.flush()
    assert [r[1] for r in records(sent)] == pytest.approx([4.0, 4.0, 2.0, 2.0, 1.5, 1.5])


def test_steps_are_sent_together_between_intervals_and_all_of_them_at_the_flush() -> None:
    sent: list[dict] = []
    clock = clock_with(sent, steps_per_call=1, calls_per_epoch=100)
    clock.call_ended(0, 0, 1.0, 101.0)  # the warm-up goes at once
    assert len(sent) == 1
    clock._last_send = 101.0
    for step in range(1, 6):
        clock.call_ended(0, step, 1.0, 101.0 + step * 0.001)  # 1 ms apart: under the send interval
    assert len(sent) == 1
    clock.flush()
    assert len(sent) == 2 and [r[0] for r in sent[1]["records"]] == [2, 3, 4, 5, 6]
    assert sent[1]["peak_rss_bytes"] > 0


def test_a_stop_sends_the_steps_at_once() -> None:
    sent: list[dict] = []
    clock = clock_with(sent, steps_per_call=1, calls_per_epoch=100)
    clock.call_ended(0, 0, 1.0, 101.0)
    clock._last_send = 101.0
    clock.stop.set()
    clock.call_ended(0, 1, 1.0, 101.001)
    assert len(sent) == 2

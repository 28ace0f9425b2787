"""Autotune ends when its space is searched and its choice checked, not when its budget is spent (issue 38 item 24);
it says what ended it, and it still adopts nothing its rounds did not show faster beyond noise."""

from __future__ import annotations

import threading
import time

import pytest

from core import RunConfig
from core.config import MAX_STEPS
from core.jobs import JobOptions, run_job
from core.results import StepRecord
from core.tuning.autotune import BUDGET, CALL_SIZES, MIN_BUDGET_S, SEARCHED, autotune
from core.tuning.point_clock import MIN_POINT_S, PRECISION, PointClock, relative_half_width

pytestmark = pytest.mark.slow

JOB = RunConfig(model="mlp", dataset="synthetic", batch_size=32)
FLOAT32_ONLY = {"has_accelerator": False, "cpu_flags": ("avx2",)}
"""A CPU without bfloat16 units: the space is the call sizes and XLA at float32."""
LARGE_BUDGET_S = 600.0


def test_a_small_space_ends_searched_with_its_choice_checked_in_every_round_it_was_given():
    result = autotune(JOB, LARGE_BUDGET_S, rounds=3, **FLOAT32_ONLY)

    assert result.stopped_because == SEARCHED, result.notes
    search = [point for point in result.points if not point.in_rounds]
    assert all(point.status == "measured" for point in search), [point.message for point in search]
    assert {point.settings["steps_per_call"] for point in search} == set(CALL_SIZES)  # a step of the MLP: every size fits a call
    assert sum(point.stage == "XLA" for point in search) == 1
    assert result.points_searched == len(search) == len(CALL_SIZES) + 1
    in_rounds = [point for point in result.points if point.in_rounds]
    assert len(in_rounds) >= 2 and all(point.status == "measured" and point.rounds == 3 for point in in_rounds)
    assert result.confirmed is not None
    data = result.to_dict()
    assert data["stopped_because"] == "searched" and data["points_searched"] == result.points_searched
    assert "its space searched" in result.ending()


def test_one_round_claims_nothing_so_nothing_is_adopted_and_the_note_says_why():
    result = autotune(JOB, LARGE_BUDGET_S, rounds=1, **FLOAT32_ONLY)

    assert result.best == result.start and result.changes() == {} and result.confirmed is False
    assert result.stopped_because == SEARCHED and not [point for point in result.points if point.in_rounds]
    assert any(note.startswith("not adopted: one interleaved round claims nothing beyond noise") for note in result.notes), result.notes


def test_a_budget_too_small_for_the_space_says_the_budget_ended_it():
    result = autotune(JOB, MIN_BUDGET_S, **FLOAT32_ONLY)

    assert result.points[0].status == "measured"  # the start always runs
    assert result.stopped_because == BUDGET and result.to_dict()["stopped_because"] == "budget"
    assert "budget ran out first" in result.ending()


def test_a_point_plainly_slower_than_the_best_stops_after_its_first_steady_calls():
    stop = threading.Event()
    clock = PointClock(stop, threading.Event(), measure_s=600.0, deadline=time.monotonic() + 600.0, floor_rate=1e12)
    result = run_job(JOB.with_changes(steps=MAX_STEPS, epochs=None), None, JobOptions(hooks=(clock,)), stop).result

    assert clock.gave_up and clock.finished
    assert result.samples_per_s is not None and result.steps_done < MAX_STEPS


def test_a_point_stops_once_its_calls_give_its_samples_per_s_within_the_precision_and_not_before():
    """The clock fed a run's calls as the engine hands them over (the steps of each call): the warm-up call, then steady
    calls. Calls of one length know the rate at once, but only after MIN_POINT_S of them; calls that keep slowing
    never do (the point then runs to `measure_s`, or its deadline)."""
    steady = PointClock(threading.Event(), threading.Event(), measure_s=600.0, deadline=time.monotonic() + 600.0)
    steady.on_step_records([StepRecord(1, 1.0, 2.0, warmup=True)])
    for step in range(2, 5):
        steady.on_step_records([StepRecord(step, 1.0, MIN_POINT_S / 3.5)])
    assert not steady.finished and not steady.point_stop.is_set()  # 3 calls, under MIN_POINT_S of steady steps
    steady.on_step_records([StepRecord(5, 1.0, MIN_POINT_S / 3.5)])
    assert steady.finished and steady.point_stop.is_set() and not steady.gave_up

    drifting = PointClock(threading.Event(), threading.Event(), measure_s=600.0, deadline=time.monotonic() + 600.0)
    drifting.on_step_records([StepRecord(1, 1.0, 2.0, warmup=True)])
    slowing = [0.01 * 1.05**call for call in range(80)]  # each call 5% slower than the one before: the rate never settles
    for step, seconds in enumerate(slowing, start=2):
        drifting.on_step_records([StepRecord(step, 1.0, seconds)])
    assert not drifting.finished and not drifting.point_stop.is_set()
    width = relative_half_width(slowing, [1] * len(slowing))
    assert width is not None and width > PRECISION

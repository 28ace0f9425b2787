"""Autotune spends its time where a choice is still open (issue 38 item 24): a point told apart from the best so far stops
there, and a rival the search found slower than the best under no more load takes no turn in the last check's rounds."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core import RunConfig
from core.jobs import run_job
from core.results import StepRecord
from core.training.hooks import RunContext
from core.tuning.autotune import TunePoint, _Tuner, settings_of
from core.tuning.point_clock import MIN_POINT_S, PRECISION, PointClock, Reference, relative_half_width

JOB = RunConfig(model="mlp", dataset="synthetic", batch_size=32)
START = settings_of(JOB)
BEST = {**START, "steps_per_call": 64}
RIVAL = {**START, "steps_per_call": 16}
CALL_S = 0.005
CALLS = 60


def noisy_calls(seconds_per_call: float, spread: float, count: int, seed: int) -> np.ndarray:
    """`count` call times around `seconds_per_call`, each off by up to `spread` of it (seeded)."""
    return seconds_per_call * (1 + spread * np.random.default_rng(seed).uniform(-1, 1, count))


def fed_clock(reference: Reference | None) -> PointClock:
    """A clock fed a warm-up call, then noisy steady calls of one step at batch 1 until it stops the point (or 400 calls)."""
    clock = PointClock(threading.Event(), threading.Event(), measure_s=600.0, deadline=time.monotonic() + 600.0, reference=reference)
    clock.on_run_start(RunContext(JOB.with_changes(batch_size=1), total_steps=401, replicas=1, device_names=("CPU:0",), model=None))
    clock.on_step_records([StepRecord(1, 1.0, 1.0, warmup=True)])
    for step, seconds in enumerate(noisy_calls(CALL_S, 0.9, 400, seed=1), start=2):
        clock.on_step_records([StepRecord(step, 1.0, float(seconds))])
        if clock.point_stop.is_set():
            break
    return clock


def test_a_point_told_apart_from_the_best_stops_before_its_own_precision_is_reached():
    """Calls too noisy to give the rate within the precision at MIN_POINT_S, at twice the best's rate: told apart there."""
    early = noisy_calls(CALL_S, 0.9, round(MIN_POINT_S / CALL_S) + 5, seed=1)
    width = relative_half_width(list(early), [1] * len(early))
    assert width is not None and width > PRECISION  # its own precision alone would not stop it yet

    apart = fed_clock(Reference(samples_per_s=0.5 / CALL_S, half_width=0.02))
    assert apart.finished and apart.told_apart and not apart.gave_up
    assert apart.steady_calls < 2 * MIN_POINT_S / CALL_S

    alike = fed_clock(Reference(samples_per_s=1 / CALL_S, half_width=0.02))  # the best's own rate: never told apart
    assert not alike.told_apart and alike.steady_calls > apart.steady_calls


def searched(settings: dict, seconds_per_call: float, contended: bool, share: float, seed: int) -> TunePoint:
    """A search point of `settings` as the search records it: its figure and its steady calls (seconds, steps each)."""
    seconds = noisy_calls(seconds_per_call, 0.05, CALLS, seed)
    steps = np.full(CALLS, float(settings["steps_per_call"]))
    rate = settings["batch_size"] * steps.sum() / seconds.sum()
    return TunePoint("search", settings, "measured", rate, calls=(seconds, steps), contended=contended, other_cpu_share=share)


def tuner_with(*points: TunePoint) -> _Tuner:
    tuner = _Tuner(JOB, (time.monotonic(), 600.0), threading.Event(), None, run_job)
    tuner.points.extend(points)
    return tuner


def test_a_rival_slower_beyond_noise_is_dominated_only_where_no_more_load_could_explain_it():
    best = searched(BEST, 64 * CALL_S, contended=True, share=0.3, seed=2)
    quiet_slower = tuner_with(best, searched(RIVAL, 2 * 16 * CALL_S, contended=False, share=0.02, seed=3))
    assert quiet_slower.best() == BEST and quiet_slower.dominated(RIVAL, BEST)

    busier_slower = tuner_with(best, searched(RIVAL, 2 * 16 * CALL_S, contended=True, share=0.5, seed=3))
    assert not busier_slower.dominated(RIVAL, BEST)  # more load while it ran: the load may have slowed it

    as_busy_slower = tuner_with(best, searched(RIVAL, 2 * 16 * CALL_S, contended=True, share=0.25, seed=3))
    assert as_busy_slower.dominated(RIVAL, BEST)

    within_noise = tuner_with(best, searched(RIVAL, 1.01 * 16 * CALL_S, contended=False, share=0.02, seed=3))
    assert not within_noise.dominated(RIVAL, BEST)

    a_little_slower = tuner_with(best, searched(RIVAL, 16 * CALL_S / 0.97, contended=False, share=0.02, seed=3))
    slower = a_little_slower.interval(RIVAL, BEST)
    assert slower is not None and slower.high < 1  # slower beyond noise, by less than the margin for drift between runs
    assert not a_little_slower.dominated(RIVAL, BEST)


@pytest.mark.slow
def test_the_rounds_leave_out_a_dominated_runner_up_and_say_so():
    """The search's figures (the start, the best, a runner-up plainly slower on a quiet machine), then the real rounds."""
    tuner = tuner_with(
        searched(START, CALL_S, contended=False, share=0.02, seed=4),
        searched(BEST, 16 * CALL_S, contended=False, share=0.02, seed=5),
        searched(RIVAL, 16 * CALL_S, contended=False, share=0.02, seed=6),
    )
    assert tuner.best() == BEST

    tuner.confirm_in_rounds(rounds=2)

    assert [point.settings for point in tuner.points if point.in_rounds] == [START, BEST]
    assert any(note.startswith("left out of the rounds: 16 steps/call (more than 5% slower than 64 steps/call ") for note in tuner.notes), (
        tuner.notes
    )

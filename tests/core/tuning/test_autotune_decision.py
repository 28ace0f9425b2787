"""Autotune on the data given (issue 38): its learning check decides by time to the start's loss only where that loss
took learning, and each point says what its step time is."""

from __future__ import annotations

import threading
import time

import pytest

from core import RunConfig, RunStatus, run_training
from core.jobs import run_job
from core.training.to_target import NO_FALL, fell_beyond_noise, smoothed_final_loss
from core.tuning.autotune import _Tuner, learning_check, settings_of

pytestmark = pytest.mark.slow


def test_a_start_whose_loss_did_not_fall_beyond_noise_leaves_the_choice_to_samples_per_s_and_says_why():
    """Batch 32 on the synthetic (random) labels for 40 steps: the start's smoothed final loss lies above where it began,
    so reaching it is luck (every run is there at step 1); the faster setting is adopted on samples/s, and says so."""
    start = run_training(RunConfig(model="mlp", steps=40, batch_size=32))
    grouped = run_training(RunConfig(model="mlp", steps=40, batch_size=32, steps_per_call=8))
    assert start.status == grouped.status == RunStatus.COMPLETED
    assert not fell_beyond_noise(start)
    settings = {"steps_per_call": 8, "precision": "off", "xla": False, "batch_size": 32, "backend": "tensorflow"}
    check = learning_check(settings, start, grouped)
    assert check.adopt and check.undecided == NO_FALL and check.gain is None
    assert check.target_loss == smoothed_final_loss(start) and check.note.startswith("adopted on samples/s: ")


def test_a_digits_start_that_learned_is_judged_by_time_to_its_loss():
    """On the digits the loss falls far beyond noise: time to the start's loss decides, as before."""
    start = run_training(RunConfig(model="mlp", dataset="digits", steps=60, batch_size=32))
    grouped = run_training(RunConfig(model="mlp", dataset="digits", steps=60, batch_size=32, steps_per_call=4))
    assert fell_beyond_noise(start)
    settings = {"steps_per_call": 4, "precision": "off", "xla": False, "batch_size": 32, "backend": "tensorflow"}
    check = learning_check(settings, start, grouped)
    assert check.undecided == "" and check.gain is not None and check.adopt == (check.gain >= 1.0)


def test_a_point_gives_its_median_and_its_mean_step_by_name():
    """`step_time_ms` (kept) is the median step: not batch ÷ samples/s, which is the mean step, now beside it by name."""
    config = RunConfig(model="mlp", batch_size=64, learning_rate=0.001)
    tuner = _Tuner(config, (time.monotonic(), 20.0), threading.Event(), None, run_job)
    point = tuner.measure(settings_of(config), "start").to_dict()
    assert point["status"] == "measured"
    assert point["step_time_median_ms"] == point["step_time_ms"] > 0
    assert point["mean_step_ms"] == pytest.approx(64 / point["samples_per_s"] * 1e3, rel=1e-6)

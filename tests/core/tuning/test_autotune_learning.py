"""Autotune adopts a faster setting only if it also learns as well: no later to the start's loss (objective "loss")."""

from __future__ import annotations

import threading
import time

import pytest

from core import RunConfig, RunStatus, run_training
from core.jobs import run_job
from core.training.to_target import reach, smoothed_final_loss
from core.tuning.autotune import _Tuner, learning_check, settings_of


@pytest.mark.slow
def test_the_most_samples_per_s_is_rejected_when_its_scaled_learning_rate_does_not_learn_and_adopted_only_on_samples():
    """Batch 8 against batch 2048 at the linear rule's learning rate (0.001 x 2048 / 8 = 0.256, Adam) on the digits.

    The large batch runs over 10x the samples/s, but at that rate Adam does not bring the loss down: the linear
    scaling rule breaks past a critical batch (Goyal et al. 2017; McCandlish et al. 2018).
    """
    start = run_training(RunConfig(model="mlp", dataset="digits", steps=150, batch_size=8))
    scaled = run_training(RunConfig(model="mlp", dataset="digits", steps=150, batch_size=2048, learning_rate=0.001 * 2048 / 8))
    assert start.status == scaled.status == RunStatus.COMPLETED
    assert scaled.samples_per_s > 10 * start.samples_per_s
    settings = {"steps_per_call": 1, "precision": "off", "xla": False, "batch_size": 2048, "backend": "tensorflow"}

    check = learning_check(settings, start, scaled)
    assert not check.adopt and check.gain is None and check.target_loss == smoothed_final_loss(start)
    assert check.note.startswith("not adopted: ") and "2048" in check.note.replace(",", "")
    assert f"did not reach the start's loss {check.target_loss:.4g}" in check.note and "--objective samples" in check.note

    regardless = learning_check(settings, start, scaled, objective="samples")
    assert regardless.adopt and regardless.note.startswith("adopted for samples/s alone (--objective samples), though")


@pytest.mark.slow
@pytest.mark.heavy  # the adoption side: the time_to_loss benchmark and the CLI autotune test adopt such settings too
def test_a_setting_that_learns_the_same_per_step_and_runs_faster_is_adopted_with_its_time_gain():
    """Steps per call changes no step's learning: 16 per call reaches the start's loss at the same step, in fewer seconds."""
    start = run_training(RunConfig(model="mlp", dataset="digits", steps=160, batch_size=32))
    grouped = run_training(RunConfig(model="mlp", dataset="digits", steps=160, batch_size=32, steps_per_call=16))
    settings = {"steps_per_call": 16, "precision": "off", "xla": False, "batch_size": 32, "backend": "tensorflow"}
    check = learning_check(settings, start, grouped)
    reached = reach(grouped, check.target_loss)
    assert reached.reached and reached.samples is not None and reached.samples <= 160 * 32
    steady_gain = reach(start, check.target_loss).steady_seconds / reached.steady_seconds  # type: ignore[operator]
    assert check.gain == pytest.approx(steady_gain)
    assert check.adopt == (check.gain >= 1.0) and check.adopt == (check.note == "")  # adopted exactly when it got there no later


@pytest.mark.slow
def test_a_larger_batch_runs_in_the_rounds_at_the_scaled_and_the_start_s_learning_rate_and_is_turned_down_when_neither_learns_as_fast():
    """The search found batch 4096 the most samples/s over batch 8; the interleaved rounds run it at 0.512 (the linear
    rule's) and at 0.001 (the start's). At 0.512 Adam does not learn; at 0.001 it takes full-data steps, each 512x the
    examples of the start's (2048 learned per step as much and reached the loss about as soon; 4096, twice the
    examples, no more per step): neither reaches the start's loss as soon, so the start is kept and the note says how
    each learning rate did."""
    config = RunConfig(model="mlp", dataset="digits", batch_size=8, learning_rate=0.001)
    tuner = _Tuner(config, (time.monotonic(), 24.0), threading.Event(), None, run_job)
    start = settings_of(config)
    large = {**start, "batch_size": 4096}
    tuner.measure(start, "start")
    tuner.measure(large, "batch")
    assert tuner.best() == large  # the most samples/s, beyond noise

    tuner.confirm_in_rounds(3)
    result = tuner.result(())
    in_rounds = {p.settings.get("learning_rate"): p for p in result.points if p.in_rounds and p.settings["batch_size"] == 4096}
    assert sorted(in_rounds) == pytest.approx([0.001, 0.512]), result.notes
    assert all(p.status == "measured" and p.rounds and p.rounds >= 2 for p in in_rounds.values())
    assert result.best == start and result.changes() == {} and result.learning_rate is None
    note = next(n for n in result.notes if n.startswith("batch 4096 at two learning rates"))
    assert "0.512 (the linear rule's)" in note and "0.001 (the start's)" in note
    assert any(n.startswith("not adopted: TensorFlow · batch 4096 · learning rate ") for n in result.notes), result.notes
    assert result.to_dict()["target_loss"] == result.target_loss is not None

"""Whether time to a target loss decides anything, on real runs: a loss that fell beyond noise, reached after the warm-up."""

from __future__ import annotations

import pytest

from core import RunConfig, RunStatus, run_training
from core.training.to_target import IN_WARMUP, NO_FALL, NO_LOSS, decide, fell_beyond_noise, loss_start, reach, smoothed_final_loss

pytestmark = pytest.mark.slow


def test_a_run_that_does_not_learn_sets_no_target_and_reaches_none_by_luck():
    """A learning rate of 1e-7 leaves the digits' loss where it began: its final loss is no target, and the loss the
    learning run reached is one it did not get to. Before, its own final (about its start) was the common target, which
    the learning run crossed within a few steps: time to it measured nothing."""
    learns = run_training(RunConfig(model="mlp", dataset="digits", steps=60, batch_size=32))
    stuck = run_training(RunConfig(model="mlp", dataset="digits", steps=60, batch_size=32, learning_rate=1e-7))
    assert learns.status == stuck.status == RunStatus.COMPLETED
    assert fell_beyond_noise(learns) and not fell_beyond_noise(stuck)
    start = loss_start(stuck)
    assert start is not None and start.steps == 10 and start.noise > 0

    decision = decide([learns, stuck], labels=["lr 0.001", "lr 1e-7"])
    assert decision.decides and decision.reason == "" and decision.target_loss == smoothed_final_loss(learns)
    learned, luck = decision.reached
    assert learned.reached and learned.steps is not None and learned.steps > 1 and not learned.in_warmup
    assert not luck.reached and luck.reason, "a run whose loss did not fall beyond noise has not reached the target"


def test_random_labels_and_a_warm_up_decide_nothing_with_the_reason():
    noise = run_training(RunConfig(model="mlp", steps=40, batch_size=32))  # synthetic: random labels
    no_fall = decide([noise])
    assert not no_fall.decides and no_fall.reason == NO_FALL and no_fall.why
    assert not no_fall.reached[0].reached and reach(noise, no_fall.target_loss).reached, "crossed by luck, so not reached"

    in_calls = run_training(RunConfig(model="mlp", dataset="digits", steps=32 * 6, batch_size=64, steps_per_call=32))
    early = float(reach(in_calls, 1.5).steps or 0)
    assert 0 < early <= 32 and fell_beyond_noise(in_calls, 1.5)
    warm = decide([in_calls], given=1.5)
    assert not warm.decides and warm.reason == IN_WARMUP and warm.reached[0].in_warmup
    assert warm.to_dict() == {"target_decides": False, "target_undecided": IN_WARMUP, "target_undecided_why": warm.why}

    assert decide([]).reason == NO_LOSS

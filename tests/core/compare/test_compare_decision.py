"""What a comparison claims, on the runs given (issue 38): an interval and its "beyond noise" say the same thing or
name why not, and time to a target compares runs only where getting there took learning after the warm-up (and only then gives
a projection the samples to it)."""

from __future__ import annotations

import pytest

from core.compare.runner import run_comparison
from core.compare.significance import HOLDS_ONE, ONE_ROUND, ONE_ROUND_MARK, interval_cell
from core.compare.table import format_table
from core.compare.targets import parse_targets
from core.config import RunConfig
from core.training.to_target import NO_FALL

pytestmark = pytest.mark.slow


def test_one_round_gives_the_calls_interval_and_says_why_nothing_is_claimed_while_rounds_agree_with_their_interval(two_cpus):
    """`compare --json` gave speedup_ci [4.58, 7.84] with beyond_noise false: runs measured in one round (one after
    another) keep the calls' own interval, which may exclude 1, while nothing is claimed across them."""
    base = RunConfig(model="mlp", dataset="digits", steps=40, batch_size=64)
    targets = parse_targets(f"{two_cpus[0]}; {two_cpus[1]}")
    one_round = run_comparison(base, targets, rounds=1)
    row = one_round.to_rows_dict()[1]
    assert row["interval_rounds"] == 1 and row["speedup_ci"] is not None
    assert row["beyond_noise"] is False and row["beyond_noise_reason"] == ONE_ROUND and row["speedup_ci_from"] == "calls"
    cell = interval_cell(one_round.rows[1], is_base=False)
    assert cell.endswith(ONE_ROUND_MARK) and "(noise)" not in cell, "not 'holds 1' where the interval may exclude it"
    assert ONE_ROUND_MARK in format_table(one_round)
    assert one_round.to_rows_dict()[0]["beyond_noise_reason"] is None, "the baseline has no interval"

    in_rounds = run_comparison(base, targets, rounds=4).to_rows_dict()[1]
    assert in_rounds["interval_rounds"] == 4 and in_rounds["speedup_ci_from"] == "rounds"
    low, high = in_rounds["speedup_ci"]
    assert in_rounds["beyond_noise"] == (not low <= 1.0 <= high), "from rounds, the interval and beyond_noise agree"
    assert in_rounds["beyond_noise_reason"] == ("" if in_rounds["beyond_noise"] else HOLDS_ONE)


def test_time_to_a_loss_that_did_not_fall_beyond_noise_compares_nothing(two_cpus):
    """Batch 32 on the synthetic (random) labels for 40 steps: the smoothed loss ends above where it began.

    The common target (that final loss) lay above the first step's loss: both "reached" it at step 1, in the warm-up,
    and time_to_target_speedup compared their first calls (tracing and compiling).
    """
    base = RunConfig(model="mlp", steps=40, batch_size=32)
    comparison = run_comparison(base, parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"))
    rows = comparison.to_rows_dict()
    assert all(row["status"] == "completed" for row in rows)
    for row in rows:
        assert row["target_decides"] is False and row["target_undecided"] == NO_FALL and row["target_undecided_why"]
        assert row["time_to_target_speedup"] is None and row["time_to_target_s"] is None and row["target_reason"]
    assert "time to the target compares nothing here" in format_table(comparison)
    assert comparison.samples_to_target(base) is None  # a projection gets no time to a target that decides nothing


def test_the_samples_to_the_target_come_from_the_baseline_for_the_same_training_on_any_device(two_cpus):
    """What a projection's time to the target rests on: the samples a compared run of the same training needed."""
    base = RunConfig(model="mlp", dataset="digits", steps=80, batch_size=64)
    comparison = run_comparison(base, parse_targets(f"{two_cpus[0]}; {two_cpus[1]}"))
    rows = comparison.to_rows_dict()
    assert comparison.target_decision().decides, comparison.target_decision().why
    for baseline in (0, 1):
        reached = comparison.with_baseline(baseline).samples_to_target(base)
        assert reached is not None and reached.target_loss == comparison.common_target()
        assert (reached.label, reached.samples) == (rows[baseline]["label"], rows[baseline]["samples_to_target"])
    # the device, strategy and length learn nothing different; the batch and the learning rate do
    elsewhere = base.with_changes(strategy="one-device", devices=(two_cpus[1],), steps=500)
    assert comparison.samples_to_target(elsewhere) is not None
    assert comparison.samples_to_target(base.with_changes(batch_size=32)) is None
    assert comparison.samples_to_target(base.with_changes(learning_rate=0.01)) is None

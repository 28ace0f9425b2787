"""The benchmark harness times the run it names: each clock bound to its run, implausible ratios failed as SUSPECT."""

from __future__ import annotations

import pytest

from benchmarks import harness
from core.config import RunConfig
from core.runner import run_training


def test_each_clock_is_bound_to_its_own_run_and_a_result_finds_only_its_clock() -> None:
    clocks = [harness.CallClock(), harness.CallClock()]
    job = RunConfig(model="mlp", dataset="synthetic", batch_size=16, steps=6)
    probe = RunConfig(model="mlp", dataset="synthetic", batch_size=16, steps=8, steps_per_call=4)
    started = run_training(job, hooks=[clocks[0]])
    later = run_training(probe, hooks=[clocks[1]])  # a probe run after it, as the window's diagnosis makes
    assert harness.clock_of(clocks, started) is clocks[0] and clocks[0].config.steps_per_call == 1
    assert harness.clock_of(clocks, later) is clocks[1]
    with pytest.raises(harness.BenchmarkError, match="expected exactly one"):
        harness.clock_of(clocks[1:], started)


def test_an_implausible_ratio_fails_as_suspect_whatever_its_target() -> None:
    assert harness.implausible_ratio(1.02, 0.5, 1.3, "an overhead") == ""
    reason = harness.implausible_ratio(1.884, 0.5, 1.3, "the window's cost over a headless run")
    assert reason.startswith("SUSPECT") and "1.884" in reason
    row = harness.Result("gui_overhead", 1.884, "x", ">= 0.97", True, suspect=reason)
    assert row.passed is False and row.verdict() == "SUSPECT"
    assert harness.Result("gui_overhead", 1.0, "x", ">= 0.97", True).verdict() == "PASS"

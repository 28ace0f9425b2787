"""Advice never contradicts its evidence: every combination of probe outcomes, and no advice whose own probe showed no gain."""

from __future__ import annotations

import itertools

from core.diagnosis.verdict import NOISY_ADVICE, TOO_NOISY, Bound, Evidence, Point, verdict
from core.training.noise import Interval

RUN = Point(batch_size=64, steps_per_call=1, step_s=0.010)
# samples/s of the probe over the run's, with a 95% interval: beyond noise and faster, beyond noise and slower, or within noise
FASTER, SLOWER, SAME = Interval(1.6, 1.4, 1.8, (30, 30)), Interval(0.6, 0.5, 0.7, (30, 30)), Interval(1.02, 0.9, 1.15, (30, 30))


def _calls_point(step_s: float, gain: Interval | None) -> Point:
    return Point(64, 8, step_s, gain)


def _batch_point(step_s: float, gain: Interval | None) -> Point:
    return Point(8, 1, step_s, gain)  # the probe at batch / 8


def test_raise_steps_per_call_only_when_the_steps_per_call_probe_was_faster_beyond_noise():
    # the medians alone would say 60% of the step is paid per call; the interval decides whether that is real
    for gain, advised in ((FASTER, True), (SAME, False), (SLOWER, False)):
        found = verdict(Evidence(run=RUN, other_calls=(_calls_point(0.00475, gain),)))
        assert ("steps per call" in found.advice) is advised, (gain, found)
        assert (found.bound is Bound.OVERHEAD) is advised, found
        if not advised:
            assert "no faster beyond noise" in found.bound_evidence or found.bound is Bound.UNKNOWN


def test_the_issue_case_eight_steps_per_call_slower_gives_no_steps_per_call_advice():
    # "with 8 steps per call a step takes 9.58 ms instead of 9.04 ms" beside "Try: raise steps per call"
    run = Point(64, 1, 0.00904)
    found = verdict(Evidence(run=run, other_batches=(Point(8, 1, 0.0089, SLOWER),), other_calls=(Point(64, 8, 0.00958, SLOWER),)))
    assert found.bound is Bound.OVERHEAD and "steps per call" not in found.advice, found
    assert found.advice.startswith("Raise the batch") and "no faster beyond noise" in found.bound_evidence


def test_no_advice_whose_own_probe_showed_no_gain_over_every_combination():
    outcomes = (FASTER, SLOWER, SAME, None)
    batch_steps, call_steps = (0.004, 0.0095), (0.004, 0.0098, 0.0105)
    for batch_gain, call_gain, batch_s, call_s, xla in itertools.product(outcomes, outcomes, batch_steps, call_steps, (False, True)):
        evidence = Evidence(
            run=RUN,
            xla=xla,
            flops_per_step=1e9,
            samples_per_s=6400,
            ceiling_flops=1.5e12,
            other_batches=(_batch_point(batch_s, batch_gain),),
            other_calls=(_calls_point(call_s, call_gain),),
        )
        found = verdict(evidence)
        advice = found.advice
        if "steps per call" in advice:  # the larger call must have been faster (beyond noise, or by medians without timings)
            assert call_gain in (FASTER, None), (call_gain, found)
        if "Raise the batch" in advice:  # the larger batch (the run's) must have given more samples/s than batch / 8
            assert batch_gain in (SLOWER, None), (batch_gain, found)
        if "XLA" in advice:
            assert "Not measured here: try XLA" in advice, found


def test_too_noisy_to_judge_instead_of_a_bound():
    evidence = Evidence(
        run=RUN, other_batches=(_batch_point(0.0095, SLOWER),), noisy="the run was measured while other processes used 63% of the CPU"
    )
    found = verdict(evidence)
    assert found.bound is Bound.UNKNOWN and found.bound_evidence.startswith(TOO_NOISY) and evidence.noisy in found.bound_evidence
    assert found.advice == NOISY_ADVICE


def test_compute_bound_advice_marks_xla_as_not_measured_and_bfloat16_only_from_measured_ceilings():
    compute = dict(run=RUN, flops_per_step=1e9, samples_per_s=6400 * 10, ceiling_flops=1e12)
    found = verdict(Evidence(**compute, ceilings_by_precision={"float32": 1e12, "bfloat16": 0.5e12}))
    assert found.bound is Bound.COMPUTE and "bfloat16" not in found.advice and "Not measured here: try XLA" in found.advice
    faster_bf16 = verdict(Evidence(**compute, ceilings_by_precision={"float32": 1e12, "bfloat16": 2e12}))
    assert "bfloat16" in faster_bf16.advice and "2.0x" in faster_bf16.advice  # the gain measured on this machine

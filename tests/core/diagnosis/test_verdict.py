"""The verdict as a pure function of measurements, with numbers measured on this 2-core CPU (noted where they come from)."""

import pytest

from core.config import RunConfig
from core.diagnosis import verdict as v
from core.diagnosis.evidence import differs_only_in
from core.diagnosis.verdict import Bound, Evidence, Point, verdict

# Measured with core.runner.run_training on this machine (2 shared cores, TF 2.21):
# the MLP at batch 8 took 0.96 ms per step, 0.90 ms at batch 1, 0.45 ms with 8 steps per call;
# the CNN at batch 256 took 120 ms per step and 16 ms at batch 32, 6.57 GFLOP per step (FlopsCounter);
# the float32 matmul ceiling measured 75 GFLOP/s, bfloat16 100 GFLOP/s (core.machine.peaks).
MLP_8 = Point(8, 1, 0.96e-3)
MLP_1 = Point(1, 1, 0.90e-3)
MLP_8_CALLS = Point(8, 8, 0.45e-3)
CNN_256 = Point(256, 1, 0.120)
CNN_32 = Point(32, 1, 0.016)
CNN_FLOPS = 6.57e9
CEILINGS = {"float32": 75e9, "bfloat16": 100e9}


def cnn(**changes) -> Evidence:
    fields = dict(
        run=CNN_256,
        samples_per_s=256 / CNN_256.step_s,
        flops_per_step=CNN_FLOPS,
        ceiling_flops=CEILINGS["float32"],
        ceiling_how="measured float32 matmul on AMD EPYC",
        estimate_flops=156e9,
        ceilings_by_precision=CEILINGS,
        other_batches=(CNN_32,),
    )
    return Evidence(**{**fields, **changes})


def test_step_time_nearly_independent_of_batch_is_overhead():
    found = verdict(Evidence(run=MLP_8, other_batches=(MLP_1,)))
    assert found.bound is Bound.OVERHEAD and found.bound == "overhead"
    assert v.fixed_share(MLP_8, (MLP_1,))[0] == pytest.approx(0.93, abs=0.005)
    assert "93%" in found.bound_evidence and "fixed cost" in found.bound_evidence  # the share it was judged by
    assert "Raise the batch" in found.advice


def test_many_steps_per_call_cutting_the_step_is_overhead_with_that_advice():
    found = verdict(Evidence(run=MLP_8, other_calls=(MLP_8_CALLS,)))
    # per-call cost = (0.96 - 0.45) / (1 - 1/8) = 0.583 ms: 61% of the 0.96 ms step
    assert found.bound is Bound.OVERHEAD
    assert v.call_share(MLP_8, (MLP_8_CALLS,))[0] == pytest.approx(0.61, abs=0.005)
    assert "61%" in found.bound_evidence and "once per call" in found.bound_evidence
    assert found.advice.startswith("Raise steps per call (to 8 or more)")


def test_fixed_share_threshold_is_inclusive():
    # step = fixed + k * batch with fixed exactly half of the batch-8 step
    run, other = Point(8, 1, 2.0), Point(4, 1, 1.5)
    assert v.fixed_share(run, (other,))[0] == pytest.approx(v.OVERHEAD_FIXED_SHARE)
    assert verdict(Evidence(run=run, other_batches=(other,))).bound is Bound.OVERHEAD
    assert verdict(Evidence(run=run, other_batches=(Point(4, 1, 1.45),))).bound is Bound.UNKNOWN


def test_a_large_share_of_the_measured_ceiling_is_compute_with_bfloat16_and_xla_advice():
    found = verdict(cnn())
    assert found.achieved_flops == pytest.approx(CNN_FLOPS / CNN_256.step_s)  # 54.75 GFLOP/s
    assert found.pct_of_measured_peak == pytest.approx(73, abs=0.1)
    assert found.bound is Bound.COMPUTE
    assert "75.00 GFLOP/s" in found.bound_evidence and "156.00 GFLOP/s" in found.bound_evidence  # the ceiling and the estimate
    assert "bfloat16" in found.advice and "1.3x" in found.advice and "XLA" in found.advice


def test_below_the_compute_share_without_other_limits_is_unknown():
    found = verdict(cnn(ceiling_flops=150e9))
    assert found.pct_of_measured_peak == pytest.approx(36.5, abs=0.1)
    assert found.bound is Bound.UNKNOWN
    assert v.fixed_share(CNN_256, (CNN_32,))[0] == pytest.approx(0.01, abs=0.005)  # (0.120 - 0.016) / 224 per example
    assert "1% of the step is a fixed cost" in found.bound_evidence  # what is known, though no limit
    assert "Profile this run" in found.advice


def test_above_the_ceiling_says_what_that_means():
    found = verdict(cnn(ceiling_flops=50e9))
    assert found.bound is Bound.COMPUTE and found.pct_of_measured_peak == pytest.approx(109.5)
    assert "above it: this model's kernels beat the large-matrix rate, or the FLOP count is off" in found.bound_evidence


def test_bfloat16_is_not_advised_where_it_measures_no_faster():
    found = verdict(cnn(ceilings_by_precision={"float32": 75e9, "bfloat16": 80e9}, xla=True))
    assert found.bound is Bound.COMPUTE
    assert "bfloat16" not in found.advice and "XLA" not in found.advice and "higher measured ceiling" in found.advice


def test_measured_waiting_for_input_is_input_bound_from_twenty_percent():
    run = Point(32, 1, 0.0212)
    found = verdict(Evidence(run=run, model_only_step_s=0.0012, pipeline_s=0.0205))
    assert found.bound is Bound.INPUT
    assert v.input_wait(Evidence(run=run, model_only_step_s=0.0012)) == (pytest.approx(0.94, abs=0.005), True)  # measured
    assert "94%" in found.bound_evidence and "21.20 ms" in found.bound_evidence  # the share of the step it was judged by
    assert "prefetch" in found.advice and "cache" in found.advice
    moderate = verdict(Evidence(run=run, model_only_step_s=0.0212 * 0.9))
    assert moderate.bound is Bound.UNKNOWN and "moderately input-bound" in moderate.bound_evidence


def test_a_pipeline_alone_about_as_slow_as_the_step_sets_the_pace():
    found = verdict(Evidence(run=Point(32, 1, 0.0212), pipeline_s=0.0205))
    assert found.bound is Bound.INPUT and "sets the pace" in found.bound_evidence
    bounded = verdict(Evidence(run=Point(32, 1, 0.0212), pipeline_s=0.0021))
    assert bounded.bound is Bound.UNKNOWN and "up to that share may be waiting" in bounded.bound_evidence


def test_input_comes_before_overhead_and_compute():
    found = verdict(cnn(pipeline_s=0.119))
    assert found.bound is Bound.INPUT


def test_a_run_without_steady_state_steps_is_unknown():
    found = verdict(Evidence(run=None))
    assert found.bound is Bound.UNKNOWN and "no steady-state step" in found.bound_evidence
    alone = verdict(Evidence(run=MLP_8))
    assert alone.bound is Bound.UNKNOWN and "nothing beyond the run itself" in alone.bound_evidence


def test_a_model_too_small_for_a_gpu_says_so():
    # A GPU run with made-up step times: there is no GPU here (named as such).
    fake_gpu_run = Evidence(run=Point(8, 1, 0.4e-3), other_batches=(Point(1, 1, 0.39e-3),), device_kind="GPU", model_params=50_826)
    found = verdict(fake_gpu_run)
    assert found.bound is Bound.OVERHEAD
    assert "too small to load a GPU" in found.bound_evidence and "50,826 parameters" in found.bound_evidence
    assert "too small" not in verdict(Evidence(run=MLP_8, other_batches=(MLP_1,), model_params=50_826)).bound_evidence


def test_verdict_json_keys():
    data = verdict(cnn()).to_dict()
    assert set(data) == {"bound", "bound_evidence", "advice", "achieved_flops", "pct_of_measured_peak"}
    assert data["bound"] == "compute" and type(data["bound"]) is str


def test_runs_match_when_they_differ_in_one_setting_only():
    base = RunConfig(model="mlp", batch_size=8, steps=200).to_dict()
    assert differs_only_in(base, RunConfig(model="mlp", batch_size=1, steps=31).to_dict(), "batch_size")
    assert not differs_only_in(base, RunConfig(model="mlp", batch_size=1, steps=31, precision="bfloat16").to_dict(), "batch_size")
    assert not differs_only_in(base, RunConfig(model="mlp", batch_size=8, steps=31).to_dict(), "batch_size")

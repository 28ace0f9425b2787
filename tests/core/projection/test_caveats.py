"""A projection's caveats: a job on real data hears how far the points on real data fell; a step beyond the points' span, that it
extrapolates; every projection, how far the points' own machines set the same job apart; a batch beyond the points' batches, which
way the projection likely errs."""

from __future__ import annotations

from core.config import RunConfig
from core.projection import calibration
from core.projection.catalogue import find_device
from core.projection.project import batch_caveats, coverage_caveats, host_caveats, input_pipeline_caveats, project
from core.projection.step_costs import BatchCosts, StepCosts


def test_a_job_on_real_data_hears_how_far_the_points_on_real_data_fell_and_on_synthetic_data_nothing() -> None:
    jax = calibration.constants("jax")
    points = calibration.points_for("jax")
    (said,) = input_pipeline_caveats(RunConfig(model="mlp", backend="jax", dataset="digits"), points, jax)
    assert "no per-batch term for the input pipeline" in said and "jax mlp b64 H200 digits: 0.82x" in said
    assert input_pipeline_caveats(RunConfig(model="mlp", backend="jax"), points, jax) == []


def test_without_a_point_on_real_data_it_says_so() -> None:
    torch = calibration.constants("torch")
    (said,) = input_pipeline_caveats(RunConfig(model="cnn", backend="torch", dataset="digits"), calibration.points_for("torch"), torch)
    assert "no point ran on real data" in said


def test_a_step_beyond_the_points_flops_or_scattered_elements_hears_that_it_extrapolates_and_a_step_that_never_scatters_nothing() -> None:
    points = calibration.points_for("jax")  # FLOPs 18 MFLOP to 281 GFLOP; scattered 0.5 to 154 million elements
    within = {"batch": 64, "flops": 1.5e9, "kernels": 84, "scattered": 2_408_448}
    beyond = {"batch": 65_536, "flops": 1.5e12, "kernels": 84, "scattered": 2_466_250_752}
    jax = RunConfig(model="cnn", backend="jax")
    said = coverage_caveats(jax, [within, beyond], 7, points)
    assert len(said) == 2 and all("at batch 65,536 lie outside" in caveat for caveat in said)
    assert said[0].startswith("FLOPs per step") and said[1].startswith("scattered elements per step") and "154M" in said[1]
    assert coverage_caveats(jax, [within, {**within, "batch": 256, "scattered": 0}], 7, points) == []
    # TensorFlow without XLA and PyTorch run their own pooling kernels: no scatter term to leave the span of
    tensorflow = RunConfig(model="cnn", backend="tensorflow")
    assert coverage_caveats(tensorflow, [{**within, "scattered": 10**12}], 7, points) == []
    assert len(coverage_caveats(tensorflow.with_changes(xla=True), [{**within, "scattered": 10**12}], 7, points)) == 1
    torch = RunConfig(model="cnn", backend="torch")
    assert coverage_caveats(torch, [{**within, "flops": 1e9, "scattered": 10**12}], 7, calibration.points_for("torch")) == []


def test_the_same_job_on_two_machines_is_found_in_the_points_and_said_with_its_steps() -> None:
    for backend, slower in (("jax", "jax cnn b64 H100-SXM"), ("torch", "torch cnn b64 H100-SXM")):
        points = calibration.points_for(backend)
        apart = calibration.same_job_apart(points)
        assert apart is not None
        slow, fast = apart
        assert slow.name == slower and fast.name == slower.replace("H100-SXM", "H200")
        # the widest such pair: no other job measured on both machines sets them further apart
        ratio = slow.step_s / fast.step_s
        for a in points:
            for b in points:
                if (a.backend, a.model, a.batch, a.precision, a.dataset) == (b.backend, b.model, b.batch, b.precision, b.dataset):
                    assert a.step_s / b.step_s <= ratio
        (said,) = host_caveats(points)
        assert f"{slow.step_s * 1e3:.3g} ms a step on the H100-SXM's machine" in said and f"{ratio:.2f}x" in said
    # one machine's points, or no job measured twice: nothing to say
    assert calibration.same_job_apart([point for point in calibration.POINTS if point.device == "H200"]) is None
    assert host_caveats(calibration.points_for("jax")[:1]) == []


def _cnn_costs() -> StepCosts:
    """The CNN's step costs as the points' job counted them (CALIBRATION_COSTS), memory a nominal 1 GB: no child to count them."""
    cached = calibration.CALIBRATION_COSTS["cnn"]
    batches = tuple(
        BatchCosts(batch, at["flops"], at["bytes"], at["kernels"], at["ops"], 10**9, 10**8, 10**8, at["scattered"])
        for batch, at in cached["batches"].items()
    )
    return StepCosts("cnn", cached["layers"], cached["params"], batches, 4096)


def test_steps_per_call_are_said_as_shared_by_a_compiled_step_and_as_taking_nothing_off_an_eager_one() -> None:
    device = find_device("H100")
    for backend, said, unsaid in (
        ("jax", "taken as shared by the 4 steps of a call", "takes nothing off"),
        ("torch", "takes nothing off", "shared by"),
    ):
        config = RunConfig(model="cnn", backend=backend, steps_per_call=4)
        document = project(config, device, _cnn_costs())
        (caveat,) = [caveat for caveat in document["caveats"] if caveat.startswith("the points all ran 1 step per call")]
        assert said in caveat and unsaid not in caveat, caveat
        # and the step itself: the compiled one shares the host's per-call cost, the eager one not
        one = project(config.with_changes(steps_per_call=1), device, _cnn_costs())
        host, host_one = document["rows"][0]["terms_s"]["host"], one["rows"][0]["terms_s"]["host"]
        assert (host < host_one) if backend == "jax" else host == host_one


def test_a_batch_above_every_point_s_is_likely_low_below_likely_high_and_between_them_nothing_is_said() -> None:
    points = calibration.points_for("jax")
    batches = sorted({point.batch for point in points})
    between = next(b for b in range(batches[0] + 1, batches[-1]) if b not in batches)
    rows = [{"batch": b} for b in (batches[0] // 4, batches[0], between, batches[-1], batches[-1] * 2)]
    low, high = batch_caveats(rows, points)
    assert f"at batch {batches[-1] * 2:,}, above theirs" in low and "likely low" in low
    assert f"at batch {batches[0] // 4:,}, below theirs" in high and "likely high" in high
    assert all(f"batch {between:,}" not in caveat for caveat in (low, high))
    assert batch_caveats([{"batch": b} for b in (batches[0], between, batches[-1])], points) == []

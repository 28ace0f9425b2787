"""One real profiled run (GPU use sampled from `FakeNvml`): its trace read back op by op, its profiled steps kept
out of the statistics, its mean GPU use in the result. Hand-made traces cover a GPU's planes and nested ops."""

from __future__ import annotations

import pytest

from core.config import RunConfig
from core.formatting import format_bytes
from core.hooks.device_use import DeviceUseHook
from core.hooks.profiler import ProfilerCapture, profile_report
from core.hooks.trace_summary import TraceUnreadable, format_top_ops, summarize_trace
from core.machine.gpu_sampler import memory_lines
from core.results import RunStatus
from core.runner import run_training
from core.training.hooks import RunHook
from core.training.metrics import summarize
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.fakes.xplane_trace import write_trace

STEPS, BATCH = 8, 16
STEADY_USE = 64.0


class WarmupOver(RunHook):
    """Turns the fake GPU busy once the warm-up call has ended (before the device-use hook hears of it)."""

    def __init__(self, phase: dict[str, float]):
        self.phase = phase

    def on_step_records(self, records):
        if records[-1].warmup:
            self.phase["use"] = STEADY_USE


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory, two_cpus):
    phase = {"use": 0.0}
    nvml = FakeNvml(FakeGpu(utilization=lambda reading: phase["use"]))
    device_use = DeviceUseHook(nvml, find_gpus=lambda driver, names: [("GPU:0", driver.gpus[0])], interval_s=0.01)
    capture = ProfilerCapture(tmp_path_factory.mktemp("profile"), 3, 5)
    config = RunConfig(model="mlp", steps=STEPS, batch_size=BATCH)
    result = run_training(config, hooks=[capture, WarmupOver(phase), device_use])
    assert result.status == RunStatus.COMPLETED, result.message
    return result, capture, device_use


@pytest.mark.slow
def test_profiled_steps_and_the_stop_after_them_are_set_apart_like_warm_up(profiled_run):
    result, capture, _ = profiled_run
    assert capture.captured == (3, 5) and capture.set_apart == [(3, 5), (6, 6)]
    expected = summarize(result.step_times_s, 1, BATCH, [(3, 5), (6, 6)])
    assert expected.steady_steps == STEPS - 1 - 4
    assert result.warmup_steps == 1
    assert result.samples_per_s == pytest.approx(expected.samples_per_s)
    assert result.step_time_median_ms == pytest.approx(expected.median_ms)
    steady = [result.step_times_s[i] for i in (1, 6, 7)]
    assert result.samples_per_s == pytest.approx(BATCH * 3 / sum(steady))
    (note,) = [w for w in result.warnings if "profiler" in w]
    assert note.startswith("Steps 3–5") and "step 6 (stopping it)" in note and "4 steps" in note  # the steps set apart
    assert "left out of the statistics" in note


@pytest.mark.slow
def test_mean_gpu_use_counts_the_steady_state_and_lands_in_the_result(profiled_run):
    result, _, device_use = profiled_run
    assert device_use.finished and device_use.gpu_names == ("GPU:0",)
    assert result.mean_utilization == STEADY_USE == device_use.mean_utilization(), "the warm-up's idle readings are not counted"
    series = device_use.series()
    assert len(series.steps) > 2 and series.utilization.shape == (len(series.steps), 1)
    assert series.steps[0] >= 0 and series.steps[-1] <= STEPS and all(a <= b for a, b in zip(series.steps, series.steps[1:], strict=False))
    assert series.utilization[-1, 0] == STEADY_USE and series.memory_pct[0, 0] == pytest.approx(100 * 68 / 80)
    (view,) = device_use.memory_views()
    assert view.process_reserved == 68 * 2**30 and view.device_total == 80 * 2**30
    assert f"{format_bytes(view.process_reserved)} reserved" in " ".join(memory_lines(view))


@pytest.mark.slow
def test_the_trace_gives_the_time_per_op_read_from_its_files(profiled_run):
    _, capture, _ = profiled_run
    summary = summarize_trace(capture.trace_dir)
    names = [op.name for op in summary.ops]
    assert "ReadVariableOp" in names and any("MatMul" in name for name in names), (
        names
    )  # "MatMul", or oneDNN's "_MklMatMul" where TF uses it
    assert summary.source.startswith("TensorFlow ops on the host's threads") and summary.timelines >= 1
    assert [op.total_s for op in summary.ops] == sorted((op.total_s for op in summary.ops), reverse=True)
    assert sum(op.share for op in summary.ops) == pytest.approx(1.0)
    assert all(op.count >= 1 and op.total_s > 0 for op in summary.ops[:5])
    by_name = summarize_trace(capture.trace_dir, group_by="name")
    assert not any(op.name.startswith("while/") for op in by_name.ops)
    assert any("MatMul" in op.name and "/" in op.name for op in by_name.ops)
    assert by_name.op_total_s == pytest.approx(summary.op_total_s)
    report = profile_report(capture, limit=3)
    assert capture.how_to_view() in report and f"Top ops in {summary.capture_dir}" in report
    assert report.count(" ms ") >= 3 and f"{len(summary.ops) - 3} more ops" in report


def test_on_a_gpu_each_kernel_counts_for_the_op_that_launched_it(tmp_path):
    kernels = [
        ("sgemm_128x64", 0, 300_000, "dense/MatMul:MatMul"),
        ("sgemm_128x64", 400_000, 200_000, "dense_1/MatMul:MatMul"),
        ("relu_kernel", 700_000, 100_000, "dense/Relu:Relu"),
        ("memcpy_h2d", 900_000, 50_000, ""),
    ]
    trace = write_trace(
        tmp_path,
        [
            ("/device:GPU:0", {"Stream #7(Compute)": kernels, "XLA Ops": [("fusion", 0, 10_000_000, "")]}),
            ("/host:CPU", {"tf_Compute": [("x/Add:AddV2", 0, 5_000_000, "")]}),
        ],
    )
    summary = summarize_trace(trace)
    assert [(op.name, op.count) for op in summary.ops] == [("MatMul", 2), ("Relu", 1), ("memcpy_h2d", 1)]
    assert summary.ops[0].total_s == pytest.approx(500e-9) and summary.ops[0].share == pytest.approx(500 / 650)
    assert summary.source.startswith("accelerator kernels") and summary.timelines == 1
    assert "MatMul" in format_top_ops(summary)


def test_host_ops_count_their_self_time_once(tmp_path):
    thread = [
        ("ExecutorState::Process", 0, 1_000_000, ""),
        ("loop:While", 0, 1_000_000, ""),
        ("inner/MatMul:MatMul", 100_000, 300_000, ""),
        ("inner/Relu:Relu", 500_000, 200_000, ""),
    ]
    trace = write_trace(tmp_path, [("/host:CPU", {"tf_Compute/1": thread, "tf_Compute/2": [("x/MatMul:MatMul", 0, 400_000, "")]})])
    ops = {op.name: (round(op.total_s * 1e12), op.count) for op in summarize_trace(trace).ops}
    assert ops == {"MatMul": (700_000, 2), "While": (500_000, 1), "Relu": (200_000, 1)}


def test_missing_or_broken_traces_say_what_to_do(tmp_path):
    with pytest.raises(TraceUnreadable, match="No profiler trace"):
        summarize_trace(tmp_path)
    capture = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    capture.mkdir(parents=True)
    (capture / "host.xplane.pb").write_bytes(b"\xff\xff not a protocol buffer")
    with pytest.raises(TraceUnreadable, match="not a readable profiler trace"):
        summarize_trace(tmp_path / "plugins" / "profile")

"""FLOPs per step from the model's graph, device peaks, and what the fraction of peak means."""

from types import SimpleNamespace

import pytest

from core.config import RunConfig
from core.results import RunResult, RunStatus
from core.training.callbacks import RunContext
from core.training.flops import (
    FlopsCounter,
    achieved_flops,
    cpu_peak_flops,
    efficiency_note,
    forward_flops,
    gpu_peak,
    peak_flops,
    training_flops_per_step,
)
from core.workloads.models import MODELS

# The MLP on 8x8x1 inputs: Dense 64->256, 256->128, 128->10; a multiply-add is 2 FLOPs.
MLP_FORWARD_PER_EXAMPLE = 2 * (64 * 256 + 256 * 128 + 128 * 10)


def test_mlp_training_flops_match_the_analytic_count(two_cpus):
    model = MODELS["mlp"].build()
    flops, method = training_flops_per_step(model, 32)
    analytic = 3 * 32 * MLP_FORWARD_PER_EXAMPLE
    # The profiler also counts the bias adds (256 + 128 + 10 per example, 0.4% of the
    # matrix products) and nothing else of note (ReLU has no registered count): so the
    # count sits just above the analytic matrix-product figure, within 1%.
    assert analytic < flops <= 1.01 * analytic
    assert "profiler" in method and "x3" in method


def test_flops_scale_with_the_global_batch(two_cpus):
    model = MODELS["mlp"].build()
    assert training_flops_per_step(model, 64)[0] == pytest.approx(2 * training_flops_per_step(model, 32)[0])


def test_cnn_counts_its_convolutions_and_outweighs_the_mlp(two_cpus):
    cnn = training_flops_per_step(MODELS["cnn"].build(), 16)[0]
    mlp = training_flops_per_step(MODELS["mlp"].build(), 16)[0]
    # First conv alone: 2 * 3*3*1*32 * 28*28 per example.
    assert cnn > 3 * 16 * 2 * 3 * 3 * 32 * 28 * 28
    assert cnn > 10 * mlp


def test_transformer_count_includes_attention_einsums(two_cpus):
    tokens, dim, blocks = 128, 64, 2
    per_block = (
        4 * 2 * tokens * dim * dim  # query, key, value and output projections
        + 2 * 2 * tokens * tokens * dim  # scores (Q K^T) and their weighted sum of values: Einsum ops
        + 2 * 2 * tokens * dim * 2 * dim  # feed-forward 64 -> 128 -> 64
    )
    analytic = blocks * per_block + 2 * dim * 2
    forward = forward_flops(MODELS["transformer"].build(), 1)
    # Layer norm, softmax, bias and residual adds come on top, a few percent; without the
    # Einsum ops the count would be a third lower and fail the lower bound.
    assert analytic <= forward <= 1.1 * analytic


def test_einsum_with_ellipsis_is_counted(two_cpus):
    import keras

    class BatchedProjection(keras.layers.Layer):
        def call(self, x):
            return keras.ops.einsum("...ij,jk->...ik", x, keras.ops.ones((4, 6)))

    inputs = keras.Input((5, 3, 4))
    model = keras.Model(inputs, BatchedProjection()(inputs))
    assert forward_flops(model, 2) == 2 * (2 * 5 * 3 * 6) * 4


def test_model_without_defined_inputs_is_refused_with_a_reason(two_cpus):
    with pytest.raises(ValueError, match="keras.Input"):
        forward_flops(SimpleNamespace(inputs=[]), 8)


def test_counter_never_fails_a_run_and_says_why_it_could_not_count(two_cpus):
    counter = FlopsCounter()
    counter.on_run_start(RunContext(RunConfig(), 10, 1, ("CPU:0",), object()))
    assert counter.flops is None and counter.method.startswith("not counted")


def test_counter_counts_once_from_the_run_model(two_cpus):
    counter = FlopsCounter()
    model = MODELS["mlp"].build()
    counter.on_run_start(RunContext(RunConfig(batch_size=16), 10, 1, ("CPU:0",), model))
    assert counter.flops == training_flops_per_step(model, 16)[0]
    assert counter.params == model.count_params()
    counter.on_run_start(RunContext(RunConfig(batch_size=32), 10, 1, ("CPU:0",), model))
    assert counter.flops == training_flops_per_step(model, 16)[0]


def test_cpu_peak_estimate_is_positive_and_explained():
    flops, how = cpu_peak_flops()
    assert flops is not None and flops > 1e9
    assert "cores" in how and "FLOPs/cycle" in how
    assert peak_flops({"kind": "CPU", "name": "this CPU"}) == (flops, how)


@pytest.mark.parametrize(
    "name, precision, tf32, tflops",
    [
        ("NVIDIA H100 80GB HBM3", "off", True, 494.7),
        ("NVIDIA H100 80GB HBM3", "off", False, 67.0),
        ("NVIDIA H100 80GB HBM3", "bfloat16", True, 989.4),
        ("NVIDIA H100 PCIe", "float16", True, 756.0),
        ("NVIDIA H200", "bfloat16", True, 989.4),
        ("NVIDIA A100-SXM4-80GB", "off", True, 156.0),
        ("Tesla V100-SXM2-16GB", "off", True, 15.7),
        ("Tesla T4", "float16", True, 65.0),
        ("NVIDIA L4", "bfloat16", True, 121.0),
        ("NVIDIA GeForce RTX 4090", "float16", True, 165.2),
    ],
)
def test_gpu_peaks_come_from_the_datasheet_table(name, precision, tf32, tflops):
    # A DeviceInfo-shaped object: the table needs only kind and name (no GPU here).
    flops, how = peak_flops(SimpleNamespace(kind="GPU", name=name), precision, tf32)
    assert flops == pytest.approx(tflops * 1e12)
    assert "datasheet" in how


def test_gpu_peak_unknowns_say_why():
    assert peak_flops({"kind": "GPU", "name": "Tesla T4"}, "bfloat16") == (None, "T4 has no bfloat16 tensor cores")
    assert peak_flops({"kind": "GPU", "name": "NVIDIA A10G"})[0] is None
    assert gpu_peak("NVIDIA A10") is not None and gpu_peak("NVIDIA A10G") is None
    assert peak_flops({"kind": "TPU", "name": "TPU v4"})[0] is None


def test_achieved_flops_uses_steady_state_steps_per_second():
    result = RunResult(status=RunStatus.COMPLETED, config={"batch_size": 64}, samples_per_s=640.0)
    assert achieved_flops(result, 1e6) == pytest.approx(1e7)
    assert achieved_flops(result, None) is None
    assert achieved_flops(RunResult(status=RunStatus.COMPLETED, config={"batch_size": 64}), 1e6) is None


@pytest.mark.parametrize(
    "fraction, words",
    [(0.01, "far below peak"), (0.1, "well below"), (0.3, "good share"), (0.8, "close to peak"), (1.5, "above"), (None, "unknown")],
)
def test_efficiency_note_reads_the_fraction(fraction, words):
    assert words in efficiency_note(fraction)

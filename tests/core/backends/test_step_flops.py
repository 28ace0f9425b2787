"""A JAX run's FLOPs per step, counted by XLA in its child: against the analytic count and TensorFlow's counter, then on to FLOP/s.

The run is real (`main.py run --backend jax`, diagnosed against a ceilings cache
the test writes), so the count travels the whole way: the child's start
message, the RunResult, the verdict's achieved FLOP/s and % of peak, the JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import RunConfig, run_training
from core.backends.step_flops import METHOD, NOT_JAX, step_flops
from core.machine import peaks
from core.training.flops import training_flops_per_step
from core.workloads.models import MODELS
from tests.ceilings_cache import FLOAT32 as CEILING
from tests.ceilings_cache import write_ceilings_cache

ROOT = Path(__file__).resolve().parents[3]
BATCH = 64
MLP_MULTIPLY_ADDS = 64 * 256 + 256 * 128 + 128 * 10  # Dense 64->256, 256->128, 128->10 on the digits' 8x8x1


@pytest.mark.slow
@pytest.mark.heavy  # a JAX job and TensorFlow side by side
def test_a_jax_run_gets_xlas_count_near_the_analytic_one_and_its_flops_per_second_and_share_of_peak(tmp_path, two_cpus):
    data = tmp_path / "data"
    write_ceilings_cache(data / peaks.CACHE_FILE, bfloat16=None)
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    args = ["run", "--model", "mlp", "--backend", "jax", "--steps", "40", "--batch-size", str(BATCH), "--json", "--no-save"]
    done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout)
    # Forward + backward = 3 x 2 x multiply-adds x batch; XLA computes no gradient for the input data (the first
    # layer's backward is a third smaller: -11%) and adds the loss, the activations and Adam's update (+3%).
    analytic = 3 * 2 * MLP_MULTIPLY_ADDS * BATCH
    assert run["flops_per_step"] == pytest.approx(analytic, rel=0.15)
    assert run["flops_method"] == METHOD and run["flops_uncounted"] == []
    # TensorFlow's counter (3 x its forward graph's per-op counts) on the same model: measured 0.924 of it.
    tensorflow_count, _ = training_flops_per_step(MODELS["mlp"].build(), BATCH)
    assert 0.85 < run["flops_per_step"] / tensorflow_count < 1.0
    assert run["achieved_flops"] == pytest.approx(run["flops_per_step"] * run["samples_per_s"] / BATCH)
    assert run["pct_of_measured_peak"] == pytest.approx(100 * run["achieved_flops"] / CEILING)


@pytest.mark.slow
def test_the_cnns_count_is_close_to_tensorflows_and_below_it(two_cpus):
    result = run_training(RunConfig(model="cnn", backend="jax", steps=2, batch_size=16))
    assert result.ok, result.message
    tensorflow_count, _ = training_flops_per_step(MODELS["cnn"].build(), 16)
    # Measured 0.906: XLA counts a "same" convolution over its valid positions only and no input gradient.
    assert 0.85 < result.flops_per_step / tensorflow_count < 1.0
    assert result.flops_method == METHOD and result.summary()["flops_per_step"] == result.flops_per_step


def test_another_backend_gets_no_count_and_says_why(two_cpus):
    counted = step_flops(MODELS["mlp"].build(), None, None, BATCH)  # this process's Keras runs on TensorFlow, not JAX
    assert counted["flops_per_step"] is None
    assert counted["method"] == NOT_JAX.format(backend="tensorflow")


FAKE_GPU_PLUGIN = """
import json, sys
import jax, keras
from jax._src import stages
from jax._src.interpreters import pxla
from core.backends.step_flops import step_flops
from core.workloads.models import MODELS

counted_as_cpu = stages.Lowered.cost_analysis

def gpu_plugins_cost_analysis(lowered):
    # A named fake of the GPU's PJRT plugin, which has no lowered cost analysis (None, jax-ml/jax#22713):
    # here every device is a CPU, so the lowering counts only when it was asked for the CPU explicitly.
    default = jax.config.jax_default_device
    return counted_as_cpu(lowered) if default is not None and default.platform == "cpu" else None

stages.Lowered.cost_analysis = gpu_plugins_cost_analysis
model = MODELS["mlp"].build()
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
import numpy as np
x, y = np.zeros((64, 8, 8, 1), "float32"), np.zeros((64,), "int32")
print(json.dumps(step_flops(model, x, y, 64)))
"""


def test_the_count_is_lowered_for_the_cpu_where_the_run_s_device_has_no_cost_analysis(two_cpus):
    """A GPU run's train step counted as on the CPU: on an H200 (JAX 0.11) the lowered step had no FLOP count."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", FAKE_GPU_PLUGIN], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counted = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted["method"] == METHOD
    assert counted["flops_per_step"] == pytest.approx(3 * 2 * MLP_MULTIPLY_ADDS * BATCH, rel=0.15)

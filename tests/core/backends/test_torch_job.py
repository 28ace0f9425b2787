"""A PyTorch job for real, where PyTorch is installed (it is not in the test extra: its Linux wheels bring GBs of CUDA)."""

from __future__ import annotations

import importlib.util

import pytest

from core import RunConfig, RunStatus, run_training

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (pip install 'device-lab[torch]')"),
]


def test_a_torch_job_trains_without_tensorflow_from_the_same_weights_as_tensorflow():
    same = {"model": "mlp", "steps": 6, "seed": 5}
    torch_run = run_training(RunConfig(backend="torch", strategy="one-device", devices=("CPU:0",), **same))  # as compare's torch:CPU:0
    tf_run = run_training(RunConfig(backend="tensorflow", **same))
    assert torch_run.status == RunStatus.COMPLETED, torch_run.message
    assert torch_run.environment["tensorflow_imported"] is False and torch_run.environment["torch"]
    assert (
        torch_run.steps_done == 6 and torch_run.samples_per_s > 0 and torch_run.warmup_steps == 3
    )  # the first call, then the steady fit's first 2: see fit_job
    assert torch_run.losses[:3] == pytest.approx(tf_run.losses[:3], rel=1e-4)

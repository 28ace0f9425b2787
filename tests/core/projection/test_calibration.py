"""The calibration: its points are the records' own figures, its constants fitted from them, its cached costs the live XLA count."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.projection import calibration
from core.projection.model import KERNEL_S

ROOT = Path(__file__).resolve().parents[3]


def test_every_point_is_a_completed_gpu_job_of_its_record_with_the_same_samples_per_second_and_settings() -> None:
    assert {(p.backend, p.model) for p in calibration.POINTS} == {
        (backend, model) for backend in ("jax", "torch") for model in ("mlp", "cnn", "resnet", "transformer")
    }
    for point in calibration.POINTS:
        path, index = re.fullmatch(r"(\S+): jobs\.runs\[(\d+)\] \(GPU:0\)", point.source).groups()  # type: ignore[union-attr]
        record = json.loads((ROOT / path).read_text())
        run, settings = record["jobs"]["runs"][int(index)], record["jobs"]["settings"]
        assert (run["backend"], run["model"], run["device"], run["status"]) == (point.backend, point.model, "GPU:0", "completed")
        assert run["samples_per_s"] == point.samples_per_s
        assert (settings["batch_size"], settings["steps_per_call"], settings["dataset"]) == (point.batch, point.steps_per_call, "synthetic")
        assert "H100" in record["inventory"]["gpus"][0]["app"]["name"]


def test_the_constants_are_fitted_from_the_points_the_jax_ones_on_the_jax_points_tensorflow_borrowing_them() -> None:
    jax = calibration.constants("jax")
    assert jax.points == tuple(p.name for p in calibration.POINTS if p.backend == "jax") and len(jax.residuals) == 4
    assert 1e-3 < jax.host_s < 1e-2 and 1e-3 < jax.efficiency < 0.1  # ~3.7 ms per call, ~0.8% of the ceiling
    assert calibration.constants("tensorflow") == jax
    torch = calibration.constants("torch")
    assert torch.efficiency == jax.efficiency and torch.per_layer_s > 0 and len(torch.residuals) == 4
    assert max(abs(r) for r in jax.residuals + torch.residuals) < 0.25
    assert KERNEL_S == 3e-6


@pytest.mark.slow
def test_the_cached_step_costs_are_what_xla_counts_on_this_machine_now() -> None:
    live = calibration.derive_calibration_costs()
    for model, cached in calibration.CALIBRATION_COSTS.items():
        counted = live[model]
        assert counted["flops"] == pytest.approx(cached["flops"], rel=0.02), model
        assert counted["bytes"] == pytest.approx(cached["bytes"], rel=0.05), model
        assert counted["kernels"] == pytest.approx(cached["kernels"], rel=0.15), model
        assert (counted["layers"], counted["params"]) == (cached["layers"], cached["params"]), model

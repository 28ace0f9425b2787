"""`main.py max-batch` and `main.py autotune` as a user runs them: real processes, their JSON and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.tuning.backend_stage import BACKENDS_OFF_NOTE

ROOT = Path(__file__).resolve().parents[3]
BUDGET_S = 25  # counted from the process's start: TensorFlow's start-up is part of it


def main_py(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_max_batch_reports_a_probe_over_the_budget_as_a_row_and_ends_with_a_number(tmp_path) -> None:
    # The small CNN grows by ~0.35 MB per example over ~650 MB of runtime: batch 2048 passes 1250 MB, 1024 stays well under it.
    # --tolerance 1 ends the search once the largest batch that fit is within 2x of the smallest that did not.
    out = main_py(
        ["max-batch", "--model", "cnn", "--start-batch", "2048", "--memory-limit", "1250MB", "--tolerance", "1", "--json"], tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert {"max_batch", "bytes_per_example", "probes"} <= set(data)
    probes = data["probes"]
    assert all({"batch", "fits", "peak_bytes"} <= set(p) for p in probes)
    first = probes[0]
    # Killed by the watcher once past the budget, or ended by an allocation the budget (RLIMIT_DATA) refused: either way a row.
    assert first["batch"] == 2048 and not first["fits"] and "memory" in first["reason"]
    fitting = [p for p in probes if p["fits"]]
    assert fitting and all(p["peak_bytes"] <= 1_250_000_000 for p in fitting)
    assert max(p["batch"] for p in fitting) < min(p["batch"] for p in probes if not p["fits"])
    assert data["max_batch"] == int(data["largest_fitting"] * (1 - data["margin"])) >= 1
    assert data["limit"] == "host memory budget" and data["memory_limit"] == 1_250_000_000
    assert "batch 2,048: does not fit:" in out.stderr


@pytest.mark.slow
def test_autotune_returns_the_best_settings_and_the_gain_within_its_budget(tmp_path) -> None:
    out = main_py(
        ["autotune", "--model", "mlp", "--target", "CPU:0", "--batch-size", "32", "--budget-s", str(BUDGET_S), "--json"], tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert {"best", "samples_per_s", "baseline_samples_per_s", "gain", "keras_defaults_samples_per_s", "points"} <= set(data)
    assert {"gain_ci", "beyond_noise", "sureness", "slack_s"} <= set(data)
    assert set(data["best"]) == {"steps_per_call", "precision", "xla", "batch_size", "backend"} and data["best"]["batch_size"] == 32
    assert data["baseline_samples_per_s"] > 0 and data["gain"] == data["samples_per_s"] / data["baseline_samples_per_s"] >= 1.0
    assert data["points"][0]["stage"] == "start" and data["points"][0]["status"] == "measured"
    assert all(p["flops_per_step"] > 0 for p in data["points"] if p["status"] == "measured"), "every measured point counts its FLOPs"
    assert all(p["flops_method"] for p in data["points"]), "a point without a count says why"
    assert data["objective"] == "loss"
    if data["best"] != data["start"]:  # adopted only when the last check's rounds found it faster beyond noise, and no later to the loss
        assert data["confirmed"] is True and data["rounds"] >= 2 and data["gain_ci"][0] > 1 and data["beyond_noise"]
        assert data["target_loss"] is not None and data["time_to_target_gain"] >= 1.0
        assert {p["stage"] for p in data["points"]} >= {"rounds"} and all(
            p["rounds"] >= 2 for p in data["points"] if p["stage"] == "rounds"
        )
    assert data["elapsed_s"] <= BUDGET_S + data["slack_s"] and not data["stopped"]
    assert any(item["precision"] == "float16" for item in data["left_out"])
    # no --backends: the backend is not tuned, and the result says how to ask for it
    assert BACKENDS_OFF_NOTE in data["notes"] and not [p for p in data["points"] if p["stage"] == "backend"]


@pytest.mark.slow
def test_bad_input_exits_2_with_what_is_allowed(tmp_path) -> None:
    out = main_py(["max-batch", "--model", "mlp", "--memory-limit", "4XB"], tmp_path)
    assert out.returncode == 2
    assert "--memory-limit: got '4XB'; allowed: a size such as 512MiB or 4GiB" in out.stderr
    out = main_py(["autotune", "--model", "mlp", "--budget-s", "1", "--target", "multi-worker"], tmp_path)
    assert out.returncode == 2 and "--budget-s: got 1.0; allowed: seconds from 5" in out.stderr

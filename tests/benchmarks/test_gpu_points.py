"""benchmarks/gpu_points.py: each planned point is one real `main.py run`, its JSON kept, the points past the budget named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_point_is_a_real_run_with_its_json_and_a_point_past_the_budget_says_so(tmp_path: Path) -> None:
    command = [sys.executable, "benchmarks/gpu_points.py", "--out", str(tmp_path), "--device", "CPU:0", "--steps", "5"]
    command += ["--points", "jax:mlp:128", "--budget-s", "70", "--bare-s", "30"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "points.json").read_text())
    probe = document["host_probe"]["json"]
    assert (probe["backend"], probe["model"], probe["batch_size"], probe["devices"]) == ("jax", "mlp", 8, ["CPU:0"])
    [point] = document["points"]
    assert point["returncode"] == 0 and point["json"]["status"] == "completed", point["stderr_tail"]
    assert (point["json"]["backend"], point["json"]["batch_size"], point["json"]["devices"]) == ("jax", 128, ["CPU:0"])
    assert point["json"]["samples_per_s"] > 0
    # the JAX point's compiled step alone, back to back on the same device: the device's share of the run's step
    [bare] = document["bare_steps"]["points"]
    assert (bare["model"], bare["batch"], bare["device"]) == ("mlp", 128, "cpu") and 0 < bare["step_ms"] < 1e3 / point["json"][
        "samples_per_s"
    ] * 128 * 5

    skipped = tmp_path / "skipped"
    command[3] = str(skipped)
    budget = command.index("--budget-s") + 1
    short = [*command[:budget], "10", "--bare-s", "0", "--no-host-probe"]
    subprocess.run(short, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    document = json.loads((skipped / "points.json").read_text())
    [point] = document["points"]
    assert "skipped" in point and "json" not in point and document["host_probe"] is None and document["bare_steps"] is None


@pytest.mark.slow
def test_a_recurrent_point_is_its_trusted_model_file_run_and_stays_out_of_the_bare_steps(tmp_path: Path) -> None:
    command = [sys.executable, "benchmarks/gpu_points.py", "--out", str(tmp_path), "--device", "CPU:0", "--steps", "5"]
    command += ["--points", "jax:benchmarks/recurrent/gru_32.py:16", "--budget-s", "150", "--bare-s", "20", "--no-host-probe"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "points.json").read_text())
    [point] = document["points"]
    assert point["returncode"] == 0 and point["json"]["status"] == "completed", point["stderr_tail"]
    assert "--trust" in point["command"] and point["json"]["model"].endswith("gru_32.py")
    assert (point["json"]["backend"], point["json"]["batch_size"]) == ("jax", 16) and point["json"]["samples_per_s"] > 0
    assert document["bare_steps"]["points"] == [] and document["bare_steps"]["skipped"].startswith("0 JAX points")

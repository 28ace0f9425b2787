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
    command += ["--points", "jax:mlp:128", "--budget-s", "40"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((tmp_path / "points.json").read_text())
    probe = document["host_probe"]["json"]
    assert (probe["backend"], probe["model"], probe["batch_size"], probe["devices"]) == ("jax", "mlp", 8, ["CPU:0"])
    [point] = document["points"]
    assert point["returncode"] == 0 and point["json"]["status"] == "completed", point["stderr_tail"]
    assert (point["json"]["backend"], point["json"]["batch_size"], point["json"]["devices"]) == ("jax", 128, ["CPU:0"])
    assert point["json"]["samples_per_s"] > 0

    skipped = tmp_path / "skipped"
    command[3] = str(skipped)
    subprocess.run([*command[:-1], "10", "--no-host-probe"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    document = json.loads((skipped / "points.json").read_text())
    [point] = document["points"]
    assert "skipped" in point and "json" not in point and document["host_probe"] is None

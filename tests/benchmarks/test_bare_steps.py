"""benchmarks/bare_steps.py: a sample model's compiled JAX train step timed alone, one JSON line per point, a bad point named."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from core.projection import calibration
from tests.hidden_packages import env_without_tensorflow_and_qt

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_each_point_is_one_json_line_and_a_point_that_cannot_be_built_says_why_leaving_the_others() -> None:
    command = [sys.executable, "benchmarks/bare_steps.py", "--points", "nosuch:8,mlp:64", "--calls", "5", "--repeats", "2"]
    hidden = env_without_tensorflow_and_qt(JAX_PLATFORMS="cpu")  # as on the GPU machine: no TensorFlow, no Qt
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=hidden)
    assert done.returncode == 0, done.stderr[-2000:]
    failed, measured = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    assert (failed["model"], failed["batch"]) == ("nosuch", 8) and "nosuch" in failed["error"] and "step_ms" not in failed
    assert (measured["model"], measured["batch"], measured["device"]) == ("mlp", 64, "cpu")
    assert len(measured["repeats_ms"]) == 2 and measured["step_ms"] == pytest.approx(statistics.median(measured["repeats_ms"]))
    assert 0 < measured["step_ms"] < 1e3 and measured["calls"] == 5
    # the compiled step's kernels as the projection counts them: on this CPU, the MLP's count in its step costs
    assert measured["kernels"] == calibration.CALIBRATION_COSTS["mlp"]["batches"][64]["kernels"]

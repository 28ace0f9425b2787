"""benchmarks/then_version.py: the H100's version of the app, from this clone's history, runs its own check's JAX jobs here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.then_version import JAX_RECORD, comparison, write_archive

ROOT = Path(__file__).resolve().parents[2]


def test_each_of_the_records_jobs_is_set_beside_the_same_job_run_again() -> None:
    record = json.loads(JAX_RECORD.read_text())
    rows = comparison(record, record)
    assert {(row["model"], row["device"]) for row in rows} == {
        (model, device) for model in ("mlp", "cnn", "resnet", "transformer") for device in ("GPU:0", "CPU:0")
    }
    assert all(row["here_over_h100_machine"] == pytest.approx(1.0) for row in rows)
    cnn_gpu = next(row for row in rows if (row["model"], row["device"]) == ("cnn", "GPU:0"))
    assert cnn_gpu["median_step_ms_h100_machine"] == pytest.approx(2.7098670000214042)

    cpu_only = {**record, "jobs": {**record["jobs"], "runs": [run for run in record["jobs"]["runs"] if run["device"] == "CPU:0"]}}
    rows = comparison(cpu_only, record)
    assert all((row["median_step_ms_here"] is None) == (row["device"] == "GPU:0") for row in rows)


@pytest.mark.heavy  # unpacks the 2026-11-27 version and runs its check's CPU job (about a minute on 2 cores)
def test_the_then_version_runs_its_own_check_from_the_archive(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "then.tar")
    command = [sys.executable, "benchmarks/then_version.py", "--archive", str(archive), "--out", str(tmp_path / "out")]
    command += ["--cpu-only", "--models", "mlp", "--budget-s", "240"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads((tmp_path / "out" / "then_version.json").read_text())
    assert document["commit"] == "c4a2cd1" and document["ended"] == "exit 0"
    [run] = document["json"]["jobs"]["runs"]
    assert (run["backend"], run["model"], run["device"], run["status"]) == ("jax", "mlp", "CPU:0", "completed")
    mlp_cpu = next(row for row in document["rows"] if (row["model"], row["device"]) == ("mlp", "CPU:0"))
    assert mlp_cpu["median_step_ms_here"] == run["step_time_median_ms"] > 0
    assert all(row["median_step_ms_here"] is None for row in document["rows"] if row["model"] != "mlp" or row["device"] == "GPU:0")


def test_a_missing_archive_says_how_to_write_it(tmp_path: Path) -> None:
    command = [sys.executable, "benchmarks/then_version.py", "--archive", str(tmp_path / "none.tar"), "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "gpu_wheels.sh" in done.stdout

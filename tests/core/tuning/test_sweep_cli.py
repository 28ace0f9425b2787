"""`main.py sweep` as a user runs it: a real process, its JSON, exit codes and history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.history.store import RunStore

ROOT = Path(__file__).resolve().parents[3]


def sweep(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    return subprocess.run([sys.executable, "main.py", "sweep", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_sweep_json_gives_rows_and_best_and_leaves_float16_out_on_a_cpu(tmp_path) -> None:
    out = sweep(
        ["--model", "mlp", "--target", "CPU:0", "--batch-sizes", "16,32", "--batch-size", "16"]
        + ["--precision", "off,float16", "--steps", "4", "--json"],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert {"rows", "best", "axes", "left_out", "group", "lr_note"} <= set(data)
    assert [row["settings"] for row in data["rows"]] == [{"batch_size": 16, "precision": "off"}, {"batch_size": 32, "precision": "off"}]
    for row in data["rows"]:
        assert {"status", "samples_per_s", "step_time_median_ms", "final_loss", "peak_memory_bytes", "suggested_learning_rate"} <= set(row)
        assert row["status"] == "completed" and row["samples_per_s"] > 0
    flops = [row["flops_per_step"] for row in data["rows"]]
    assert 0 < flops[0] < flops[1], "each point counts its own FLOPs per step: twice the batch, more FLOPs"
    assert data["best"] in (0, 1) and data["target"] == "CPU:0"
    assert data["left_out"][0]["value"] == "float16" and "no fast float16" in data["left_out"][0]["reason"]
    assert [row["suggested_learning_rate"] for row in data["rows"]] == [0.001, 0.002]
    assert "point 2 of 2: batch 32 · float32" in out.stderr and "left out float16" in out.stderr
    with RunStore.open(tmp_path / "data" / "history.sqlite3") as store:
        assert store.groups() == [data["group"]] == ["sweep 1: batch × precision"]
        assert sorted(run.id for run in store.list_runs()) == sorted(row["run_id"] for row in data["rows"])


@pytest.mark.slow
def test_bad_sweep_values_exit_2_with_the_allowed_form(tmp_path) -> None:
    out = sweep(["--model", "mlp", "--batch-sizes", "16,x"], tmp_path)
    assert out.returncode == 2
    assert "--batch-sizes: got '16,x'; allowed: comma-separated whole numbers" in out.stderr
    assert "Traceback" not in out.stderr
    empty = sweep(["--model", "mlp", "--batch-sizes", ""], tmp_path)  # was quoted as 'tensorflow', the job's backend
    assert empty.returncode == 2 and "--batch-sizes: got ''; allowed: comma-separated whole numbers" in empty.stderr
    refused = sweep(["--model", "mlp", "--batch-sizes", "16,32", "--target-loss", "nan"], tmp_path)
    assert refused.returncode == 2 and "--target-loss: got 'nan'; allowed: a finite number" in refused.stderr


@pytest.mark.slow
@pytest.mark.heavy  # three sweep processes; the star's rule is checked in process by tests/core/tuning/test_sweep.py
def test_sweep_json_times_every_point_to_the_common_loss_and_names_the_first_there_best(tmp_path) -> None:
    out = sweep(["--model", "mlp", "--data", "digits", "--batch-sizes", "16,512", "--steps", "60", "--json", "--no-save"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    rows = data["rows"]
    target = data["target_loss"]
    assert target is not None
    for row in rows:
        assert row["target_loss"] == target
        assert (row["time_to_target_s"] is None) == (row["steps_to_target"] is None) == bool(row["target_reason"])
    reached = [(row["time_to_target_steady_s"], index) for index, row in enumerate(rows) if row["time_to_target_s"] is not None]
    assert reached, "the common target is a loss some point reached"  # the star: the least steady-state time to it
    assert data["best"] == min(reached)[1]
    most = max(range(len(rows)), key=lambda index: rows[index]["samples_per_s"])
    assert data["best_by_samples_per_s"] == most and data["best_is_most_samples_per_s"] == (data["best"] == most)
    assert bool(data["best_why"]) != data["best_is_most_samples_per_s"]
    assert "smoothed final losses" in data["target_how"]
    given = sweep(["--model", "mlp", "--batch-sizes", "16,32", "--steps", "4", "--target-loss", "-1", "--json", "--no-save"], tmp_path)
    assert given.returncode == 0 and json.loads(given.stdout)["rows"][0]["target_reason"] == "not reached in 4 steps"

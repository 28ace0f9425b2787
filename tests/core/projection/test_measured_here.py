"""A projection set against this machine's own run of the job: the newest completed, uncontended run with the same speed
settings, read from a real history (a real `main.py run` in a child, then copies of it with other conditions and settings);
and a loss target turned into the samples the newest run of the same training needed to reach it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from core.config import RunConfig
from core.history.store import FILE_NAME, RunStore
from core.projection.measured_here import NO_RUN, SamplesToLoss, latest_measured, samples_to_loss
from core.training.to_target import smoothed_losses

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def main_py(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_newest_quiet_run_of_the_same_job_is_what_the_projection_is_set_against(tmp_path: Path) -> None:
    assert latest_measured(RunConfig(model="mlp"), tmp_path / FILE_NAME) is None
    assert not (tmp_path / FILE_NAME).exists()  # a projection never creates a history
    ran = main_py(["run", "--model", "mlp", "--steps", "40", "--no-verdict", "--json"], tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    path = tmp_path / FILE_NAME
    with RunStore.open(path) as store:  # copies dated after the real run, the newest last
        measured = store.load(1, with_steps=False)
        quiet = store.save(replace(measured, conditions={"contended": False}, started_at="2100-01-01T00:00:00+00:00"))
        store.save(
            replace(measured, conditions={"contended": True, "reason": "marked busy by this test"}, started_at="2100-01-01T00:01:00+00:00")
        )
        store.save(replace(measured, config={**measured.config, "batch_size": 128}, started_at="2100-01-01T00:02:00+00:00"))
        rate = store.load(quiet, with_steps=False).samples_per_s
    job = RunConfig(model="mlp")
    found = latest_measured(job, path)
    assert found is not None and found.run_id == quiet and found.samples_per_s == pytest.approx(rate)
    assert latest_measured(job.with_changes(learning_rate=0.1, seed=3, steps=7), path) == found  # they set no speed
    assert latest_measured(job.with_changes(batch_size=32), path) is None
    assert latest_measured(job.with_changes(precision="bfloat16"), path) is None
    assert latest_measured(job.with_changes(backend="jax"), path) is None

    done = main_py(["project", "--model", "mlp", "--device", "H100", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["measured_here"]["run_id"] == quiet
    first, *others = document["rows"]
    assert first["batch"] == 64 and all(row["speedup_vs_measured"] is None for row in others)
    for key in ("low", "mid", "high"):
        assert first["speedup_vs_measured"][key] == pytest.approx(first["samples_per_s"][key] / rate)
    text = main_py(["project", "--model", "mlp", "--device", "H100"], tmp_path).stdout
    assert f"against this machine: run #{quiet} (" in text and f"trained this job at {rate:,.0f} samples/s: at batch 64" in text


def test_a_loss_target_becomes_the_samples_the_newest_run_of_the_same_training_needed_and_a_projected_time(tmp_path: Path) -> None:
    """`project --target-loss L` after `run` on the digits: the samples come from that run's own smoothed losses."""
    digits = RunConfig(model="mlp", dataset="digits")
    assert samples_to_loss(digits, 0.5, tmp_path / FILE_NAME) == NO_RUN
    ran = main_py(["run", "--model", "mlp", "--data", "digits", "--steps", "120", "--no-verdict"], tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    with RunStore.open(tmp_path / FILE_NAME) as store:
        result = store.load(1)
    smoothed = smoothed_losses(result)
    target = float(smoothed[79])  # the loss the run's smoothed loss had come down to at step 80, past its warm-up
    first = int(np.flatnonzero(smoothed <= target)[0]) + 1
    found = samples_to_loss(digits, target, tmp_path / FILE_NAME)
    assert isinstance(found, SamplesToLoss) and (found.run_id, found.samples) == (1, first * 64)
    assert "did not reach loss" in str(samples_to_loss(digits, float(smoothed.min()) / 2, tmp_path / FILE_NAME))
    assert samples_to_loss(digits.with_changes(learning_rate=0.01), target, tmp_path / FILE_NAME) == NO_RUN  # learns otherwise
    assert samples_to_loss(digits.with_changes(backend="jax", steps_per_call=4), target, tmp_path / FILE_NAME) == found  # learns alike

    done = main_py(["project", "--model", "mlp", "--data", "digits", "--device", "L4", "--target-loss", repr(target), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["samples_to_target"] == first * 64 and document["samples_to_target_how"].startswith("run #1 of this training reached")
    row = document["rows"][0]
    assert row["time_to_target_s"]["mid"] == pytest.approx(first * 64 / row["samples_per_s"]["mid"])

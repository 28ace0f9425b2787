"""A sweep's learning rates scale from one base, the batch the job's learning rate is set for, in the window and the CLI.

The window took the form's batch (64) as the base, `sweep` the first of --batch-sizes (32): the same sweep suggested
twice the learning rates from the command line. Real `main.py sweep` processes; the window's plan made as it makes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.tuning.sweep import Sweep
from core.tuning.sweep_plan import plan_sweep

ROOT = Path(__file__).resolve().parents[3]
LR = 0.004


def _sweep(tmp_path: Path, *extra: str) -> dict:
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    args = ["sweep", "--model", "mlp", "--batch-sizes", "32,128", "--lr", str(LR), "--steps", "3", "--rounds", "1", "--json", "--no-save"]
    done = subprocess.run([sys.executable, "main.py", *args, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_cli_and_the_window_scale_the_learning_rate_from_the_jobs_own_batch(tmp_path):
    form = RunConfig(model="mlp", learning_rate=LR)  # the window's form at its default batch
    window = Sweep(plan_sweep(form, {"batch_size": (32, 128)}, has_accelerator=False, cpu_flags=[]), ())
    cli = _sweep(tmp_path)
    assert cli["base_batch_size"] == form.batch_size == window.plan.base.batch_size
    assert cli["lr_note"] == window.lr_note()
    assert [row["suggested_learning_rate"] for row in cli["rows"]] == pytest.approx([LR * 32 / form.batch_size, LR * 128 / form.batch_size])
    chosen = _sweep(tmp_path, "--batch-size", "32")
    assert chosen["base_batch_size"] == 32
    assert [row["suggested_learning_rate"] for row in chosen["rows"]] == pytest.approx([LR, LR * 4])

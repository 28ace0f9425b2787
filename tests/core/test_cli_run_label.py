"""A run from the command line is stored with the label the window gives the same job, not an empty one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import RunConfig
from core.jobs import run_label

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_cli_run_is_stored_with_the_windows_label_for_its_job(tmp_path):
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    cli("run", "--model", "mlp", "--data", "digits", "--batch-size", "16", "--steps", "4", "--xla", "--no-verdict")
    [stored] = json.loads(cli("history", "--json"))
    expected = run_label(RunConfig(model="mlp", dataset="digits", batch_size=16, xla=True))
    assert stored["label"] == expected == "MLP · digits · default · batch 16 · XLA"

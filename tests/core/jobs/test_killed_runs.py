"""A run killed with SIGKILL mid-way reads back as interrupted with its steps, whichever caller started it.

Real processes and a real SQLite history: the CLI's `run`, `compare` and
`sweep`, and the window's training worker (run in a child process without the
window). Each is killed once the history holds its first steps and at least
one append after them, then the history is read as the next start would read it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.history.store import RunStore
from core.results import RunStatus

ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 300

WINDOW_WORKER = """
import threading
from core.config import RunConfig
from core.live.step_buffer import StepBuffer
from gui.controllers.training_worker import TrainingWorker

config = RunConfig(model="mlp", dataset="digits", steps=1_000_000, batch_size=32)
TrainingWorker(config, "window run", StepBuffer(), threading.Event(), diagnose=False).run()
"""

CALLERS = {
    "cli run": (["main.py", "run", "--no-verdict", "--model", "mlp", "--data", "digits", "--steps", "1000000", "--batch-size", "32"], ""),
    "cli compare": (
        ["main.py", "compare", "--model", "mlp", "--data", "digits", "--steps", "1000000", "--batch-size", "32", "--targets", "CPU:0"],
        "MLP · digits · CPU:0 · batch 32 · compare",
    ),
    "cli sweep": (
        ["main.py", "sweep", "--model", "mlp", "--data", "digits", "--steps", "1000000", "--batch-sizes", "32,64"],
        "MLP · digits · default · batch 32 · sweep",
    ),
    "window worker": (["-c", WINDOW_WORKER], "window run"),
}


def stored_step_chunks(path: Path) -> int:
    """How many step appends the history holds (0 while it does not exist yet), read without writing."""
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is still being created
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_run_killed_mid_way_reads_back_as_interrupted_with_its_steps(caller: str, tmp_path: Path) -> None:
    argv, label = CALLERS[caller]
    env = dict(os.environ, DEVICE_LAB_DATA_DIR=str(tmp_path / "data"), DEVICE_LAB_LOG_DIR=str(tmp_path / "logs"))
    env["QT_QPA_PLATFORM"] = "offscreen"
    history = tmp_path / "data" / "history.sqlite3"
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            # the first call's steps, then at least one append after them (a sweep sets up both points and warms each up first)
            while stored_step_chunks(history) < (3 if caller == "cli sweep" else 2):
                assert process.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]
                assert time.monotonic() < deadline, f"{caller}: no second append within {START_TIMEOUT_S} s"
                time.sleep(0.1)
            process.send_signal(signal.SIGKILL)
        finally:
            code = process.wait(60)
    assert code == -signal.SIGKILL
    with RunStore.open(history) as store:
        runs = store.list_runs()  # one run; a sweep's points in rounds were all begun before the first trained
        assert len(runs) == (2 if caller == "cli sweep" else 1) and {r.status for r in runs} == {RunStatus.INTERRUPTED}
        run = max(runs, key=lambda r: r.steps)
        assert run.status == RunStatus.INTERRUPTED and run.steps >= 2, (run.status, run.steps, run.message)
        assert "steps were kept" in run.message
        if label:
            assert label in {r.label for r in runs}
        assert len(store.load(run.id).losses) == run.steps

"""The app in a real process: SIGKILL, SIGTERM, SIGHUP and a second SIGTERM mid-run, read back from the history.

Each test starts `gui.app.run_app` (offscreen, its own data folder) in a
subprocess that presses Start on a long run once the devices are listed and
prints how many steps the window has drawn; the test signals the process and
then opens the history as the next start of the app would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.history.store import RunStore
from core.results import RunStatus

ROOT = Path(__file__).resolve().parents[2]
START_LIMIT_S = 240
pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]

DRIVER = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from gui.app import run_app
from gui.main_window import MainWindow
from tests.gui.helpers import set_one_device

steps_per_call = sys.argv[1]
state = {"started": False}

def tick():
    windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    if windows and not state["started"] and windows[0].run_panel.start_button.isEnabled():
        window = windows[0]
        set_one_device(window, "CPU:0", steps=1_000_000)
        window.run_panel.spc_edit.setText(steps_per_call)
        window.run_panel.request_start()
        state["started"] = True
    elif windows and state["started"]:
        window = windows[0]
        print(f"STEPS {window.plots.series(window.run_controller.current_key).size}", flush=True)
    QTimer.singleShot(200, tick)

app = QApplication([sys.argv[0]])
QTimer.singleShot(100, tick)
sys.exit(run_app([sys.argv[0]]))
"""


class AppProcess:
    """The driver in a subprocess; its output lines are collected with the time each arrived."""

    def __init__(self, tmp_path: Path, steps_per_call: int = 1):
        env = {
            **os.environ,
            "QT_QPA_PLATFORM": "offscreen",
            "DEVICE_LAB_DATA_DIR": str(tmp_path / "data"),
            "DEVICE_LAB_SETTINGS_DIR": str(tmp_path / "settings"),
            "DEVICE_LAB_LOG_DIR": str(tmp_path / "logs"),
        }
        self.history = tmp_path / "data" / "history.sqlite3"
        self.process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(steps_per_call)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stdout: list[tuple[float, str]] = []
        self.stderr: list[tuple[float, str]] = []
        self._readers = [self._read(self.process.stdout, self.stdout), self._read(self.process.stderr, self.stderr)]

    @staticmethod
    def _read(stream, lines: list[tuple[float, str]]) -> threading.Thread:
        def read() -> None:
            for line in stream:
                lines.append((time.monotonic(), line.rstrip("\n")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        return reader

    def steps_seen(self, before: float = float("inf")) -> int:
        """The most steps the window had drawn in a line that arrived before `before` (monotonic)."""
        return max((int(line.split()[1]) for at, line in list(self.stdout) if at < before and line.startswith("STEPS ")), default=0)

    def wait_for(self, condition, limit_s: float, what: str) -> None:
        deadline = time.monotonic() + limit_s
        while not condition():
            assert self.process.poll() is None, f"the app exited ({self.process.returncode}) before {what}:\n{self.errors()}"
            assert time.monotonic() < deadline, f"no {what} within {limit_s} s:\n{self.errors()}"
            time.sleep(0.05)

    def wait_for_steps(self, count: int) -> float:
        """Wait until the window has drawn `count` steps; returns when it did (monotonic)."""
        self.wait_for(lambda: self.steps_seen() >= count, START_LIMIT_S, f"{count} steps drawn")
        return time.monotonic()

    def exit_code(self, limit_s: float) -> int:
        code = self.process.wait(limit_s)
        for reader in self._readers:
            reader.join(5)
        return code

    def errors(self) -> str:
        return "\n".join(line for _, line in self.stderr[-40:])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def app_process(tmp_path):
    started: list[AppProcess] = []

    def start(steps_per_call: int = 1) -> AppProcess:
        started.append(AppProcess(tmp_path, steps_per_call))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def only_run(history: Path):
    """The one run in the history, opened as the app's next start opens it (and proof nothing was half-written)."""
    with RunStore.open(history) as store:
        assert store.recovered_from is None, store.notice
        runs = store.list_runs()
        assert len(runs) == 1, runs
        stored = store.load(runs[0].id)
    assert len(stored.losses) == len(stored.step_times_s) == runs[0].steps
    return runs[0], stored


def test_a_run_killed_with_sigkill_reads_back_as_interrupted_with_its_steps(app_process):
    app = app_process()
    first = app.wait_for_steps(1)
    app.wait_for(lambda: time.monotonic() - first >= 4, 30, "four seconds of steps")
    killed_at = time.monotonic()
    app.process.send_signal(signal.SIGKILL)
    assert app.exit_code(30) == -signal.SIGKILL
    run, stored = only_run(app.history)
    assert run.status == RunStatus.INTERRUPTED and run.steps > 0
    assert run.steps >= app.steps_seen(before=killed_at - 3), "steps drawn 3 s before the kill were lost"
    assert stored.config["devices"] == ["CPU:0"] and stored.config["steps"] == 1_000_000


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_closes_the_window_and_saves_the_stopped_run(app_process, signum):
    app = app_process()
    app.wait_for_steps(20)
    app.process.send_signal(signum)
    assert app.exit_code(90) == 128 + signum, app.errors()
    assert any(f"{signum.name} received" in line for _, line in app.stderr)
    run, stored = only_run(app.history)
    assert run.status == RunStatus.STOPPED, run.message
    assert run.steps >= 20 and stored.steps_done == run.steps
    assert "QThread: Destroyed" not in app.errors()


@pytest.mark.heavy  # the CLI's second-signal test stays in the default run
def test_a_second_sigterm_while_closing_ends_at_once_and_leaves_the_run_interrupted(app_process):
    calls = 5000  # steps per call: one call takes seconds, so the first SIGTERM leaves the run in its call for a while
    app = app_process(steps_per_call=calls)
    app.wait_for_steps(calls)
    app.process.send_signal(signal.SIGTERM)
    app.wait_for(lambda: any("SIGTERM received" in line for _, line in app.stderr), 30, "the first SIGTERM handled")
    app.process.send_signal(signal.SIGTERM)
    assert app.exit_code(5) == 128 + signal.SIGTERM, "the second SIGTERM must end the app within 5 s"
    assert any("SIGTERM again: quitting now" in line for _, line in app.stderr)
    run, _ = only_run(app.history)
    assert run.status == RunStatus.INTERRUPTED and run.steps >= calls

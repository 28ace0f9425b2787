"""Start and Stop do not move or change size when a run starts and ends: the app from its entry point (`gui.app.run_app`).

A child process runs the app offscreen and, at its default size and then at
1024×700, reads both buttons' geometry in window coordinates before a run,
while it trains and after Stop has ended it; the test compares the three.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from PySide6.QtCore import QPoint, QTimer
from PySide6.QtWidgets import QApplication, QProgressBar, QPushButton
from gui.app import run_app
from gui.main_window import MainWindow

SIZES = [None, (1024, 700)]  # None: the size the window opens at
STEPS = 1_000_000  # the form's steps (settings.ini): a run that trains until Stop
seen = {}
state = {"size": 0, "phase": "before"}


def window():
    found = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    return found[0] if found else None


def geometry(win):
    boxes = {}
    for name in ("startButton", "stopButton"):
        button = win.findChild(QPushButton, name)
        corner = button.mapTo(win, QPoint(0, 0))
        boxes[name] = [corner.x(), corner.y(), button.width(), button.height(), button.isVisible()]
    return boxes


def running(win):
    return win.run_controller.is_running() if win._charts is not None else False


def step():
    win = window()
    if win is None or not win.run_panel.start_button.isEnabled() and state["phase"] == "before":
        QTimer.singleShot(100, step)
        return
    size = SIZES[state["size"]]
    key = "default" if size is None else f"{size[0]}x{size[1]}"
    phase = state["phase"]
    if phase == "before":
        if size is not None and (win.width(), win.height()) != size:
            state["resizes"] = state.get("resizes", 0) + 1
            if state["resizes"] > 10:  # the layout's minimum holds it wider or taller: say so rather than wait
                hint = win.minimumSizeHint()
                print(f"RESIZE refused: {win.width()}x{win.height()}, minimum {hint.width()}x{hint.height()}", flush=True)
                win.close()
                return
            win.resize(*size)
            QTimer.singleShot(300, step)  # laid out again at the new size
            return
        seen.setdefault(key, {})["size"] = [win.width(), win.height()]
        seen[key]["before"] = geometry(win)
        win.findChild(QPushButton, "startButton").click()
        state["phase"] = "starting"
    elif phase == "starting":
        if running(win) and win.findChild(QProgressBar, "progressBar").maximum() == STEPS:  # steps have come in
            seen[key]["while"] = geometry(win)
            win.findChild(QPushButton, "stopButton").click()
            state["phase"] = "stopping"
    elif phase == "stopping":
        if not running(win) and win.run_panel.start_button.isEnabled():
            seen[key]["after"] = geometry(win)
            state["size"] += 1
            state["phase"] = "before"
            if state["size"] == len(SIZES):
                print("GEOMETRY " + json.dumps(seen), flush=True)
                win.close()
                return
    QTimer.singleShot(50, step)


app = QApplication([sys.argv[0]])
QTimer.singleShot(100, step)
sys.exit(run_app([sys.argv[0]]))
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_start_and_stop_keep_their_place_and_size_before_during_and_after_a_run(tmp_path):
    settings = tmp_path / "settings"
    settings.mkdir()
    # A run long enough to be seen while it trains: the form's steps, remembered from "last session".
    (settings / "settings.ini").write_text("[runForm]\nstepsEdit=1000000\nmodelCombo=mlp\n")
    env = {**os.environ, "DEVICE_LAB_SETTINGS_DIR": str(settings), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESIZE refused" not in done.stdout, done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith("GEOMETRY ")]
    seen = json.loads(line.removeprefix("GEOMETRY "))
    assert seen["1024x700"]["size"] == [1024, 700]
    for size, phases in seen.items():
        for name in ("startButton", "stopButton"):
            before, during, after = (phases[phase][name] for phase in ("before", "while", "after"))
            assert before[4], f"{name} is shown at {size}"
            assert before == during == after, f"{name} at {size}: before {before}, while running {during}, after {after}"

"""Regression guard: PySide6 6.12.0 on CPython 3.11 corrupts refcounts when a QThread emits signals.

The crash ("Fatal Python error: bool_dealloc") kills the interpreter, so the
emitting runs in a child process: a crash fails this test instead of pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EMITS = 40_000

STRESS_SCRIPT = r"""
import sys
from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer, Signal, Slot

EMITS = int(sys.argv[1])
PAYLOADS = (True, False, None, 7, 0, -1, 2**40)


class Emitter(QObject):
    flag = Signal(bool)
    anything = Signal(object)
    number = Signal(int)
    finished = Signal()

    @Slot()
    def run(self):
        for i in range(EMITS):
            payload = PAYLOADS[i % len(PAYLOADS)]
            self.flag.emit(bool(i % 2))
            self.anything.emit(payload)
            self.number.emit(i)
        self.finished.emit()


class Receiver(QObject):
    def __init__(self):
        super().__init__()
        self.flags = self.objects = self.numbers = 0
        self.total = 0

    @Slot(bool)
    def on_flag(self, value):
        self.flags += 1

    @Slot(object)
    def on_object(self, value):
        self.objects += 1

    @Slot(int)
    def on_number(self, value):
        self.numbers += 1
        self.total += value


app = QCoreApplication([])
thread = QThread()
emitter = Emitter()
receiver = Receiver()
emitter.moveToThread(thread)
thread.started.connect(emitter.run)
emitter.flag.connect(receiver.on_flag)
emitter.anything.connect(receiver.on_object)
emitter.number.connect(receiver.on_number)
emitter.finished.connect(thread.quit)
thread.finished.connect(app.quit)
QTimer.singleShot(120_000, app.quit)
thread.start()
app.exec()
while thread.isRunning():
    thread.wait(10)
app.processEvents()
print(f"RESULT {receiver.flags} {receiver.objects} {receiver.numbers} {receiver.total}")
"""


@pytest.mark.timeout(180)
def test_tens_of_thousands_of_cross_thread_emits_arrive_and_the_process_survives():
    out = subprocess.run(
        [sys.executable, "-c", STRESS_SCRIPT, str(EMITS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
        env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, f"the emitting process died ({out.returncode}): {out.stderr[-2000:]}"
    assert "Fatal Python error" not in out.stderr
    result = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    flags, objects, numbers, total = map(int, result.split()[1:])
    assert (flags, objects, numbers) == (EMITS, EMITS, EMITS)
    assert total == EMITS * (EMITS - 1) // 2

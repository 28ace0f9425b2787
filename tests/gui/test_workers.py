"""Worker threads: results and errors come back to the GUI thread, threads end, history failures are explained."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Slot

from core.live.step_buffer import StepBuffer
from gui.qt_threads import FunctionWorker, running_threads, start_worker, wait_for_threads


class Receiver(QObject):
    """Records what a worker reports, and in which thread it arrived."""

    def __init__(self):
        super().__init__()
        self.values, self.errors, self.threads = [], [], []

    @Slot(object)
    def on_done(self, value):
        self.values.append(value)
        self.threads.append(threading.current_thread() is threading.main_thread())

    @Slot(str)
    def on_failed(self, message):
        self.errors.append(message)


def test_function_worker_returns_its_result_in_the_gui_thread(qtbot):
    receiver = Receiver()
    worker = FunctionWorker(sum, [1, 2, 3])
    worker.done.connect(receiver.on_done)
    with qtbot.waitSignal(worker.finished, timeout=10_000):
        start_worker(worker, "sum")
    qtbot.waitUntil(lambda: receiver.values == [6], timeout=5000)
    assert receiver.threads == [True]
    qtbot.waitUntil(lambda: not running_threads(), timeout=5000)


def test_function_worker_reports_an_exception_and_still_finishes(qtbot):
    def boom():
        raise RuntimeError("disk on fire")

    receiver = Receiver()
    worker = FunctionWorker(boom)
    worker.failed.connect(receiver.on_failed)
    worker.done.connect(receiver.on_done)
    with qtbot.waitSignal(worker.finished, timeout=10_000):
        start_worker(worker, "boom")
    qtbot.waitUntil(lambda: receiver.errors == ["RuntimeError: disk on fire"], timeout=5000)
    assert receiver.values == []
    assert wait_for_threads(10)


def test_step_buffer_hands_over_steps_as_arrays():
    from core.results import StepRecord

    buffer = StepBuffer()
    buffer.append([StepRecord(1, 2.5, 1.0, True), StepRecord(2, 2.0, 0.01)])
    buffer.append([StepRecord(3, 1.5, 0.02)])
    steps = buffer.drain()
    assert steps.steps.tolist() == [1, 2, 3] and steps.losses.tolist() == [2.5, 2.0, 1.5]
    assert steps.warmup.tolist() == [True, False, False]
    assert len(buffer.drain()) == 0

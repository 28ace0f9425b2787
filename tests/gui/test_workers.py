"""Worker threads: results and errors come back to the GUI thread, finished always fires, threads end on stop."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal, Slot

from core.config import ConfigError
from core.live.step_buffer import StepBuffer
from gui.qt_threads import Worker, run_in_background, running_threads, start_worker, stop_and_wait, wait_for_threads


class Receiver(QObject):
    """Records what a worker reports, in order, and whether each arrived in the GUI thread."""

    def __init__(self):
        super().__init__()
        self.values, self.errors, self.events, self.in_gui_thread = [], [], [], []

    def _arrived(self, event: str) -> None:
        self.events.append(event)
        self.in_gui_thread.append(threading.current_thread() is threading.main_thread())

    @Slot()
    def on_started(self):
        self._arrived("started")

    @Slot(object)
    def on_result(self, value):
        self.values.append(value)
        self._arrived("returned")

    @Slot(str)
    def on_error(self, message):
        self.errors.append(message)
        self._arrived("errored")

    @Slot()
    def on_finished(self):
        self._arrived("finished")


def _run(receiver: Receiver, function, *args, name: str):
    return run_in_background(
        function, *args, on_result=receiver.on_result, on_error=receiver.on_error, on_finished=receiver.on_finished, name=name
    )


def test_a_function_returns_its_result_in_the_gui_thread_then_finishes(qtbot):
    receiver = Receiver()
    _run(receiver, sum, [1, 2, 3], name="sum")
    qtbot.waitUntil(lambda: "finished" in receiver.events, timeout=10_000)
    assert receiver.values == [6] and receiver.events == ["returned", "finished"]
    assert all(receiver.in_gui_thread)
    qtbot.waitUntil(lambda: not running_threads(), timeout=5000)


def test_an_exception_becomes_errored_with_its_reason_and_still_finishes(qtbot):
    def boom():
        raise RuntimeError("disk on fire\nsecond line of detail")

    def bad_input():
        raise ConfigError("batch_size", 0, "1 or more")

    receiver = Receiver()
    _run(receiver, boom, name="boom")
    _run(receiver, bad_input, name="bad-input")
    qtbot.waitUntil(lambda: receiver.events.count("finished") == 2, timeout=10_000)
    assert sorted(receiver.errors) == ["RuntimeError: disk on fire", "batch_size: got 0; allowed: 1 or more"]
    assert receiver.values == [] and all(receiver.in_gui_thread)
    assert wait_for_threads(10)


def test_every_callback_is_called_in_the_gui_thread_lambdas_and_mixed_slots_too(qtbot):
    """A sender moved to the worker thread had PySide6 call these there (measured: benchmarks/worker_threads.py)."""

    class MixedReceiver(QObject):
        """A `@Slot(object)` method beside an undecorated one, the class made here: where PySide6 showed the fault."""

        def __init__(self):
            super().__init__()
            self.in_gui_thread = []

        @Slot(object)
        def on_result(self, value):
            self.in_gui_thread.append(threading.current_thread() is threading.main_thread())

        def on_error(self, message):
            self.in_gui_thread.append(threading.current_thread() is threading.main_thread())

    mixed = MixedReceiver()
    lambdas = []
    for index in range(30):
        run_in_background(
            int,
            index,
            on_result=mixed.on_result,
            on_error=mixed.on_error,
            on_finished=lambda: lambdas.append(threading.current_thread() is threading.main_thread()),
            name="mixed",
        )
    qtbot.waitUntil(lambda: len(mixed.in_gui_thread) == len(lambdas) == 30, timeout=60_000)
    assert all(mixed.in_gui_thread) and all(lambdas)
    qtbot.waitUntil(lambda: not running_threads(), timeout=10_000)


def test_stop_while_running_ends_the_thread_and_the_result_still_arrives(qtbot):
    stop = threading.Event()
    began = threading.Event()

    def wait_for_stop(stop_event: threading.Event) -> str:
        began.set()
        stop_event.wait(120)
        return "stopped" if stop_event.is_set() else "timed out"

    receiver = Receiver()
    thread = _run(receiver, wait_for_stop, stop, name="stoppable")
    assert began.wait(30)
    assert running_threads() == [thread]
    assert stop_and_wait(stop, thread, 30), "the thread ends once its task sees the stop"
    assert not running_threads()
    qtbot.waitUntil(lambda: "finished" in receiver.events, timeout=10_000)
    assert receiver.values == ["stopped"]


def test_closing_waits_for_every_task_in_flight_and_none_is_left_running(qtbot):
    release = threading.Event()
    receiver = Receiver()
    for index in range(8):
        _run(receiver, release.wait, 120, name=f"in-flight-{index}")
    qtbot.waitUntil(lambda: len(running_threads()) == 8, timeout=30_000)
    release.set()
    assert wait_for_threads(60), "the window's close waits without running the event loop"
    qtbot.waitUntil(lambda: receiver.events.count("finished") == 8, timeout=10_000)
    assert receiver.values == [True] * 8


def test_many_short_tasks_each_deliver_once_while_the_gui_thread_connects(qtbot):
    """Each worker is destroyed in the GUI thread while others start and connect: no deadlock, nothing lost."""
    receiver = Receiver()
    for index in range(200):
        _run(receiver, int, index, name="short")
    qtbot.waitUntil(lambda: receiver.events.count("finished") == 200, timeout=120_000)
    assert sorted(receiver.values) == list(range(200)) and all(receiver.in_gui_thread)
    qtbot.waitUntil(lambda: not running_threads(), timeout=30_000)


class CountingJob(Worker):
    """A job with its own progress signal on top of the worker's: counts up to `count`, then returns the count."""

    counted = Signal(int)

    def __init__(self, count: int):
        super().__init__()
        self.count = count

    def work(self) -> int:
        for number in range(1, self.count + 1):
            self.counted.emit(number)
        return self.count


class JobReceiver(Receiver):
    def __init__(self):
        super().__init__()
        self.counted = []

    @Slot(int)
    def on_counted(self, number):
        self.counted.append(number)
        self._arrived("counted")


def test_a_job_worker_says_started_its_progress_its_result_then_finished(qtbot):
    receiver = JobReceiver()
    job = CountingJob(3)
    job.started.connect(receiver.on_started)
    job.counted.connect(receiver.on_counted)
    job.returned.connect(receiver.on_result)
    job.finished.connect(receiver.on_finished)
    start_worker(job, "counting-job")
    qtbot.waitUntil(lambda: "finished" in receiver.events, timeout=10_000)
    assert receiver.events == ["started", "counted", "counted", "counted", "returned", "finished"]
    assert receiver.counted == [1, 2, 3] and receiver.values == [3] and all(receiver.in_gui_thread)
    qtbot.waitUntil(lambda: not running_threads(), timeout=5000)


def test_step_buffer_hands_over_steps_as_arrays():
    from core.results import StepRecord

    buffer = StepBuffer()
    buffer.append([StepRecord(1, 2.5, 1.0, True), StepRecord(2, 2.0, 0.01)])
    buffer.append([StepRecord(3, 1.5, 0.02)])
    steps = buffer.drain()
    assert steps.steps.tolist() == [1, 2, 3] and steps.losses.tolist() == [2.5, 2.0, 1.5]
    assert steps.warmup.tolist() == [True, False, False]
    assert len(buffer.drain()) == 0

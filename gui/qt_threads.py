"""QThread wiring: run a worker object in its own thread, the way that does not crash.

The pattern every worker thread in the GUI follows (`gui.controllers.base.JobController`
applies it to runs and comparisons):

- The worker is a parentless QObject moved to a new QThread; `thread.started ->
  worker.run`, `worker.finished -> thread.quit`; the thread is deleted later.
- Stop is a `threading.Event` the worker checks, never a Qt call into its thread.
- Every exception in `run()` becomes a failed result (a `failed` signal or a
  FAILED run), never lost in the thread, and `finished` always fires (`finally`).
- A keeper object living in the GUI thread holds the Python references until
  `thread.finished` has been delivered there, so no wrapper is garbage-collected
  while its thread still runs; then the worker is destroyed in the GUI thread
  (see `_ThreadKeeper.release` for why not with deleteLater).
- Waits poll `isRunning()` instead of `QThread.wait()`, which keeps the GIL in
  PySide6 (see `wait_for_thread`). `running_threads()` lets tests fail when one
  is left running.

Connect a worker's signals to methods of QObjects that live in the GUI thread
(queued across threads), never to lambdas or plain functions: PySide6 calls
those in the emitting thread, where touching a widget crashes.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QThread, Signal, Slot

_keepers: set[_ThreadKeeper] = set()
_POLL_S = 0.005


class _ThreadKeeper(QObject):
    """Holds a thread and its worker until the thread has finished (lives in the GUI thread)."""

    def __init__(self, thread: QThread, worker: QObject):
        super().__init__()
        self.worker_thread = thread
        self.worker: QObject | None = worker

    @Slot()
    def release(self) -> None:
        """Drop the references: the worker is destroyed here, in the GUI thread, once its thread is done.

        Not `worker.deleteLater()`: that runs the destructor in the worker thread, where
        PySide6 holds Qt's signal-slot mutex while it waits for the GIL, and a GUI thread
        calling `connect()` at that moment holds the GIL while it waits for the mutex:
        a deadlock (seen in the test suite, in QObject::~QObject vs QObject::connect).
        """
        wait_for_thread(self.worker_thread, None)
        self.worker = None
        _keepers.discard(self)


def start_worker(worker: Any, name: str = "") -> QThread:
    """Run `worker.run()` in a new QThread; the worker (a QObject) must emit `finished` when done.

    Call from the GUI thread. The worker must have no parent.
    """
    thread = QThread()
    if name:
        thread.setObjectName(name)
    worker.moveToThread(thread)
    keeper = _ThreadKeeper(thread, worker)
    thread.started.connect(worker.run)
    worker.finished.connect(thread.quit)
    thread.finished.connect(keeper.release)
    thread.finished.connect(thread.deleteLater)
    _keepers.add(keeper)
    thread.start()
    return thread


def running_threads() -> list[QThread]:
    """Threads started by `start_worker` that are still running."""
    return [k.worker_thread for k in list(_keepers) if shiboken6.isValid(k.worker_thread) and k.worker_thread.isRunning()]


def wait_for_thread(thread: QThread, timeout_s: float | None) -> bool:
    """Block until `thread` has ended (or `timeout_s` passed); True when it has.

    Polls instead of calling `QThread.wait()`: PySide6 keeps the GIL during
    `wait()`, so a worker that still has Python to run (its last emit, its
    deletion) could never finish, and the wait would always time out.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while shiboken6.isValid(thread) and thread.isRunning():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def stop_and_wait(stop_event: threading.Event | None, thread: QThread | None, timeout_s: float) -> bool:
    """Ask a run to stop and wait for its thread to end (closing the window); True when it has."""
    if stop_event is not None:
        stop_event.set()
    if thread is None or not shiboken6.isValid(thread):
        return True
    thread.quit()
    return wait_for_thread(thread, timeout_s)


def wait_for_threads(timeout_s: float) -> bool:
    """Block until every worker thread has ended or `timeout_s` passed; True when none runs.

    Each thread is told to quit first: `worker.finished -> thread.quit` is a queued
    call into the GUI thread, which does not run while it waits here. Quitting
    early is safe: the worker's `run()` still completes, then the thread ends.
    """
    deadline = time.monotonic() + timeout_s
    for thread in running_threads():
        thread.quit()
        wait_for_thread(thread, max(0.0, deadline - time.monotonic()))
    return not running_threads()


class FunctionWorker(QObject):
    """Calls `function(*args)` in a worker thread; emits `done(result)` or `failed(message)`, then `finished`."""

    done = Signal(object)
    failed = Signal(str)
    finished = Signal()

    def __init__(self, function: Callable[..., Any], *args: Any):
        super().__init__()
        self._function = function
        self._args = args

    @Slot()
    def run(self) -> None:
        try:
            result = self._function(*self._args)
        except Exception as exc:  # reported to the GUI, never lost in the thread
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
        else:
            self.done.emit(result)
        finally:
            self.finished.emit()

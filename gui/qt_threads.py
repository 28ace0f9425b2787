"""Background work in the GUI: one worker class, run in its own QThread the way that does not crash.

Every task the window runs off the GUI thread goes through here:

- `run_in_background(function, *args, on_result=..., on_error=..., on_finished=..., name=...)`
  calls a function in a new thread and calls back in the GUI thread; no view wires a
  thread itself.
- A job (a run, a comparison, a sweep, a search: `gui.controllers`) is a `Worker`
  subclass whose `work()` does the job and returns its result, with its own progress
  signals; `JobController._launch` starts it with `start_worker`.

`Worker` has one signal set (`started`, `returned(result)`, `errored(reason)`,
`finished`) and one body (`Worker.run`): an exception in `work()` becomes `errored`
with a readable reason (`core.training.failures.explain_failure`; the traceback goes
to the log unless it is an ExplainedError, worded for the user), never lost in the thread, and
`finished` always fires (`finally`). Stop is a `threading.Event` the task checks,
never a Qt call into its thread.

The threading rules it follows:

- The worker stays in the GUI thread; a small parentless `_InThread` object is
  moved to a new QThread and runs `worker.run()` there (`thread.started`). Signals
  emitted from the thread by a GUI-thread sender reach every connection in the
  GUI thread, lambdas included; a sender moved to the thread had PySide6 call
  lambdas, and even some `@Slot` methods of GUI objects, in the thread, where
  touching a widget crashes (measured: benchmarks/worker_threads.py).
- `worker.finished -> thread.quit` (queued to the GUI thread); the thread is
  deleted later.
- A keeper object living in the GUI thread holds the Python references until
  `thread.finished` has been delivered there, so no wrapper is garbage-collected
  while its thread still runs; then the objects are destroyed in the GUI thread
  (see `_ThreadKeeper.release` for why not with deleteLater).
- Waits poll `isRunning()` instead of `QThread.wait()`, which keeps the GIL in
  PySide6 (see `wait_for_thread`). `running_threads()` lets tests fail when one
  is left running, by its name.

Why not superqt's `create_worker` (QRunnables on the global QThreadPool), measured
against this one (benchmarks/worker_threads.py, benchmarks/RESULTS.md 2026-11-28):
its pool has one thread per core, so a short task waited 9.8 s behind two long
ones on 2 cores (here: 1 ms), and the window has long ones (a run, a ceilings
measurement, a TPU probe); closing asks every task to quit and drops the results
of those in flight (a TensorBoard started meanwhile would be left running); its
errors are exception objects, re-raised in the GUI thread when nothing handles
them; one worker in 2,000 was destroyed in a pool thread in two runs of four. It
starts short tasks faster (2,000 in 0.2-0.6 s, here 0.4-0.9 s): no concern for
the window's few tasks a second.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QThread, Signal, Slot

from core.errors import ExplainedError

_keepers: set[_ThreadKeeper] = set()
_POLL_S = 0.005


class Worker(QObject):
    """One background task: `work()` runs in its own thread, its outcome comes back as signals.

    `started` as it begins; then `returned(result)`, or `errored(reason)` when it
    raised; `finished` always, last. By default `work()` calls the function given;
    a job overrides `work()` and adds its own progress signals. The worker itself
    stays in the GUI thread (only `_InThread` moves), so whatever its signals are
    connected to is called there.
    """

    started = Signal()
    returned = Signal(object)
    errored = Signal(str)
    finished = Signal()

    def __init__(self, function: Callable[..., Any] | None = None, *args: Any):
        super().__init__()
        self._function = function
        self._args = args

    def run(self) -> None:
        """The one body every task runs, in its thread: `work()`, its outcome as signals, `finished` last."""
        self.started.emit()
        try:
            result = self.work()
        except Exception as exc:  # reported to the GUI, never lost in the thread
            self.errored.emit(readable_reason(exc))
            if not isinstance(exc, ExplainedError):  # a failure worded for the user is said as it is; anything else goes to the log too
                traceback.print_exc()
        else:
            self.returned.emit(result)
        finally:
            self.finished.emit()

    def work(self) -> Any:
        """The task itself, in the worker's thread: calls the function given."""
        if self._function is None:
            raise NotImplementedError(f"{type(self).__name__} has no function and does not override work()")
        return self._function(*self._args)


def readable_reason(exc: BaseException) -> str:
    """Why a task failed, in words (the engine's advice when it has some)."""
    try:
        from core.training.failures import explain_failure

        return explain_failure(exc)
    except Exception:
        return f"{type(exc).__name__}: {exc}"


def run_in_background(
    function: Callable[..., Any],
    *args: Any,
    on_result: Callable[[Any], Any] | None = None,
    on_error: Callable[[str], Any] | None = None,
    on_finished: Callable[[], Any] | None = None,
    name: str = "",
) -> QThread:
    """Call `function(*args)` in a new thread named `name`; its result goes to `on_result`, its failure's reason to `on_error`.

    `on_finished` follows either. Every callback is called in the GUI thread. Call
    from the GUI thread; returns the thread (for `stop_and_wait`).
    """
    worker = Worker(function, *args)
    for signal, callback in ((worker.returned, on_result), (worker.errored, on_error), (worker.finished, on_finished)):
        if callback is not None:
            signal.connect(callback)
    return start_worker(worker, name)


def start_worker(worker: Worker, name: str = "") -> QThread:
    """Run `worker.run()` in a new QThread named `name`; connect its signals first.

    Call from the GUI thread. The worker must have no parent.
    """
    thread = QThread()
    if name:
        thread.setObjectName(name)
    in_thread = _InThread(worker)
    in_thread.moveToThread(thread)
    keeper = _ThreadKeeper(thread, worker, in_thread)
    thread.started.connect(in_thread.run)
    worker.finished.connect(thread.quit)
    thread.finished.connect(keeper.release)
    thread.finished.connect(thread.deleteLater)
    _keepers.add(keeper)
    thread.start()
    return thread


class _InThread(QObject):
    """The one object that moves to a worker's thread: `thread.started` calls its `run` there, which runs the worker.

    The worker stays in the GUI thread: PySide6 (6.11.3) calls a lambda connected
    to a sender that lives in a worker thread there, and in the benchmark even a
    GUI object's `@Slot` method beside an undecorated one (benchmarks/worker_threads.py);
    a sender in the GUI thread has every connection called in the GUI thread.
    """

    def __init__(self, worker: Worker):
        super().__init__()
        self._worker = worker

    @Slot()
    def run(self) -> None:
        self._worker.run()


class _ThreadKeeper(QObject):
    """Holds a thread, its worker and its `_InThread` until the thread has finished (lives in the GUI thread)."""

    def __init__(self, thread: QThread, worker: Worker, in_thread: _InThread):
        super().__init__()
        self.worker_thread = thread
        self.worker: Worker | None = worker
        self.in_thread: _InThread | None = in_thread

    @Slot()
    def release(self) -> None:
        """Drop the references: the worker and its `_InThread` are destroyed here, in the GUI thread, once the thread is done.

        Not `deleteLater()` on the one in the thread: that runs the destructor in the
        worker thread, where PySide6 holds Qt's signal-slot mutex while it waits for the
        GIL, and a GUI thread calling `connect()` at that moment holds the GIL while it
        waits for the mutex: a deadlock (seen in the test suite, in QObject::~QObject vs
        QObject::connect).
        """
        wait_for_thread(self.worker_thread, None)
        self.worker = self.in_thread = None
        _keepers.discard(self)


def running_threads() -> list[QThread]:
    """Worker threads (`start_worker`, `run_in_background`) that are still running."""
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

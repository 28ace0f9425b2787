"""QThread wiring: run a worker object in its own thread, the way that does not crash.

The pattern (DESIGN.md, "Training thread"): the worker is a parentless QObject
moved to a new QThread; `thread.started -> worker.run`, `worker.finished ->
thread.quit`; the thread is deleted later. A keeper object living in the GUI
thread holds the Python references until `thread.finished` has been delivered
there, so no wrapper is garbage-collected while its thread still runs; then the
worker is destroyed in the GUI thread (see `_ThreadKeeper.release` for why not
with deleteLater). `running_threads()`
lets tests fail when one is left running.

Connect a worker's signals to methods of QObjects that live in the GUI thread
(queued across threads), never to lambdas or plain functions: PySide6 calls
those in the emitting thread, where touching a widget crashes.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shiboken6
from PySide6.QtCore import QObject, QThread, Signal, Slot

from core.callbacks import RunCallback, RunContext
from core.config import RunConfig
from core.results import FAILED, RunResult, StepRecord

_keepers: set[_ThreadKeeper] = set()
_POLL_S = 0.005


class _ThreadKeeper(QObject):
    """Holds a thread and its worker until the thread has finished (lives in the GUI thread)."""

    def __init__(self, thread: QThread, worker: QObject):
        super().__init__()
        self.thread = thread
        self.worker = worker

    @Slot()
    def release(self) -> None:
        """Drop the references: the worker is destroyed here, in the GUI thread, once its thread is done.

        Not `worker.deleteLater()`: that runs the destructor in the worker thread, where
        PySide6 holds Qt's signal-slot mutex while it waits for the GIL, and a GUI thread
        calling `connect()` at that moment holds the GIL while it waits for the mutex:
        a deadlock (seen in the test suite, in QObject::~QObject vs QObject::connect).
        """
        wait_for_thread(self.thread, None)
        self.worker = None
        _keepers.discard(self)


def start_worker(worker: QObject, name: str = "") -> QThread:
    """Run `worker.run()` in a new QThread; the worker must emit `finished` when done.

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
    return [k.thread for k in list(_keepers) if shiboken6.isValid(k.thread) and k.thread.isRunning()]


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


class StepBuffer:
    """Step records handed from the training thread to the GUI thread, under a lock.

    The training thread appends after every call of the compiled step function
    (cheap: no Qt signal); the GUI drains it from a timer (10 Hz for runs, 20 Hz for comparisons).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[StepRecord] = []
        self.total_steps = 0
        self.replicas = 1

    def set_plan(self, total_steps: int, replicas: int) -> None:
        with self._lock:
            self.total_steps = total_steps
            self.replicas = replicas

    def append(self, records: Sequence[StepRecord]) -> None:
        with self._lock:
            self._pending.extend(records)

    def drain(self) -> StepArrays:
        """Everything appended since the last drain, as numpy arrays."""
        with self._lock:
            records, self._pending = self._pending, []
        return StepArrays.from_records(records)


@dataclass(frozen=True)
class StepArrays:
    """A batch of steps as parallel numpy arrays (step numbers are 1-based)."""

    steps: np.ndarray
    losses: np.ndarray
    times_s: np.ndarray
    warmup: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def from_records(cls, records: Sequence[StepRecord]) -> StepArrays:
        n = len(records)
        return cls(
            np.fromiter((r.step for r in records), np.float64, n),
            np.fromiter((r.loss for r in records), np.float64, n),
            np.fromiter((r.step_time_s for r in records), np.float64, n),
            np.fromiter((r.warmup for r in records), np.bool_, n),
        )


class _PlanCallback(RunCallback):
    """Tells the buffer how many steps the run will take once the engine knows."""

    def __init__(self, buffer: StepBuffer):
        self._buffer = buffer

    def on_run_start(self, context: RunContext) -> None:
        self._buffer.set_plan(context.total_steps, context.replicas)


@dataclass(frozen=True)
class FinishedRun:
    """What the training thread hands back: the result and where the history stored it."""

    result: RunResult
    run_id: int | None
    history_error: str = ""


class TrainingWorker(QObject):
    """Runs one `run_training` call in a worker thread.

    Stop by setting `stop_event` from any thread: the engine checks it after every
    call of the compiled step function. Steps go to `buffer`; the result, saved to
    the history, comes back through `result_ready`.
    """

    result_ready = Signal(object)
    failed = Signal(str)
    finished = Signal()

    def __init__(
        self,
        config: RunConfig,
        label: str,
        buffer: StepBuffer,
        stop_event: threading.Event,
        callbacks: Sequence[RunCallback] = (),
    ):
        super().__init__()
        self.callbacks = list(callbacks)
        self.config = config
        self.label = label
        self.buffer = buffer
        self.stop_event = stop_event

    @Slot()
    def run(self) -> None:
        from core.training import run_training
        from gui.history import save_to_history

        try:
            try:
                result = run_training(self.config, self.buffer.append, self.stop_event, [_PlanCallback(self.buffer), *self.callbacks])
            except Exception as exc:  # a config the machine cannot run: recorded like any failed run
                message = _explain(exc)
                self.failed.emit(message)
                result = RunResult(status=FAILED, config=self.config.to_dict(), message=message)
            run_id, history_error = save_to_history(result, self.label)
            self.result_ready.emit(FinishedRun(result, run_id, history_error))
        except Exception as exc:  # never let an exception die silently in the thread
            self.failed.emit(_explain(exc))
            traceback.print_exc()
        finally:
            self.finished.emit()


def _explain(exc: BaseException) -> str:
    try:
        from core.training import explain_failure

        return explain_failure(exc)
    except Exception:
        return f"{type(exc).__name__}: {exc}"

"""The lifecycle every job controller shares: one worker thread at a time, its stop flag and its poll timer.

A job (a training run, a comparison) runs in a parentless `JobWorker` moved to its own
QThread (`gui.qt_threads.start_worker`). The worker only appends step records to
buffers; a timer in the GUI thread drains them (`_poll`), so no signal is sent
per step. Stop is a `threading.Event` the worker checks; when the worker emits
`finished`, the controller drains what is left (`_job_ended`) and is idle again.
"""

from __future__ import annotations

import threading
import traceback

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from core.config import ConfigError
from gui.qt_threads import start_worker, stop_and_wait


def explain(exc: BaseException) -> str:
    """A readable reason for a job that failed in a worker thread (the engine's advice when it has some)."""
    try:
        from core.training.failures import explain_failure

        return explain_failure(exc)
    except Exception:
        return f"{type(exc).__name__}: {exc}"


class JobWorker(QObject):
    """A job's worker, run in its own thread: `work()` does the job; `finished` always follows it.

    An exception in `work()` becomes `failed(reason)`, never lost in the thread: a
    ConfigError is the user's input and is said as it is; anything else is
    explained and its traceback goes to stderr (the log). Stop by setting
    `stop_event` from any thread: the job checks it between its calls.
    """

    failed = Signal(str)
    finished = Signal()

    def __init__(self, stop_event: threading.Event):
        super().__init__()
        self.stop_event = stop_event

    @Slot()
    def run(self) -> None:
        try:
            self.work()
        except ConfigError as exc:
            self.failed.emit(str(exc))
        except Exception as exc:
            self.failed.emit(explain(exc))
            traceback.print_exc()
        finally:
            self.finished.emit()

    def work(self) -> None:
        """The job itself, in the worker's thread."""
        raise NotImplementedError


class JobController(QObject):
    """Starts one job's worker thread, polls its buffers while it runs, stops it and waits for it.

    Subclasses build the worker (with the stop event from `_new_stop_event`),
    connect its own signals, hand it to `_launch`, and implement `_poll` (a timer
    tick) and `_job_ended` (the worker has finished: drain the rest, drop buffers).
    """

    running_changed = Signal(bool)

    def __init__(self, poll_interval_ms: int, parent: QObject | None = None):
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: JobWorker | None = None
        self._stop_event: threading.Event | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(poll_interval_ms)
        self._timer.timeout.connect(self._poll)

    def is_running(self) -> bool:
        """True from a successful start until the worker has finished and its last steps are drained."""
        return self._worker is not None

    def stop(self) -> None:
        """Ask the job to stop after the call in flight (returns at once)."""
        if self._stop_event is not None:
            self._stop_event.set()

    def shutdown(self, timeout_s: float) -> bool:
        """Stop the job and wait for its thread to end (closing the window); True when it has."""
        return stop_and_wait(self._stop_event, self._thread, timeout_s)

    def _new_stop_event(self) -> threading.Event:
        """The stop flag of the job about to start: give it to the worker, then call `_launch`."""
        self._stop_event = threading.Event()
        return self._stop_event

    def _launch(self, worker: JobWorker, thread_name: str) -> None:
        """Run `worker` (parentless) in a new thread and start polling."""
        worker.finished.connect(self._on_worker_finished)
        self._worker = worker
        self._thread = start_worker(worker, thread_name)
        self._timer.start()
        self.running_changed.emit(True)

    def _poll(self) -> None:
        """Timer tick in the GUI thread: move what the worker buffered since the last tick."""
        raise NotImplementedError

    def _job_ended(self) -> None:
        """The worker has finished: drain what is left and drop the job's buffers."""
        raise NotImplementedError

    def _on_worker_finished(self) -> None:
        self._job_ended()
        self._timer.stop()
        self._worker = None
        self._thread = None
        self._stop_event = None
        self.running_changed.emit(False)

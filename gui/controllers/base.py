"""The lifecycle every job controller shares: one worker thread at a time, its stop flag and its poll timer.

A job (a training run, a comparison, a sweep, a search) is a `gui.qt_threads.Worker`
subclass run in its own QThread (`start_worker`): its `work()` does the job and
returns the result, an exception becomes the controller's `failed(reason)`. The
worker only appends step records to buffers; a timer in the GUI thread drains them
(`_poll`), so no signal is sent per step. Stop is a `threading.Event` the worker
checks; when the worker emits `finished`, the controller drains what is left
(`_job_ended`) and is idle again.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread, QTimer, Signal

from gui.qt_threads import Worker, start_worker, stop_and_wait


class JobController(QObject):
    """Starts one job's worker thread, polls its buffers while it runs, stops it and waits for it.

    Subclasses build the worker (with the stop event from `_new_stop_event`),
    connect its result and progress signals, hand it to `_launch` (which connects
    its `errored` to `failed`), and implement `_poll` (a timer tick) and `_job_ended`
    (the worker has finished: drain the rest, drop buffers).
    """

    running_changed = Signal(bool)
    failed = Signal(str)  # the job raised (or could not start): why, in words

    def __init__(self, poll_interval_ms: int, parent: QObject | None = None):
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: Worker | None = None
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

    def _launch(self, worker: Worker, thread_name: str) -> None:
        """Run `worker` (parentless) in a new thread and start polling."""
        worker.errored.connect(self.failed)
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

"""One training run at a time, from Start to the saved result: thread, stop flag, live curves, progress.

The training thread only appends step records to a `StepBuffer`; a 10 Hz timer
in the GUI thread drains it into the plots, and the progress figures follow at
most 4 times a second. No signal per step, so a fast model cannot flood the event loop.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, QTimer, Signal

from core.config import RunConfig
from core.live.rate_limit import RateLimit
from core.live.step_buffer import StepBuffer
from core.training.callbacks import RunCallback
from gui.controllers.training_worker import FinishedRun, TrainingWorker
from gui.plotting.plots import PlotsWidget
from gui.qt_threads import start_worker, stop_and_wait

POLL_INTERVAL_MS = 100


@dataclass(frozen=True)
class Progress:
    """Where the run in flight stands; rates are steady-state (warm-up excluded)."""

    done: int
    total: int
    samples_per_s: float | None
    eta_s: float | None


class RunController(QObject):
    """Starts, stops and follows training runs; feeds the plots while a run trains."""

    run_started = Signal(str, str)  # plot key, label
    progress = Signal(object)  # Progress
    run_finished = Signal(object)  # FinishedRun (completed, stopped or failed; saved to the history)
    run_failed = Signal(str)  # the engine could not even start the run
    running_changed = Signal(bool)

    def __init__(self, plots: PlotsWidget, parent: QObject | None = None):
        super().__init__(parent)
        self._plots = plots
        self._keys = itertools.count(1)
        self._thread: QThread | None = None
        self._worker: TrainingWorker | None = None
        self._buffer: StepBuffer | None = None
        self._stop_event: threading.Event | None = None
        self._config: RunConfig | None = None
        self._key = ""
        self._done = 0
        self._steady_s = 0.0
        self._steady_steps = 0
        self._progress_rate = RateLimit()
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_INTERVAL_MS)
        self._timer.timeout.connect(self._poll)

    @property
    def current_key(self) -> str:
        """The plot key of the run in flight (or the last one)."""
        return self._key

    def is_running(self) -> bool:
        return self._worker is not None

    def start(self, config: RunConfig, label: str, callbacks: Sequence[RunCallback] = ()) -> bool:
        """Start `config` in a training thread; False (and nothing happens) while a run is in flight.

        `callbacks` (TensorBoard writer, profiler, cluster watcher) run in the training thread.
        """
        if self.is_running():
            return False
        self._key = f"live-{next(self._keys)}"
        self._config = config
        self._done, self._steady_s, self._steady_steps = 0, 0.0, 0
        self._progress_rate.reset()
        self._buffer = StepBuffer()
        self._stop_event = threading.Event()
        self._plots.add_run(self._key, label, batch_size=config.batch_size)
        worker = TrainingWorker(config, label, self._buffer, self._stop_event, callbacks)
        worker.result_ready.connect(self._on_result)
        worker.failed.connect(self.run_failed)
        worker.finished.connect(self._on_worker_finished)
        self._worker = worker
        self._thread = start_worker(worker, "training")
        self._timer.start()
        self.running_changed.emit(True)
        self.run_started.emit(self._key, label)
        return True

    def stop(self) -> None:
        """Ask the run to stop after the call in flight (returns at once)."""
        if self._stop_event is not None:
            self._stop_event.set()

    def shutdown(self, timeout_s: float) -> bool:
        """Stop the run and wait for its thread to end (closing the window); True when it has."""
        return stop_and_wait(self._stop_event, self._thread, timeout_s)

    # --- following the run ---------------------------------------------------

    def _poll(self) -> None:
        """Timer tick: move new steps into the plots, and report progress (rate-limited)."""
        if (self._drain() or self._done) and self._progress_rate.ready():
            self._report_progress()

    def _drain(self) -> int:
        if self._buffer is None:
            return 0
        steps = self._buffer.drain()
        if len(steps):
            self._plots.append_steps(self._key, steps.steps, steps.losses, steps.times_s, steps.warmup)
            self._done += len(steps)
            steady = ~steps.warmup
            self._steady_s += float(steps.times_s[steady].sum())
            self._steady_steps += int(steady.sum())
        return len(steps)

    def _report_progress(self) -> None:
        total = self._buffer.total_steps if self._buffer is not None else 0
        mean_step = self._steady_s / self._steady_steps if self._steady_steps else None
        batch = self._config.batch_size if self._config else 0
        samples_per_s = batch / mean_step if mean_step else None
        eta = (total - self._done) * mean_step if mean_step is not None and total else None
        self.progress.emit(Progress(self._done, total, samples_per_s, eta))

    def _on_result(self, finished: FinishedRun) -> None:
        self._drain()
        self._report_progress()
        self._plots.flush()
        self.run_finished.emit(finished)

    def _on_worker_finished(self) -> None:
        self._drain()
        self._plots.flush()
        self._timer.stop()
        self._worker = None
        self._thread = None
        self._buffer = None
        self._stop_event = None
        self.running_changed.emit(False)

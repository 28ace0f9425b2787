"""One training run at a time, from Start to the saved result: thread, stop flag, live curves, progress.

The training thread only appends step records to a `StepBuffer`; a 10 Hz timer
in the GUI thread drains it into the plots, and the progress figures follow at
most 4 times a second. No signal per step, so a fast model cannot flood the event loop.
After a completed run the worker diagnoses it (`diagnosing` says each step, Stop
ends it); `diagnose = False` leaves runs without a verdict (tests that are not about it).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from core.config import RunConfig
from core.live.rate_limit import RateLimit
from core.live.step_buffer import StepBuffer
from core.training.hooks import RunHook
from gui.controllers.base import JobController
from gui.controllers.training_worker import TrainingWorker
from gui.job_data import FinishedRun, Progress

POLL_INTERVAL_MS = 100


class RunController(JobController):
    """Starts, stops and follows training runs; says what to plot while a run trains (`curve_added`, `steps_arrived`)."""

    run_started = Signal(str, str)  # plot key, label
    progress = Signal(object)  # Progress
    run_finished = Signal(object)  # FinishedRun (completed, stopped or failed; saved to the history)
    diagnosing = Signal(str)  # the run has completed and is being diagnosed: what the diagnosis does now ("" as it begins)
    run_hooks = Signal(object)  # the run's hooks (core.jobs.RunHooks), built before it starts: GPU use to follow, outputs to show
    curve_added = Signal(str, str, object)  # plot key, label, batch size: a new run's curves
    steps_arrived = Signal(str, object)  # plot key, StepArrays: steps to append to its curves
    steps_complete = Signal()  # the run's last steps are in: draw them now

    def __init__(self, parent: QObject | None = None):
        super().__init__(POLL_INTERVAL_MS, parent)
        self._keys = itertools.count(1)
        self._buffer: StepBuffer | None = None
        self._config: RunConfig | None = None
        self._key = ""
        self._done = 0
        self._steady_s = 0.0
        self._steady_steps = 0
        self._progress_rate = RateLimit()
        self.diagnose = True
        self._diagnosing = False

    @property
    def current_key(self) -> str:
        """The plot key of the run in flight (or the last one)."""
        return self._key

    def start(self, config: RunConfig, label: str, listeners: Sequence[RunHook] = ()) -> bool:
        """Start `config` in a training thread; False (and nothing happens) while a run is in flight.

        `listeners` (a view's own hooks: the cluster watcher) run in the training thread; the run's standard hooks
        (TensorBoard and the profiler as `config.hooks` asks, GPU use, …) are the job service's, announced by `run_hooks`.
        """
        if self.is_running():
            return False
        self._key = f"live-{next(self._keys)}"
        self._config = config
        self._done, self._steady_s, self._steady_steps = 0, 0.0, 0
        self._diagnosing = False
        self._progress_rate.reset()
        self._buffer = StepBuffer()
        self.curve_added.emit(self._key, label, config.batch_size)
        worker = TrainingWorker(config, label, self._buffer, self._new_stop_event(), listeners, self.diagnose)
        worker.hooks_ready.connect(self.run_hooks)
        worker.returned.connect(self._on_result)
        worker.diagnosing.connect(self._on_diagnosing)
        self._launch(worker, "training")
        self.run_started.emit(self._key, label)
        return True

    # --- following the run ---------------------------------------------------

    def _poll(self) -> None:
        """Timer tick: move new steps into the plots, and report progress (rate-limited)."""
        if (self._drain() or self._done) and not self._diagnosing and self._progress_rate.ready():
            self._report_progress()

    def _drain(self) -> int:
        if self._buffer is None:
            return 0
        steps = self._buffer.drain()
        if len(steps):
            self.steps_arrived.emit(self._key, steps)
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

    def _on_diagnosing(self, what: str) -> None:
        """The run's last steps are in (plots and progress complete), then say what the diagnosis does."""
        if not self._diagnosing:
            self._diagnosing = True
            self._drain()
            self._report_progress()
        self.diagnosing.emit(what)

    def _on_result(self, finished: FinishedRun) -> None:
        self._drain()
        self._report_progress()
        self.steps_complete.emit()
        self.run_finished.emit(finished)

    def _job_ended(self) -> None:
        self._drain()
        self.steps_complete.emit()
        self._buffer = None

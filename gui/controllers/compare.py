"""One comparison (or scaling sweep) at a time: its thread, stop flag, live curves per target and saved runs.

The comparison thread runs `core.compare.runner.run_comparison` (or `scaling_sweep`):
targets in interleaved rounds (each set up alone, then every round runs each for its
share of the steps, in a new random order), the same model, data, global batch, steps and seed,
each through the job service, which records every run in the history as it
trains (begun, steps about once a second, finished). Its listener appends each
target's steps to that target's `StepBuffer`. A 20 Hz timer in the GUI thread drains the
buffers into the shared plots, one plot key per target. No signal per step.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from core.compare.runner import progress_line, run_comparison, scaling_sweep
from core.compare.table import Comparison
from core.jobs import JobListener, JobOptions, RecordedRun
from core.live.rate_limit import RateLimit
from core.live.step_buffer import StepArrays, StepBuffer
from core.results import StepRecord
from core.training.hooks import RunContext
from gui.controllers.base import JobController
from gui.controllers.history import JobHistory
from gui.job_data import CompareJob, FinishedRun, SavedTarget
from gui.qt_threads import Worker

POLL_INTERVAL_MS = 50


class CompareBuffers:
    """Every target's step records, handed from the comparison thread to the GUI thread under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: dict[int, StepBuffer] = {}
        self._labels: dict[int, str] = {}
        self._current = -1

    def begin(self, index: int, label: str) -> None:
        """A target starts: the steps that follow belong to it (comparison thread)."""
        with self._lock:
            self._buffers[index] = StepBuffer()
            self._labels[index] = label
            self._current = index

    def switch(self, index: int) -> None:
        """Target `index` has the turn in the interleaved rounds: the steps that follow belong to it (comparison thread)."""
        with self._lock:
            if index in self._buffers:
                self._current = index

    def append_current(self, records: Sequence[StepRecord]) -> None:
        """Steps of the target in flight (comparison thread)."""
        with self._lock:
            buffer = self._buffers.get(self._current)
        if buffer is not None:
            buffer.append(records)

    def set_plan(self, total_steps: int, replicas: int) -> None:
        """The engine knows how many steps the current target will take."""
        with self._lock:
            buffer = self._buffers.get(self._current)
        if buffer is not None:
            buffer.set_plan(total_steps, replicas)

    def current(self) -> tuple[int, int]:
        """(index of the target in flight or -1, its planned steps or 0)."""
        with self._lock:
            buffer = self._buffers.get(self._current)
            return self._current, buffer.total_steps if buffer is not None else 0

    def drain(self) -> list[tuple[int, str, StepArrays]]:
        """(index, label, new steps) for every target with steps since the last drain."""
        with self._lock:
            items = list(self._buffers.items())
            labels = dict(self._labels)
        drained = [(index, labels[index], buffer.drain()) for index, buffer in items]
        return [entry for entry in drained if len(entry[2])]


class CompareWorker(Worker):
    """Runs one comparison in a worker thread, every target recorded in the history as it trains (`core.jobs`).

    Each target is begun in the history before it trains, its steps appended
    about once a second, and finished with its result. A target that never
    started (it does not fit this machine) comes back as a failed row and is
    recorded too, so the history explains it. Stop by setting `stop_event`:
    the run in flight ends and the rest are skipped. Returns the Comparison.
    """

    progress = Signal(int, int, str)  # index, total, label
    turn = Signal(int, int, int)  # index, round (0-based), rounds
    run_saved = Signal(object)  # SavedTarget

    def __init__(self, job: CompareJob, buffers: CompareBuffers, stop_event: threading.Event):
        super().__init__()
        self.job = job
        self.buffers = buffers
        self.stop_event = stop_event

    def work(self) -> Comparison:
        with JobHistory() as history:
            options = JobOptions(listener=_CompareListener(self), unsaved_reason=history.error)
            if self.job.sweep_kind:
                return scaling_sweep(self.job.base, self.job.sweep_kind, None, 0, history.store, options, self.stop_event, self.job.rounds)
            return run_comparison(
                self.job.base, self.job.targets, self.job.baseline_index, history.store, options, self.stop_event, self.job.rounds
            )


class _CompareListener(JobListener):
    """The comparison's progress channel: each target's plan and steps to its buffer, its start and saved run as signals."""

    def __init__(self, worker: CompareWorker):
        self._worker = worker
        self._labels: dict[int, str] = {}

    def on_job_start(self, index: int, total: int, label: str) -> None:
        self._labels[index] = label
        self._worker.buffers.begin(index, label)
        self._worker.progress.emit(index, total, label)

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        self._worker.buffers.switch(index)
        if round_index >= 0:
            self._worker.turn.emit(index, round_index, rounds)

    def on_run_start(self, context: RunContext) -> None:
        self._worker.buffers.set_plan(context.total_steps, context.replicas)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._worker.buffers.append_current(records)

    def on_job_end(self, index: int, recorded: RecordedRun) -> None:
        finished = FinishedRun(recorded.result, recorded.run_id, recorded.history_error)
        self._worker.run_saved.emit(SavedTarget(index, self._labels.get(index, f"target {index + 1}"), finished))


class CompareController(JobController):
    """Starts, stops and follows comparisons; says what to plot while one runs (`curve_added`, `steps_arrived`).

    `stop()` ends the target in flight after its current step and skips the rest.
    """

    progress = Signal(str)  # "run 2 of 3: GPU:0 · step 12 of 20"
    run_saved = Signal(object)  # SavedTarget
    comparison_ready = Signal(object)  # Comparison
    curve_added = Signal(str, str, object)  # plot key, label, batch size: a target's curves
    steps_arrived = Signal(str, object)  # plot key, StepArrays

    def __init__(self, parent: QObject | None = None):
        super().__init__(POLL_INTERVAL_MS, parent)
        self._curves: set[str] = set()
        self._numbers = itertools.count(1)
        self._number = 0
        self._buffers: CompareBuffers | None = None
        self._job: CompareJob | None = None
        self._line = ""
        self._done: dict[int, int] = {}
        self._progress_rate = RateLimit()

    def plot_key(self, index: int) -> str:
        """The plots' key of target `index` in the latest comparison."""
        return f"compare-{self._number}-{index}"

    def start(self, job: CompareJob) -> bool:
        """Run `job` in a worker thread; False (and nothing happens) while one is in flight.

        `job.base` is the run form's config (a sample model or the user's model file,
        its trust and hash included); the run form's hooks are dropped, since a
        comparison writes no TensorBoard logs and takes no profile.
        """
        if self.is_running():
            return False
        job = replace(job, base=job.base.with_hooks())
        self._number = next(self._numbers)
        self._job = job
        self._done = {}
        self._line = ""
        self._buffers = CompareBuffers()
        worker = CompareWorker(job, self._buffers, self._new_stop_event())
        worker.progress.connect(self._on_progress)
        worker.turn.connect(self._on_turn)
        worker.run_saved.connect(self._on_run_saved)
        worker.returned.connect(self._on_comparison)
        self._launch(worker, "comparison")
        return True

    # --- following the comparison -------------------------------------------

    def _on_progress(self, index: int, total: int, label: str) -> None:
        self._poll()
        self._line = progress_line(index, total, label)
        self._ensure_curve(index, label)
        self.progress.emit(self._line + " · building the model and compiling the step…")

    def _on_turn(self, index: int, round_index: int, rounds: int) -> None:
        self._poll()
        label = self._job.targets[index].label if self._job is not None and index < len(self._job.targets) else f"target {index + 1}"
        self._line = f"round {round_index + 1} of {rounds}: {label}"
        self.progress.emit(self._line)

    def _ensure_curve(self, index: int, label: str) -> None:
        key = self.plot_key(index)
        if key not in self._curves:
            self._curves.add(key)
            batch = self._job.base.batch_size if self._job is not None else None
            self.curve_added.emit(key, f"{label} (compare)", batch)

    def _poll(self) -> None:
        if self._buffers is None:
            return
        drained = self._buffers.drain()
        for index, label, steps in drained:
            self._ensure_curve(index, label)
            self.steps_arrived.emit(self.plot_key(index), steps)
            self._done[index] = self._done.get(index, 0) + len(steps)
        index, total = self._buffers.current()
        if drained and self._line and index >= 0 and self._progress_rate.ready():
            done = self._done.get(index, 0)
            self.progress.emit(f"{self._line} · step {done:,} of {total:,}" if total else f"{self._line} · step {done:,}")

    def _on_run_saved(self, saved: SavedTarget) -> None:
        self._poll()
        self.run_saved.emit(saved)

    def _on_comparison(self, comparison: Comparison) -> None:
        self._poll()
        self.comparison_ready.emit(comparison)

    def _job_ended(self) -> None:
        self._poll()
        self._buffers = None

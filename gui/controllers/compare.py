"""One comparison (or scaling sweep) at a time: its thread, stop flag, live curves per target and saved runs.

The comparison thread runs `core.compare.runner.run_comparison` (or `scaling_sweep`):
targets one after another, the same model, data, global batch, steps and seed.
It appends each target's steps to that target's `StepBuffer` and records every
run in the history as it trains (begun, steps about once a second, finished). A 20 Hz timer in the GUI thread drains the
buffers into the shared plots, one plot key per target. No signal per step.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from dataclasses import replace

from PySide6.QtCore import QObject, Signal, Slot

from core.compare.runner import progress_line, run_comparison, scaling_sweep
from core.compare.table import Comparison
from core.compare.targets import sweep_targets
from core.config import RunConfig
from core.history.recorder import HistoryRecorder
from core.live.rate_limit import RateLimit
from core.live.step_buffer import StepArrays, StepBuffer
from core.results import RunResult, RunStatus, StepRecord
from core.workloads.workload import model_title
from gui.controllers.base import JobController, failures_reported
from gui.controllers.history import JobHistory
from gui.controllers.training_worker import PlanCallback
from gui.job_data import CompareJob, FinishedRun, SavedTarget

POLL_INTERVAL_MS = 50


def history_label(target_label: str, config: dict) -> str:
    """'MLP · digits · mirrored:CPU:0,CPU:1 · batch 64 · compare': how a comparison's run shows in the history.

    A model file shows by its file name, an .npz data file by its name.
    """
    dataset = str(config.get("dataset"))
    data = os.path.basename(dataset) if dataset.lower().endswith(".npz") else dataset
    return " · ".join([model_title(str(config.get("model"))), data, target_label, f"batch {config.get('batch_size')}", "compare"])


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

    def append(self, index: int, records: Sequence[StepRecord]) -> None:
        with self._lock:
            buffer = self._buffers.get(index)
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


class CompareWorker(QObject):
    """Runs one comparison in a worker thread, recording every run in the history as it trains.

    Each target is begun in the history before it trains, its steps appended
    about once a second, and finished with its result (through the runner's
    `recorders`). A target that never started (it does not fit this machine)
    comes back as a failed row and is recorded too, so the history explains
    it. Stop by setting `stop_event`: the run in flight ends and the rest are skipped.
    """

    progress = Signal(int, int, str)  # index, total, label
    run_saved = Signal(object)  # SavedTarget
    comparison_ready = Signal(object)  # Comparison
    failed = Signal(str)
    finished = Signal()

    def __init__(self, job: CompareJob, buffers: CompareBuffers, stop_event: threading.Event):
        super().__init__()
        self.job = job
        self.buffers = buffers
        self.stop_event = stop_event
        self._labels: dict[int, str] = {}
        self._saved: set[int] = set()
        self._history = JobHistory()
        self._recorders: dict[int, HistoryRecorder] = {}

    @Slot()
    def run(self) -> None:
        with failures_reported(self):
            with self._history:
                comparison = self._compare()
                for index, row in enumerate(comparison.rows):  # rows that never started: failed, or skipped and recorded
                    if index not in self._saved and (row.status == RunStatus.FAILED or index in self._recorders):
                        self._save(index, row.label, row.result)
            self.comparison_ready.emit(comparison)

    def _compare(self) -> Comparison:
        callbacks = [PlanCallback(self.buffers.set_plan)]
        recorders = self._recorder if self._history.is_open else None
        if self.job.sweep_kind:
            return scaling_sweep(
                self.job.base, self.job.sweep_kind, None, 0,
                self._on_progress, self.buffers.append, self.stop_event, self._on_result, callbacks, recorders=recorders,
            )  # fmt: skip
        return run_comparison(
            self.job.base, self.job.targets, self.job.baseline_index,
            self._on_progress, self.buffers.append, self.stop_event, self._on_result, callbacks, recorders=recorders,
        )  # fmt: skip

    def _recorder(self, index: int, config: RunConfig) -> HistoryRecorder:
        """The history recorder of target `index` (the runner begins and finishes it), labelled as the History tab shows it."""
        recorder = self._history.recorder(config, history_label(self._label(index, config), config.to_dict()))
        self._recorders[index] = recorder
        return recorder

    def _label(self, index: int, config: RunConfig | None = None) -> str:
        """The target's label: as announced, else the job's target, else (a sweep's, before it starts) from its devices."""
        if index in self._labels:
            return self._labels[index]
        if index < len(self.job.targets):
            return self.job.targets[index].label
        if config is not None and config.devices:
            return sweep_targets(config.devices, [len(config.devices)])[0].label
        return f"target {index + 1}"

    def _on_progress(self, index: int, total: int, label: str) -> None:
        self._labels[index] = label
        self.buffers.begin(index, label)
        self.progress.emit(index, total, label)

    def _on_result(self, index: int, result: RunResult) -> None:
        self._save(index, self._label(index), result)

    def _save(self, index: int, label: str, result: RunResult) -> None:
        """Finish the target's record (when the engine has not already) and tell the GUI where it is stored."""
        self._saved.add(index)
        recorder = self._recorders.get(index)
        if recorder is None and self._history.is_open:  # a target the runner never recorded: it did not start
            recorder = self._recorder(index, self.job.base)  # finishing writes the target's own config
        if recorder is not None:
            recorder.finish(result)
        run_id, error = self._history.outcome(recorder)
        self.run_saved.emit(SavedTarget(index, label, FinishedRun(result, run_id, error)))


class CompareController(JobController):
    """Starts, stops and follows comparisons; says what to plot while one runs (`curve_added`, `steps_arrived`).

    `stop()` ends the target in flight after its current step and skips the rest.
    """

    progress = Signal(str)  # "run 2 of 3: GPU:0 · step 12 of 20"
    run_saved = Signal(object)  # SavedTarget
    comparison_ready = Signal(object)  # Comparison
    failed = Signal(str)
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
        worker.run_saved.connect(self._on_run_saved)
        worker.comparison_ready.connect(self._on_comparison)
        worker.failed.connect(self._on_failed)
        self._launch(worker, "comparison")
        return True

    # --- following the comparison -------------------------------------------

    def _on_progress(self, index: int, total: int, label: str) -> None:
        self._poll()
        self._line = progress_line(index, total, label)
        self._ensure_curve(index, label)
        self.progress.emit(self._line + " · building the model and compiling the step…")

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

    def _on_failed(self, message: str) -> None:
        self.failed.emit(message)

    def _job_ended(self) -> None:
        self._poll()
        self._buffers = None

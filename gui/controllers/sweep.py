"""One setting sweep at a time: its thread, stop flag, live progress and the rows as they finish.

The sweep thread plans the sweep (which precisions the target runs usefully
needs TensorFlow and the CPU's flags), then runs `core.tuning.sweep.run_sweep`:
one normal run per point through the job service, each recorded in the history
as it trains under the sweep's group. Steps go to a `StepBuffer` that a GUI timer drains for the
progress line; rows, the plan and the final sweep come back as signals (one per
point, never one per step).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from core.jobs import JobOptions
from core.live.rate_limit import RateLimit
from core.live.step_buffer import StepBuffer
from core.results import StepRecord
from core.training.hooks import RunContext
from core.tuning.sweep import SweepListener, SweepRow, run_sweep
from core.tuning.sweep_plan import next_sweep_group, plan_sweep
from gui.controllers.base import JobController
from gui.controllers.history import JobHistory
from gui.job_data import SweepJob, SweepOutcome
from gui.qt_threads import Worker

POLL_INTERVAL_MS = 100


class SweepWorker(Worker):
    """Plans and runs one sweep in a worker thread and returns its SweepOutcome.

    Stop by setting `stop_event`: the point in flight ends, the rest are skipped.
    """

    planned = Signal(object)  # SweepPlan
    progress = Signal(int, int, str)  # point index, points, label
    turn = Signal(int, int, int)  # point index, round (-1: its set-up and warm-up), rounds
    row_done = Signal(int, object)  # point index, SweepRow

    def __init__(self, job: SweepJob, buffer: StepBuffer, stop_event: threading.Event):
        super().__init__()
        self.job = job
        self.buffer = buffer
        self.stop_event = stop_event

    def work(self) -> SweepOutcome:
        with JobHistory() as history:
            plan = plan_sweep(self.job.base, self.job.values, keep_slow=self.job.keep_slow)
            self.planned.emit(plan)
            group = next_sweep_group(history.groups(), plan) if history.is_open else ""
            options = JobOptions(group=group, listener=_SweepWorkerListener(self), unsaved_reason=history.error)
            sweep = run_sweep(plan, history.store, options, self.stop_event, self.job.rounds)
        errors = [row.history_error for row in sweep.rows if row.history_error]
        return SweepOutcome(sweep, errors[0] if errors else "")


class _SweepWorkerListener(SweepListener):
    """The sweep's progress channel: each point's plan and steps to the buffer, its start and row as signals."""

    def __init__(self, worker: SweepWorker):
        self._worker = worker

    def on_job_start(self, index: int, total: int, label: str) -> None:
        self._worker.progress.emit(index, total, label)

    def on_turn(self, index: int, round_index: int, rounds: int) -> None:
        self._worker.turn.emit(index, round_index, rounds)

    def on_run_start(self, context: RunContext) -> None:
        self._worker.buffer.set_plan(context.total_steps, context.replicas)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._worker.buffer.append(records)

    def on_row(self, index: int, row: SweepRow) -> None:
        self._worker.row_done.emit(index, row)


class SweepController(JobController):
    """Starts, stops and follows sweeps; says which point is training and how far it is."""

    planned = Signal(object)  # SweepPlan
    progress = Signal(int, int, str)  # points done, points, "point 2 of 4: batch 32 · float32 · step 3 of 6"
    row_done = Signal(int, object)  # point index, SweepRow
    sweep_ready = Signal(object)  # SweepOutcome

    def __init__(self, parent: QObject | None = None):
        super().__init__(POLL_INTERVAL_MS, parent)
        self._buffer: StepBuffer | None = None
        self._point = (0, 0, "")
        self._labels: dict[int, str] = {}
        self._done: dict[int, int] = {}
        self._round = ""
        self._rate = RateLimit()

    def start(self, job: SweepJob) -> bool:
        """Run `job` in a worker thread; False (and nothing happens) while one is in flight."""
        if self.is_running():
            return False
        self._buffer = StepBuffer()
        self._point = (0, 0, "")
        self._labels, self._done, self._round = {}, {}, ""
        worker = SweepWorker(job, self._buffer, self._new_stop_event())
        worker.planned.connect(self.planned)
        worker.progress.connect(self._on_progress)
        worker.turn.connect(self._on_turn)
        worker.row_done.connect(self._on_row_done)
        worker.returned.connect(self.sweep_ready)
        self._launch(worker, "sweep")
        return True

    def _on_progress(self, index: int, total: int, label: str) -> None:
        self._poll()
        self._point = (index, total, label)
        self._labels[index] = label
        self._rate.reset()
        self.progress.emit(index, total, f"point {index + 1} of {total}: {label} · building the model and compiling the step…")

    def _on_turn(self, index: int, round_index: int, rounds: int) -> None:
        """Point `index` has the turn in the interleaved rounds: the steps that follow are its own."""
        self._poll()
        total = self._point[1]
        self._point = (index, total, self._labels.get(index, f"point {index + 1}"))
        self._round = f"round {round_index + 1} of {rounds} · " if round_index >= 0 else "warm-up · "

    def _on_row_done(self, index: int, row: SweepRow) -> None:
        self._poll()
        self.row_done.emit(index, row)

    def _poll(self) -> None:
        if self._buffer is None:
            return
        steps = len(self._buffer.drain())
        index, total, label = self._point
        self._done[index] = self._done.get(index, 0) + steps
        if steps and total and self._rate.ready():
            planned = self._buffer.total_steps
            of = f" of {planned:,}" if planned else ""
            self.progress.emit(index, total, f"{self._round}point {index + 1} of {total}: {label} · step {self._done[index]:,}{of}")

    def _job_ended(self) -> None:
        self._poll()
        self._buffer = None

"""The training thread's worker: one job through the job service (`core.jobs.run_job`), its steps to a buffer.

The service records the run as it trains and diagnoses a completed run in the
same thread (its verdict: what bounds its speed, the evidence, the advice; a
few seconds of probe runs that Stop ends) before finishing its record.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from PySide6.QtCore import Signal

from core.config import RunConfig
from core.jobs import JobListener, JobOptions, run_job
from core.live.step_buffer import StepBuffer
from core.results import StepRecord
from core.training.callbacks import RunCallback, RunContext
from gui.controllers.base import JobWorker
from gui.controllers.history import JobHistory
from gui.job_data import FinishedRun


class TrainingWorker(JobWorker):
    """Runs one job in a worker thread through the job service: trained, recorded, and (`diagnose`) a completed run diagnosed.

    Stop by setting `stop_event` from any thread: the engine checks it after every
    call of the compiled step function, probe runs included. Steps go to `buffer`
    and, about once a second, to the history (so a crash loses at most the last
    second); `diagnosing` says each step of the diagnosis; the result, with its
    verdict and recorded in the history, comes back through `result_ready`.
    """

    result_ready = Signal(object)
    failed = Signal(str)
    diagnosing = Signal(str)  # what the diagnosis is doing ("" as it begins)
    finished = Signal()

    def __init__(
        self,
        config: RunConfig,
        label: str,
        buffer: StepBuffer,
        stop_event: threading.Event,
        callbacks: Sequence[RunCallback] = (),
        diagnose: bool = True,
    ):
        super().__init__(stop_event)
        self.callbacks = list(callbacks)
        self.diagnose = diagnose
        self.config = config
        self.label = label
        self.buffer = buffer

    def work(self) -> None:
        with JobHistory() as history:
            options = JobOptions(
                label=self.label,
                diagnose=self.diagnose,
                hooks=tuple(self.callbacks),
                listener=_WorkerListener(self),
                unsaved_reason=history.error,
            )
            recorded = run_job(self.config, history.store, options, self.stop_event)
        if not recorded.started:
            self.failed.emit(recorded.result.message)
        self.result_ready.emit(FinishedRun(recorded.result, recorded.run_id, recorded.history_error))


class _WorkerListener(JobListener):
    """The worker's progress channel: the plan and steps to its buffer, the diagnosis's steps to its `diagnosing` signal."""

    def __init__(self, worker: TrainingWorker):
        self._buffer = worker.buffer
        self._diagnosing = worker.diagnosing

    def on_run_start(self, context: RunContext) -> None:
        self._buffer.set_plan(context.total_steps, context.replicas)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._buffer.append(records)

    def on_diagnosing(self, what: str) -> None:
        self._diagnosing.emit(what)

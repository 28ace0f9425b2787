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
from core.jobs import JobListener, JobOptions, RunHooks, run_job
from core.live.step_buffer import StepBuffer
from core.results import StepRecord
from core.training.hooks import RunContext, RunHook
from gui.controllers.history import JobHistory
from gui.job_data import FinishedRun
from gui.qt_threads import Worker


class TrainingWorker(Worker):
    """Runs one job in a worker thread through the job service: trained, recorded, and (`diagnose`) a completed run diagnosed.

    Stop by setting `stop_event` from any thread: the engine checks it after every
    call of the compiled step function, probe runs included. Steps go to `buffer`
    and, about once a second, to the history (so a crash loses at most the last
    second); `diagnosing` says each step of the diagnosis; the result, with its
    verdict and recorded in the history, is returned (`returned`); a run that could
    not start says why through `errored` first. `listeners` are the window's own
    hooks (a view's watcher); the run's standard hooks are the job service's, and
    `hooks_ready` hands them over once built (`core.jobs.RunHooks`).
    """

    diagnosing = Signal(str)  # what the diagnosis is doing ("" as it begins)
    hooks_ready = Signal(object)  # the run's hooks (RunHooks), built before it starts: GPU use to follow, outputs to show

    def __init__(
        self,
        config: RunConfig,
        label: str,
        buffer: StepBuffer,
        stop_event: threading.Event,
        listeners: Sequence[RunHook] = (),
        diagnose: bool = True,
    ):
        super().__init__()
        self.stop_event = stop_event
        self.listeners = list(listeners)
        self.diagnose = diagnose
        self.config = config
        self.label = label
        self.buffer = buffer

    def work(self) -> FinishedRun:
        with JobHistory() as history:
            options = JobOptions(
                label=self.label,
                diagnose=self.diagnose,
                hooks=tuple(self.listeners),
                listener=_WorkerListener(self),
                unsaved_reason=history.error,
            )
            recorded = run_job(self.config, history.store, options, self.stop_event)
        if not recorded.started:
            self.errored.emit(recorded.result.message)
        return FinishedRun(recorded.result, recorded.run_id, recorded.history_error)


class _WorkerListener(JobListener):
    """The worker's progress channel: the run's hooks to `hooks_ready`, the plan and steps to its buffer, the diagnosis's steps
    to its `diagnosing` signal."""

    def __init__(self, worker: TrainingWorker):
        self._buffer = worker.buffer
        self._diagnosing = worker.diagnosing
        self._hooks_ready = worker.hooks_ready

    def on_run_hooks(self, hooks: RunHooks) -> None:
        self._hooks_ready.emit(hooks)

    def on_run_start(self, context: RunContext) -> None:
        self._buffer.set_plan(context.total_steps, context.replicas)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._buffer.append(records)

    def on_diagnosing(self, what: str) -> None:
        self._diagnosing.emit(what)

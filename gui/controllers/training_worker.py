"""The training thread's worker: one `run_training` call, its steps to a buffer and to the history as it trains.

A completed run is then diagnosed in the same thread (its verdict: what bounds
its speed, the evidence, the advice; a few seconds of probe runs that Stop
ends), and its history record finished with the verdict.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from core.config import RunConfig
from core.history.recorder import HistoryRecorder
from core.live.step_buffer import StepBuffer
from core.results import RunResult, RunStatus
from core.training.callbacks import RunCallback, RunContext

if TYPE_CHECKING:
    from core.training.flops import FlopsCounter
from gui.controllers.base import explain, failures_reported
from gui.controllers.history import JobHistory


class PlanCallback(RunCallback):
    """Hands the run's planned steps and replicas to `set_plan` once the engine knows them.

    The live progress (step n of total) needs the total before the first step arrives.
    """

    def __init__(self, set_plan: Callable[[int, int], None]):
        self._set_plan = set_plan

    def on_run_start(self, context: RunContext) -> None:
        self._set_plan(context.total_steps, context.replicas)


@dataclass(frozen=True)
class FinishedRun:
    """What the training thread hands back: the result and where the history stored it."""

    result: RunResult
    run_id: int | None
    history_error: str = ""


class TrainingWorker(QObject):
    """Runs one `run_training` call in a worker thread, then the diagnosis of a completed run.

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
    ):
        super().__init__()
        self.callbacks = list(callbacks)
        self.config = config
        self.label = label
        self.buffer = buffer
        self.stop_event = stop_event

    @Slot()
    def run(self) -> None:
        with failures_reported(self):
            with JobHistory() as history:
                recorder = history.recorder(self.config, self.label) if history.is_open else None
                result = self._train(recorder)
                run_id, history_error = history.outcome(recorder)
            self.result_ready.emit(FinishedRun(result, run_id, history_error))

    def _train(self, recorder: HistoryRecorder | None) -> RunResult:
        """One `run_training` call, recorded as it goes: begun first, steps about once a second, then its result with its verdict."""
        from core.diagnosis.run_verdict import HoldRunEnd
        from core.runner import run_training
        from core.training.flops import FlopsCounter

        counter = FlopsCounter()
        callbacks: list[RunCallback] = [PlanCallback(self.buffer.set_plan)]
        if recorder is not None:
            recorder.begin()
            callbacks.append(HoldRunEnd(recorder))  # ahead of the run's own hooks; finished below, with the verdict
        callbacks.append(counter)
        try:
            result = run_training(self.config, self.buffer.append, self.stop_event, [*callbacks, *self.callbacks])
        except Exception as exc:  # a config the machine cannot run: recorded like any failed run
            message = explain(exc)
            self.failed.emit(message)
            result = RunResult(status=RunStatus.FAILED, config=self.config.to_dict(), message=message)
        if result.status == RunStatus.COMPLETED and not self.stop_event.is_set():
            result = self._diagnosed(result, counter)
        if recorder is not None:
            recorder.finish(result)
        return result

    def _diagnosed(self, result: RunResult, counter: FlopsCounter) -> RunResult:
        """The completed run with its verdict; each step said through `diagnosing`; Stop ends the probe runs."""
        from core.diagnosis.run_verdict import diagnose_run

        self.diagnosing.emit("")
        diagnosed, _probes = diagnose_run(self.config, result, counter, self.stop_event, self.diagnosing.emit)
        return diagnosed

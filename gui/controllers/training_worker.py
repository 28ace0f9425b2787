"""The training thread's worker: one `run_training` call, its steps to a buffer, its result saved."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from core.config import RunConfig
from core.live.step_buffer import StepBuffer
from core.results import RunResult, RunStatus
from core.training.callbacks import RunCallback, RunContext


class _PlanCallback(RunCallback):
    """Tells the buffer how many steps the run will take once the engine knows."""

    def __init__(self, buffer: StepBuffer):
        self._buffer = buffer

    def on_run_start(self, context: RunContext) -> None:
        self._buffer.set_plan(context.total_steps, context.replicas)


@dataclass(frozen=True)
class FinishedRun:
    """What the training thread hands back: the result and where the history stored it."""

    result: RunResult
    run_id: int | None
    history_error: str = ""


class TrainingWorker(QObject):
    """Runs one `run_training` call in a worker thread.

    Stop by setting `stop_event` from any thread: the engine checks it after every
    call of the compiled step function. Steps go to `buffer`; the result, saved to
    the history, comes back through `result_ready`.
    """

    result_ready = Signal(object)
    failed = Signal(str)
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
        from core.runner import run_training
        from gui.controllers.history import save_to_history

        try:
            try:
                result = run_training(self.config, self.buffer.append, self.stop_event, [_PlanCallback(self.buffer), *self.callbacks])
            except Exception as exc:  # a config the machine cannot run: recorded like any failed run
                message = _explain(exc)
                self.failed.emit(message)
                result = RunResult(status=RunStatus.FAILED, config=self.config.to_dict(), message=message)
            run_id, history_error = save_to_history(result, self.label)
            self.result_ready.emit(FinishedRun(result, run_id, history_error))
        except Exception as exc:  # never let an exception die silently in the thread
            self.failed.emit(_explain(exc))
            traceback.print_exc()
        finally:
            self.finished.emit()


def _explain(exc: BaseException) -> str:
    try:
        from core.training.engine import explain_failure

        return explain_failure(exc)
    except Exception:
        return f"{type(exc).__name__}: {exc}"

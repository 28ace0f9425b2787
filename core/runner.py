"""`run_training(config, stop_event=..., callbacks=...) -> RunResult`: one entry point for every strategy.

A multi-worker run without TF_CONFIG is handed to worker processes
(`core.cluster.supervisor`), whose chief streams its steps back here; every
other strategy trains in this process (`core.training.engine`). This module
sits above both, so neither needs to know the other. Progress goes through one
channel, the run hooks (`RunCallback`); a plain `on_steps` function is still
taken, and becomes one of them. Recording and diagnosis are the job service's
(`core.jobs.run_job`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from core.cluster.supervisor import run_local_cluster
from core.config import RunConfig
from core.results import RunResult, StepRecord
from core.training.callbacks import RunCallback
from core.training.engine import OnSteps, train_in_this_process


def run_training(
    config: RunConfig,
    on_steps: OnSteps | None = None,
    stop_event: threading.Event | None = None,
    callbacks: Sequence[RunCallback] = (),
) -> RunResult:
    """Train `config`, passing each call's step records to the hooks in `callbacks` (and `on_steps`, when given).

    Raises ConfigError when the config does not fit this machine (a device
    that does not exist). Every other problem ends the run with status
    "failed" and a readable message; setting `stop_event` ends it with status
    "stopped" after the call in flight.
    """
    listeners = [*callbacks, *([StepsTo(on_steps)] if on_steps is not None else [])]
    if config.strategy == "multi-worker":
        return run_local_cluster(config, None, stop_event, listeners)
    return train_in_this_process(config, None, stop_event, listeners)


class StepsTo(RunCallback):
    """A plain `on_steps(records)` function as a run hook."""

    def __init__(self, on_steps: OnSteps):
        self._on_steps = on_steps

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        self._on_steps(records)

"""`run_training(config, on_steps, stop_event) -> RunResult`: one entry point for every strategy.

A run on the JAX or PyTorch backend trains in a child process of its own
(`core.backends`), which streams its steps back here. A multi-worker run
without TF_CONFIG is handed to worker processes (`core.cluster.supervisor`),
whose chief streams its steps back here; every other strategy trains in this
process (`core.training.engine`). This module sits above all three, so none
needs to know the others.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from core.backends.backend_run import run_in_backend_child
from core.cluster.supervisor import run_local_cluster
from core.config import RunConfig
from core.results import RunResult
from core.training.callbacks import RunCallback
from core.training.engine import OnSteps, train_in_this_process


def run_training(
    config: RunConfig,
    on_steps: OnSteps | None = None,
    stop_event: threading.Event | None = None,
    callbacks: Sequence[RunCallback] = (),
) -> RunResult:
    """Train `config`, streaming step records to `on_steps` after every call.

    Raises ConfigError when the config does not fit this machine (a device
    that does not exist). Every other problem ends the run with status
    "failed" and a readable message; setting `stop_event` ends it with status
    "stopped" after the call in flight.
    """
    if config.backend != "tensorflow":
        return run_in_backend_child(config, on_steps, stop_event, callbacks)
    if config.strategy == "multi-worker":
        return run_local_cluster(config, on_steps, stop_event, callbacks)
    return train_in_this_process(config, on_steps, stop_event, callbacks)

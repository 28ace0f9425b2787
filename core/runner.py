"""`run_training(config, stop_event=..., hooks=...) -> RunResult`: one entry point for every strategy.

A run on the JAX or PyTorch backend trains in a child process of its own
(`core.backends`), which streams its steps back here. A multi-worker run
without TF_CONFIG is handed to worker processes (`core.cluster.supervisor`),
whose chief streams its steps back here; every other strategy trains in this
process (`core.training.engine`). This module sits above all three, so none
needs to know the others. Progress goes through one
channel, the run hooks (`RunHook`). Recording and diagnosis are the job service's
(`core.jobs.run_job`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from core.backends.backend_run import run_in_backend_child
from core.cluster.supervisor import run_local_cluster
from core.config import RunConfig
from core.results import RunResult
from core.training.engine import train_in_this_process
from core.training.hooks import RunHook


def run_training(
    config: RunConfig,
    stop_event: threading.Event | None = None,
    hooks: Sequence[RunHook] = (),
) -> RunResult:
    """Train `config`, passing each call's step records to the hooks in `hooks`.

    Raises ConfigError when the config does not fit this machine (a device
    that does not exist). Every other problem ends the run with status
    "failed" and a readable message; setting `stop_event` ends it with status
    "stopped" after the call in flight.
    """
    hooks = list(hooks)
    if config.backend != "tensorflow":
        return run_in_backend_child(config, stop_event, hooks)
    if config.strategy == "multi-worker":
        return run_local_cluster(config, stop_event, hooks)
    return train_in_this_process(config, stop_event, hooks)

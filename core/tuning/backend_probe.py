"""A max-batch probe on JAX or PyTorch: the job trains in the probe's own process, where the parent watches it.

A run on another backend normally trains in a child of its own
(`core.backends.child_job`). A probe must not: its parent's memory watch reads
the probe process's peak resident memory, and a grandchild's memory is not in
it (nor can a kill of the probe's group reach it, the job leading a group of
its own). So the probe process becomes the job: KERAS_BACKEND set and
TensorFlow refused before Keras is imported (`child_job.prepare_environment`),
then the same `fit_job.train` the job runs. Its peak is the backend's own, not
TensorFlow's import as well, and the parent's poll, time limit and stop kill
the training itself.

RLIMIT_DATA backs the watch up as it does for TensorFlow, but a JAX process's
data segment runs ahead of its resident memory (95 MB of thread stacks and
reserved arenas once the CPU client has started, measured with JAX 0.10), where
TensorFlow's lags behind it (370 MB against 600 MB). A limit at the budget
would refuse JAX's allocations before the watch sees the budget passed, and
XLA's CPU kernels then fail with errors that do not say "out of memory". So
the limit is the budget plus the private memory not resident when it is set,
plus DATA_MARGIN: the watch judges each probe, and the limit only stops one
allocation that would overshoot the budget by more than the margin.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from core.backends.job_setup import process_memory
from core.config import RunConfig
from core.job_messages import JobMessage, Started

DATA_MARGIN = 256 * 2**20
"""How far past the budget one allocation may reach before RLIMIT_DATA refuses it (about TensorFlow's own margin)."""


def train_on_backend(config: RunConfig, host_bytes: int) -> dict[str, Any]:
    """In the probe's child: train `config` on its backend here (RLIMIT_DATA just past `host_bytes` on a CPU job: `data_limit`); say how it went."""
    from core.backends.available import INSTALL_HINTS, is_installed
    from core.config import backend_title

    if not is_installed(config.backend):
        return {"status": "failed", "message": f"{backend_title(config.backend)} is not installed here: {INSTALL_HINTS[config.backend]}"}
    from core.backends.child_job import prepare_environment

    prepare_environment(config)
    from core.backends.fit_job import train
    from core.backends.job_setup import backend_devices

    on_accelerator = any(not device.startswith("CPU") for device in backend_devices(config, 1))
    if os.name == "posix" and not on_accelerator:  # as for TensorFlow: once the backend has started, never under CUDA's mappings
        import resource

        limit = data_limit(host_bytes)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    started: list[Started] = []

    def hear(message: JobMessage) -> None:
        if isinstance(message, Started):
            started.append(message)

    # the parent ends a probe by killing its group: nothing sets the event; a probe reports no FLOPs, so none are counted
    train(config, hear, threading.Event(), count_flops=False)
    return {
        "status": "completed",
        "message": "",
        "on_accelerator": on_accelerator,
        "device_peak": device_peak(config.backend) if on_accelerator else None,
        "replicas": started[0].replicas if started else 1,
    }


def device_peak(backend: str) -> int | None:
    """The accelerator allocator's peak in this process (JAX's first device, PyTorch's CUDA), None where it keeps none."""
    if backend == "torch":
        import torch

        return int(torch.cuda.max_memory_allocated()) if torch.cuda.is_available() else None
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return int(peak) if peak is not None else None


def data_limit(host_bytes: int) -> int:
    """RLIMIT_DATA for a budget of `host_bytes`: past it by the data segment's lead over resident memory now, and DATA_MARGIN."""
    sizes = process_memory()  # {} without /proc (macOS): the margin alone
    return host_bytes + max(0, sizes.get("VmData", 0) - sizes.get("VmRSS", 0)) + DATA_MARGIN

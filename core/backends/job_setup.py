"""How a backend job is set up: where it trains, its optimizer, compilation, step plan and environment.

Everything here imports Keras inside its functions, after `child_job` has set KERAS_BACKEND.
"""

from __future__ import annotations

import math
import sys
from contextlib import nullcontext
from typing import Any

from core.config import RunConfig

PRECISION_POLICIES = {"off": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


def placement(config: RunConfig) -> tuple[Any, int]:
    """(a context to build and train in, replicas): one device, JAX data parallel over several, or the backend's default."""
    import keras

    if config.strategy == "one-device":
        if config.backend == "torch" and config.devices[0].startswith("CPU"):
            return nullcontext(), 1  # PyTorch's only CPU device, its default; under a "cpu:0" scope its fit finds no gradients
        return keras.device(config.devices[0].lower()), 1
    if config.strategy == "mirrored":
        if config.backend != "jax":
            raise ValueError(f"mirrored needs Keras's distribution API, which the {config.backend} backend lacks; use jax or tensorflow.")
        names = [d.lower() for d in config.devices] or keras.distribution.list_devices()
        known = keras.distribution.list_devices()
        missing = [name for name in names if name not in known]
        if missing:
            raise ValueError(f"devices {', '.join(missing)} are not here; {config.backend} sees {', '.join(known)}.")
        if config.batch_size % len(names):
            raise ValueError(f"batch_size {config.batch_size} must be a multiple of the {len(names)} replicas.")
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=names))
        return nullcontext(), len(names)
    return nullcontext(), 1


def make_optimizer(config: RunConfig, chosen: Any = None) -> Any:
    """`chosen` (a .py file's own optimizer) or the run's setting (Keras wraps it for loss scaling under float16)."""
    import keras

    optimizers = {
        "adam": keras.optimizers.Adam,
        "adamw": keras.optimizers.AdamW,
        "sgd": keras.optimizers.SGD,
        "rmsprop": keras.optimizers.RMSprop,
    }
    return chosen if chosen is not None else optimizers[config.optimizer](learning_rate=config.learning_rate)


def jit_setting(config: RunConfig) -> bool | str:
    """`--xla` asks for compilation (torch.compile on PyTorch); off leaves Keras's default, which on JAX compiles with XLA anyway."""
    return True if config.xla else "auto"


def planned_steps(config: RunConfig, workload: Any, batches_per_epoch: int) -> tuple[int, int, list[str]]:
    """(total steps, steps per call, notes): `steps`, or `epochs` passes; calls shortened as the TF engine does."""
    from core.training.metrics import call_size
    from core.workloads.data import batch_warning

    total = config.steps if config.epochs is None else config.epochs * (workload.steps_per_epoch(config.batch_size) or config.steps)
    per_call, why = call_size(config.steps_per_call, total)
    notes = [note for note in (batch_warning(config, workload.num_examples), why) if note]
    if total % per_call:
        total = math.ceil(total / per_call) * per_call
        notes.append(f"{total} steps were run: model.fit runs whole calls of {per_call} steps.")
    return total, per_call, notes


def environment(config: RunConfig, devices: list[str]) -> dict[str, Any]:
    """Versions the result was measured with: the backend's, Keras's, Python's, the platform."""
    import platform
    import socket
    from importlib.metadata import version

    import keras

    return {
        "backend": config.backend,
        config.backend: version(config.backend),
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "devices": devices,
    }


def backend_devices(config: RunConfig, replicas: int) -> list[str]:
    """Short names of the devices the run trains on ("CPU:0")."""
    if config.devices:
        return list(config.devices)
    if config.backend == "torch":
        import torch

        return ["GPU:0" if torch.cuda.is_available() else "CPU:0"]
    import keras

    first = keras.distribution.list_devices()[:replicas] or ["cpu:0"]
    return [name.upper() for name in first]


def process_memory(pid: int | str = "self") -> dict[str, int]:
    """A process's memory figures from Linux's /proc/PID/status, in bytes ("VmHWM", "VmRSS", "VmData", ...).

    {} where there is no such file (macOS, Windows, a process that has ended) or it cannot be read.
    """
    sizes = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                number, _, unit = value.strip().partition(" ")
                if name.startswith("Vm") and unit == "kB":
                    sizes[name] = int(number) * 1024
    except (OSError, ValueError):
        return {}
    return sizes


def peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM where Linux has it, which starts afresh at exec.

    Linux's ru_maxrss does not: it keeps the resident size of the process this one was forked from (the
    app, TensorFlow loaded), so a JAX job started from a 1.5 GB parent read 2.2 GB for a small MLP.
    """
    peak = process_memory().get("VmHWM")
    if peak is not None:
        return peak
    import resource  # no /proc (macOS): the kernel's own peak

    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss if sys.platform == "darwin" else maxrss * 1024)

"""Versions and hardware a result was measured on, kept with it for the history and exports."""

from __future__ import annotations

import platform
import socket
from collections.abc import Sequence
from typing import Any

from core.machine.peak_estimates import run_peak_environment
from core.machine.types import short_name


def environment(device_names: Sequence[str] = (), precision: str = "off") -> dict[str, Any]:
    """Versions and hardware a result was measured on, for the history and exports.

    `devices` are the run's, `logical_devices` all TensorFlow had (two logical
    CPUs split one CPU). With the devices' estimated peak FLOP/s for `precision` and whether the CPU
    has native bfloat16 (`run_peak_environment`): a comparison shown later reads
    these instead of the hardware.
    """
    import keras
    import tensorflow as tf

    env: dict[str, Any] = {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "devices": list(device_names),
        "logical_devices": [short_name(d.name) for d in tf.config.list_logical_devices()],
        "cpu": _cpu_model(),
    }
    build = tf.sysconfig.get_build_info()
    env["cuda_build"] = bool(build.get("is_cuda_build"))
    env["cuda"] = build.get("cuda_version", "")
    env["cudnn"] = build.get("cudnn_version", "")
    env.update(run_peak_environment(device_names, precision))
    return env


def _cpu_model() -> str:
    try:
        from core.machine.cpu import cpu_info

        return cpu_info().get("Model", platform.processor())
    except Exception:
        return platform.processor() or "n/a"

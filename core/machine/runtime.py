"""Process-wide TensorFlow settings that must be applied before the TF runtime starts.

Splitting the CPU into logical devices and GPU memory growth/limits can only be
set before TensorFlow initialises its devices; afterwards TF refuses them. Call
`configure_runtime` once at start-up (CLI, GUI worker, benchmark) before
anything lists devices or builds a model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from core.config import MAX_LOGICAL_CPUS, ConfigError

MEMORY_GROWTH_NOTE = (
    "Why TensorFlow seems to take the whole GPU: without memory growth its allocator reserves nearly all of "
    "each GPU's memory when it starts, so nvidia-smi and the driver count it as used however little the "
    "tensors need. With memory growth on, it reserves memory as tensors need it and keeps it for reuse: the "
    "driver's figure is then the run's high-water mark plus the CUDA context (a few hundred MiB). "
    "Either way, what tensors use is TensorFlow's own figure (in use, peak)."
)


@dataclass(frozen=True)
class RuntimeSettings:
    """Start-up device settings; 0 means 'leave TensorFlow's default' (see MEMORY_GROWTH_NOTE for growth)."""

    logical_cpus: int = 0
    gpu_memory_growth: bool = True
    gpu_memory_limit_mb: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.logical_cpus, bool) or not isinstance(self.logical_cpus, int) or not 0 <= self.logical_cpus <= MAX_LOGICAL_CPUS:
            raise ConfigError("logical_cpus", self.logical_cpus, f"a whole number from 0 (no split) to {MAX_LOGICAL_CPUS}")
        if isinstance(self.gpu_memory_limit_mb, bool) or not isinstance(self.gpu_memory_limit_mb, int) or self.gpu_memory_limit_mb < 0:
            raise ConfigError("gpu_memory_limit_mb", self.gpu_memory_limit_mb, "0 (no limit) or a positive number of MiB")


def quiet_tensorflow_logs() -> None:
    """Keep TF's C++ start-up chatter out of the terminal (set before TF is imported)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def configure_runtime(settings: RuntimeSettings) -> list[str]:
    """Apply `settings` to TensorFlow; returns warnings for settings that came too late."""
    quiet_tensorflow_logs()
    import tensorflow as tf

    warnings: list[str] = []
    try:
        if settings.logical_cpus > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(settings.logical_cpus)])
        for gpu in tf.config.list_physical_devices("GPU"):
            if settings.gpu_memory_limit_mb:
                tf.config.set_logical_device_configuration(
                    gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=settings.gpu_memory_limit_mb)]
                )
            else:
                tf.config.experimental.set_memory_growth(gpu, settings.gpu_memory_growth)
    except RuntimeError as exc:
        warnings.append(f"Device settings not applied: TensorFlow was already initialised ({exc}). They take effect after a restart.")
    return warnings

"""What this machine can train on: CPUs, GPUs and TPUs as TensorFlow sees them, with memory.

The list merges four sources: `tf.config` (which devices TF can use and their names),
psutil and py-cpuinfo (the CPU and host RAM), NVML (GPUs as the NVIDIA driver sees them,
see `core.machine.gpu`) and a time-boxed TPU probe (`core.machine.tpu`). TensorFlow is imported
inside the functions, so importing this module is cheap and the GUI can show its window
first. Where TensorFlow is not installed (JAX or PyTorch only) the list comes from the
OS, NVML and the TPU hint alone, and a note says so. Every field is read on its own: one that cannot be read shows "n/a" and the rest
of the listing still appears. Memory is counted once: logical CPUs split from one
CPU share the host's RAM, which only the first of them carries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from core.machine import gpu, tpu
from core.machine.cpu import cpu_rows
from core.machine.types import DeviceInfo, DeviceReport, Note, NoteTopic
from core.tensorflow_import import tensorflow_installed


def _section(label: str, build: Callable[[], tuple[list[DeviceInfo], list[Note]]]) -> tuple[list[DeviceInfo], list[Note]]:
    """Run one part of the listing; if it fails as a whole, say so in a note instead of failing all."""
    try:
        return build()
    except Exception as error:
        text = f"{label} check failed ({type(error).__name__}: {error}); the other devices are listed."
        return [], [Note(NoteTopic.CHECK_FAILED, text)]


def inspect_devices(probe_tpu: bool = True) -> DeviceReport:
    """Every device TF can use (one row per logical device) plus hardware it cannot, with notes.

    The TPU check is a cheap look for TPU hardware; only when it finds a hint and
    `probe_tpu` is true does it start the time-boxed TPU probe (`core.machine.tpu`).
    """
    if not tensorflow_installed():
        return _inspect_without_tensorflow()
    import tensorflow as tf

    cpus, cpu_notes = _section("CPU", lambda: (share_host_memory(cpu_rows(tf)), []))
    gpus, gpu_notes = _section("GPU", lambda: gpu.gpu_rows(tf))
    tpus, tpu_notes = _section("TPU", lambda: tpu.tpu_rows(tf, probe=probe_tpu))
    return DeviceReport(tuple(cpus + gpus + tpus), tuple(cpu_notes + gpu_notes + tpu_notes))


NO_TENSORFLOW_NOTE = (
    "TensorFlow is not installed: devices are listed as the OS and the NVIDIA driver see them, and none of them "
    "trains TensorFlow jobs here. JAX and PyTorch train on them (their devices are listed under backends: "
    "jax:GPU:0, torch:CPU:0, ...); pip install tensorflow adds the TensorFlow engine."
)


def _inspect_without_tensorflow() -> DeviceReport:
    """The CPU from the OS, GPUs from NVML and a TPU hint, each marked as unusable by TensorFlow (not installed)."""
    cpus, cpu_notes = _section("CPU", lambda: (cpu_rows(None), []))
    gpus, gpu_notes = _section("GPU", gpu.gpu_rows_without_tensorflow)
    tpus, tpu_notes = _section("TPU", lambda: tpu.tpu_rows(None, probe=False))
    notes = [Note(NoteTopic.NO_TENSORFLOW, NO_TENSORFLOW_NOTE), *cpu_notes, *gpu_notes, *tpu_notes]
    return DeviceReport(tuple(cpus + gpus + tpus), tuple(notes))


def share_host_memory(cpus: list[DeviceInfo]) -> list[DeviceInfo]:
    """CPU devices all use the host's RAM: the first row carries it, the others name that row (memory counted once)."""
    if len(cpus) < 2:
        return cpus
    owner = cpus[0].tf_name
    shared = {"RAM shared by": ", ".join(cpu.tf_name for cpu in cpus)}
    rest = [
        replace(cpu, memory_total=None, memory_used=None, memory_free=None, memory_shared_with=owner, details={**cpu.details, **shared})
        for cpu in cpus[1:]
    ]
    return [replace(cpus[0], details={**cpus[0].details, **shared}), *rest]


def list_devices() -> list[DeviceInfo]:
    """`inspect_devices().devices` as a list."""
    return list(inspect_devices().devices)


def refresh_gpu_usage(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """GPU rows with memory, utilisation, temperature and power re-read from NVML; others unchanged.

    Cheap (no TensorFlow calls): meant for a GUI timer every couple of seconds.
    """
    return gpu.refresh(devices)


def device_table_rows(report: DeviceReport) -> list[dict[str, Any]]:
    """JSON-ready rows (memory in bytes) for `devices --json` and the CLI table.

    `bus_id` stays out: it is the matching key for NVML re-reads, and the details already show it.
    """
    rows = []
    for device in report.devices:
        row = asdict(device)
        del row["bus_id"]
        rows.append(row)
    return rows

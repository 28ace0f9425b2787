"""The records every device reader fills in (CPU, GPU, TPU), and the small helpers the readers share."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from core.formatting import NA, format_bytes


@dataclass(frozen=True)
class DeviceInfo:
    """One row of the device list: a TF logical device, or hardware TF cannot use."""

    kind: str  # "CPU" | "GPU" | "TPU"
    name: str  # display name, e.g. "AMD EPYC 7B13", "NVIDIA H100 80GB HBM3"
    tf_name: str  # TF logical device short name "CPU:0", "GPU:1"; "" when TF cannot use it
    memory_total: int | None  # bytes; None when unknowable
    memory_used: int | None
    memory_free: int | None
    details: dict[str, str]  # ordered label -> value; a field that cannot be read is "n/a"
    available: bool = True  # False: the system sees it but TensorFlow cannot use it
    reason: str = ""  # for unavailable devices: why, and the fix
    bus_id: str = ""  # GPUs: normalised PCI bus id "0000:04:00.0", how NVML re-reads are matched; "" otherwise
    memory_shared_with: str = ""  # TF name of the row whose memory this device uses (logical CPUs: "CPU:0"); its own are None

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies this row across re-reads: kind, TF name and bus id (driver-only GPUs have no TF name)."""
        return self.kind, self.tf_name, self.bus_id


def memory_cells(device: DeviceInfo) -> tuple[str, str, str]:
    """Total, used and free memory as table text; a device using another row's memory says whose, once."""
    if device.memory_shared_with:
        return f"shared with {device.memory_shared_with}", "", ""
    return format_bytes(device.memory_total), format_bytes(device.memory_used), format_bytes(device.memory_free)


class NoteTopic(Enum):
    """What a device-report note is about, so code can pick notes without reading their wording."""

    CHECK_FAILED = "check_failed"  # one part of the listing (CPU, GPU or TPU) failed as a whole
    NO_GPU = "no_gpu"  # no GPU TensorFlow can use
    NO_TPU = "no_tpu"  # no TPU hardware found
    TPU_UNUSED = "tpu_unused"  # TPU hardware seen, but TensorFlow is not using it
    NO_TENSORFLOW = "no_tensorflow"  # TensorFlow is not installed: the devices as the OS and the driver see them


@dataclass(frozen=True)
class Note:
    """One plain-language note on what is missing and how to get it."""

    topic: NoteTopic
    text: str


@dataclass(frozen=True)
class DeviceReport:
    """The device list plus notes on what is missing and how to get it."""

    devices: tuple[DeviceInfo, ...]
    note_records: tuple[Note, ...]

    @property
    def notes(self) -> tuple[str, ...]:
        """The notes' texts in order: what the CLI prints and the device panel shows."""
        return tuple(note.text for note in self.note_records)


@dataclass(frozen=True)
class TpuProbe:
    """Outcome of `probe_tpu`: on success one DeviceInfo per TPU core."""

    ok: bool
    message: str  # success: "TPU v3-8: 8 cores"; failure: readable reason + what to do
    devices: tuple[DeviceInfo, ...] = ()
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class LogicalSlot:
    """A local TF logical device and the physical device it was carved from."""

    tf_name: str  # "GPU:1"
    physical: Any  # tf.config.PhysicalDevice, or None when TF's numbering could not be followed
    position: int  # 1-based among the logical devices made from `physical`
    count: int  # how many logical devices were made from `physical`
    memory_limit: int | None = None  # bytes, when a logical-device configuration sets one


def try_read(read: Callable[[], Any]) -> Any | None:
    """`read()`, or None when it raises: drivers fail per field (no permission, unsupported, too old)."""
    try:
        return read()
    except Exception:
        return None


def read_field(read: Callable[[], Any], fmt: Callable[[Any], str] = str) -> str:
    """`fmt(read())` as display text; "n/a" when reading or formatting fails or yields nothing."""
    try:
        value = read()
        text = "" if value is None else fmt(value)
    except Exception:
        return NA
    return text or NA


def short_name(device_name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:1' -> 'GPU:1'."""
    return device_name.split("device:")[-1]


def logical_layout(tf: Any, kind: str) -> list[LogicalSlot]:
    """TF's local logical devices of `kind`, each paired with its physical device.

    TF numbers logical devices in order over the visible physical devices, each one
    contributing as many as its logical-device configuration lists (or one). Without
    TensorFlow (`tf` None) the host is one CPU, "CPU:0", and no other kind is listed.
    """
    if tf is None:
        return [LogicalSlot("CPU:0", None, 1, 1)] if kind == "CPU" else []
    names = [short_name(d.name) for d in tf.config.list_logical_devices(kind) if _is_local(d.name)]
    slots: list[tuple[Any, int, int, int | None]] = []
    for physical in try_read(lambda: tf.config.get_visible_devices(kind)) or []:
        configs = try_read(functools.partial(tf.config.get_logical_device_configuration, physical)) or [None]
        for position, config in enumerate(configs, 1):
            limit_mb = getattr(config, "memory_limit", None)
            slots.append((physical, position, len(configs), limit_mb * 2**20 if limit_mb else None))
    return [LogicalSlot(name, *slots[i]) if i < len(slots) else LogicalSlot(name, None, 1, 1) for i, name in enumerate(names)]


def _is_local(device_name: str) -> bool:
    return "/job:" not in device_name or "/job:localhost/" in device_name

"""What this machine can train on: CPUs, GPUs and TPUs as TensorFlow sees them, with memory.

The list merges four sources: `tf.config` (which devices TF can use and their names),
psutil and py-cpuinfo (the CPU and host RAM), NVML (GPUs as the NVIDIA driver sees them,
see `core.gpu_info`) and a time-boxed TPU probe (`core.tpu`). TensorFlow is imported
inside the functions, so importing this module is cheap and the GUI can show its window
first. Every field is read on its own: one that cannot be read shows "n/a" and the rest
of the listing still appears.
"""

from __future__ import annotations

import functools
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import psutil

NA = "n/a"

_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}


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


@dataclass(frozen=True)
class DeviceReport:
    """The device list plus plain-language notes on what is missing and how to get it."""

    devices: tuple[DeviceInfo, ...]
    notes: tuple[str, ...]


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


def format_bytes(n: int | None) -> str:
    """Bytes in binary units for display: "15.6 GiB"; "n/a" for None."""
    if n is None:
        return NA
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def short_name(device_name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:1' -> 'GPU:1'."""
    return device_name.split("device:")[-1]


def logical_layout(tf: Any, kind: str) -> list[LogicalSlot]:
    """TF's local logical devices of `kind`, each paired with its physical device.

    TF numbers logical devices in order over the visible physical devices, each one
    contributing as many as its logical-device configuration lists (or one).
    """
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


_CPU_INFO_LOCK = threading.Lock()


@functools.cache
def _cpu_info_cached() -> tuple[tuple[str, str], ...]:
    import cpuinfo

    raw: dict[str, Any] = try_read(cpuinfo.get_cpu_info) or {}
    flags = set(raw.get("flags") or ())
    freq = try_read(psutil.cpu_freq)

    def has(*names: str) -> str:
        if not flags:
            return NA
        found = [n for n in names if n in flags]
        return ("yes" if len(names) == 1 else "yes (" + ", ".join(found) + ")") if found else "no"

    info = {
        "Model": read_field(lambda: raw.get("brand_raw") or platform.processor()),
        "Vendor": read_field(lambda: _VENDORS.get(raw["vendor_id_raw"], raw["vendor_id_raw"])),
        "Architecture": read_field(lambda: raw.get("arch_string_raw") or platform.machine()),
        "Physical cores": read_field(lambda: psutil.cpu_count(logical=False)),
        "Logical cores": read_field(lambda: psutil.cpu_count(logical=True)),
        "Frequency (current)": read_field(lambda: freq.current or None, _ghz),
        "Frequency (max)": read_field(lambda: (freq.max if freq else 0) or raw["hz_advertised"][0] / 1e6, _ghz),
        "AVX2": has("avx2"),
        "AVX-512 (F)": has("avx512f"),
        "AVX-512 BF16": has("avx512_bf16"),
        "AMX": has("amx_tile", "amx_bf16"),
        "FMA": has("fma"),
    }
    return tuple(info.items())


def _ghz(mhz: float) -> str:
    return f"{mhz / 1000:.2f} GHz" if mhz > 0 else ""


def cpu_info() -> dict[str, str]:
    """The CPU for display: model, vendor, cores, frequency and the ISA features TF uses.

    Cached for the process: py-cpuinfo takes about a second (it starts a
    subprocess), so callers that know they will need it start
    `prefetch_cpu_info()` early, e.g. while TensorFlow imports.
    """
    with _CPU_INFO_LOCK:
        return dict(_cpu_info_cached())


def prefetch_cpu_info() -> threading.Thread:
    """Read the CPU details in a background thread; a later `cpu_info()` waits for it."""
    thread = threading.Thread(target=cpu_info, name="cpu-info", daemon=True)
    thread.start()
    return thread


def _cpu_rows(tf: Any) -> list[DeviceInfo]:
    info = cpu_info()
    memory = try_read(psutil.virtual_memory)
    total = getattr(memory, "total", None)
    free = getattr(memory, "available", None)
    used = total - free if total is not None and free is not None else None
    rows = []
    for slot in logical_layout(tf, "CPU"):
        details = {**info, "RAM total": format_bytes(total), "RAM available": format_bytes(free)}
        if slot.count > 1:
            details["Logical device"] = f"{slot.position} of {slot.count} (split of one physical CPU)"
        name = info["Model"] if info["Model"] != NA else "CPU"
        rows.append(DeviceInfo("CPU", name, slot.tf_name, total, used, free, details))
    return rows


def _section(label: str, build: Callable[[], tuple[list[DeviceInfo], list[str]]]) -> tuple[list[DeviceInfo], list[str]]:
    """Run one part of the listing; if it fails as a whole, say so in a note instead of failing all."""
    try:
        return build()
    except Exception as error:
        return [], [f"{label} check failed ({type(error).__name__}: {error}); the other devices are listed."]


def inspect_devices(probe_tpu: bool = True) -> DeviceReport:
    """Every device TF can use (one row per logical device) plus hardware it cannot, with notes.

    The TPU check is a cheap look for TPU hardware; only when it finds a hint and
    `probe_tpu` is true does it start the time-boxed TPU probe (`core.tpu`).
    """
    import tensorflow as tf

    from core import gpu_info, tpu

    cpus, cpu_notes = _section("CPU", lambda: (_cpu_rows(tf), []))
    gpus, gpu_notes = _section("GPU", lambda: gpu_info.gpu_rows(tf))
    tpus, tpu_notes = _section("TPU", lambda: tpu.tpu_rows(tf, probe=probe_tpu))
    return DeviceReport(tuple(cpus + gpus + tpus), tuple(cpu_notes + gpu_notes + tpu_notes))


def list_devices() -> list[DeviceInfo]:
    """`inspect_devices().devices` as a list."""
    return list(inspect_devices().devices)


def refresh_gpu_usage(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """GPU rows with memory, utilisation, temperature and power re-read from NVML; others unchanged.

    Cheap (no TensorFlow calls): meant for a GUI timer every couple of seconds.
    """
    from core import gpu_info

    return gpu_info.refresh(devices)


def detect_tpu_cheaply() -> str:
    """What hints at a TPU (PCI vendor 0x1ae0, /dev/accel*, TPU env vars); empty when nothing does."""
    from core import tpu

    return tpu.detect_tpu_cheaply()


def probe_tpu(address: str = "local", timeout_s: float = 30.0) -> TpuProbe:
    """Connect to and initialise a TPU in a child process, killed after `timeout_s`.

    `address` is "local" (Cloud TPU VM), a TPU name, or "grpc://host:port". TF's TPU
    initialisation against an address where nothing listens hangs for minutes, so it
    never runs in this process.
    """
    from core import tpu

    return tpu.probe_tpu(address, timeout_s)


def device_table_rows(report: DeviceReport) -> list[dict[str, Any]]:
    """JSON-ready rows (memory in bytes) for `devices --json`."""
    return [asdict(device) for device in report.devices]


__all__ = [
    "NA",
    "DeviceInfo",
    "DeviceReport",
    "TpuProbe",
    "cpu_info",
    "detect_tpu_cheaply",
    "device_table_rows",
    "format_bytes",
    "inspect_devices",
    "list_devices",
    "probe_tpu",
    "refresh_gpu_usage",
]

"""GPU rows: TensorFlow's GPUs joined with what the NVIDIA driver reports through NVML.

Matching a TF GPU to an NVML device: TF names physical GPUs by CUDA device ordinal
("/physical_device:GPU:i" is CUDA device i, after CUDA_VISIBLE_DEVICES) and does not
expose PCI bus ids (`tf.config.experimental.get_device_details` gives only the name and
compute capability). So the CUDA driver is asked for ordinal -> PCI bus id
(`cuDeviceGetPCIBusId` through ctypes: the numbering TF itself gets) and the NVML device
with that bus id is taken. Without the CUDA driver library the fallback is index order
(NVML device i = TF GPU i), which is right on one-GPU machines and with
CUDA_DEVICE_ORDER=PCI_BUS_ID and no CUDA_VISIBLE_DEVICES.

NVML is optional: without it TF's GPUs are still listed, with TF's own allocator numbers.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.formatting import format_bytes
from core.machine.types import NA, DeviceInfo, LogicalSlot, Note, NoteTopic, logical_layout, read_field, try_read

INSTALL_FIX = "`pip install 'tensorflow[and-cuda]'`"
NO_DRIVER = "no NVIDIA driver found (nvidia-smi / libnvidia-ml not present)"
HIDDEN_BY_TF = "Hidden by tf.config.set_visible_devices: include it there (or drop that setting) and restart."


@dataclass(frozen=True)
class DriverGpu:
    """One GPU as the NVIDIA driver reports it."""

    bus_id: str  # normalised "0000:04:00.0"; "" when unreadable
    name: str
    memory: tuple[int | None, int | None, int | None]  # total, used, free (bytes)
    compute_capability: str
    usage: dict[str, str]  # the fields `refresh` re-reads: memory, utilisation, temperature, power


@functools.cache
def load_nvml() -> tuple[Any | None, str]:
    """(initialised pynvml module, "") or (None, why the driver cannot be asked). Once per process."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed, so the NVIDIA driver could not be asked"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return None, NO_DRIVER
    except pynvml.NVMLError as error:
        return None, f"the NVIDIA driver did not answer ({error})"
    return pynvml, ""


def driver_gpu_count() -> int:
    """How many GPUs the NVIDIA driver lists (0 without NVML): JAX's and PyTorch's GPUs, found without starting either."""
    nvml, _ = load_nvml()
    return (try_read(nvml.nvmlDeviceGetCount) or 0) if nvml is not None else 0


def normalize_bus_id(raw: str | bytes) -> str:
    """'00000000:04:00.0' (NVML) or '0000:04:00.0' (CUDA) -> '0000:04:00.0'."""
    domain, bus, slot = _text(raw).strip().lower().split(":")
    device, function = slot.split(".")
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function, 16)}"


def cuda_bus_ids() -> dict[int, str]:
    """CUDA device ordinal -> PCI bus id from the CUDA driver; {} when the driver library is missing."""
    try:
        cuda = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return {}
    count = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return {}
    ids = {}
    for ordinal in range(count.value):
        device = ctypes.c_int()
        buffer = ctypes.create_string_buffer(32)
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) == 0 and cuda.cuDeviceGetPCIBusId(buffer, 32, device) == 0:
            ids[ordinal] = normalize_bus_id(buffer.value)
    return ids


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _watts(milliwatts: float) -> str:
    return f"{milliwatts / 1000:.0f} W"


def _cuda_version(encoded: int) -> str:
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _driver_handles(nvml: Any) -> list[tuple[str, Any]]:
    """(normalised bus id or "", handle) for each GPU the driver lists, in NVML index order."""
    handles = []
    for index in range(try_read(nvml.nvmlDeviceGetCount) or 0):
        handle = try_read(functools.partial(nvml.nvmlDeviceGetHandleByIndex, index))
        if handle is not None:
            handles.append((_bus_id(nvml, handle), handle))
    return handles


def _bus_id(nvml: Any, handle: Any) -> str:
    """The GPU's normalised PCI bus id, "" when the driver does not say."""
    return try_read(lambda: normalize_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)) or ""


def read_memory_info(nvml: Any, handle: Any) -> Any | None:
    """NVML's memory info, version 2 where the driver and nvidia-ml-py have it (as nvidia-smi reads it), else version 1.

    Version 1's `used` counts the memory the driver reserves for itself: an idle H100
    read 480 MiB used there where nvidia-smi said 0 (2026-11-27). Version 2 gives that
    share apart, as `reserved`.
    """
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        memory = try_read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle, version=version))
        if memory is not None:
            return memory
    return try_read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))


def _usage(nvml: Any, handle: Any) -> tuple[tuple[int | None, int | None, int | None], dict[str, str]]:
    """Memory (total, used, free) and the display fields that change while a GPU works."""
    memory = read_memory_info(nvml, handle)
    total, used, free = (getattr(memory, key, None) for key in ("total", "used", "free"))
    reserved = getattr(memory, "reserved", None)
    usage = {
        "Memory total": format_bytes(total),
        "Memory used": format_bytes(used),
        "Memory free": format_bytes(free),
        **({"Memory reserved by the driver": format_bytes(reserved)} if reserved is not None else {}),
        "Utilisation": read_field(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu, "{} %".format),
        "Temperature": read_field(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU), "{} °C".format),
        "Power draw": read_field(lambda: nvml.nvmlDeviceGetPowerUsage(handle), _watts),
        "Power limit": read_field(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle), _watts),
    }
    return (total, used, free), usage


def read_driver_gpus(nvml: Any) -> list[DriverGpu]:
    """Every GPU the NVIDIA driver lists, whether or not TensorFlow can use it."""
    return [_driver_gpu(nvml, bus_id, handle) for bus_id, handle in _driver_handles(nvml)]


def _driver_gpu(nvml: Any, bus_id: str, handle: Any) -> DriverGpu:
    memory, usage = _usage(nvml, handle)
    name = read_field(lambda: _text(nvml.nvmlDeviceGetName(handle)))
    capability = read_field(lambda: "{}.{}".format(*nvml.nvmlDeviceGetCudaComputeCapability(handle)))
    return DriverGpu(bus_id, name, memory, capability, usage)


def _system_details(nvml: Any | None, build: dict[str, Any]) -> dict[str, str]:
    """Driver and CUDA versions, shared by every GPU row."""
    return {
        "Driver version": read_field(lambda: _text(nvml.nvmlSystemGetDriverVersion())) if nvml is not None else NA,
        "CUDA (driver supports)": read_field(lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion())) if nvml is not None else NA,
        "CUDA (TensorFlow build)": read_field(lambda: build["cuda_version"]),
        "cuDNN (TensorFlow build)": read_field(lambda: build["cudnn_version"]),
    }


def _tf_row(tf: Any, slot: LogicalSlot, bus_id: str, gpu: DriverGpu | None, system: dict[str, str], has_nvml: bool) -> DeviceInfo:
    """A GPU TensorFlow can use; memory from NVML when the driver reported it, else TF's allocator."""
    tf_details = try_read(lambda: tf.config.experimental.get_device_details(slot.physical)) or {}
    capability = tf_details.get("compute_capability")
    if capability:
        details = {"Compute capability": "{}.{}".format(*capability)}
    else:
        details = {"Compute capability": gpu.compute_capability if gpu else NA}
    if gpu is not None:
        memory = gpu.memory
        details |= gpu.usage
    else:
        allocator = try_read(lambda: tf.config.experimental.get_memory_info(slot.tf_name)) or {}
        memory = (None, allocator.get("current"), None)
        unknown = "NVML not available" if not has_nvml else "the driver did not report this GPU"
        details["Memory total"] = f"total unknown ({unknown})"
        details["Memory used by TensorFlow"] = format_bytes(allocator.get("current"))
        details["Peak used by TensorFlow"] = format_bytes(allocator.get("peak"))
    if slot.memory_limit:
        details["Memory limit (TensorFlow)"] = format_bytes(slot.memory_limit)
    if slot.count > 1:
        details["Logical device"] = f"{slot.position} of {slot.count} (split of one physical GPU)"
    details |= system
    details["PCI bus id"] = bus_id or NA
    name = tf_details.get("device_name") or (gpu.name if gpu else "") or "GPU"
    return DeviceInfo("GPU", name, slot.tf_name, *memory, details, bus_id=bus_id)


def _driver_only_row(gpu: DriverGpu, system: dict[str, str], reason: str) -> DeviceInfo:
    """A GPU the driver sees but TensorFlow cannot use."""
    details = {"Compute capability": gpu.compute_capability, **gpu.usage, **system, "PCI bus id": gpu.bus_id or NA}
    return DeviceInfo("GPU", gpu.name, "", *gpu.memory, details, available=False, reason=reason, bus_id=gpu.bus_id)


def _unused_reason(tf_has_gpus: bool, build: dict[str, Any]) -> str:
    """Why a GPU the driver lists is not among TensorFlow's, and the fix."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if tf_has_gpus or (visible is not None and visible.strip() in ("", "-1")):
        if visible is not None:
            return f"Hidden by CUDA_VISIBLE_DEVICES={visible!r}: add this GPU to it (or unset it) and restart."
        return "TensorFlow skipped this GPU; its start-up log says why (usually a compute capability below its minimum)."
    if not build.get("is_cuda_build"):
        return (
            "This TensorFlow build has no CUDA support (tf.sysconfig.get_build_info()['is_cuda_build'] is False). "
            f"Fix: {INSTALL_FIX} (Linux or WSL2) and restart."
        )
    return (
        f"TensorFlow is built for CUDA {build.get('cuda_version', '?')} but found no usable GPU: the CUDA/cuDNN "
        f"libraries are missing or the driver is too old. Fix: {INSTALL_FIX} for matching libraries, update the "
        "driver if TensorFlow's start-up log asks for a newer one, and restart."
    )


def _no_gpu_note(nvml_problem: str, driver_gpus: list[DriverGpu], reason: str, build: dict[str, Any]) -> str:
    """Why TensorFlow has no GPU, and the fix, from what the driver said."""
    if nvml_problem == NO_DRIVER:
        note = f"No GPU visible to TensorFlow: {NO_DRIVER}. Install the NVIDIA driver and {INSTALL_FIX}."
        if not build.get("is_cuda_build"):
            note += " This TensorFlow build also lacks CUDA support."
        return note
    if nvml_problem:
        return f"No GPU visible to TensorFlow ({nvml_problem}). With an NVIDIA GPU: install the driver and {INSTALL_FIX}."
    if not driver_gpus:
        return "No GPU visible to TensorFlow: the NVIDIA driver is installed but reports no GPU."
    return f"No GPU visible to TensorFlow: the driver sees {len(driver_gpus)} GPU(s) that TensorFlow cannot use. {reason}"


def _physical_index(physical: Any) -> int:
    return int(physical.name.rsplit(":", 1)[-1])


def _physical_bus_id(physical: Any, cuda_ids: dict[int, str], driver_buses: Sequence[str]) -> str:
    """The PCI bus id of a TF physical GPU: the CUDA driver's numbering, else NVML index order; "" when unknown."""
    index = try_read(lambda: _physical_index(physical))
    return "" if index is None else _ordinal_bus_id(index, cuda_ids, driver_buses)


def _ordinal_bus_id(index: int, cuda_ids: dict[int, str], driver_buses: Sequence[str]) -> str:
    """The PCI bus id of CUDA device `index`: the CUDA driver's numbering, else NVML index order; "" when unknown."""
    if cuda_ids:
        return cuda_ids.get(index, "")
    return driver_buses[index] if index < len(driver_buses) else ""


def run_gpu_handles(nvml: Any, device_names: Sequence[str]) -> list[tuple[str, Any]]:
    """(TF name, NVML handle) for each physical GPU among a run's devices ("GPU:0", …), matched as the device list matches them.

    Logical GPUs carved from one physical GPU share its handle, listed once. Where TensorFlow is not
    installed (JAX or PyTorch only), "GPU:i" is CUDA device i, as those backends number their GPUs.
    """
    if not any(name.startswith("GPU") for name in device_names):
        return []
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
    slots = {slot.tf_name: slot for slot in logical_layout(tf, "GPU")} if tf is not None else {}
    driver = _driver_handles(nvml)
    by_bus = {bus_id: handle for bus_id, handle in driver if bus_id}
    cuda_ids = cuda_bus_ids()
    driver_buses = [bus for bus, _ in driver]
    found: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for name in device_names:
        if tf is None:
            kind, _, index = name.partition(":")
            bus_id = _ordinal_bus_id(int(index), cuda_ids, driver_buses) if kind == "GPU" and index.isascii() and index.isdigit() else ""
        else:
            slot = slots.get(name)
            if slot is None or slot.physical is None:
                continue
            bus_id = _physical_bus_id(slot.physical, cuda_ids, driver_buses)
        if bus_id and bus_id not in seen and bus_id in by_bus:
            seen.add(bus_id)
            found.append((name, by_bus[bus_id]))
    return found


def process_memory(nvml: Any, handle: Any, pid: int) -> int | None:
    """GPU memory the driver counts for process `pid` on this GPU (its CUDA context and allocator pool); None when not listed.

    In a container the driver reports host PIDs, so a process may not find itself.
    """
    processes = try_read(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)) or []
    for process in processes:
        if getattr(process, "pid", None) == pid:
            used = getattr(process, "usedGpuMemory", None)
            return int(used) if isinstance(used, int) else None
    return None


def gpu_rows(tf: Any) -> tuple[list[DeviceInfo], list[Note]]:
    """TF's logical GPUs, then GPUs only the driver sees (available=False), and notes on what is missing."""
    nvml, nvml_problem = load_nvml()
    driver_gpus = read_driver_gpus(nvml) if nvml else []
    build = try_read(tf.sysconfig.get_build_info) or {}
    system = _system_details(nvml, build)
    slots = logical_layout(tf, "GPU")
    physical = try_read(lambda: tf.config.list_physical_devices("GPU")) or []
    cuda_ids = cuda_bus_ids() if physical else {}

    def bus_of(device: Any) -> str:
        return _physical_bus_id(device, cuda_ids, [gpu.bus_id for gpu in driver_gpus])

    by_bus = {gpu.bus_id: gpu for gpu in driver_gpus if gpu.bus_id}
    slot_buses = [(slot, bus_of(slot.physical)) for slot in slots]
    rows = [_tf_row(tf, slot, bus_id, by_bus.get(bus_id), system, nvml is not None) for slot, bus_id in slot_buses]
    used = {bus_id for _, bus_id in slot_buses if bus_id}
    hidden_by_tf = {bus_of(device) for device in physical} - used - {""}
    reason = _unused_reason(bool(slots), build)
    for gpu in driver_gpus:
        if gpu.bus_id not in used:
            rows.append(_driver_only_row(gpu, system, HIDDEN_BY_TF if gpu.bus_id in hidden_by_tf else reason))
    notes = [] if slots else [Note(NoteTopic.NO_GPU, _no_gpu_note(nvml_problem, driver_gpus, reason, build))]
    return rows, notes


NOT_FOR_TENSORFLOW = "TensorFlow is not installed: JAX and PyTorch train on this GPU (jax:GPU:{index}, torch:GPU:{index})."


def gpu_rows_without_tensorflow() -> tuple[list[DeviceInfo], list[Note]]:
    """Where TensorFlow is not installed: each GPU the driver lists, in CUDA order, marked as not TensorFlow's."""
    nvml, nvml_problem = load_nvml()
    if nvml is None:
        return [], [Note(NoteTopic.NO_GPU, f"No GPU listed: {nvml_problem}.")]
    driver_gpus = read_driver_gpus(nvml)
    cuda_ids = cuda_bus_ids()
    ordinal = {bus_id: index for index, bus_id in cuda_ids.items()}
    system = _system_details(nvml, {})
    rows = []
    for position, driver_gpu in enumerate(driver_gpus):
        index = ordinal.get(driver_gpu.bus_id, position) if cuda_ids else position
        rows.append(_driver_only_row(driver_gpu, system, NOT_FOR_TENSORFLOW.format(index=index)))
    notes = [] if rows else [Note(NoteTopic.NO_GPU, "No GPU listed: the NVIDIA driver is installed but reports no GPU.")]
    return rows, notes


def refresh(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """GPU rows with usage fields re-read from NVML (matched by PCI bus id); other rows unchanged."""
    nvml, _ = load_nvml()
    if nvml is None or not any(device.kind == "GPU" for device in devices):
        return list(devices)
    handles = {bus_id: handle for bus_id, handle in _driver_handles(nvml) if bus_id}
    refreshed = []
    for device in devices:
        handle = handles.get(device.bus_id) if device.kind == "GPU" and device.bus_id else None
        if handle is None:
            refreshed.append(device)
            continue
        (total, used, free), usage = _usage(nvml, handle)
        details = {**device.details, **usage}
        refreshed.append(replace(device, memory_total=total, memory_used=used, memory_free=free, details=details))
    return refreshed

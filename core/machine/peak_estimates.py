"""What one device can do at most, estimated without measuring: GPU datasheet peaks, CPU ISA estimates.

A GPU's dense peak per math mode comes from its vendor's datasheet; a CPU's
from its cores, clock and vector width. These are the figures shown *beside*
a measured ceiling (`core.machine.peaks`), never instead of it. A run records
its devices' estimate in its environment (`run_peak_environment`) so that a
comparison, verdict or export shown later reads it back (`recorded_peak_flops`)
instead of the hardware, which may have changed or be another machine's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from core.machine import cpu as machine_cpu

if TYPE_CHECKING:
    from core.machine.types import DeviceInfo

# Keys of a run's `environment` under which it records its devices' peak (see `run_peak_environment`).
PEAK_FLOPS = "peak_flops"
PEAK_FLOPS_HOW = "peak_flops_how"
CPU_NATIVE_BFLOAT16 = "cpu_native_bfloat16"
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@dataclass(frozen=True)
class GpuPeak:
    """Dense (no sparsity) peak FLOP/s of one GPU, per math mode, in TFLOP/s."""

    name: str
    fp32: float
    tf32: float | None
    half: float | None
    bf16: bool = True


# Vendor datasheets, dense figures (the datasheets' "with sparsity" numbers halved):
# NVIDIA H200 and H100 Tensor Core GPU datasheets, A100 datasheet, A10, L4 and L40S
# datasheets, V100 and T4 datasheets, NVIDIA Ampere GA102 whitepaper (RTX 3090) and
# Ada Lovelace whitepaper (RTX 4090; FP16/BF16 with FP32 accumulate, as Keras mixed
# precision uses). First match wins, so specific patterns come before general ones.
GPU_PEAKS: tuple[tuple[str, GpuPeak], ...] = (
    (r"H200.*NVL", GpuPeak("H200 NVL", 60.0, 417.5, 835.5)),
    (r"H200", GpuPeak("H200 SXM", 67.0, 494.7, 989.4)),
    (r"H100.*NVL", GpuPeak("H100 NVL", 60.0, 417.5, 835.5)),
    (r"H100.*PCIE", GpuPeak("H100 PCIe", 51.0, 378.0, 756.0)),
    (r"H100", GpuPeak("H100 SXM", 67.0, 494.7, 989.4)),
    (r"A100", GpuPeak("A100", 19.5, 156.0, 312.0)),
    (r"\bA10\b", GpuPeak("A10", 31.2, 62.5, 125.0)),
    (r"L40S", GpuPeak("L40S", 91.6, 183.0, 362.05)),
    (r"\bL4\b", GpuPeak("L4", 30.3, 60.0, 121.0)),
    (r"V100.*PCIE", GpuPeak("V100 PCIe", 14.0, None, 112.0, bf16=False)),
    (r"V100", GpuPeak("V100 SXM2", 15.7, None, 125.0, bf16=False)),
    (r"\bT4\b", GpuPeak("T4", 8.1, None, 65.0, bf16=False)),
    (r"RTX 3090(?! TI)", GpuPeak("GeForce RTX 3090", 35.6, 35.6, 71.0)),
    (r"RTX 4090", GpuPeak("GeForce RTX 4090", 82.6, 82.6, 165.2)),
)


def gpu_peak(name: str) -> GpuPeak | None:
    """The table entry for a GPU model name such as "NVIDIA H100 80GB HBM3", or None."""
    upper = name.upper()
    return next((peak for pattern, peak in GPU_PEAKS if re.search(pattern, upper)), None)


def peak_flops(device: DeviceInfo | Mapping[str, Any], precision: str = "off", tf32: bool = True) -> tuple[float | None, str]:
    """(peak FLOP/s of one device for this precision, how it was found), or (None, why not).

    `precision` is the run's: "off" (float32), "float16" or "bfloat16".
    TensorFlow runs float32 matrix products in TF32 on Ampere and newer GPUs
    unless told not to, so the TF32 peak applies there; pass `tf32=False`
    when `tf.config.experimental.enable_tensor_float_32_execution(False)`.
    """
    kind, name = _field(device, "kind"), _field(device, "name")
    if kind == "GPU":
        return _gpu_peak_flops(str(name), precision, tf32)
    if kind == "CPU":
        return cpu_peak_flops()
    return None, f"no peak table for {kind or 'this'} devices"


def _gpu_peak_flops(name: str, precision: str, tf32: bool) -> tuple[float | None, str]:
    peak = gpu_peak(name)
    if peak is None:
        return None, f"GPU model {name!r} is not in the peak table"
    if precision == "bfloat16" and not peak.bf16:
        return None, f"{peak.name} has no bfloat16 tensor cores"
    if precision in ("float16", "bfloat16") and peak.half:
        return peak.half * 1e12, f"{peak.name} {precision} tensor-core dense peak (vendor datasheet)"
    if tf32 and peak.tf32:
        return peak.tf32 * 1e12, f"{peak.name} TF32 tensor-core dense peak (vendor datasheet; TF uses TF32 for float32)"
    return peak.fp32 * 1e12, f"{peak.name} FP32 peak (vendor datasheet)"


def _field(device: DeviceInfo | Mapping[str, Any], key: str) -> Any:
    return device.get(key) if isinstance(device, Mapping) else getattr(device, key, None)


@lru_cache(maxsize=1)
def cpu_peak_flops() -> tuple[float | None, str]:
    """This machine's CPU: usable physical cores x clock x float32 FLOPs per cycle per core.

    FLOPs per cycle from the widest vector unit: AVX-512 with two FMA units
    64 (32 on AMD Zen 4, which splits it over 256-bit units), AVX2 + FMA 32,
    AVX 16, ARM NEON 16, else 8. It is an upper bound:
    some AVX-512 parts have one FMA unit, and clocks drop under vector load.
    """
    import psutil

    info = machine_cpu.raw_cpu_info()
    flags = cpu_flags()
    per_cycle, unit = _flops_per_cycle(flags, info)
    physical = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else physical
    cores = min(physical, usable)
    hz = _cpu_hz(info)
    if not hz:
        return None, "CPU clock unknown"
    return cores * hz * per_cycle, f"{cores} cores x {hz / 1e9:.2f} GHz x {per_cycle} FLOPs/cycle ({unit}), float32 estimate"


def _flops_per_cycle(flags: frozenset[str], info: Mapping[str, Any]) -> tuple[int, str]:
    if "avx512f" in flags and info.get("vendor_id_raw") == "AuthenticAMD" and info.get("family") == 25:
        return 32, "AVX-512 on 256-bit units, AMD Zen 4"
    if "avx512f" in flags:
        return 64, "AVX-512, 2 FMA units"
    if "avx2" in flags and "fma" in flags:
        return 32, "AVX2 + FMA"
    if "avx" in flags:
        return 16, "AVX"
    if "ARM" in str(info.get("arch", "")).upper() or "asimd" in flags or "neon" in flags:
        return 16, "NEON"
    return 8, "SSE"


def cpu_flags() -> frozenset[str]:
    """This CPU's instruction-set flags as py-cpuinfo reports them ("avx2", "avx512_bf16", ...)."""
    return frozenset(machine_cpu.raw_cpu_info().get("flags") or ())


def _cpu_hz(info: Mapping[str, Any]) -> float | None:
    import psutil

    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):
        freq = None
    if freq is not None and (freq.max or freq.current):
        return (freq.max or freq.current) * 1e6
    advertised = info.get("hz_advertised") or info.get("hz_actual")
    return float(advertised[0]) if advertised and advertised[0] else None


def peak_flops_for_devices(device_names: Sequence[str], precision: str = "off") -> tuple[float | None, str]:
    """Peak FLOP/s of the devices one run used ("CPU:0", "GPU:1", ...) on this machine.

    GPUs add up; logical CPU devices split one physical CPU, so CPUs count once.
    """
    kinds = {name.split(":")[0] for name in device_names}
    if not device_names or len(kinds) != 1:
        return None, "no single device kind to look up"
    kind = kinds.pop()
    if kind == "CPU":
        return cpu_peak_flops()
    if kind != "GPU":
        return None, f"no peak table for {kind} devices"
    names = _gpu_model_names()
    if not names:
        return None, "no GPU model name available"
    tf32 = _tf32_enabled()
    total, how = 0.0, ""
    for device in device_names:
        index = int(device.split(":")[1])
        flops, how = _gpu_peak_flops(names[min(index, len(names) - 1)], precision, tf32)
        if flops is None:
            return None, how
        total += flops
    return total, how if len(device_names) == 1 else f"{len(device_names)} x {how}"


def run_peak_environment(device_names: Sequence[str], precision: str = "off") -> dict[str, Any]:
    """Environment entries for a run: its devices' estimated peak FLOP/s, how it was found, native CPU bfloat16.

    Called in the thread that trains: the estimate reads py-cpuinfo and
    TensorFlow's device details, which a comparison shown later must not.
    Never raises: a failed estimate records why.
    """
    try:
        peak, how = peak_flops_for_devices(device_names, precision)
        native = bool(cpu_flags() & BFLOAT16_FLAGS)
    except Exception as exc:  # instrumentation must never end a run
        return {PEAK_FLOPS: None, PEAK_FLOPS_HOW: f"not estimated: {type(exc).__name__}: {exc}", CPU_NATIVE_BFLOAT16: None}
    return {PEAK_FLOPS: peak, PEAK_FLOPS_HOW: how, CPU_NATIVE_BFLOAT16: native}


def _gpu_model_names() -> list[str]:
    import tensorflow as tf

    return [str(tf.config.experimental.get_device_details(gpu).get("device_name", "")) for gpu in tf.config.list_physical_devices("GPU")]


def _tf32_enabled() -> bool:
    import tensorflow as tf

    return bool(tf.config.experimental.tensor_float_32_execution_enabled())


def recorded_peak_flops(environment: Mapping[str, Any]) -> tuple[float | None, str]:
    """The datasheet/ISA peak FLOP/s a run recorded for its devices, and how it was found.

    Runs recorded before the app estimated peaks during the run have none: (None, why).
    """
    if PEAK_FLOPS_HOW not in environment:
        return None, "not recorded with this run (an older version of the app ran it)"
    peak = environment.get(PEAK_FLOPS)
    return (float(peak) if peak else None), str(environment[PEAK_FLOPS_HOW])


def recorded_native_bfloat16(environment: Mapping[str, Any]) -> bool | None:
    """Whether the run's CPU had native bfloat16 math (AVX-512 BF16 or AMX); None when the run did not record it."""
    value = environment.get(CPU_NATIVE_BFLOAT16)
    return None if value is None else bool(value)

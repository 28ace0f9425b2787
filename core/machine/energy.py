"""Energy counters this machine exposes: NVML's total energy per NVIDIA GPU, the Linux powercap (RAPL) zones of the CPU.

Measured, never guessed: a counter is a cumulative figure the hardware keeps, read
before and after a window; where none can be read, `energy_counters` says why and
nothing is estimated.

- NVML: `nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded,
  on Volta and later GPUs (older ones answer "not supported"); 64 bits, no wrap in practice.
- powercap: `/sys/class/powercap/intel-rapl:N` (the CPU package; `:N:M` its DRAM and
  cores), `energy_uj` in microjoules, wrapping at `max_energy_range_uj`; Intel, and AMD
  since Linux 5.8. Since 2020 `energy_uj` is readable by root only (CVE-2020-8694): an
  unreadable file is said as such. Subzones are inside their package: only packages
  (`intel-rapl:N`) and DRAM zones (named "dram") are counted, so nothing is counted twice.

Zeus's `ZeusMonitor` reads the same two counters; the app reads them directly through
NVML, which it already uses, and a few sysfs files, so a run needs no further dependency.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

POWERCAP_ROOT = Path(os.environ.get("DEVICE_LAB_POWERCAP_ROOT") or "/sys/class/powercap")
"""Where the powercap zones are: sysfs, or DEVICE_LAB_POWERCAP_ROOT (a copy mounted elsewhere; the tests' stand-in counter)."""


class EnergyCounter(Protocol):
    """One cumulative energy counter: its name and kind, a read in joules, and where it wraps (None: never)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...  # "GPU" | "CPU" | "DRAM"

    @property
    def wrap_joules(self) -> float | None: ...

    def read_joules(self) -> float: ...


@dataclass(frozen=True)
class NvmlEnergy:
    """A GPU's total energy through NVML (millijoules)."""

    nvml: Any
    handle: Any
    name: str
    kind: str = "GPU"
    wrap_joules: float | None = None

    def read_joules(self) -> float:
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0


@dataclass(frozen=True)
class PowercapEnergy:
    """A powercap zone's `energy_uj` (microjoules), wrapping at `max_energy_range_uj`."""

    zone: Path
    name: str
    kind: str
    wrap_joules: float | None

    def read_joules(self) -> float:
        return int((self.zone / "energy_uj").read_text().strip()) / 1e6


@dataclass(frozen=True)
class Reading:
    """Every counter's value (joules) at one moment (time.perf_counter())."""

    at: float
    joules: tuple[float, ...]


def read_all(counters: Sequence[EnergyCounter]) -> Reading:
    return Reading(time.perf_counter(), tuple(counter.read_joules() for counter in counters))


def joules_between(counters: Sequence[EnergyCounter], start: Reading, end: Reading) -> tuple[float | None, str]:
    """(joules used from `start` to `end`, summed over the counters, "") or (None, why not): a wrap is unwrapped once;
    a counter that went back without a known range is said. 0 where no counter advanced (a counter updates every
    millisecond or more: a short interval may read none; a window that read none at all is said by its reader)."""
    total = 0.0
    for counter, before, after in zip(counters, start.joules, end.joules, strict=True):
        delta = after - before
        if delta < 0:
            if counter.wrap_joules is None:
                return None, f"{counter.name} went back ({before:.3f} J to {after:.3f} J) and is not known to wrap"
            delta += counter.wrap_joules  # the counter wrapped once during the window
        total += delta
    return total, ""


def powercap_counters(root: Path = POWERCAP_ROOT) -> tuple[list[EnergyCounter], str]:
    """The CPU packages' and DRAM zones' counters under `root`; ([], why none) where there are none or none is readable."""
    if not root.is_dir():
        return [], f"no powercap (RAPL) counters: {root} does not exist (a virtual machine, or a kernel without powercap)"
    zones = sorted(path for path in root.glob("intel-rapl:*") if path.is_dir())
    if not zones:
        return [], f"no powercap (RAPL) counters: {root} has no intel-rapl zones (a virtual machine, or a CPU the kernel does not meter)"
    counters: list[EnergyCounter] = []
    unreadable = []
    for zone in zones:
        name = _text(zone / "name")
        depth = zone.name.count(":")
        if depth > 1 and name != "dram":
            continue  # cores, uncore: inside their package's figure
        try:
            zone_range = int(_text(zone / "max_energy_range_uj") or 0) / 1e6 or None
            counter = PowercapEnergy(zone, f"powercap {zone.name} ({name or 'zone'})", "DRAM" if name == "dram" else "CPU", zone_range)
            counter.read_joules()
        except PermissionError:
            unreadable.append(zone.name)
            continue
        except (OSError, ValueError):
            continue
        counters.append(counter)
    if not counters and unreadable:
        return (
            [],
            f"powercap (RAPL) counters {', '.join(unreadable)} are readable by root only (since Linux 5.10): run as root to measure energy",
        )
    return counters, "" if counters else f"no readable powercap (RAPL) counter under {root}"


def gpu_counters(nvml: Any, handles: Sequence[tuple[str, Any]]) -> tuple[list[EnergyCounter], str]:
    """NVML energy counters of the run's GPUs ((TF name, handle) pairs); ([], why) where a GPU has none (older than Volta)."""
    counters: list[EnergyCounter] = []
    for tf_name, handle in handles:
        counter = NvmlEnergy(nvml, handle, f"NVML total energy, {tf_name}")
        try:
            counter.read_joules()
        except Exception as exc:  # NVMLError_NotSupported on GPUs older than Volta
            return [], f"{tf_name} reports no energy counter through NVML ({exc}): GPUs older than Volta have none"
        counters.append(counter)
    return counters, ""


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""

"""The conditions a measurement was made in: how busy the machine was with other work while it ran.

Linux gives the signals cheaply, so every run samples them at the start and the
end of its steady state (`ConditionsSampler`) and keeps the difference:

- other processes' CPU share: the whole machine's busy time (`/proc/stat`) minus
  this process's CPU time and its children's once waited for (`os.times`; a
  child still running counts as another process), as a share of all cores' time;
- steal: time the hypervisor gave this VM's CPUs to someone else (`/proc/stat`);
- CPU pressure: the share of time some runnable task waited for a CPU
  (`/proc/pressure/cpu`, "some" total);
- the load average and the current CPU frequency;
- on GPUs (NVML), the other processes using each GPU, its SM clock against its
  maximum, and the reasons the driver gives for throttling it.

A measurement is *contended* when other processes used at least
`CONTENDED_OTHER_SHARE` of all cores' time (the one threshold, stated in
`CONTENTION_RULE`), or another process used a GPU the run used. Own threads
(TensorFlow's pools, the window) never count: they are this process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CONTENDED_OTHER_SHARE = 0.10
"""Other processes used at least this share of all cores' time during the measurement: it is contended."""
CONTENTION_RULE = f"other processes used at least {CONTENDED_OTHER_SHARE:.0%} of all cores' time, or another process used the GPU"
MIN_WINDOW_S = 0.5
"""Below this, clock-tick rounding (10 ms) makes the CPU shares too coarse; the whole run's window is used instead."""
_PROC_STAT = Path("/proc/stat")
_PRESSURE = Path("/proc/pressure/cpu")
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass(frozen=True)
class Snapshot:
    """One reading of the machine's counters (seconds of CPU time, µs of pressure); None where unreadable."""

    at: float  # time.monotonic()
    busy_s: float | None  # all cores' busy time since boot (steal included)
    total_s: float | None  # all cores' time since boot
    steal_s: float | None
    own_s: float  # the app's CPU time: this process, its waited-for children and its live descendants (`own_cpu_s`)
    pressure_us: float | None  # /proc/pressure/cpu "some" total


@dataclass(frozen=True)
class Conditions:
    """What else the machine did while a measurement ran, and whether that makes it unreliable.

    Shares are fractions of all cores' time over `window_s` seconds (0.63 means
    other processes used 63% of the CPU). `window` says which span was measured:
    "steady state", or "whole run" when the steady state was too short.
    """

    window: str = ""
    window_s: float | None = None
    cpus: int | None = None
    other_cpu_share: float | None = None
    steal_share: float | None = None
    cpu_pressure: float | None = None
    load_average: tuple[float, ...] = ()
    cpu_mhz: float | None = None
    cpu_max_mhz: float | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    contended: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["load_average"] = list(self.load_average)
        data["gpus"] = [dict(gpu) for gpu in self.gpus]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Conditions | None:
        """Conditions from `to_dict`'s output; None for an empty or missing record (a run from before they were kept)."""
        if not data:
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["load_average"] = tuple(known.get("load_average") or ())
        known["gpus"] = tuple(dict(g) for g in known.get("gpus") or ())
        return cls(**known)


def snapshot() -> Snapshot:
    """Read the counters now (about 1 ms: two small /proc files, os.times and this process's descendants)."""
    busy, total, steal = _read_stat()
    return Snapshot(time.monotonic(), busy, total, steal, own_cpu_s(), _read_pressure())


def _descendants() -> list[Any]:
    """This process's live descendants (psutil processes); none where psutil or /proc cannot tell.

    A snapshot is taken between a run's calls, inside a step's time, so the tree is read from each thread's
    /proc/PID/task/TID/children (~0.1 ms) where Linux has it; psutil's `children(recursive=True)` scans every
    process on the machine (~2.6 ms, which made a 3 ms MLP step read 6-11 ms).
    """
    try:
        import psutil

        pids = _child_pids_from_proc(os.getpid())
        if pids is None:
            return list(psutil.Process().children(recursive=True))
        found = []
        for pid in pids:
            try:
                found.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return found
    except Exception:  # no psutil or no /proc
        return []


def _child_pids_from_proc(root: int) -> list[int] | None:
    """The pids below `root`, from /proc's per-thread children lists; None where the kernel keeps none."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return None
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:  # it ended meanwhile
            continue
        for thread in threads:
            try:
                with open(f"/proc/{pid}/task/{thread}/children") as file:
                    children = [int(child) for child in file.read().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


def own_pids() -> list[int]:
    """This process and its live descendants: the processes a run's GPU may be used by without contending with it."""
    return [os.getpid(), *(child.pid for child in _descendants())]


def own_cpu_s() -> float:
    """CPU seconds of the app's own work: this process, its waited-for children and its live descendants.

    A run's helpers (a JAX or PyTorch job's child, local cluster workers, a probe) are the run, not
    "other processes": os.times counts a child only once it has been waited for, so the live ones
    are read from /proc (psutil). A child waited for between two readings moves from one count to the other.
    """
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    for process in _descendants():
        try:
            cpu = process.cpu_times()
        except Exception:  # it ended meanwhile
            continue
        own += cpu.user + cpu.system + getattr(cpu, "children_user", 0.0) + getattr(cpu, "children_system", 0.0)
    return own


def _read_stat() -> tuple[float | None, float | None, float | None]:
    """(busy, total, steal) seconds of all cores from /proc/stat's "cpu" line; Nones where it cannot be read."""
    try:
        with _PROC_STAT.open() as file:
            fields = [int(v) for v in file.readline().split()[1:]]
    except (OSError, ValueError):
        return None, None, None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal  # guest time is already inside user
    return busy * _TICK_S, (busy + idle + iowait) * _TICK_S, steal * _TICK_S


def _read_pressure() -> float | None:
    """The "some" total of /proc/pressure/cpu in µs, or None (no PSI in this kernel)."""
    try:
        for line in _PRESSURE.read_text().splitlines():
            if line.startswith("some"):
                return float(line.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def between(start: Snapshot, end: Snapshot, window: str, gpus: Sequence[Mapping[str, Any]] = ()) -> Conditions:
    """The conditions over [start, end]: shares of the whole machine's CPU time, and whether they make it contended."""
    elapsed = max(end.at - start.at, 0.0)
    other = steal = None
    if None not in (start.busy_s, end.busy_s, start.total_s, end.total_s) and end.total_s > start.total_s:  # type: ignore[operator]
        total = end.total_s - start.total_s  # type: ignore[operator]
        other = min(max((end.busy_s - start.busy_s - (end.own_s - start.own_s)) / total, 0.0), 1.0)  # type: ignore[operator]
        steal = min(max((end.steal_s - start.steal_s) / total, 0.0), 1.0)  # type: ignore[operator]
    pressure = None
    if start.pressure_us is not None and end.pressure_us is not None and elapsed > 0:
        pressure = min(max((end.pressure_us - start.pressure_us) / 1e6 / elapsed, 0.0), 1.0)
    mhz, max_mhz = cpu_frequency()
    conditions = Conditions(
        window=window,
        window_s=round(elapsed, 3),
        cpus=os.cpu_count(),
        other_cpu_share=other,
        steal_share=steal,
        cpu_pressure=pressure,
        load_average=_load_average(),
        cpu_mhz=mhz,
        cpu_max_mhz=max_mhz,
        gpus=tuple(dict(gpu) for gpu in gpus),
    )
    reason = contention_reason(conditions)
    return Conditions(**{**conditions.__dict__, "contended": bool(reason), "reason": reason})


def contention_reason(conditions: Conditions) -> str:
    """Why these conditions make a measurement unreliable ("" when they do not): the one threshold, `CONTENTION_RULE`."""
    reasons = []
    if conditions.other_cpu_share is not None and conditions.other_cpu_share >= CONTENDED_OTHER_SHARE:
        reasons.append(f"other processes used {conditions.other_cpu_share:.0%} of the CPU")
    for gpu in conditions.gpus:
        if gpu.get("other_processes"):
            reasons.append(f"{len(gpu['other_processes'])} other process(es) used {gpu.get('device', 'the GPU')}")
    return "; ".join(reasons)


def contention_warning(conditions: Conditions | None) -> str:
    """The warning a contended measurement carries, or ""."""
    if conditions is None or not conditions.contended:
        return ""
    return f"measured while {conditions.reason}: figures are low and noisy; re-run on a quiet machine"


def _load_average() -> tuple[float, ...]:
    try:
        return tuple(round(v, 2) for v in os.getloadavg())
    except OSError:
        return ()


def cpu_frequency() -> tuple[float | None, float | None]:
    """(current, maximum) CPU clock in MHz where readable (psutil), else (None, None)."""
    try:
        import psutil

        freq = psutil.cpu_freq()
    except Exception:  # no cpufreq in this VM or kernel
        return None, None
    if freq is None:
        return None, None
    return (round(freq.current, 1) or None), (round(freq.max, 1) or None)


def gpu_conditions(nvml: Any, handles: Sequence[tuple[str, Any]], own_pids: Sequence[int]) -> list[dict[str, Any]]:
    """Per GPU the run used (TF name, NVML handle): other processes on it, SM clock and its maximum, throttle reasons."""
    found = []
    for name, handle in handles:
        processes = _read(lambda h=handle: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
        others = sorted({p.pid for p in processes if getattr(p, "pid", None) not in own_pids})
        sm = _read(lambda h=handle: nvml.nvmlDeviceGetClockInfo(h, getattr(nvml, "NVML_CLOCK_SM", 1)))
        sm_max = _read(lambda h=handle: nvml.nvmlDeviceGetMaxClockInfo(h, getattr(nvml, "NVML_CLOCK_SM", 1)))
        reasons = _read(lambda h=handle: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        found.append(
            {
                "device": name,
                "other_processes": others,
                "sm_clock_mhz": sm,
                "sm_max_clock_mhz": sm_max,
                "throttle_reasons": throttle_names(nvml, reasons) if reasons is not None else None,
            }
        )
    return found


THROTTLE_REASONS = {
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
"""NVML's clock throttle reason bits that slow a measurement (idle, 0x1, is left out: a busy GPU is not idle)."""


def throttle_names(nvml: Any, mask: int) -> list[str]:
    """The throttle reasons set in `mask`, in words."""
    return [words for bit, words in THROTTLE_REASONS.items() if int(mask) & bit]


def _read(query: Any) -> Any:
    try:
        return query()
    except Exception:  # a query this GPU or driver does not support
        return None


@dataclass
class ConditionsSampler:
    """Snapshots at a run's start, after its warm-up and at its end; `conditions()` gives the steady state's (or the whole run's)."""

    run_start: Snapshot | None = None
    steady_start: Snapshot | None = None
    end: Snapshot | None = None

    def start(self) -> None:
        self.run_start = self.end = snapshot()

    def steady(self) -> None:
        self.steady_start = self.end = snapshot()

    def stop(self) -> None:
        self.end = snapshot()

    def conditions(self, gpus: Sequence[Mapping[str, Any]] = ()) -> Conditions | None:
        """Over the steady state when it lasted at least MIN_WINDOW_S, else over the whole run; None before `start`."""
        if self.end is None:
            return None
        if self.steady_start is not None and self.end.at - self.steady_start.at >= MIN_WINDOW_S:
            return between(self.steady_start, self.end, "steady state", gpus)
        if self.run_start is not None:
            return between(self.run_start, self.end, "whole run", gpus)
        return None

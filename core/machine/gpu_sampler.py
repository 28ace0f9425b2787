"""GPU utilisation and memory sampled during a run, about 10 times a second, in a thread of its own.

The device panel's 2 s refresh is too slow for a run: `GpuSampler` asks NVML for
each GPU's utilisation and memory every SAMPLE_INTERVAL_S (never more often), and
how much memory the driver counts for this process every PROCESS_MEMORY_EVERY-th
sample (a slower query). NVML's utilisation is the share of its own last sample
period (1/6 s to 1 s, by GPU model) in which a kernel ran, so neighbouring
samples may repeat a value. `MemoryView` and `memory_lines` put TensorFlow's view
of a GPU's memory (in use, peak) beside the driver's (reserved by this process),
in words that say why they differ.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.formatting import format_bytes
from core.machine.gpu import process_memory, read_memory_info
from core.machine.types import try_read

SAMPLE_INTERVAL_S = 0.1
PROCESS_MEMORY_EVERY = 5
MAX_KEPT = 5000  # readings kept for the plot; beyond, every other is dropped (the mean still counts every reading)
STOP_WAIT_S = 2.0


@dataclass(frozen=True)
class GpuReading:
    """One sample of every sampled GPU: utilisation (%), memory used by all processes and by this one (bytes)."""

    time_s: float
    utilization: tuple[float | None, ...]
    memory_used: tuple[int | None, ...]
    process_memory: tuple[int | None, ...]


class GpuSampler:
    """Reads NVML for `handles` every `interval_s` in a daemon thread, from `start` until `stop`.

    `mean_utilization` averages every reading since `start` (or the last
    `restart_mean`) over the sampled GPUs; `readings` keeps at most MAX_KEPT.
    """

    def __init__(
        self,
        nvml: Any,
        handles: Sequence[Any],
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.nvml = nvml
        self.handles = list(handles)
        self.interval_s = interval_s
        self._clock = clock
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._readings: list[GpuReading] = []
        self._stride = 1
        self._taken = 0
        self._sum = 0.0
        self._count = 0
        self._mean_since = -float("inf")
        self._process: tuple[int | None, ...] = (None,) * len(self.handles)
        self.memory_total: tuple[int | None, ...] = tuple(self._memory(handle)[0] for handle in self.handles)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Take the first reading now, then one every `interval_s` in the background."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait (briefly) for the thread; safe to call twice or before `start`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)

    def restart_mean(self) -> None:
        """Count the mean from readings started from now on (the run's warm-up is over)."""
        with self._lock:
            self._sum, self._count = 0.0, 0
            self._mean_since = self._clock()

    def mean_utilization(self) -> float | None:
        """Mean utilisation (%) over the readings counted, over the GPUs that report one; None before any."""
        with self._lock:
            return self._sum / self._count if self._count else None

    def readings(self) -> list[GpuReading]:
        """The readings kept so far, oldest first (a copy)."""
        with self._lock:
            return list(self._readings)

    def _loop(self) -> None:
        while True:
            started = self._clock()
            self._read(started)
            if self._stop.wait(max(0.0, started + self.interval_s - self._clock())):
                return

    def _read(self, now: float) -> None:
        nvml = self.nvml
        rates = tuple(self._utilisation(handle) for handle in self.handles)
        used = tuple(self._memory(handle)[1] for handle in self.handles)
        if self._taken % PROCESS_MEMORY_EVERY == 0:
            self._process = tuple(process_memory(nvml, handle, self._pid) for handle in self.handles)
        self._taken += 1
        reading = GpuReading(now, rates, used, self._process)
        known = [rate for rate in rates if rate is not None]
        with self._lock:
            if known and now >= self._mean_since:
                self._sum += sum(known) / len(known)
                self._count += 1
            if (self._taken - 1) % self._stride == 0:
                self._readings.append(reading)
            if len(self._readings) > MAX_KEPT:
                self._readings = self._readings[::2]
                self._stride *= 2

    def _utilisation(self, handle: Any) -> float | None:
        return try_read(lambda: float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu))

    def _memory(self, handle: Any) -> tuple[int | None, int | None]:
        info = read_memory_info(self.nvml, handle)
        return getattr(info, "total", None), getattr(info, "used", None)


@dataclass(frozen=True)
class MemoryView:
    """One GPU's memory as TensorFlow sees it (tensors in use, peak) and as the driver does (this process, the whole GPU).

    `growth` is whether TensorFlow's memory growth is on (None when unknown).
    """

    device: str
    tf_in_use: int | None = None
    tf_peak: int | None = None
    process_reserved: int | None = None
    device_used: int | None = None
    device_total: int | None = None
    growth: bool | None = None


def memory_lines(view: MemoryView) -> list[str]:
    """What the user reads: TensorFlow's figures, the driver's, and why they differ."""
    lines = []
    if view.tf_in_use is not None:
        peak = f", peak {format_bytes(view.tf_peak)}" if view.tf_peak is not None else ""
        lines.append(f"{view.device} as TensorFlow sees it: {format_bytes(view.tf_in_use)} in use by tensors{peak}.")
    else:
        lines.append(f"{view.device} as TensorFlow sees it: not reported (TensorFlow gave no memory figures for this device).")
    total = f" of {format_bytes(view.device_total)}" if view.device_total else ""
    whole = f"; {format_bytes(view.device_used)}{total} in use on the GPU by all processes" if view.device_used is not None else ""
    if view.process_reserved is not None:
        lines.append(f"As the driver sees it: {format_bytes(view.process_reserved)} reserved by this process{whole}.")
    else:
        lines.append(
            "As the driver sees it: this process's share not reported (the driver lists no process with this PID, "
            f"as in a container){whole}."
        )
    lines.append(_why_they_differ(view.growth))
    return lines


def _why_they_differ(growth: bool | None) -> str:
    if growth is False:
        return (
            "Memory growth is off: TensorFlow reserved nearly all of the GPU's memory when it started, so the driver "
            "counts it as used however little the tensors need. Turn on memory growth in Settings to reserve only "
            "what the run needs (after a restart)."
        )
    if growth is True:
        return (
            "Memory growth is on: TensorFlow reserves memory as tensors need it and keeps it for reuse, so the driver's "
            "figure is the run's high-water mark plus the CUDA context (a few hundred MiB), not what tensors use now."
        )
    return (
        "The driver counts what TensorFlow's allocator holds: with memory growth off it reserves nearly the whole GPU "
        "at start-up, with it on it grows as needed and keeps freed memory for reuse. Tensors use TensorFlow's figure."
    )

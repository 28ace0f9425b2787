"""`FakeNvml`: the pynvml functions the GPU sampler calls, answering for GPUs that are not here.

Each fake GPU is a `FakeGpu`; its utilisation comes from a function of the number
of readings taken so far, so a test knows every value the sampler saw.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

GIB = 2**30


class FakeNvmlError(Exception):
    """What pynvml raises for a query the driver does not support."""


@dataclass
class FakeGpu:
    """One fake GPU: memory figures (bytes), utilisation by reading number, and the processes using it."""

    bus: str = "00000000:41:00.0"
    total: int = 80 * GIB
    used: int = 70 * GIB
    utilization: Callable[[int], float] = lambda reading: 50.0
    processes: dict[int, int | None] = field(default_factory=lambda: {os.getpid(): 68 * GIB})
    readings: int = 0
    sm_clock_mhz: int = 1755
    sm_max_clock_mhz: int = 1980
    throttle_reasons: int = 0  # NVML's clock throttle reason bits
    reserved: int = 0  # what the driver keeps for itself: in version 1's used, apart in version 2's


class FakeNvml:
    """Stands in for an initialised pynvml module; handles are the `FakeGpu`s, in NVML index order."""

    def __init__(self, *gpus: FakeGpu) -> None:
        self.gpus = list(gpus)
        self.process_queries = 0
        self._lock = threading.Lock()

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetPciInfo(self, handle: FakeGpu) -> SimpleNamespace:
        return SimpleNamespace(busId=handle.bus.encode())

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> SimpleNamespace:
        with self._lock:
            value = handle.utilization(handle.readings)
            handle.readings += 1
        if value is None:
            raise FakeNvmlError("Not Supported")
        return SimpleNamespace(gpu=value, memory=0)

    nvmlMemory_v2 = 0x02000028  # pynvml's version tag for the struct with `reserved`

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu, version: int | None = None) -> SimpleNamespace:
        free = handle.total - handle.used - handle.reserved
        if version is not None and version == self.nvmlMemory_v2:
            return SimpleNamespace(total=handle.total, used=handle.used, free=free, reserved=handle.reserved)
        return SimpleNamespace(total=handle.total, used=handle.used + handle.reserved, free=free)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        self.process_queries += 1
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle.processes.items()]

    def nvmlDeviceGetClockInfo(self, handle: FakeGpu, clock: int) -> int:
        return handle.sm_clock_mhz

    def nvmlDeviceGetMaxClockInfo(self, handle: FakeGpu, clock: int) -> int:
        return handle.sm_max_clock_mhz

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeGpu) -> int:
        return handle.throttle_reasons

"""GPU utilisation and memory sampled during a run, about 10 times a second, in a thread of its own.

The device panel's 2 s refresh is too slow for a run: `GpuSampler` asks NVML for
each GPU's utilisation and memory every SAMPLE_INTERVAL_S (never more often), and
how much memory the driver counts for the run's process (this one, or a JAX or
PyTorch job's child) every PROCESS_MEMORY_EVERY-th sample (a slower query).
NVML's utilisation is the share of its own last sample period (1/6 s to 1 s, by
GPU model) in which a kernel ran, so neighbouring samples may repeat a value.
`MemoryView` and `memory_lines` put the view of a GPU's memory of the framework
that trained (TensorFlow's in use and peak, a JAX or PyTorch job's allocator
peak) beside the driver's (reserved by the run's process), in words that say why
they differ: TensorFlow's memory growth, JAX's preallocation, PyTorch's cache.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import backend_title
from core.formatting import format_bytes
from core.machine.gpu import process_memory, read_memory_info
from core.machine.types import try_read

SAMPLE_INTERVAL_S = 0.1
PROCESS_MEMORY_EVERY = 5
MAX_KEPT = 5000  # readings kept for the plot; beyond, every other is dropped (the mean still counts every reading)
STOP_WAIT_S = 2.0
ALLOCATOR_VARIABLES = {
    "jax": ("XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"),
    "torch": ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"),
}
JAX_FRACTION_VARIABLES = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")  # the second deprecated
JAX_DEFAULT_FRACTION = 0.75  # of the GPU's memory XLA's allocator reserves at start-up unless told otherwise
PEAK_METHODS = {"jax": "device memory_stats", "torch": "torch.cuda.max_memory_allocated"}


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
    `pid` is the process whose memory the driver is asked for (None: this one).
    """

    def __init__(
        self,
        nvml: Any,
        handles: Sequence[Any],
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
        pid: int | None = None,
    ) -> None:
        self.nvml = nvml
        self.handles = list(handles)
        self.interval_s = interval_s
        self._clock = clock
        self.pid = os.getpid() if pid is None else pid
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
            self._process = tuple(process_memory(nvml, handle, self.pid) for handle in self.handles)
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
    """One GPU's memory as the run's framework sees it (tensors in use, peak) and as the driver does (the run's process, the GPU).

    `backend` is the framework that trained ("tensorflow", "jax", "torch"); `pid` the process the driver
    was asked about where the run trained in another (a JAX or PyTorch job's child; None: this one);
    `growth` whether TensorFlow's memory growth is on (None when unknown); `allocator_settings` the
    environment variables that set a JAX or PyTorch job's allocator, as the job had them (`allocator_settings`).
    """

    device: str
    in_use: int | None = None
    peak: int | None = None
    process_reserved: int | None = None
    device_used: int | None = None
    device_total: int | None = None
    growth: bool | None = None
    backend: str = "tensorflow"
    pid: int | None = None
    allocator_settings: tuple[tuple[str, str], ...] = ()


def allocator_settings(backend: str, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of `environ` (a job's: its parent's, which it inherits) that set the backend's GPU allocator, as (name, value)."""
    return tuple((name, environ[name]) for name in ALLOCATOR_VARIABLES.get(backend, ()) if name in environ)


def allocator_peak_source(backend: str, devices: Sequence[str]) -> str:
    """How a JAX or PyTorch job's device peak is named: 'JAX allocator peak on GPU:0 (device memory_stats)'."""
    where = ", ".join(devices)
    peaks = f"allocator peak on {where}" if len(devices) == 1 else f"allocator peaks on {where}, summed"
    return f"{backend_title(backend)} {peaks} ({PEAK_METHODS.get(backend, 'device allocator')})"


def memory_lines(view: MemoryView) -> list[str]:
    """What the user reads: the framework's figures, the driver's, and why they differ."""
    return [_framework_line(view), _driver_line(view), _why_they_differ(view)]


def _framework_line(view: MemoryView) -> str:
    title = backend_title(view.backend)
    seen = f"{view.device} as {title} sees it"
    if view.in_use is not None:
        peak = f", peak {format_bytes(view.peak)}" if view.peak is not None else ""
        return f"{seen}: {format_bytes(view.in_use)} in use by tensors{peak}."
    if view.peak is not None:
        return f"{seen}: at most {format_bytes(view.peak)} in use by tensors (its allocator's peak)."
    return f"{seen}: not reported ({title} gave no memory figures for this device)."


def _driver_line(view: MemoryView) -> str:
    total = f" of {format_bytes(view.device_total)}" if view.device_total else ""
    whole = f"; {format_bytes(view.device_used)}{total} in use on the GPU by all processes" if view.device_used is not None else ""
    job = f"the {backend_title(view.backend)} job"
    if view.process_reserved is not None:
        owner = "this process" if view.pid is None else f"{job}'s process (PID {view.pid})"
        return f"As the driver sees it: {format_bytes(view.process_reserved)} reserved by {owner}{whole}."
    if view.pid is None:
        return f"As the driver sees it: this process's share not reported (the driver lists no process with this PID, as in a container){whole}."
    return f"As the driver sees it: {job}'s share not reported (the driver lists no process with its PID {view.pid}, as in a container){whole}."


def _why_they_differ(view: MemoryView) -> str:
    settings = dict(view.allocator_settings)
    if view.backend == "jax":
        return _jax_allocator(settings)
    if view.backend == "torch":
        return _torch_allocator(settings)
    return _tensorflow_allocator(view.growth)


def _tensorflow_allocator(growth: bool | None) -> str:
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


def _jax_allocator(settings: Mapping[str, str]) -> str:
    """XLA's GPU client as `jaxlib.xla_client` sets it up from these variables."""
    if settings.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").lower() == "platform":
        return (
            "JAX allocates with the platform allocator (XLA_PYTHON_CLIENT_ALLOCATOR=platform): memory as arrays need it, "
            "freed as they go, so the driver's figure follows the arrays, plus the CUDA context (a few hundred MiB)."
        )
    preallocate = settings.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")
    if preallocate in ("false", "False", "0"):
        return (
            f"Preallocation is off (XLA_PYTHON_CLIENT_PREALLOCATE={preallocate}): JAX's allocator reserves memory as arrays "
            "need it and keeps it for reuse, so the driver's figure is the run's high-water mark plus the CUDA context "
            "(a few hundred MiB), not what arrays use now."
        )
    name = next((name for name in JAX_FRACTION_VARIABLES if settings.get(name)), "")
    share = f"{_percent(settings[name])} ({name}={settings[name]})" if name else f"{JAX_DEFAULT_FRACTION:.0%} (XLA's default)"
    return (
        f"JAX's allocator reserved {share} of the GPU's memory when it started, so the driver counts it as used however "
        "little the arrays need. Set XLA_PYTHON_CLIENT_PREALLOCATE=false to reserve only what the run needs, or "
        "XLA_CLIENT_MEM_FRACTION to reserve another share."
    )


def _torch_allocator(settings: Mapping[str, str]) -> str:
    if settings.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") not in ("", "0"):
        return (
            "PyTorch's caching is off (PYTORCH_NO_CUDA_MEMORY_CACHING): memory is freed as tensors go, so the driver's "
            "figure follows the tensors, plus the CUDA context (a few hundred MiB)."
        )
    tuned = next((f" ({name}={settings[name]})" for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF") if name in settings), "")
    return (
        f"PyTorch's caching allocator keeps freed blocks for reuse{tuned}: the driver counts what it has reserved "
        "(torch.cuda.memory_reserved) plus the CUDA context (a few hundred MiB), at least the tensors' peak "
        "(torch.cuda.max_memory_allocated), not what they use now."
    )


def _percent(fraction: str) -> str:
    try:
        return f"{float(fraction):.0%}"
    except ValueError:
        return fraction

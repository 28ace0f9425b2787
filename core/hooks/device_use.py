"""Accelerator use beside step time: a run's GPUs sampled (NVML, ~10 Hz) from its start to its end.

`DeviceUseHook` starts a `GpuSampler` when the run is set up and stops it when
the run ends; the steady-state mean utilisation (after the warm-up call) goes
into the result as `mean_utilization`. Each sample is placed on the run's step
axis by the call it fell in, so a plot can draw utilisation under step time.
On a TensorFlow run its memory figures are read between calls, at most every
TF_MEMORY_INTERVAL_S, and shown beside the driver's (`memory_views`). A JAX or
PyTorch job trains in a child: the driver is asked about the child's PID, the
job's allocator settings are read from the environment it inherits, its
allocator's peak comes with its result (one GPU), and TensorFlow is never
imported for it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from core.machine.gpu import load_nvml, run_gpu_handles
from core.machine.gpu_sampler import SAMPLE_INTERVAL_S, GpuSampler, MemoryView, allocator_peak_source, allocator_settings
from core.machine.types import try_read
from core.training.hooks import RunContext, RunHook

if TYPE_CHECKING:
    from core.config import RunConfig
    from core.results import RunResult, StepRecord

TF_MEMORY_INTERVAL_S = 0.5
FindGpus = Callable[[Any, Sequence[str]], list[tuple[str, Any]]]  # (nvml, run's device names) -> (name, handle)


@dataclass(frozen=True)
class DeviceUseSeries:
    """Samples placed on the step axis: `steps` (fractional) and, per GPU (columns), utilisation and memory in %."""

    gpu_names: tuple[str, ...]
    steps: np.ndarray
    utilization: np.ndarray
    memory_pct: np.ndarray


class DeviceUseHook(RunHook):
    """Samples the run's GPUs from `on_run_start` to the run's end; inactive when the run has none NVML knows."""

    def __init__(self, nvml: Any, find_gpus: FindGpus | None = None, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.nvml = nvml
        self._find_gpus = find_gpus or run_gpu_handles
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._sampler: GpuSampler | None = None
        self.gpu_names: tuple[str, ...] = ()
        self._calls: list[tuple[float, float]] = []  # (call end, last step), from (run start, 0)
        self._tf_memory: dict[str, tuple[int | None, int | None]] = {}
        self._tf_read_at = -float("inf")
        self._growth: bool | None = None
        self._backend = "tensorflow"
        self._settings: tuple[tuple[str, str], ...] = ()
        self._job_peak: int | None = None  # a JAX or PyTorch job's allocator peak on its one GPU
        self.finished = False

    @property
    def active(self) -> bool:
        """True once the run started on at least one GPU the driver reports."""
        return self._sampler is not None

    @property
    def _on_tensorflow(self) -> bool:
        return self._backend == "tensorflow"

    def on_run_start(self, context: RunContext) -> None:
        found = self._find_gpus(self.nvml, context.device_names)
        if not found:
            self.finished = True
            return
        self.gpu_names = tuple(name for name, _ in found)
        self._backend = context.config.backend  # a JAX or PyTorch job's memory is its child's, not TensorFlow's here
        self._growth = _memory_growth() if self._on_tensorflow else None
        self._settings = allocator_settings(self._backend, os.environ)
        self._sampler = GpuSampler(self.nvml, [handle for _, handle in found], self._interval_s, pid=context.process_id)
        with self._lock:
            self._calls = [(time.perf_counter(), 0.0)]
        self._sampler.start()
        self._read_tf_memory(force=True)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if self._sampler is None or not records:
            return
        with self._lock:
            self._calls.append((time.perf_counter(), float(records[-1].step)))
        if records[-1].warmup:
            self._sampler.restart_mean()
        self._read_tf_memory()

    def amend_result(self, result: RunResult) -> RunResult:
        self._finish()
        one_gpu = len(self.gpu_names) == 1  # the job's peak over several is their sum
        if one_gpu and not self._on_tensorflow and result.peak_memory_source == allocator_peak_source(self._backend, self.gpu_names):
            self._job_peak = result.peak_memory_bytes
        mean = self.mean_utilization()
        return dataclasses.replace(result, mean_utilization=mean) if mean is not None else result

    def on_run_end(self, result: RunResult) -> None:
        self._finish()

    def mean_utilization(self) -> float | None:
        """Mean utilisation (%) of the run's GPUs since the warm-up call ended; None without samples."""
        return self._sampler.mean_utilization() if self._sampler is not None else None

    def series(self) -> DeviceUseSeries:
        """The samples taken within the run's calls so far, on the step axis (safe from any thread)."""
        sampler = self._sampler
        count = len(self.gpu_names)
        if sampler is None:
            return DeviceUseSeries(self.gpu_names, np.empty(0), np.empty((0, count)), np.empty((0, count)))
        with self._lock:
            ends, steps = (np.array(column, dtype=np.float64) for column in zip(*self._calls, strict=True))
        readings = [r for r in sampler.readings() if r.time_s <= ends[-1]]
        times = np.array([r.time_s for r in readings], dtype=np.float64)
        utilization = np.array([[_nan(v) for v in r.utilization] for r in readings], dtype=np.float64).reshape(-1, count)
        totals = np.array([_nan(t) for t in sampler.memory_total], dtype=np.float64)
        held = [[p if p is not None else u for p, u in zip(r.process_memory, r.memory_used, strict=True)] for r in readings]
        memory = np.array([[_nan(v) for v in row] for row in held], dtype=np.float64).reshape(-1, count)
        return DeviceUseSeries(self.gpu_names, np.interp(times, ends, steps), utilization, 100.0 * memory / totals)

    def memory_views(self) -> list[MemoryView]:
        """Each GPU's memory as the run's framework and as the driver see it, from the latest readings.

        A JAX or PyTorch job's child has ended, and freed its memory, before the run's last readings: once the
        run has ended, the driver's figures are the latest taken up to its last call's end, the process's share
        the latest the driver gave.
        """
        sampler = self._sampler
        if sampler is None:
            return []
        with self._lock:
            last_call_end = self._calls[-1][0] if self.finished else float("inf")
        readings = [r for r in sampler.readings() if r.time_s <= last_call_end] or sampler.readings()
        latest = readings[-1] if readings else None
        views = []
        for i, name in enumerate(self.gpu_names):
            in_use, peak = self._tf_memory.get(name, (None, None)) if self._on_tensorflow else (None, self._job_peak)
            views.append(
                MemoryView(
                    device=name,
                    in_use=in_use,
                    peak=peak,
                    process_reserved=next((r.process_memory[i] for r in reversed(readings) if r.process_memory[i] is not None), None),
                    device_used=latest.memory_used[i] if latest else None,
                    device_total=sampler.memory_total[i],
                    growth=self._growth,
                    backend=self._backend,
                    pid=None if sampler.pid == os.getpid() else sampler.pid,
                    allocator_settings=self._settings,
                )
            )
        return views

    def _finish(self) -> None:
        if self._sampler is not None and not self.finished:
            self._read_tf_memory(force=True)
            self._sampler.stop()
        self.finished = True

    def _read_tf_memory(self, force: bool = False) -> None:
        """TensorFlow's allocator figures for the run's GPUs, at most every TF_MEMORY_INTERVAL_S (in the training thread)."""
        now = time.perf_counter()
        if not self._on_tensorflow or (not force and now - self._tf_read_at < TF_MEMORY_INTERVAL_S):
            return
        self._tf_read_at = now
        import tensorflow as tf

        for name in self.gpu_names:
            info = try_read(functools.partial(tf.config.experimental.get_memory_info, name)) or {}
            self._tf_memory[name] = (info.get("current"), info.get("peak"))


def device_use_hook_for(config: RunConfig) -> DeviceUseHook | None:
    """A hook sampling the run's GPUs, or None where there is nothing to sample (no NVML, a multi-worker run)."""
    nvml, _ = load_nvml()
    if nvml is None or config.strategy == "multi-worker":
        return None
    return DeviceUseHook(nvml)


def _memory_growth() -> bool | None:
    """Whether TensorFlow's memory growth is on for every GPU (None when it has none or cannot say)."""
    import tensorflow as tf

    gpus = try_read(lambda: tf.config.list_physical_devices("GPU")) or []
    states = [try_read(functools.partial(tf.config.experimental.get_memory_growth, gpu)) for gpu in gpus]
    return None if not states or None in states else all(states)


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)

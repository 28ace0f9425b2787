"""A run's peak memory: TensorFlow's allocator peak on accelerators, else the process's resident memory.

On the CPU TensorFlow keeps no allocator figure, so two are given: the
process's RSS peak (`peak_memory_bytes`, as before: the whole process,
TensorFlow, the app and earlier runs included, so hundreds of MB even for a
tiny model) and what the run added to it, the RSS peak less the RSS when the
run started (`memory_added_bytes`): the figure to read beside the model's
memory estimate. On accelerators both are the allocator's peak for the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

DEVICE_PEAK = "device allocator peak"
RSS_PEAK = "host process RSS peak"
RSS_ADDED = "host process RSS peak less its RSS when the run started"


class MemoryTracker:
    """Peak memory of the run: TF's allocator peak on accelerators, else the process's RSS and what the run added to it.

    None until `start`: a run that failed while setting up (no TPU answered,
    data missing) used no memory of its own worth reporting.
    """

    SAMPLE_INTERVAL_S = 0.25

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._accelerators: list[str] = []
        self._rss_baseline = 0
        self._rss_peak = 0
        self._last_sample = -float("inf")
        self._started = False

    def start(self, device_names: Sequence[str]) -> None:
        """Reset the accelerators' peak counters and take the first RSS sample (the run's baseline)."""
        import tensorflow as tf

        self._started = True
        self._accelerators = [d for d in device_names if not d.startswith("CPU")]
        for device in self._accelerators:
            try:
                tf.config.experimental.reset_memory_stats(device)
            except (ValueError, RuntimeError):
                pass
        self._rss_baseline = self._process.memory_info().rss
        self.sample()

    def sample(self, now: float | None = None) -> None:
        """Read the process RSS, at most every SAMPLE_INTERVAL_S when `now` is given (cheap per call)."""
        if now is not None and now - self._last_sample < self.SAMPLE_INTERVAL_S:
            return
        self._last_sample = time.perf_counter() if now is None else now
        self._rss_peak = max(self._rss_peak, self._process.memory_info().rss)

    def peak(self) -> tuple[int | None, str]:
        """(peak bytes or None, where the figure comes from); (None, "") when the run never started."""
        return self._figure(lambda: ((self._rss_peak or None), RSS_PEAK))

    def added(self) -> tuple[int | None, str]:
        """(bytes the run itself used, how it was found): the allocator peak, or RSS growth since the start on the CPU."""
        return self._figure(lambda: (max(0, self._rss_peak - self._rss_baseline), RSS_ADDED))

    def _figure(self, on_host: Callable[[], tuple[int | None, str]]) -> tuple[int | None, str]:
        """The device allocator's peak where there is one, else `on_host()` from the RSS samples; (None, "") before the run."""
        if not self._started:
            return None, ""
        self.sample()
        device = self._device_peak()
        return (device, DEVICE_PEAK) if device is not None else on_host()

    def result_fields(self) -> dict[str, Any]:
        """The memory figures under `RunResult`'s field names."""
        peak, source = self.peak()
        added, added_source = self.added()
        return {"peak_memory_bytes": peak, "peak_memory_source": source, "memory_added_bytes": added, "memory_added_source": added_source}

    def _device_peak(self) -> int | None:
        if not self._accelerators:
            return None
        import tensorflow as tf

        try:
            return sum(tf.config.experimental.get_memory_info(d)["peak"] for d in self._accelerators)
        except (ValueError, RuntimeError):
            return None

"""A run's peak memory: TensorFlow's allocator peak on accelerators, else the process's resident memory."""

from __future__ import annotations

import time
from collections.abc import Sequence


class MemoryTracker:
    """Peak memory of the run: TF's allocator peak on accelerators, else the process's RSS.

    None until `start`: a run that failed while setting up (no TPU answered,
    data missing) used no memory of its own worth reporting.
    """

    SAMPLE_INTERVAL_S = 0.25

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._accelerators: list[str] = []
        self._rss_peak = 0
        self._last_sample = -float("inf")
        self._started = False

    def start(self, device_names: Sequence[str]) -> None:
        """Reset the accelerators' peak counters and take the first RSS sample."""
        import tensorflow as tf

        self._started = True
        self._accelerators = [d for d in device_names if not d.startswith("CPU")]
        for device in self._accelerators:
            try:
                tf.config.experimental.reset_memory_stats(device)
            except (ValueError, RuntimeError):
                pass
        self.sample()

    def sample(self, now: float | None = None) -> None:
        """Read the process RSS, at most every SAMPLE_INTERVAL_S when `now` is given (cheap per call)."""
        if now is not None and now - self._last_sample < self.SAMPLE_INTERVAL_S:
            return
        self._last_sample = time.perf_counter() if now is None else now
        self._rss_peak = max(self._rss_peak, self._process.memory_info().rss)

    def peak(self) -> tuple[int | None, str]:
        """(peak bytes or None, where the figure comes from); (None, "") when the run never started."""
        import tensorflow as tf

        if not self._started:
            return None, ""
        self.sample()
        if self._accelerators:
            try:
                return sum(tf.config.experimental.get_memory_info(d)["peak"] for d in self._accelerators), "device allocator peak"
            except (ValueError, RuntimeError):
                pass
        return (self._rss_peak or None), "host process RSS peak"

"""Step records handed from the training thread to the GUI thread, and drained as numpy arrays."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.results import StepRecord


class StepBuffer:
    """Step records handed from the training thread to the GUI thread, under a lock.

    The training thread appends after every call of the compiled step function
    (cheap: no Qt signal); the GUI drains it from a timer (10 Hz for runs, 20 Hz for comparisons).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[StepRecord] = []
        self.total_steps = 0
        self.replicas = 1

    def set_plan(self, total_steps: int, replicas: int) -> None:
        """The run's planned steps and replicas, once the engine knows them (training thread)."""
        with self._lock:
            self.total_steps = total_steps
            self.replicas = replicas

    def append(self, records: Sequence[StepRecord]) -> None:
        """Queue step records for the next drain (training thread)."""
        with self._lock:
            self._pending.extend(records)

    def drain(self) -> StepArrays:
        """Everything appended since the last drain, as numpy arrays."""
        with self._lock:
            records, self._pending = self._pending, []
        return StepArrays.from_records(records)


@dataclass(frozen=True)
class StepArrays:
    """A batch of steps as parallel numpy arrays (step numbers are 1-based)."""

    steps: np.ndarray
    losses: np.ndarray
    times_s: np.ndarray
    warmup: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def from_records(cls, records: Sequence[StepRecord]) -> StepArrays:
        n = len(records)
        return cls(
            np.fromiter((r.step for r in records), np.float64, n),
            np.fromiter((r.loss for r in records), np.float64, n),
            np.fromiter((r.step_time_s for r in records), np.float64, n),
            np.fromiter((r.warmup for r in records), np.bool_, n),
        )

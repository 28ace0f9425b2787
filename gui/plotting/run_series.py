"""One run's step series as the live plots keep it: the raw and smoothed values, their y ranges and running figures.

The series grow in place (`GrowingArray`) while steps arrive; smoothing (EMA)
continues from where it stopped, and warm-up steps are kept out of the step-time
smoothing and out of every curve's y range. What a curve was last drawn from
(`Drawn`) is kept here too, so the widget can tell when the view has outgrown it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg

from core.live.decimation import GrowingArray, MinMaxPyramid
from core.live.smoothing import EmaState, ema

CURVES = ("loss_raw", "loss", "time_raw", "time")


@dataclass(frozen=True)
class Drawn:
    """What a curve holds: steps `low`..`high`, one point (`exact`) or one min/max bin per `step_per_bin` steps."""

    low: float
    high: float
    step_per_bin: float
    exact: bool
    log_x: bool


def _median(values: np.ndarray) -> float:
    """The median, as np.median takes it, without np.median's first-call import of numpy.ma (~20 ms, mid-run)."""
    middle = [(len(values) - 1) // 2, len(values) // 2]
    return float(np.partition(values, middle)[middle].mean())


@dataclass
class RunSeries:
    """One run's step series and its curves on both plots."""

    key: Hashable
    label: str
    color: str
    batch_size: int | None
    steps: GrowingArray = field(default_factory=GrowingArray)
    losses: GrowingArray = field(default_factory=GrowingArray)
    times_ms: GrowingArray = field(default_factory=GrowingArray)
    loss_smooth: GrowingArray = field(default_factory=GrowingArray)
    time_smooth: GrowingArray = field(default_factory=GrowingArray)
    pyramids: dict[str, MinMaxPyramid] = field(default_factory=lambda: {name: MinMaxPyramid() for name in CURVES})
    loss_state: EmaState = EmaState()
    time_state: EmaState = EmaState()
    warmup_steps: int = 0
    warmup_drawn: int = -1
    steady_time_s: float = 0.0
    steady_count: int = 0
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    items: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    drawn: dict[str, Drawn | None] = field(default_factory=dict)
    visible: bool = True
    _median: tuple[int, float | None] = (0, None)

    @property
    def size(self) -> int:
        return self.steps.size

    def curve_values(self, name: str) -> np.ndarray:
        """The y values of curve `name` (one of CURVES)."""
        arrays = {"loss_raw": self.losses, "loss": self.loss_smooth, "time_raw": self.times_ms, "time": self.time_smooth}
        return arrays[name].values

    @property
    def samples_per_s(self) -> float | None:
        """Steady-state throughput so far (warm-up excluded), when the batch size is known."""
        if not self.batch_size or not self.steady_count or self.steady_time_s <= 0:
            return None
        return self.batch_size * self.steady_count / self.steady_time_s

    @property
    def median_step_ms(self) -> float | None:
        """Median steady-state step time; recomputed once the run grew by 1% (a million-step median costs ~10 ms)."""
        size, median = self._median
        if self.size != size and (median is None or self.size > size * 1.01 or self.size < size):
            steady = self.times_ms.values[self.warmup_steps :]
            median = _median(steady) if len(steady) else None
            self._median = (self.size, median)
        return median

    @property
    def warmup_s(self) -> float:
        """The time the warm-up steps took."""
        return float(self.times_ms.values[: self.warmup_steps].sum()) / 1e3

    def widen_bounds(self, name: str, values: np.ndarray) -> None:
        """Grow a curve's steady-state y range to cover `values` (non-finite values ignored)."""
        finite = values[np.isfinite(values)]
        if not len(finite):
            return
        low, high = float(finite.min()), float(finite.max())
        if name in self.bounds:
            old_low, old_high = self.bounds[name]
            low, high = min(low, old_low), max(high, old_high)
        self.bounds[name] = (low, high)

    def append(self, steps: np.ndarray, losses: np.ndarray, times_s: np.ndarray, warmup: np.ndarray, smoothing: float) -> None:
        """Take in steps (in increasing step order): the raw values, their smoothing with weight `smoothing`, the y ranges."""
        times_ms = np.asarray(times_s, dtype=np.float64) * 1e3
        self.warmup_steps += int(np.count_nonzero(warmup))
        steady = ~np.asarray(warmup, dtype=bool)
        self.steady_count += int(np.count_nonzero(steady))
        self.steady_time_s += float(times_ms[steady].sum()) / 1e3
        self.steps.extend(steps)
        self.losses.extend(losses)
        self.times_ms.extend(times_ms)
        smoothed_loss, self.loss_state = ema(losses, smoothing, self.loss_state)
        self.loss_smooth.extend(smoothed_loss)
        smoothed_time = times_ms.copy()
        smoothed_time[steady], self.time_state = ema(times_ms[steady], smoothing, self.time_state)
        self.time_smooth.extend(smoothed_time)
        first_steady = max(0, self.warmup_steps - (self.size - len(steps)))
        for name, values in (("loss_raw", losses), ("loss", smoothed_loss), ("time_raw", times_ms), ("time", smoothed_time)):
            self.widen_bounds(name, np.asarray(values)[first_steady:])

    def resmooth(self, smoothing: float) -> None:
        """Smooth the whole series again with weight `smoothing` (the slider moved)."""
        warm = self.warmup_steps
        smoothed, self.loss_state = ema(self.losses.values, smoothing)
        self.loss_smooth.overwrite(0, smoothed)
        steady, self.time_state = ema(self.times_ms.values[warm:], smoothing)
        self.time_smooth.overwrite(warm, steady)
        self.bounds.pop("loss", None)
        self.bounds.pop("time", None)
        self.widen_bounds("loss", smoothed[warm:])
        self.widen_bounds("time", steady)
        self.pyramids["loss"].clear()
        self.pyramids["time"].clear()

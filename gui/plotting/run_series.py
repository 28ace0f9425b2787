"""One run's step series as the live plots keep it: the raw and smoothed values, their y ranges and running figures.

The series grow in place (`GrowingArray`) while steps arrive; smoothing (EMA)
continues from where it stopped, and warm-up steps are kept out of the step-time
smoothing and out of every curve's y range. What a curve was last drawn from
(`Drawn`) is kept here too, so the widget can tell when the view has outgrown it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyqtgraph as pg

from core.backends.call_timer import window_steps
from core.config import hooks_in_words, recorded_hooks
from core.live.decimation import GrowingArray, MinMaxPyramid
from core.live.smoothing import EmaState, ema
from core.training.metrics import typical_step_s

CURVES = ("loss_raw", "loss", "time_raw", "time")
X_AXES = {"steps": ("step", ""), "samples": ("samples seen", ""), "seconds": ("training time", "s")}
"""What the plots' x axis counts (its label and unit): steps, samples (steps × batch), or seconds of training from the first step."""
# What may tell runs apart beyond the label the run form gives them (model, data, target, batch): config key -> words.
DIFFERENCES: dict[str, Callable[[Any], str]] = {
    "learning_rate": lambda v: f"lr {v:g}" if isinstance(v, int | float) else f"lr {v}",
    "optimizer": str,
    "precision": str,
    "xla": lambda v: "XLA" if v else "no XLA",
    "steps_per_call": lambda v: f"{v} step/call" if v == 1 else f"{v} steps/call",
    "steps": lambda v: f"{v} step" if v == 1 else f"{v} steps",
    "epochs": lambda v: f"{v} epoch" if v == 1 else f"{v} epochs",
    "seed": lambda v: f"seed {v}",
}
LEGEND_MAX_CHARS = 40  # about a third of the loss plot's width in a 1024-pixel window


@dataclass(frozen=True)
class Drawn:
    """What a curve holds: steps `low`..`high`, one point (`exact`) or one min/max bin per `step_per_bin` steps."""

    low: float
    high: float
    step_per_bin: float
    exact: bool
    log_x: bool


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
    elapsed_s: GrowingArray = field(default_factory=GrowingArray)  # the step times summed from the first step: where each step ended
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
    number: int | None = None  # the run's id in the history, once known
    config: dict[str, Any] | None = None  # the run's config (RunConfig.to_dict()), once known
    shown_label: str = ""  # the label in the run list (`distinct_labels`)
    legend_label: str = ""  # the shorter one in the plot's legend
    _median: tuple[int, int, float | None] = (0, 1, None)  # (steps, window steps) it was taken at, and the median

    @property
    def size(self) -> int:
        return self.steps.size

    def x_values(self, axis: str) -> np.ndarray:
        """Where each step lies on the x axis `axis` (one of X_AXES); samples need the batch (steps without it)."""
        if axis == "seconds":
            return self.elapsed_s.values
        if axis == "samples" and self.batch_size:
            return self.steps.values * float(self.batch_size)
        return self.steps.values

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
    def window_steps(self) -> int:
        """Steps whose calls' ends the run's clock may see together (a JAX or PyTorch job's), once its config is known."""
        config = self.config or {}
        return window_steps(str(config.get("backend") or "tensorflow"), int(config.get("steps_per_call") or 1))

    @property
    def median_step_ms(self) -> float | None:
        """Median steady-state step time as the run's result stores it (`typical_step_s`: of windows where a job's calls
        are read some together); recomputed once the run grew by 1% (a million-step median costs ~10 ms)."""
        size, window, median = self._median
        grown = self.size != size and (median is None or self.size > size * 1.01 or self.size < size)
        if grown or window != self.window_steps:
            steady = self.times_ms.values[self.warmup_steps :]
            median = typical_step_s(steady, self.window_steps) if len(steady) else None
            self._median = (self.size, self.window_steps, median)
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
        start_s = float(self.elapsed_s.values[-1]) if self.elapsed_s.size else 0.0
        self.elapsed_s.extend(start_s + np.cumsum(times_ms) / 1e3)
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


def distinct_labels(runs: Sequence[RunSeries]) -> dict[Hashable, tuple[str, str]]:
    """Each run's (full, short) label: its history number and what sets it apart from the other runs.

    Full, for the run list: "#12 MLP · digits · default · batch 64 · lr 0.1, TensorBoard"
    beside "#13 MLP · digits · default · batch 64 · lr 0.01, no hooks". Short, for the
    legend inside the plot: "#12 · lr 0.1, TensorBoard": the number, the parts of its
    own label the others lack, and the settings that differ (LEGEND_MAX_CHARS at most).
    Only settings that differ among the runs whose config is known are named.
    """
    words = {run.key: config_words(run.config) for run in runs if run.config is not None}
    differing = [key for key in [*DIFFERENCES, "hooks"] if len({run_words[key] for run_words in words.values()}) > 1]
    parts = {run.key: run.label.split(" · ") for run in runs}
    common = set.intersection(*(set(own) for own in parts.values())) if len(runs) > 1 else set()
    labels = {}
    for run in runs:
        number, own = f"#{run.number}" if run.number is not None else "", parts[run.key]
        said = [word for key in differing for word in words.get(run.key, {}).get(key, "").split(", ")]
        details = ", ".join(word for word in said if word and word not in own)  # a hook the form's label names is not repeated
        full = " · ".join(text for text in (f"{number} {run.label}".strip(), details) if text)
        short = " · ".join(text for text in (number, *(part for part in own if part not in common), details) if text)
        short = short if short != number else full
        labels[run.key] = (full, short if len(short) <= LEGEND_MAX_CHARS else short[: LEGEND_MAX_CHARS - 1] + "…")
    return labels


def config_words(config: dict[str, Any]) -> dict[str, str]:
    """The settings of DIFFERENCES and the hooks that were on, in words ('' for a setting the config lacks)."""
    words = {key: "" if config.get(key) is None else describe(config[key]) for key, describe in DIFFERENCES.items()}
    words["hooks"] = hooks_in_words(recorded_hooks(config))
    return words

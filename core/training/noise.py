"""Is a difference real? Step-time noise, and a block-bootstrap 95% interval for the ratio of two runs' speeds.

A run's steady-state calls are its repeated measurements. Neighbouring calls are
correlated (a busy second slows several in a row), so the bootstrap resamples
*blocks* of neighbouring calls (a moving-block bootstrap, block length about the
cube root of the number of calls), which keeps that correlation and does not
shrink the interval as resampling single calls would. The statistic is the
ratio of the two runs' samples/s (total samples / total time of the resampled
calls, the definition of `RunResult.samples_per_s`), so the interval is the
speed-up's. The generator is seeded: the same runs give the same interval.

"No difference beyond noise" when the interval holds 1; `beyond_noise` otherwise.
Cost: see the `contention` benchmark, which times `bootstrap_ratio` on 2 x 1000 calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NOISY_SPREAD = 0.5
"""A steady state whose (p90 - p10) / median reaches this is too noisy for one figure to stand for it."""
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20
_CHUNK = 250
MIN_CALLS = 3
MAX_UNITS = 400
"""At most this many resampling units a run: longer runs' neighbouring calls are summed into this many contiguous groups
first (the ratio of sums is unchanged), so an interval costs the same for a run of 100 calls or of 100,000."""
"""Fewer steady-state calls than this in either run: no interval (it would mean nothing)."""


def noise_warning(spread: float | None) -> str:
    """The warning a run with a wide step-time spread carries, or ""."""
    if spread is None or spread < NOISY_SPREAD:
        return ""
    return (
        f"step times are noisy: the middle 80% spread over {spread:.0%} of the median (at least {NOISY_SPREAD:.0%} is noisy); "
        "compare runs only beyond noise and re-run on a quiet machine"
    )


@dataclass(frozen=True)
class Interval:
    """A ratio (run B's samples/s over run A's) with its 95% interval; `beyond_noise` when the interval excludes 1."""

    ratio: float
    low: float
    high: float
    calls: tuple[int, int]  # steady-state calls resampled in A and B

    @property
    def beyond_noise(self) -> bool:
        return not self.low <= 1.0 <= self.high

    def to_list(self) -> list[float]:
        return [self.low, self.high]

    def text(self) -> str:
        """ "1.82× (95% interval 1.71–1.94×)", or the same ending in ": no difference beyond noise"."""
        base = f"{self.ratio:.2f}× (95% interval {self.low:.2f}–{self.high:.2f}×)"
        return base if self.beyond_noise else f"{base}: no difference beyond noise"

    def sureness(self) -> str:
        """How sure a "faster" is, in words: the interval's lower end as the least gain."""
        if not self.beyond_noise:
            return "not beyond noise (the 95% interval holds 1)"
        if self.low > 1:
            return f"at least {self.low - 1:.0%} faster with 95% confidence"
        return f"at least {1 - self.high:.0%} slower with 95% confidence"


def call_times(step_times_s: Sequence[float], warmup_steps: int, steps_per_call: int) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, steps) of each steady-state call, rebuilt from a run's per-step times (each call's steps share its time)."""
    times = np.asarray(step_times_s, dtype=np.float64)[warmup_steps:]
    per_call = max(int(steps_per_call or 1), 1)
    seconds, steps = [], []
    for first in range(0, len(times), per_call):
        chunk = times[first : first + per_call]
        seconds.append(float(chunk.sum()))
        steps.append(len(chunk))
    return np.asarray(seconds), np.asarray(steps, dtype=np.float64)


def _block_means(seconds: np.ndarray, steps: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Steps per second of `resamples` moving-block resamples of one run's calls."""
    n = len(seconds)
    block = max(1, round(n ** (1 / 3)))
    blocks = math.ceil(n / block)
    rates = []
    for first in range(0, resamples, _CHUNK):  # in chunks, so a long run's index matrix stays small
        starts = rng.integers(0, n - block + 1, size=(min(_CHUNK, resamples - first), blocks))
        index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(len(starts), -1)[:, :n]
        rates.append(steps[index].sum(axis=1) / seconds[index].sum(axis=1))
    return np.concatenate(rates)


def _grouped(seconds: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The calls summed into at most MAX_UNITS contiguous groups (unchanged when there are fewer calls)."""
    if len(seconds) <= MAX_UNITS:
        return seconds, steps
    edges = np.linspace(0, len(seconds), MAX_UNITS + 1).astype(int)[:-1]
    return np.add.reduceat(seconds, edges), np.add.reduceat(steps, edges)


def bootstrap_ratio(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], batch_ratio: float = 1.0, seed: int = SEED
) -> Interval | None:
    """B's samples/s over A's with a 95% block-bootstrap interval; `a`, `b` are `call_times`; None with too few calls.

    `batch_ratio` is B's global batch over A's (samples per step differ when the batch does).
    """
    (a_s, a_n), (b_s, b_n) = a, b
    if min(len(a_s), len(b_s)) < MIN_CALLS or a_s.sum() <= 0 or b_s.sum() <= 0:
        return None
    rng = np.random.default_rng(seed)
    (a_s, a_n), (b_s, b_n) = _grouped(a_s, a_n), _grouped(b_s, b_n)
    ratios = batch_ratio * _block_means(b_s, b_n, rng, RESAMPLES) / _block_means(a_s, a_n, rng, RESAMPLES)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    ratio = batch_ratio * (b_n.sum() / b_s.sum()) / (a_n.sum() / a_s.sum())
    return Interval(float(ratio), float(low), float(high), (len(a_s), len(b_s)))


def runs_ratio(a: object, b: object) -> Interval | None:
    """B's samples/s over A's (two `RunResult`s with their step series) with its interval; None without enough calls."""
    series = []
    for run in (a, b):
        config = getattr(run, "config", {}) or {}
        times = getattr(run, "step_times_s", ())
        if not times:
            return None
        series.append(call_times(times, getattr(run, "warmup_steps", 0), config.get("steps_per_call", 1)))
    batch_a = (getattr(a, "config", {}) or {}).get("batch_size") or 1
    batch_b = (getattr(b, "config", {}) or {}).get("batch_size") or 1
    return bootstrap_ratio(series[0], series[1], batch_b / batch_a)

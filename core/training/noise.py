"""Is a difference real? A block-bootstrap 95% interval for the ratio of two runs' speeds (a run's own noise: `metrics.noise_warning`).

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

Calls inside two runs cannot see a load that changed *between* the runs: two
runs of the same job measured one after another read as different, with a tight
interval. So a decision between runs (`between_runs`) takes its interval from
interleaved rounds (`core.jobs.rounds`): the ratio of the two runs' samples/s in
each round they shared, a t-interval over the rounds of its logarithm, never
narrower than the calls' own noise within the rounds (`rounds_ratio`). Runs
measured in fewer than two shared rounds get the calls' interval with `rounds`
1, and one round claims nothing: their difference is never "beyond noise".

Under load, two copies of one job differ for as long as they run, by more than
their rounds spread: that difference is the same in every round, so no number
of rounds shows it. Rounds whose turns were contended widen the interval by
`LOADED_COPIES_SD` for the share of the rounds they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from core.machine.conditions import CONTENDED_OTHER_SHARE

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20
_CHUNK = 250
MIN_CALLS = 3
"""Fewer steady-state calls than this in either run: no interval (it would mean nothing)."""
_Z = 1.959964  # the normal 97.5% quantile: LOADED_COPIES_SD is a measured figure, not estimated from the rounds
LOADED_COPIES_SD = 0.09
"""How far two copies of the same job, measured in the same rounds, differ under load: the standard deviation of
their log speed ratio across comparisons, less what the rounds' own spread explains. Measured: 12 comparisons of
CPU:0 against itself with a busy loop on each of 2 cores (`../shared/tools/busy.sh`) read 0.82-1.16x, a spread of
0.108 against the rounds' 0.057 (benchmarks/RESULTS.md, 2026-11-28); the same copies quiet agree within the rounds."""
MAX_UNITS = 400
"""At most this many resampling units a run: longer runs' neighbouring calls are summed into this many contiguous groups
first (the ratio of sums is unchanged), so an interval costs the same for a run of 100 calls or of 100,000."""


@dataclass(frozen=True)
class Interval:
    """A ratio (run B's samples/s over run A's) with its 95% interval; `beyond_noise` when the interval excludes 1."""

    ratio: float
    low: float
    high: float
    calls: tuple[int, int]  # steady-state calls resampled in A and B
    rounds: int | None = None  # interleaved rounds the interval is built from; 1: runs one after another; None: calls only
    round_ratios: tuple[float, ...] = ()

    @property
    def beyond_noise(self) -> bool:
        """The interval excludes 1, and (between runs) it comes from two rounds or more."""
        return not self.low <= 1.0 <= self.high and self.rounds != 1

    def to_list(self) -> list[float]:
        return [self.low, self.high]

    def text(self) -> str:
        """ "1.82× (95% interval 1.71–1.94×, 6 rounds)", or the same ending in ": no difference beyond noise"."""
        base = f"{self.ratio:.2f}× (95% interval {self.low:.2f}–{self.high:.2f}×{self._rounds_text()})"
        return base if self.beyond_noise else f"{base}: no difference beyond noise"

    def _rounds_text(self) -> str:
        if self.rounds is None:
            return ""
        return ", 1 round: measured one after another" if self.rounds == 1 else f", {self.rounds} rounds"

    def sureness(self) -> str:
        """How sure a "faster" is, in words: the interval's lower end as the least gain."""
        if self.rounds == 1:
            return "not told apart: measured one after another (one round claims nothing across runs)"
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
    return bootstrap_ratio(series[0], series[1], _batch(b) / _batch(a))


def _round_calls(run: object) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each interleaved round's steady-state calls of a run (round index -> `call_times`); {} without rounds."""
    rounds = getattr(run, "rounds", None) or {}
    spans = rounds.get("spans") or []
    indices = rounds.get("round_index") or list(range(len(spans)))
    per_call = int((getattr(run, "config", {}) or {}).get("steps_per_call") or 1)
    times = getattr(run, "step_times_s", ())
    found = {}
    for index, (first, last) in zip(indices, spans, strict=False):
        seconds, steps = call_times(times[first - 1 : last], 0, per_call)
        if len(seconds) and seconds.sum() > 0:
            found[int(index)] = (seconds, steps)
    return found


def _rates(calls: dict[int, tuple[np.ndarray, np.ndarray]], batch: int) -> dict[int, float]:
    return {index: batch * float(steps.sum() / seconds.sum()) for index, (seconds, steps) in calls.items()}


def _batch(run: object) -> int:
    return (getattr(run, "config", {}) or {}).get("batch_size") or 1


def rounds_ratio(a: object, b: object) -> Interval | None:
    """B's samples/s over A's from the interleaved rounds both measured; None without two shared rounds of the same id.

    The ratio is the geometric mean of the per-round ratios. Its interval is the wider of two: a t-interval over
    the rounds of the per-round log ratio (what varies between rounds: the load, the order), and a bootstrap of the
    same statistic that resamples each run's calls within each round (the calls' own noise, a floor that a few
    rounds agreeing by chance cannot undercut), the t-interval widened by `LOADED_COPIES_SD` times the share of the
    rounds that were contended. A load that changed between rounds moves both runs' rates in the round alike and
    drops out of the ratio; within-run intervals over all calls would count it as noise.
    """
    rounds_a, rounds_b = (getattr(run, "rounds", None) or {} for run in (a, b))
    if not rounds_a or rounds_a.get("id") != rounds_b.get("id"):
        return None
    calls_a, calls_b = _round_calls(a), _round_calls(b)
    rates_a, rates_b = _rates(calls_a, _batch(a)), _rates(calls_b, _batch(b))
    shared = sorted(set(calls_a) & set(calls_b))
    if len(shared) < 2:
        return None
    from scipy.special import stdtrit  # 0.1-0.5 s to load: only where rounds are compared

    batch_ratio = _batch(b) / _batch(a)
    logs = np.log([rates_b[k] / rates_a[k] for k in shared])
    mean = float(np.mean(logs))
    half = float(stdtrit(len(logs) - 1, 1 - (1 - CONFIDENCE) / 2)) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
    half = math.hypot(half, _Z * LOADED_COPIES_SD * _contended_share(a, b, shared))
    rng = np.random.default_rng(SEED)
    resampled = np.mean([np.log(batch_ratio * _resampled(calls_b[k], rng) / _resampled(calls_a[k], rng)) for k in shared], axis=0)
    tail = (1 - CONFIDENCE) / 2 * 100
    floor_low, floor_high = np.percentile(resampled, [tail, 100 - tail])
    low, high = min(mean - half, float(floor_low)), max(mean + half, float(floor_high))
    calls = (sum(len(calls_a[k][0]) for k in shared), sum(len(calls_b[k][0]) for k in shared))
    return Interval(math.exp(mean), math.exp(low), math.exp(high), calls, len(shared), tuple(float(r) for r in np.exp(logs)))


def energy_ratio(a: object, b: object) -> Interval | None:
    """B's joules per sample over A's from the interleaved rounds both measured (`energy["rounds_joules_per_sample"]`,
    core.hooks.energy); None without two shared rounds with energy. Below 1: B uses less energy per sample.

    The geometric mean of the per-round ratios, with a t-interval over the rounds widened for contended rounds as
    `rounds_ratio`'s is; there is no within-round floor (a round has one energy reading, not one per call).
    """
    rounds_a, rounds_b = (getattr(run, "rounds", None) or {} for run in (a, b))
    if not rounds_a or rounds_a.get("id") != rounds_b.get("id"):
        return None
    per_round = []
    for run, rounds in ((a, rounds_a), (b, rounds_b)):
        values = ((getattr(run, "energy", None) or {}).get("rounds_joules_per_sample")) or []
        indices = rounds.get("round_index") or list(range(len(values)))
        per_round.append({int(k): v for k, v in zip(indices, values, strict=False) if v})
    shared = sorted(set(per_round[0]) & set(per_round[1]))
    if len(shared) < 2:
        return None
    from scipy.special import stdtrit

    logs = np.log([per_round[1][k] / per_round[0][k] for k in shared])
    mean = float(np.mean(logs))
    half = float(stdtrit(len(logs) - 1, 1 - (1 - CONFIDENCE) / 2)) * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
    half = math.hypot(half, _Z * LOADED_COPIES_SD * _contended_share(a, b, shared))
    return Interval(
        math.exp(mean), math.exp(mean - half), math.exp(mean + half), (0, 0), len(shared), tuple(float(r) for r in np.exp(logs))
    )


def _contended_share(a: object, b: object, shared: Sequence[int]) -> float:
    """The share of the `shared` rounds in which either run's turn was contended (other processes' CPU share at the threshold)."""
    busy: set[int] = set()
    for run in (a, b):
        rounds = getattr(run, "rounds", None) or {}
        shares = zip(rounds.get("round_index") or [], rounds.get("other_share") or [], strict=False)
        busy.update(k for k, share in shares if k in shared and share is not None and share >= CONTENDED_OTHER_SHARE)
    return len(busy) / len(shared)


def _resampled(calls: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Steps per second of RESAMPLES resamples (single calls, with replacement) of one round's calls."""
    seconds, steps = calls
    index = rng.integers(0, len(seconds), size=(RESAMPLES, len(seconds)))
    return steps[index].sum(axis=1) / seconds[index].sum(axis=1)


def between_runs(a: object, b: object) -> Interval | None:
    """The decision interval of B's samples/s over A's, for two runs: from their shared interleaved rounds (`rounds_ratio`).

    Runs without two shared rounds get the calls' interval (`runs_ratio`) with `rounds` 1: measured one after
    another, nothing is claimed across them. None without enough steady-state calls in either run.
    """
    over_rounds = rounds_ratio(a, b)
    if over_rounds is not None:
        return over_rounds
    calls = runs_ratio(a, b)
    return None if calls is None else replace(calls, rounds=1)

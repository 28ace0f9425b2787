"""TensorBoard-style exponential moving average, vectorised so a million points smooth in a blink.

Like TensorBoard's scalar smoothing: debiased (early points are not pulled
towards zero), and non-finite values pass through unsmoothed without
poisoning the average.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_WEIGHT = 0.99
_MAX_BLOCK = 4096
_MAX_EXPONENT = 150.0  # keep w**-block below 1e150: far from float64 overflow


@dataclass(frozen=True)
class EmaState:
    """Where a running average stands: the biased accumulator and how many values went in."""

    last: float = 0.0
    count: int = 0


def ema(values: np.ndarray, weight: float, state: EmaState = EmaState()) -> tuple[np.ndarray, EmaState]:
    """Smooth `values` continuing from `state`; returns the smoothed values and the new state.

    `weight` is the slider value, 0 (no smoothing) to 0.99.
    """
    values = np.asarray(values, dtype=np.float64)
    if weight <= 0.0 or not len(values):
        return values.copy(), state
    weight = min(float(weight), MAX_WEIGHT)
    out = values.copy()
    finite = np.isfinite(values)
    x = values[finite]
    if not len(x):
        return out, state
    biased = np.empty_like(x)
    block = int(min(_MAX_BLOCK, max(1, math.floor(_MAX_EXPONENT * math.log(10) / -math.log(weight)))))
    powers = weight ** np.arange(1, block + 1, dtype=np.float64)
    last = state.last
    for start in range(0, len(x), block):
        chunk = x[start : start + block]
        p = powers[: len(chunk)]
        # y_i = w^(i+1) * last + (1 - w) * sum_k w^(i-k) x_k, the sum taken as w^i * cumsum(x_k / w^k)
        inner = np.cumsum(chunk / (p / weight)) * (p / weight)
        result = p * last + (1.0 - weight) * inner
        biased[start : start + len(chunk)] = result
        last = float(result[-1])
    counts = state.count + np.arange(1, len(x) + 1, dtype=np.float64)
    out[finite] = biased / (1.0 - weight**counts)
    return out, EmaState(last, state.count + len(x))

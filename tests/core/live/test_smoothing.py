"""The EMA matches TensorBoard's definition, in one go or in pieces, and skips non-finite values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.live.smoothing import EmaState, ema


def tensorboard_ema(values, weight):
    """TensorBoard's scalar smoothing, written out point by point."""
    last, count, out = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out.append(last / (1 - weight**count))
    return np.array(out)


@pytest.mark.parametrize("weight", [0.0, 0.01, 0.3, 0.6, 0.9, 0.99])
def test_matches_tensorboard(weight):
    values = np.random.default_rng(1).standard_normal(9000) + 3
    values[[10, 4000]] = [np.nan, np.inf]
    smoothed, state = ema(values, weight)
    expected = tensorboard_ema(values, weight)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(smoothed[finite], expected[finite], rtol=1e-9, atol=1e-9)
    assert np.isnan(smoothed[10]) and np.isinf(smoothed[4000])
    assert state.count == (len(values) - 2 if weight else 0)


def test_continues_from_a_state():
    values = np.random.default_rng(2).random(5000)
    whole, _ = ema(values, 0.95)
    first, state = ema(values[:1234], 0.95)
    rest, _ = ema(values[1234:], 0.95, state)
    np.testing.assert_allclose(np.concatenate([first, rest]), whole, rtol=1e-12)


def test_first_point_is_not_pulled_towards_zero():
    smoothed, state = ema(np.array([5.0, 5.0]), 0.9, EmaState())
    assert smoothed.tolist() == pytest.approx([5.0, 5.0])

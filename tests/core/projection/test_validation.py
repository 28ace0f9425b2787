"""Leave-one-out over the recorded GPU points: every point projected without itself, its range, the figures the benchmark reports."""

from __future__ import annotations

import pytest

from core.projection import calibration
from core.projection.validation import leave_one_out, summary


def test_each_point_is_projected_from_a_fit_that_never_saw_it() -> None:
    rows = leave_one_out()
    assert [row.point for row in rows] == list(calibration.POINTS)
    for row in rows:
        assert row.point.name not in row.constants["points"]
        assert len(row.constants["points"]) == 3 and all(name.startswith(row.point.backend) for name in row.constants["points"])
        assert row.low <= row.mid <= row.high and row.width <= 2.0 + 1e-9


def test_the_leave_one_out_figures() -> None:
    rows = {f"{row.point.backend} {row.point.model}": row for row in leave_one_out()}
    ratios = {name: round(row.ratio, 2) for name, row in rows.items()}
    assert ratios == {
        "jax mlp": 0.87,
        "jax cnn": 1.24,
        "jax resnet": 0.64,
        "jax transformer": 0.93,
        "torch mlp": 1.35,
        "torch cnn": 0.81,
        "torch resnet": 0.92,
        "torch transformer": 1.2,
    }
    total = summary(list(rows.values()))
    assert total["geomean_error"] == pytest.approx(0.228, abs=0.002) and total["geomean_error"] <= 0.30
    assert total["inside"] == 7 and not rows["jax resnet"].inside  # left out, no other point is device-bound: a floor, 1.56x low
    assert total["widest"] <= 2.0 + 1e-9 and not total["met"]

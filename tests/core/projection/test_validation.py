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
        own = [point for point in calibration.POINTS if point.backend == row.point.backend]
        assert len(row.constants["points"]) == len(own) - 1 and all(name.startswith(row.point.backend) for name in row.constants["points"])
        assert row.low <= row.mid <= row.high and row.width <= 2.0 + 1e-9


def test_the_leave_one_out_figures() -> None:
    rows = {row.point.name: row for row in leave_one_out()}
    ratios = {name: round(row.ratio, 2) for name, row in rows.items()}
    assert ratios == {
        "jax mlp b64 H100-SXM": 1.34,
        "jax cnn b64 H100-SXM": 1.74,
        "jax resnet b64 H100-SXM": 2.87,
        "jax transformer b64 H100-SXM": 1.41,
        "torch mlp b64 H100-SXM": 1.44,
        "torch cnn b64 H100-SXM": 0.94,
        "torch resnet b64 H100-SXM": 0.97,
        "torch transformer b64 H100-SXM": 1.23,
        "jax cnn b64 H200": 0.58,
        "torch cnn b64 H200": 0.68,
        "jax cnn b256 H200": 0.58,
        "jax resnet b256 H200": 0.5,
        "jax transformer b256 H200": 0.64,
        "jax mlp b256 H200": 0.49,
        "jax cnn b1024 H200": 1.11,
        "jax resnet b1024 H200": 0.28,
        "jax transformer b1024 H200": 0.52,
        "jax mlp b1024 H200": 0.58,
        "torch cnn b256 H200": 0.93,
        "torch mlp b256 H200": 0.96,
        "torch resnet b256 H200": 1.04,
        "torch transformer b256 H200": 1.1,
        "jax cnn b4096 H200": 3.2,
    }
    total = summary(list(rows.values()))
    # the H200's points (2026-11-28) are the first the model had not been fitted on: it misses them (RESULTS.md)
    assert total["geomean_error"] == pytest.approx(0.557, abs=0.002) and total["geomean_error"] > 0.30
    assert total["geomean_error_by_backend"]["torch"] == pytest.approx(0.155, abs=0.002)
    assert total["inside"] == 10 and not rows["jax resnet b1024 H200"].inside
    assert total["widest"] <= 2.0 + 1e-9 and not total["met"]

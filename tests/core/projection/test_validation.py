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
        "jax mlp b64 H100-SXM": 1.04,
        "jax cnn b64 H100-SXM": 1.62,
        "jax resnet b64 H100-SXM": 1.72,
        "jax transformer b64 H100-SXM": 0.91,
        "torch mlp b64 H100-SXM": 1.44,
        "torch cnn b64 H100-SXM": 0.94,
        "torch resnet b64 H100-SXM": 0.97,
        "torch transformer b64 H100-SXM": 1.23,
        "jax cnn b64 H200": 0.91,
        "torch cnn b64 H200": 0.68,
        "jax cnn b256 H200": 0.81,
        "jax resnet b256 H200": 0.64,
        "jax transformer b256 H200": 0.59,
        "jax mlp b256 H200": 0.76,
        "jax cnn b1024 H200": 1.12,
        "jax resnet b1024 H200": 0.44,
        "jax transformer b1024 H200": 0.98,
        "jax mlp b1024 H200": 0.99,
        "torch cnn b256 H200": 0.93,
        "torch mlp b256 H200": 0.96,
        "torch resnet b256 H200": 1.04,
        "torch transformer b256 H200": 1.1,
        "jax cnn b4096 H200": 2.49,
        "jax mlp b64 H200": 0.59,
        "jax mlp b64 H200 float16": 0.74,
        "jax mlp b64 H200 digits": 0.69,
        "jax mlp b512 H200 digits": 1.31,
        "jax mlp b4096 H200 digits": 2.46,
    }
    total = summary(list(rows.values()))
    # host and device added, a byte share, JAX's steady step its median: 11 of the 28 points fall outside their 2x range (the
    # CNN's device rate, the H100 machine's slower host, the digits at batch 4,096) and the geometric mean misses its 30%
    assert total["geomean_error"] == pytest.approx(0.342, abs=0.002) and total["geomean_error"] > 0.30
    assert total["geomean_error_by_backend"] == {"jax": pytest.approx(0.441, abs=0.002), "torch": pytest.approx(0.155, abs=0.002)}
    assert total["inside"] == 17 and not rows["jax cnn b4096 H200"].inside and rows["jax mlp b64 H100-SXM"].inside
    assert total["widest"] <= 2.0 + 1e-9 and not total["met"]

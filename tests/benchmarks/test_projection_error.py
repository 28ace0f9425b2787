"""benchmarks/projection_error.py: one row per recorded GPU point, then the geometric-mean error and the coverage, misses as FAIL."""

from __future__ import annotations

import pytest

from benchmarks import projection_error, run
from core.projection.calibration import POINTS
from core.projection.validation import leave_one_out, summary


def test_the_benchmark_is_listed_and_reports_every_point_then_the_geomean_error_and_the_coverage() -> None:
    assert "projection_error" in run.BENCHMARKS
    rows = projection_error.run(quick=True)
    assert len(rows) == len(POINTS) + 2
    held = leave_one_out()
    for row, point in zip(rows, held, strict=False):
        assert row.name == f"projection_error {point.point.name}"
        assert row.measured == pytest.approx(point.ratio) and row.passed == (point.inside and point.width <= 2.0 + 1e-9)
        assert f"{point.measured:,.0f} samples/s" in row.detail
    geomean, coverage = rows[-2], rows[-1]
    total = summary(held)
    assert geomean.measured == pytest.approx(100 * total["geomean_error"]) and geomean.passed == (total["geomean_error"] <= 0.30)
    assert coverage.measured == total["inside"] and coverage.passed is (total["inside"] == len(POINTS))
    assert "jax resnet" in coverage.detail  # the miss is named, not hidden

"""Leave-one-out over the recorded GPU points: each projected from a fit that never saw it, its range, its error.

For every point, the backend's constants are fitted to the other points (PyTorch's efficiency and
byte share to the JAX points other than it), the point's step projected from its own step costs on
its device and checked against its steady step (`MeasuredPoint.step_s`), and its range drawn from
that fit's residuals as a projection's is (`model.spread`). The
benchmark `projection_error` reports these rows; the target is a geometric-mean error of at most
30%, every measured point inside its range, no range wider than 2x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.projection import calibration
from core.projection.calibration import MeasuredPoint
from core.projection.model import geometric_mean_error, spread, step_parts

MAX_GEOMEAN_ERROR = 0.30


@dataclass(frozen=True)
class HeldOut:
    """One point projected without it: measured and projected samples/s (low, mid, high), and the constants used."""

    point: MeasuredPoint
    low: float
    mid: float
    high: float
    regime: str
    capped: bool
    constants: dict[str, Any]

    @property
    def measured(self) -> float:
        """The point's steady samples/s (its median step for a JAX job: `MeasuredPoint.step_s`)."""
        return self.point.steady_samples_per_s

    @property
    def ratio(self) -> float:
        """Projected / measured samples/s."""
        return self.mid / self.measured

    @property
    def inside(self) -> bool:
        return self.low <= self.measured <= self.high

    @property
    def width(self) -> float:
        """high / low."""
        return self.high / self.low

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point.to_dict(),
            "measured_samples_per_s": self.measured,
            "projected_samples_per_s": {"low": self.low, "mid": self.mid, "high": self.high},
            "ratio": self.ratio,
            "inside": self.inside,
            "width": self.width,
            "regime": self.regime,
            "capped": self.capped,
            "constants": self.constants,
        }


def leave_one_out(points: Sequence[MeasuredPoint] = calibration.POINTS) -> list[HeldOut]:
    """Every point of `points` projected from a fit on the others (see the module docstring)."""
    rows = []
    for held in points:
        others = [point for point in points if point is not held]
        constants = calibration.fit_points(held.backend, others)
        parts = step_parts(held.backend, calibration.point_costs(held), calibration.point_target(held), constants, held.steps_per_call)
        band = spread(constants.residuals, constants.fitted)
        mid = held.batch / parts.step_s
        rows.append(HeldOut(held, mid / band.factor, mid, mid * band.factor, parts.regime, band.capped, constants.to_dict()))
    return rows


def summary(rows: Sequence[HeldOut]) -> dict[str, Any]:
    """The geometric-mean error, per backend and over all, how many points fell inside their range, the widest range."""
    backends = sorted({row.point.backend for row in rows})
    error = geometric_mean_error([row.ratio for row in rows])
    return {
        "geomean_error": error,
        "geomean_error_by_backend": {b: geometric_mean_error([r.ratio for r in rows if r.point.backend == b]) for b in backends},
        "inside": sum(row.inside for row in rows),
        "points": len(rows),
        "widest": max(row.width for row in rows),
        "capped": sum(row.capped for row in rows),
        "met": error <= MAX_GEOMEAN_ERROR and all(row.inside for row in rows) and all(row.width <= 2.0 + 1e-9 for row in rows),
    }

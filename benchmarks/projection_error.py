"""projection_error: how far `main.py project` is off on every GPU measurement the app has recorded, each left out of its own fit.

Leave-one-out over the recorded GPU points (`core.projection.calibration.POINTS`: the H100 and H200
records in benchmarks/records/, JAX and PyTorch): each point is projected from its step costs (XLA's
count on a CPU, cached in calibration.py with how it was derived) through constants fitted to the
other points of its backend, with the range a projection shows (`core.projection.validation`).
One row per point (projected / measured samples/s; passed: inside its range and the range no
wider than 2x), then the geometric-mean error (target at most 30%) and the coverage. A miss is
reported as a FAIL, never hidden. Runs in a second: no compiling, no training.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "projection_error"
TARGET = "geomean error <= 30%, every measured point inside its projected range, no range wider than 2x"


def run(quick: bool) -> list[harness.Result]:
    from core.projection.validation import MAX_GEOMEAN_ERROR, leave_one_out, summary

    rows = leave_one_out()
    results = []
    for row in rows:
        point = row.point
        results.append(
            harness.Result(
                f"{NAME} {point.name}",
                row.ratio,
                "x",
                "measured inside the range, high/low <= 2",
                row.inside and row.width <= 2.0 + 1e-9,
                f"measured {row.measured:,.0f} samples/s on {point.device}; projected {row.low:,.0f}-{row.high:,.0f} "
                f"(mid {row.mid:,.0f}, high/low {row.width:.2f}{', capped' if row.capped else ''}), {row.regime}; "
                f"fitted without it: host {row.constants['host_s'] * 1e3:.3g} ms, efficiency {row.constants['efficiency']:.3%}"
                + (f", {row.constants['per_layer_s'] * 1e3:.3g} ms per layer" if row.constants["per_layer_s"] is not None else ""),
                row.to_dict(),
            )
        )
    total = summary(rows)
    by_backend = ", ".join(f"{backend} {error:.0%}" for backend, error in total["geomean_error_by_backend"].items())
    results.append(
        harness.Result(
            f"{NAME} geomean error",
            100 * total["geomean_error"],
            "%",
            f"<= {MAX_GEOMEAN_ERROR:.0%}",
            total["geomean_error"] <= MAX_GEOMEAN_ERROR,
            f"over {total['points']} points, leave-one-out ({by_backend}); {total['inside']} of {total['points']} inside their range; "
            f"widest range {total['widest']:.2f}x ({total['capped']} capped at 2x: their 90% interval was wider)",
            total,
        )
    )
    results.append(
        harness.Result(
            f"{NAME} coverage",
            float(total["inside"]),
            f"of {total['points']}",
            "every measured point inside its range, none wider than 2x",
            total["inside"] == total["points"] and total["widest"] <= 2.0 + 1e-9,
            ", ".join(row.point.name for row in rows if not row.inside) + " outside" if total["inside"] < total["points"] else "all inside",
        )
    )
    return results

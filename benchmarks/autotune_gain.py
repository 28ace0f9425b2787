"""autotune_gain: how much faster do autotune's settings train than a bare Keras `model.fit` with its defaults?

In one fresh process per model: `core.tuning.autotune.autotune` searches steps
per call, precision and XLA at global batch 64 on the CPU (its default budget,
120 s; the batch is kept), then the engine with the settings it chose and a bare
`model.fit` with Keras's defaults (`compile(optimizer, loss)` and nothing else:
one step per execution, float32, no XLA on a CPU) train the same sample model
on the same synthetic `tf.data` pipeline, same Adam learning rate, alternating
(ABAB...), timed the same way from outside as in engine_vs_fit (the start time
of every call, whole call cycles after the first call and the first 10% of
calls). Figure: the median of the per-pair ratios, engine at autotune's
settings / fit at Keras's defaults.

Beside it, in the same process, the grid: the plain sweep over the space
autotune searches (steps per call 1, 4, 16, 64 x the precisions it keeps x XLA
off and on, the sweep's own steps and rounds) through the app's sweep code
(`core.tuning.sweep.run_sweep`). The command line sweeps two settings at a
time, so a user runs it as two sweeps of the same points and steps (XLA off,
XLA on); one plan of all of them keeps every point in the same rounds, so its
best and the rows tied with it are judged across the whole space. Two more
figures: autotune's wall time over the grid's (target <= 0.5: it searches a
part of the space and checks its choice; the row says where autotune's time
went: the search's points, one after another, and the last check's rounds, its
candidates side by side), and whether the setting autotune
adopted is the grid's best or tied with it (`Sweep.tied`: not slower than the
best beyond noise).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import harness

NAME = "autotune_gain"
TARGETS = {"mlp": 2.0, "cnn": 1.25}
MAX_TIME_SHARE = 0.5
"""Autotune's wall time over the grid's."""
TARGET = f"MLP >= 2.0x, small CNN >= 1.25x; time <= {MAX_TIME_SHARE:g}x the grid's; the grid's best within noise"
GRID_AXES = ("steps_per_call", "precision", "xla")
BATCH_SIZE = 64
SECONDS_PER_SIDE = 4.0
"""Each side of a pair trains about this long (sized from a short calibration of each side)."""


def run(quick: bool) -> list[harness.Result]:
    budget_s, pairs = (30, 2) if quick else (120, 3)
    rows = []
    for model, target in TARGETS.items():
        child = harness.run_child(NAME, [model, budget_s, pairs], timeout_s=budget_s + 1200)
        ratio, ratios = harness.paired_ratio(child["engine"], child["fit"])
        rows += grid_rows(model, child)
        rows.append(
            harness.Result(
                f"{NAME} {model}",
                ratio,
                "x",
                f">= {target:.2f}",
                ratio >= target,
                f"autotune chose {child['best_text']} in {child['elapsed_s']:.0f} s (its own figure: {child['gain_over_keras_defaults']:.2f}x over "
                f"the engine at Keras's defaults); engine {harness.median(child['engine']):,.0f} vs fit {harness.median(child['fit']):,.0f} samples/s, "
                f"batch {BATCH_SIZE}, {pairs} pairs; ratios {harness.spread_text(ratios)}",
                {"best": child["best"], "engine": child["engine"], "fit": child["fit"], "ratios": ratios, "points": child["points"]},
            )
        )
    return rows


def grid_rows(model: str, child: dict[str, Any]) -> list[harness.Result]:
    """Autotune against the grid: its wall time over the grid's, and whether its choice is the grid's best within noise."""
    grid = child["grid"]
    share = child["wall_s"] / grid["wall_s"]
    phases = f"search {child['search_s']:.1f} s, rounds of {child['round_candidates']} {child['rounds_s']:.1f} s"
    ended = f"autotune {child['wall_s']:.1f} s ({child['points_searched']} points, {phases}, ended: {child['stopped_because']})"
    choice = grid["choice"]
    versus = f"{choice['over_best']:.3f}" if choice["over_best"] is not None else "n/a"
    return [
        harness.Result(
            f"{NAME} {model} time vs grid",
            share,
            "x",
            f"<= {MAX_TIME_SHARE:.2f}",
            share <= MAX_TIME_SHARE,
            f"{ended} vs the grid {grid['wall_s']:.1f} s ({grid['points']} points, {grid['steps']} steps, {grid['rounds']} rounds)",
            {"autotune_s": child["wall_s"], "grid_s": grid["wall_s"], "search_s": child["search_s"], "rounds_s": child["rounds_s"]},
        ),
        harness.Result(
            f"{NAME} {model} choice vs grid",
            choice["over_best"],
            "x",
            "the grid's best, or tied with it",
            choice["within_noise"],
            f"autotune adopted {choice['label']} (confirmed: {child['confirmed']}); the grid's best {grid['best_label']} "
            f"({grid['best_by']}), {grid['tied']} row(s) tied with it; the choice's samples/s in the grid over the best's {versus}",
            grid,
        ),
    ]


def judge_against_grid(sweep: Any, adopted: dict[str, Any]) -> dict[str, Any]:
    """Where `adopted` (autotune's settings) stands in `sweep` (the grid): its row, whether it is the best or tied with it."""
    index = next((i for i, row in enumerate(sweep.rows) if all(row.settings[name] == adopted[name] for name in GRID_AXES)), None)
    best, tied = sweep.best, sweep.tied()
    row = sweep.rows[index] if index is not None else None
    top = sweep.rows[best] if best is not None else None
    rate, top_rate = (row.result.samples_per_s if row else None), (top.result.samples_per_s if top else None)
    return {
        "label": row.label if row is not None else ", ".join(f"{name} {adopted[name]}" for name in GRID_AXES) + " (not in the grid)",
        "row": index,
        "within_noise": index is not None and (index == best or index in tied),
        "over_best": rate / top_rate if rate and top_rate else None,
    }


def _grid(config: Any, precisions: tuple[str, ...], adopted: dict[str, Any]) -> dict[str, Any]:
    """The plain sweep over autotune's space, timed, and where autotune's choice stands in it."""
    from core.tuning.autotune import CALL_SIZES
    from core.tuning.sweep import best_by, run_sweep
    from core.tuning.sweep_plan import SweepAxis, SweepPlan, plan_sweep

    two = plan_sweep(config, {"steps_per_call": CALL_SIZES, "precision": precisions})
    plan = SweepPlan(two.base, (*two.axes, SweepAxis("xla", (False, True))), two.left_out)
    began = time.monotonic()
    sweep = run_sweep(plan)
    wall = time.monotonic() - began
    best = sweep.best
    return {
        "wall_s": wall,
        "points": len(sweep.rows),
        "steps": plan.base.steps,
        "rounds": sweep.to_dict()["rounds"],
        "best_label": sweep.rows[best].label if best is not None else "none",
        "best_by": best_by(sweep.rows) if best is not None else "",
        "tied": len(sweep.tied()),
        "rows": [{"label": row.label, "samples_per_s": row.result.samples_per_s, "status": row.status.value} for row in sweep.rows],
        "choice": judge_against_grid(sweep, adopted),
    }


def _steps_for(rate: float, multiple: int) -> int:
    """Steps for about SECONDS_PER_SIDE at `rate` samples/s, a whole number of calls (at least 20)."""
    steps = max(20 * multiple, int(SECONDS_PER_SIDE * rate / BATCH_SIZE))
    return -(-steps // multiple) * multiple


def _child(argv: list[str]) -> dict:
    from core.logs import import_tensorflow_quietly
    from core.tuning.autotune import autotune, settings_text, usable_precisions

    import_tensorflow_quietly()
    from core.config import RunConfig

    model, budget_s, pairs = argv[0], float(argv[1]), int(argv[2])
    config = RunConfig(model=model, dataset="synthetic", batch_size=BATCH_SIZE)
    began = time.monotonic()
    tuned = autotune(config, budget_s)
    wall = time.monotonic() - began
    if tuned.samples_per_s is None:
        raise harness.BenchmarkError(f"autotune measured nothing: {tuned.error or tuned.notes}")
    best = dict(tuned.best)
    in_rounds = [point for point in tuned.points if point.in_rounds]
    grid = _grid(config, usable_precisions(config)[0], best)
    engine_steps = _steps_for(tuned.samples_per_s, best["steps_per_call"])
    fit_steps = _steps_for(tuned.keras_defaults_samples_per_s or tuned.baseline_samples_per_s or tuned.samples_per_s, 1)
    rates: dict[str, list[float]] = {"engine": [], "fit": []}
    for _ in range(pairs):
        rates["engine"].append(harness.engine_rate(model, engine_steps, **best))
        rates["fit"].append(harness.fit_rate(model, fit_steps, BATCH_SIZE))  # compile() and fit() with their defaults
    return {
        **rates,
        "best": best,
        "best_text": settings_text(best),
        "elapsed_s": tuned.elapsed_s,
        "wall_s": wall,
        "stopped_because": tuned.stopped_because,
        "points_searched": tuned.points_searched,
        "search_s": sum(point.seconds for point in tuned.points if not point.in_rounds),
        "rounds_s": max((point.seconds for point in in_rounds), default=0.0),  # the candidates ran side by side
        "round_candidates": len(in_rounds),
        "confirmed": tuned.confirmed,
        "grid": grid,
        "gain_over_keras_defaults": tuned.gain_over_keras_defaults or 0.0,
        "points": [point.to_dict() for point in tuned.points],
    }


if __name__ == "__main__":
    harness.child_main(_child)

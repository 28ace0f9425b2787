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
"""

from __future__ import annotations

from benchmarks import harness

NAME = "autotune_gain"
TARGETS = {"mlp": 2.0, "cnn": 1.25}
TARGET = "MLP >= 2.0x, small CNN >= 1.25x"
BATCH_SIZE = 64
SECONDS_PER_SIDE = 4.0
"""Each side of a pair trains about this long (sized from a short calibration of each side)."""


def run(quick: bool) -> list[harness.Result]:
    budget_s, pairs = (30, 2) if quick else (120, 3)
    rows = []
    for model, target in TARGETS.items():
        child = harness.run_child(NAME, [model, budget_s, pairs], timeout_s=budget_s + 600)
        ratio, ratios = harness.paired_ratio(child["engine"], child["fit"])
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


def _steps_for(rate: float, multiple: int) -> int:
    """Steps for about SECONDS_PER_SIDE at `rate` samples/s, a whole number of calls (at least 20)."""
    steps = max(20 * multiple, int(SECONDS_PER_SIDE * rate / BATCH_SIZE))
    return -(-steps // multiple) * multiple


def _child(argv: list[str]) -> dict:
    from core.logs import import_tensorflow_quietly
    from core.tuning.autotune import autotune, settings_text

    import_tensorflow_quietly()
    from core.config import RunConfig

    model, budget_s, pairs = argv[0], float(argv[1]), int(argv[2])
    tuned = autotune(RunConfig(model=model, dataset="synthetic", batch_size=BATCH_SIZE), budget_s)
    if tuned.samples_per_s is None:
        raise harness.BenchmarkError(f"autotune measured nothing: {tuned.error or tuned.notes}")
    best = dict(tuned.best)
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
        "gain_over_keras_defaults": tuned.gain_over_keras_defaults or 0.0,
        "points": [point.to_dict() for point in tuned.points],
    }


if __name__ == "__main__":
    harness.child_main(_child)

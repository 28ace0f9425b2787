"""time_to_loss: does autotune's choice train to a loss sooner than Keras's defaults, not only run more samples/s?

Per model (the MLP and the small CNN, on the shipped digits, batch 64), in one
fresh process: `autotune` with larger batches allowed (budget 60 s, objective
"loss") from Keras's defaults (one step per execution, float32, no XLA), then
the start and the chosen settings (with the learning rate autotune would adopt
them with) train alternately (ABAB..., fresh engine runs in that process, the
same seed, weights and data order) for the same number of steps each. The
target is the start run's smoothed final loss in that pair; the figure is the
start's steady-state seconds to it over the chosen's (`core.training.to_target`),
the median over the pairs. A choice that never reaches the target counts 0.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "time_to_loss"
TARGETS = {"mlp": 1.5, "cnn": 1.0}
TARGET = "MLP >= 1.5x, small CNN >= 1.0x (never slower)"
BATCH_SIZE = 64
STEPS = {"mlp": 600, "cnn": 150}
"""Steps of the start run in each pair (the chosen settings train as many at their batch)."""


def run(quick: bool) -> list[harness.Result]:
    budget_s, pairs = (30, 2) if quick else (60, 3)
    rows = []
    for model, target in TARGETS.items():
        child = harness.run_child(NAME, [model, budget_s, pairs], timeout_s=budget_s + 900)
        ratio = harness.median(child["ratios"])
        rows.append(
            harness.Result(
                f"{NAME} {model}",
                ratio,
                "x",
                f">= {target:.2f}",
                ratio >= target,
                f"autotune chose {child['best_text']} (lr {child['learning_rate']:.3g}) in {child['elapsed_s']:.0f} s, its own time gain "
                f"{child['time_to_target_gain']}; to the start's loss (steady s) start {harness.spread_text(child['start_s'])} vs chosen "
                f"{harness.spread_text(child['chosen_s'])}; samples/s {harness.median(child['start_rate']):,.0f} vs "
                f"{harness.median(child['chosen_rate']):,.0f}; {pairs} pairs of {STEPS[model]} steps, ratios {harness.spread_text(child['ratios'])}",
                child,
            )
        )
    return rows


def _child(argv: list[str]) -> dict:
    from core.logs import import_tensorflow_quietly

    import_tensorflow_quietly()
    from core import RunConfig, run_training
    from core.training.to_target import reach, smoothed_final_loss
    from core.tuning.autotune import autotune, settings_text

    model, budget_s, pairs = argv[0], float(argv[1]), int(argv[2])
    start = RunConfig(model=model, dataset="digits", batch_size=BATCH_SIZE, steps=STEPS[model])
    tuned = autotune(start, budget_s, allow_batch_change=True)
    if tuned.samples_per_s is None:
        raise harness.BenchmarkError(f"autotune measured nothing: {tuned.error or tuned.notes}")
    changes = tuned.changes()
    chosen = start.with_changes(**changes)
    figures: dict[str, list[float]] = {"start_s": [], "chosen_s": [], "ratios": [], "start_rate": [], "chosen_rate": []}
    for _ in range(pairs):
        base, tried = run_training(start), run_training(chosen)
        target = smoothed_final_loss(base)
        base_to, tried_to = reach(base, target), reach(tried, target)
        figures["start_s"].append(round(base_to.steady_seconds or 0.0, 4))
        figures["chosen_s"].append(round(tried_to.steady_seconds, 4) if tried_to.steady_seconds is not None else -1.0)
        figures["ratios"].append((base_to.steady_seconds or 0.0) / tried_to.steady_seconds if tried_to.steady_seconds else 0.0)
        figures["start_rate"].append(base.samples_per_s or 0.0)
        figures["chosen_rate"].append(tried.samples_per_s or 0.0)
    return {
        **figures,
        "best": dict(tuned.best),
        "best_text": settings_text(tuned.best),
        "learning_rate": chosen.learning_rate,
        "elapsed_s": tuned.elapsed_s,
        "time_to_target_gain": tuned.time_to_target_gain,
        "notes": list(tuned.notes),
    }


if __name__ == "__main__":
    harness.child_main(_child)

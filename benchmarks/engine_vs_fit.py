"""engine_vs_fit: does the app's engine train as fast as a bare Keras `model.fit`?

Both sides train the same sample model (core.workloads.models), on the same synthetic
tf.data pipeline (core.workloads.data.make_dataset), with the same global batch, Adam
learning rate, steps per call (fit: steps_per_execution=K, jit_compile=False)
and number of steps, on the CPU. Engine and fit alternate (ABAB...) inside one
process, several processes per case with the order swapped in every other one:
runs of the same job in different processes differ by up to ±20% here (thread
pools, memory layout), so only pairs from one process are compared. Both are
timed the same way from outside: the start time of every call
(RunHook.on_call_begin / Callback.on_train_batch_begin), samples/s over
whole call cycles after the first call and the first 10% of calls. Figure:
median over all pairs of engine samples/s / fit samples/s.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "engine_vs_fit"
TARGET = ">= 1.00"
TARGET_RATIO = 1.00
PLAUSIBLE = (0.5, 1.5)
"""The same job, the same steps per call: beyond this the clocks time different work."""
BATCH_SIZE = 64


def run(quick: bool) -> list[harness.Result]:
    processes, pairs = (1, 2) if quick else (2, 3)
    rows = []
    for model, k, steps in harness.ENGINE_CASES:
        steps = steps // 4 if quick else steps
        children = [harness.run_child(NAME, [model, k, steps, pairs, i % 2]) for i in range(processes)]
        engine = [rate for child in children for rate in child["engine"]]
        fit = [rate for child in children for rate in child["fit"]]
        ratio, ratios = harness.paired_ratio(engine, fit)
        rows.append(
            harness.Result(
                f"{NAME} {model} K={k}",
                ratio,
                "x",
                TARGET,
                ratio >= TARGET_RATIO,
                f"engine {harness.median(engine):,.0f} vs fit {harness.median(fit):,.0f} samples/s "
                f"(batch {BATCH_SIZE}, {steps} steps, {processes} processes x {pairs} pairs); ratios {harness.spread_text(ratios)}",
                {"engine": engine, "fit": fit, "ratios": ratios},
                harness.implausible_ratio(ratio, *PLAUSIBLE, "the same job and steps per call in the engine and in fit"),
            )
        )
    return rows


def _child(argv: list[str]) -> dict:
    model, k, steps, pairs, fit_first = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4] == "1"
    rates: dict[str, list[float]] = {"engine": [], "fit": []}
    trainers = {
        "engine": lambda: harness.engine_rate(model, steps, BATCH_SIZE, steps_per_call=k),
        "fit": lambda: harness.fit_rate(model, steps, BATCH_SIZE, steps_per_execution=k, jit_compile=False),
    }
    order = ("fit", "engine") if fit_first else ("engine", "fit")
    for _ in range(pairs):
        for name in order:
            rates[name].append(trainers[name]())
    return rates


if __name__ == "__main__":
    harness.child_main(_child)

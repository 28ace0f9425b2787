"""truth: is the samples/s the app reports what a stopwatch outside the engine sees?

Runs the engine as `main.py run` does (core.runner.run_training with the CLI's
progress printer as a hook) in a fresh process, with a RunHook recording
time.perf_counter when each call starts and when its steps are handed out. The
outside figure covers the same steady steps the app reports on (every call after
the first): batch x those steps / (end of the last call - start of the second
call), so it includes whatever the engine does between calls. Figure: median
over processes of reported / outside - 1.
"""

from __future__ import annotations

import os

from benchmarks import harness

NAME = "truth"
TARGET = "within +-3%"
TOLERANCE = 0.03
BATCH_SIZE = 64


def run(quick: bool) -> list[harness.Result]:
    repeats = 1 if quick else 3
    rows = []
    for model, k, steps in harness.ENGINE_CASES:
        steps = steps // 4 if quick else steps
        runs = [harness.run_child(NAME, [model, k, steps]) for _ in range(repeats)]
        deviations = [r["reported"] / r["outside"] - 1 for r in runs]
        deviation = harness.median(deviations)
        rows.append(
            harness.Result(
                f"{NAME} {model} K={k}",
                deviation * 100,
                "%",
                TARGET,
                abs(deviation) <= TOLERANCE,
                f"reported {harness.median([r['reported'] for r in runs]):,.0f} vs outside "
                f"{harness.median([r['outside'] for r in runs]):,.0f} samples/s; deviations % "
                f"{harness.spread_text([d * 100 for d in deviations], '+.2f')}",
                {"runs": runs},
            )
        )
    return rows


def _child(argv: list[str]) -> dict:
    from core.cli.output import ProgressPrinter
    from core.cli.training_commands import RunProgress
    from core.config import RunConfig
    from core.runner import run_training

    model, k, steps = argv[0], int(argv[1]), int(argv[2])
    config = RunConfig(model=model, dataset="synthetic", batch_size=BATCH_SIZE, steps=steps, steps_per_call=k)
    clock = harness.CallClock()
    with open(os.devnull, "w") as devnull:
        result = run_training(config, hooks=[RunProgress(ProgressPrinter(steps, BATCH_SIZE, stream=devnull)), clock])
    if not result.ok:
        raise harness.BenchmarkError(f"run {result.status}: {result.message}")
    steady_steps = sum(clock.steps[1:])
    outside = BATCH_SIZE * steady_steps / (clock.ends[-1] - clock.begins[1])
    return {"reported": result.samples_per_s, "outside": outside, "steady_steps": steady_steps}


if __name__ == "__main__":
    harness.child_main(_child)

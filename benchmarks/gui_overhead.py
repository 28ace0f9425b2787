"""gui_overhead: does training from the window (live plots updating) cost throughput?

The same run (MLP, synthetic data, batch 64, one step per call: the fastest
steps, so the most GUI traffic per second) is started once from the real window
(offscreen Qt, Start pressed, Training tab with live plots showing) and once
headless as `main.py run` does it, each in a fresh process, alternating
(ABAB...). Both are timed the same way from outside: a RunCallback added to
run_training records when each call starts; samples/s over whole call cycles
after the first 10% of calls. Figure: median over rounds of window / headless.
"""

from __future__ import annotations

import os

from benchmarks import harness

NAME = "gui_overhead"
TARGET = ">= 0.97"
TARGET_RATIO = 0.97
MODEL, BATCH_SIZE, STEPS_PER_CALL = "mlp", 64, 1


def run(quick: bool) -> list[harness.Result]:
    steps = 800 if quick else 2000
    repeats = 2 if quick else 3
    rounds = harness.alternate(
        {
            "window": lambda: harness.run_child(NAME, ["window", steps]),
            "headless": lambda: harness.run_child(NAME, ["headless", steps]),
        },
        repeats,
    )
    ratio, ratios = harness.paired_ratio([r["outside"] for r in rounds["window"]], [r["outside"] for r in rounds["headless"]])
    window = harness.median([r["outside"] for r in rounds["window"]])
    headless = harness.median([r["outside"] for r in rounds["headless"]])
    reported = harness.median([r["reported"] for r in rounds["window"]]) / harness.median([r["reported"] for r in rounds["headless"]])
    return [
        harness.Result(
            f"{NAME} {MODEL} K={STEPS_PER_CALL}",
            ratio,
            "x",
            TARGET,
            ratio >= TARGET_RATIO,
            f"window {window:,.0f} vs headless {headless:,.0f} samples/s ({steps} steps); ratios {harness.spread_text(ratios)}; "
            f"as the app reports them: {reported:.3f}",
            rounds,
        )
    ]


def _headless(steps: int) -> dict:
    from core.cli import ProgressPrinter
    from core.config import RunConfig
    from core.training import run_training

    config = RunConfig(model=MODEL, dataset="synthetic", batch_size=BATCH_SIZE, steps=steps, steps_per_call=STEPS_PER_CALL)
    clock = harness.CallClock()
    with open(os.devnull, "w") as devnull:
        result = run_training(config, ProgressPrinter(steps, BATCH_SIZE, stream=devnull), callbacks=[clock])
    return _figures(result, clock)


def _window(steps: int) -> dict:
    clocks = timed_engine()

    def script(app: harness.AppWindow) -> dict:
        app.wait_until_ready()
        app.set_run(MODEL, steps, BATCH_SIZE, STEPS_PER_CALL)
        finished = app.run()
        return _figures(finished.result, clocks[-1])

    return harness.run_in_app(script)


def timed_engine() -> list[harness.CallClock]:
    """Give every later run_training call in this process a CallClock (the window's worker imports it at run time)."""
    import core.training

    clocks: list[harness.CallClock] = []
    engine = core.training.run_training

    def run_training(config, on_steps=None, stop_event=None, callbacks=()):
        clocks.append(harness.CallClock())
        return engine(config, on_steps, stop_event, [*callbacks, clocks[-1]])

    core.training.run_training = run_training
    return clocks


def _figures(result, clock: harness.CallClock) -> dict:
    if not result.ok:
        raise harness.BenchmarkError(f"run {result.status}: {result.message}")
    return {"outside": harness.cycle_rate(clock.begins, clock.steps, BATCH_SIZE), "reported": result.samples_per_s}


def _child(argv: list[str]) -> dict:
    return (_window if argv[0] == "window" else _headless)(int(argv[1]))


if __name__ == "__main__":
    harness.child_main(_child)

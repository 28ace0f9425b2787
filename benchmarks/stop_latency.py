"""stop_latency: how long from pressing Stop to the window showing the run as stopped?

In a fresh process the real window (offscreen) starts a long run of the small
CNN with several steps per call (calls of ~0.1-0.2 s, so where Stop lands within
a call matters), waits for steady steps plus a random 0-300 ms, presses Stop and
times until `run_controller.run_finished` delivers the result with status
"stopped" on the GUI thread (the engine ends after the call in flight, then the
run is summarised and saved to the history). Repeated several times; each trial
is held to its own bound: its median call time + 100 ms. Figure: the latency
of the trial furthest over (or least under) its bound.
"""

from __future__ import annotations

import random
import time

from benchmarks import harness

NAME = "stop_latency"
TARGET = "<= one call + 100 ms"
SLACK_MS = 100.0
MODEL, BATCH_SIZE, STEPS_PER_CALL, STEPS = "cnn", 64, 5, 100_000


def run(quick: bool) -> list[harness.Result]:
    trials = harness.run_child(NAME, [2 if quick else 6])["trials"]
    worst = max(trials, key=lambda t: t["latency_ms"] - t["call_ms"])
    passed = all(t["latency_ms"] <= t["call_ms"] + SLACK_MS for t in trials)
    detail = "latency / call ms: " + ", ".join(f"{t['latency_ms']:.0f}/{t['call_ms']:.0f}" for t in trials)
    return [
        harness.Result(
            NAME,
            worst["latency_ms"],
            "ms",
            f"{TARGET} (worst trial: {worst['call_ms']:.0f} + {SLACK_MS:.0f} ms)",
            passed,
            detail,
            {"trials": trials},
        )
    ]


def _child(argv: list[str]) -> dict:
    count = int(argv[0])
    rng = random.Random(0)

    def trial(app: harness.AppWindow) -> dict:
        controller = app.window.run_controller
        finished: list[tuple[float, object]] = []

        def on_finished(outcome) -> None:
            finished.append((time.perf_counter(), outcome))

        controller.run_finished.connect(on_finished)
        try:
            app.start()
            app.wait(lambda: app.steady_steps_plotted() > 0, 120, "steady steps")
            deadline = time.perf_counter() + rng.uniform(0, 0.3)
            app.wait(lambda: time.perf_counter() >= deadline, 5, "a random moment")
            pressed = time.perf_counter()
            app.find("stopButton").click()
            app.wait(lambda: bool(finished) and not controller.is_running(), 60, "the run to stop")
        finally:
            controller.run_finished.disconnect(on_finished)
        at, outcome = finished[0]
        result = outcome.result
        if result.status != "stopped":
            raise harness.BenchmarkError(f"run ended {result.status}, not stopped: {result.message}")
        return {"latency_ms": (at - pressed) * 1e3, "call_ms": result.step_time_median_ms * STEPS_PER_CALL, "steps": result.steps_done}

    def script(app: harness.AppWindow) -> dict:
        app.wait_until_ready()
        app.set_run(MODEL, STEPS, BATCH_SIZE, STEPS_PER_CALL)
        return {"trials": [trial(app) for _ in range(count)]}

    return harness.run_in_app(script)


if __name__ == "__main__":
    harness.child_main(_child)

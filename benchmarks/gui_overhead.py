"""gui_overhead: does training from the window (live plots updating) cost throughput?

The same run (MLP, synthetic data, batch 64, one step per call: the fastest
steps, so the most GUI traffic per second) is done headless, as `main.py run`
does it (the job service called in the main thread with the run's standard hooks
and its verdict, progress printed, the window idle), and from the real window (offscreen Qt, Start pressed, the Training tab
with live plots showing), alternating (ABAB...) inside one app process. Runs in
different processes of the same job differ by up to ±20% here (thread pools,
memory layout), far more than the GUI's cost, so A and B share a process and
only the pairs are compared. Several such processes are started. Both sides
are timed the same way from outside: a RunHook added to run_training
records when each call starts; samples/s over whole call cycles after the first
10% of calls. Figure: median over all pairs of window / headless.

Each rate comes from the clock of the run it names: every run_training call in
the process gets its own clock, bound to its run (`harness.clock_of`), and the
window's figure is read from the clock whose run is the window's result, after
checking it is the job that was started (model, batch, steps, steps per call).
The window's run is followed by the verdict's probe runs (other steps per call,
other data), which call run_training too: reading "the last clock" timed a
probe (1.884x, 2026-11). A ratio outside 0.5-1.3x cannot be a GUI's cost and
fails as SUSPECT.
"""

from __future__ import annotations

import os

from benchmarks import harness

NAME = "gui_overhead"
TARGET = ">= 0.97"
TARGET_RATIO = 0.97
PLAUSIBLE = (0.5, 1.3)
MODEL, BATCH_SIZE, STEPS_PER_CALL = "mlp", 64, 1


def run(quick: bool) -> list[harness.Result]:
    steps = 800 if quick else 2000
    processes, pairs = (1, 2) if quick else (3, 3)
    rounds = [harness.run_child(NAME, [steps, pairs]) for _ in range(processes)]
    window = [rate for r in rounds for rate in r["window"]]
    headless = [rate for r in rounds for rate in r["headless"]]
    ratio, ratios = harness.paired_ratio(window, headless)
    suspect = harness.implausible_ratio(ratio, *PLAUSIBLE, "the window's cost over a headless run")
    return [
        harness.Result(
            f"{NAME} {MODEL} K={STEPS_PER_CALL}",
            ratio,
            "x",
            TARGET,
            ratio >= TARGET_RATIO,
            f"window {harness.median(window):,.0f} vs headless {harness.median(headless):,.0f} samples/s "
            f"({steps} steps, {processes} processes x {pairs} pairs); ratios {harness.spread_text(ratios)}",
            rounds,
            suspect,
        )
    ]


def _pairs(steps: int, pairs: int) -> dict:
    """In one app process: `pairs` times a headless run then the same run from the window."""
    clocks = timed_engine()
    rates: dict[str, list[float]] = {"headless": [], "window": []}

    def script(app: harness.AppWindow) -> dict:
        app.wait_until_ready()
        app.set_run(MODEL, steps, BATCH_SIZE, STEPS_PER_CALL)
        for _ in range(pairs):
            rates["headless"].append(_headless(steps, clocks))
            finished = app.run()
            rates["window"].append(_rate(finished.result, _started_job_clock(clocks, finished.result, steps)))
        return rates

    return harness.run_in_app(script)


def _headless(steps: int, clocks: list[harness.CallClock]) -> float:
    """The run as `main.py run` does it, in this (GUI) thread: the event loop waits meanwhile."""
    from core.cli.output import ProgressPrinter
    from core.cli.training_commands import RunProgress
    from core.config import RunConfig
    from core.jobs.service import JobOptions, run_job

    config = RunConfig(model=MODEL, dataset="synthetic", batch_size=BATCH_SIZE, steps=steps, steps_per_call=STEPS_PER_CALL)
    with open(os.devnull, "w") as devnull:
        progress = RunProgress(ProgressPrinter(steps, BATCH_SIZE, stream=devnull))
        result = run_job(config, None, JobOptions(listener=progress, diagnose=True)).result  # the standard hooks, as the window's
    return _rate(result, _started_job_clock(clocks, result, steps))


def _started_job_clock(clocks: list[harness.CallClock], result, steps: int) -> harness.CallClock:
    """The clock of the run `result` came from, checked to be the job started (not a probe run made after it)."""
    clock = harness.clock_of(clocks, result)
    job = (clock.config.model, clock.config.batch_size, clock.config.steps, clock.config.steps_per_call)
    if job != (MODEL, BATCH_SIZE, steps, STEPS_PER_CALL):
        raise harness.BenchmarkError(f"the timed run is {job}, not the job started {(MODEL, BATCH_SIZE, steps, STEPS_PER_CALL)}")
    return clock


def timed_engine() -> list[harness.CallClock]:
    """Give every later run_training call in this process a CallClock (the window's worker trains through core.jobs)."""
    import core.jobs.service
    import core.runner

    clocks: list[harness.CallClock] = []
    engine = core.runner.run_training

    def run_training(config, stop_event=None, hooks=()):
        clocks.append(harness.CallClock())
        return engine(config, stop_event, [*hooks, clocks[-1]])

    core.runner.run_training = run_training
    core.jobs.service.run_training = run_training
    return clocks


def _rate(result, clock: harness.CallClock) -> float:
    if not result.ok:
        raise harness.BenchmarkError(f"run {result.status}: {result.message}")
    return harness.cycle_rate(clock.begins, clock.steps, BATCH_SIZE)


def _child(argv: list[str]) -> dict:
    return _pairs(int(argv[0]), int(argv[1]))


if __name__ == "__main__":
    harness.child_main(_child)

"""hook_overhead: what do the app's hooks cost a run? TensorBoard logging, and the profiler's effect on the figures.

The MLP on the digits data, batch 64, one step per call (the most hook calls per
second a run can make), trained in one process three ways, alternated
(ABCABC..., the order reversed in every other process): without hooks, with
TensorBoard logging (core.hooks.tensorboard.TensorBoardWriter, as the window's
"Write TensorBoard logs" and `main.py run --tensorboard DIR` use it), and with
the profiler capturing a few steps (core.hooks.profiler.ProfilerCapture).

- "tensorboard": samples/s timed from outside (harness.CallClock: start of every
  call, whole call cycles after the first 10% of calls, so the hooks' time between
  calls is inside), per round with / without; figure: median of the per-round ratios.
  The detail adds the process's CPU time per step (every thread, the writer's too),
  which other load on the machine disturbs less than wall time.
- "profiler": the samples/s the run itself reports, with the profiler / without.
  The profiled calls (trace start, capture, the trace written at stop) are far
  slower than the others; when the run's statistics leave them out, as they leave
  out warm-up, the two agree.
"""

from __future__ import annotations

import tempfile
import time

from benchmarks import harness

NAME = "hook_overhead"
TARGET = ">= 0.97"
TARGET_RATIO = 0.97
PLAUSIBLE = (0.5, 1.3)
BATCH_SIZE = 64
PROFILED_STEPS = (100, 110)


def run(quick: bool) -> list[harness.Result]:
    processes, rounds, steps = (1, 2, 400) if quick else (3, 5, 1000)
    children = [harness.run_child(NAME, [steps, rounds, i % 2]) for i in range(processes)]
    runs = {name: [rate for child in children for rate in child[name]] for name in ("off", "tensorboard", "profile")}
    tensorboard, tensorboard_ratios = harness.paired_ratio([r["outside"] for r in runs["tensorboard"]], [r["outside"] for r in runs["off"]])
    profile, profile_ratios = harness.paired_ratio([r["reported"] for r in runs["profile"]], [r["reported"] for r in runs["off"]])
    job = f"MLP digits, batch {BATCH_SIZE}, 1 step per call, {steps} steps, {processes} processes x {rounds} rounds"
    return [
        harness.Result(
            f"{NAME} tensorboard",
            tensorboard,
            "x",
            TARGET,
            tensorboard >= TARGET_RATIO,
            f"with / without TensorBoard logging: {harness.median([r['outside'] for r in runs['tensorboard']]):,.0f} vs "
            f"{harness.median([r['outside'] for r in runs['off']]):,.0f} samples/s timed from outside ({job}); "
            f"ratios {harness.spread_text(tensorboard_ratios)}; CPU time per step (whole process, warm-up included) "
            f"{harness.median([r['cpu_us_per_step'] for r in runs['tensorboard']]):,.0f} vs "
            f"{harness.median([r['cpu_us_per_step'] for r in runs['off']]):,.0f} µs",
            {"runs": runs, "ratios": tensorboard_ratios},
            harness.implausible_ratio(tensorboard, *PLAUSIBLE, "a hook's cost (it cannot make the run faster)"),
        ),
        harness.Result(
            f"{NAME} profiler",
            profile,
            "x",
            TARGET,
            profile >= TARGET_RATIO,
            f"samples/s the run reports with steps {PROFILED_STEPS[0]}-{PROFILED_STEPS[1]} profiled / without: "
            f"{harness.median([r['reported'] for r in runs['profile']]):,.0f} vs {harness.median([r['reported'] for r in runs['off']]):,.0f} "
            f"({job}); ratios {harness.spread_text(profile_ratios)}",
            {"ratios": profile_ratios},
            harness.implausible_ratio(profile, *PLAUSIBLE, "a hook's cost (it cannot make the run faster)"),
        ),
    ]


def _train(hooks: str, steps: int) -> dict:
    from core.config import RunConfig
    from core.hooks.profiler import ProfilerCapture
    from core.hooks.tensorboard import TensorBoardWriter
    from core.runner import run_training

    logdir = tempfile.mkdtemp(prefix=f"{NAME}-")
    callbacks = {
        "off": [],
        "tensorboard": [TensorBoardWriter(logdir)],
        "profile": [ProfilerCapture(logdir, *PROFILED_STEPS)],
    }[hooks]
    config = RunConfig(model="mlp", dataset="digits", batch_size=BATCH_SIZE, steps=steps, steps_per_call=1)
    clock = harness.CallClock()
    cpu_start = time.process_time()
    result = run_training(config, hooks=[clock, *callbacks])
    cpu_us_per_step = (time.process_time() - cpu_start) / steps * 1e6  # this process, every thread (the writer's too)
    if not result.ok:
        raise harness.BenchmarkError(f"{hooks} run {result.status}: {result.message}")
    rate = harness.cycle_rate(clock.begins, clock.steps, BATCH_SIZE)
    return {"outside": rate, "reported": result.samples_per_s, "cpu_us_per_step": cpu_us_per_step}


def _child(argv: list[str]) -> dict:
    steps, rounds, reverse = int(argv[0]), int(argv[1]), argv[2] == "1"
    order = ("off", "tensorboard", "profile")
    runners = {name: (lambda name=name: _train(name, steps)) for name in (reversed(order) if reverse else order)}
    return harness.alternate(runners, rounds)


if __name__ == "__main__":
    harness.child_main(_child)

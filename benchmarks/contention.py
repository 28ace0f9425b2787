"""contention: does a run say when other work used the machine, and only then?

In one process with TensorFlow imported, the same MLP run (300 steps, batch
64, one step per call) is made RUNS times on a quiet machine and RUNS times
while one bounded busy-loop process per core keeps the cores busy
(`tests/busy.py`, as a build or a second training job would), alternating
quiet and busy. Figure: the share of runs flagged correctly (contended when
busy, not when quiet); target: all of them. The cost of the speed-up interval
(`core.training.noise.bootstrap_ratio` on two runs of 1,000 calls) is timed
beside it. Run it on an otherwise quiet machine: a quiet run flagged there is a
false alarm, unless the detail shows another process really was busy.
"""

from __future__ import annotations

import time

from benchmarks import harness

NAME = "contention"
RUNS = 10
TARGET = "all runs flagged right (busy: contended; quiet: not)"


def run(quick: bool) -> list[harness.Result]:
    runs = 3 if quick else RUNS
    child = harness.run_child(NAME, [runs, 150 if quick else 300], timeout_s=600 + 60 * runs)
    busy, quiet = child["busy"], child["quiet"]
    right = sum(busy) + sum(not flagged for flagged in quiet)
    share = right / (2 * runs)
    shares = child["quiet_shares"]
    return [
        harness.Result(
            NAME,
            100 * share,
            "%",
            TARGET,
            share == 1.0,
            f"{sum(busy)}/{runs} busy runs flagged, {sum(quiet)}/{runs} quiet runs flagged; other processes' CPU share when quiet "
            f"{min(shares):.0%}–{max(shares):.0%}, when busy {min(child['busy_shares']):.0%}–{max(child['busy_shares']):.0%}; "
            f"bootstrap interval of 2 x 1,000 calls: {child['bootstrap_ms']:.0f} ms",
            child,
        )
    ]


def _bootstrap_ms() -> float:
    import numpy as np

    from core.training.noise import bootstrap_ratio

    rng = np.random.default_rng(0)
    runs = [(rng.gamma(25.0, 0.0004 * k, 1000), np.ones(1000)) for k in (1.0, 1.05)]
    began = time.perf_counter()
    for _ in range(5):
        bootstrap_ratio(runs[0], runs[1])
    return (time.perf_counter() - began) / 5 * 1e3


def _child(argv: list[str]) -> dict:
    from core.logs import import_tensorflow_quietly

    import_tensorflow_quietly()
    from core.config import RunConfig
    from core.hooks.conditions import ConditionsHook
    from core.runner import run_training
    from tests.busy import busy_cores

    runs, steps = int(argv[0]), int(argv[1])
    job = RunConfig(model="mlp", dataset="synthetic", batch_size=64, steps=steps)
    run_training(job.with_changes(steps=20))  # the process's first run pays for thread pools and caches
    found: dict[str, list] = {"busy": [], "quiet": [], "busy_shares": [], "quiet_shares": []}
    for _ in range(runs):
        for kind in ("quiet", "busy"):
            if kind == "busy":
                with busy_cores(limit_s=120):
                    result = run_training(job, hooks=[ConditionsHook()])
            else:
                result = run_training(job, hooks=[ConditionsHook()])
            found[kind].append(result.contended)
            found[f"{kind}_shares"].append(result.conditions.get("other_cpu_share") or 0.0)
    return {**found, "bootstrap_ms": _bootstrap_ms()}


if __name__ == "__main__":
    harness.child_main(_child)

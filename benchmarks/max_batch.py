"""max_batch: is the largest batch the search finds close to the true largest, and never above it?

The small CNN on synthetic data under a 2 GiB host memory budget:
`core.tuning.max_batch.find_max_batch` searches (doubling, then narrowing; its
5% margin applied), then a reference search of the benchmark's own probes the
batches from the answer upwards in steps of 1% of it, each in its own child
process under the same budget, until one does not fit: the last that fit is the
true largest at that resolution (when the answer itself does not fit, the scan
goes down instead). Figure: answer / true largest. The answer is the first
batch of the reference scan, so "never above" is checked by a probe too.
"""

from __future__ import annotations

import time

from benchmarks import harness

NAME = "max_batch"
TARGET = "0.90 to 1.00 of the true largest"
MODEL = "cnn"
BUDGET = 2 * 2**30
STEP = 0.01
MAX_SCAN = 30


def run(quick: bool) -> list[harness.Result]:
    from core.config import RunConfig
    from core.tuning.max_batch import find_max_batch
    from core.tuning.max_batch_probe import ProbeLimits, run_probe

    budget, step = (2**30, 0.02) if quick else (BUDGET, STEP)
    config = RunConfig(model=MODEL, dataset="synthetic", batch_size=64)
    began = time.monotonic()
    found = find_max_batch(config, budget)
    search_s = time.monotonic() - began
    if not found.finished or found.max_batch < 1:
        raise harness.BenchmarkError(f"the search gave no answer: {found.error or found.notes}")
    increment = max(1, round(found.max_batch * step))
    scanned = _scan(lambda batch: run_probe(config, batch, ProbeLimits(budget)).fits, found.max_batch, increment)
    true_largest = max((b for b, fits in scanned if fits), default=0)
    ratio = found.max_batch / true_largest if true_largest else 0.0
    return [
        harness.Result(
            NAME,
            ratio,
            "x",
            TARGET,
            0.9 <= ratio <= 1.0,
            f"{MODEL}, {budget / 2**30:.0f} GiB budget: found {found.max_batch:,} in {len(found.probes)} probes ({search_s:.0f} s; "
            f"largest that fit {found.largest_fitting:,}, smallest that did not {found.smallest_failing:,}); "
            f"reference scan in {step:.0%} steps: true largest {true_largest:,} ({len(scanned)} probes)",
            {"found": found.to_dict(), "scan": scanned, "true_largest": true_largest},
        )
    ]


def _scan(fits, first: int, increment: int) -> list[tuple[int, bool]]:
    """(batch, fits) from `first` upwards by `increment` until one does not fit; downwards until one fits when `first` does not."""
    scanned = [(first, fits(first))]
    direction = increment if scanned[0][1] else -increment
    while len(scanned) < MAX_SCAN and scanned[-1][1] == scanned[0][1] and scanned[-1][0] + direction >= 1:
        batch = scanned[-1][0] + direction
        scanned.append((batch, fits(batch)))
    return scanned

"""peaks_agreement: is the measured float32 matmul ceiling what a plain tf.matmul timing outside the app sees?

Each round times a plain 4096 x 4096 float32 `tf.matmul` in a fresh process
(tf.function, one warm-up call, median of 3, each call read back) and runs the
app's measurement (`core.machine.peaks.measure_peaks`, its own child process),
alternating. Figure: the median over rounds of measured / plain - 1 (paired per
round, so load that drifts between rounds cancels). The issue's acceptance:
within +-25%.
"""

from __future__ import annotations

import statistics
import time

from benchmarks import harness

NAME = "peaks_agreement"
TARGET = "within +-25%"
TOLERANCE = 0.25
MATMUL_N = 4096


def run(quick: bool) -> list[harness.Result]:
    from core.machine.peaks import measure_peaks

    rounds = 1 if quick else 3
    plain, measured = [], []
    for _ in range(rounds):
        plain.append(harness.run_child(NAME, ["plain"])["flops"])
        report = measure_peaks()
        cpu = report.device("CPU:0")
        if cpu is None or "float32" not in cpu.matmul_flops:
            raise harness.BenchmarkError(f"the measurement gave no CPU float32 figure: {report.error or cpu}")
        measured.append(cpu.matmul_flops["float32"])
    ratio, ratios = harness.paired_ratio(measured, plain)
    deviation = ratio - 1
    return [
        harness.Result(
            NAME,
            deviation * 100,
            "%",
            TARGET,
            abs(deviation) <= TOLERANCE,
            f"measured {harness.median(measured) / 1e9:,.1f} vs plain {harness.median(plain) / 1e9:,.1f} GFLOP/s (4096^2 float32); "
            f"ratios {harness.spread_text(ratios)}",
            {"measured": measured, "plain": plain},
        )
    ]


def _child(argv: list[str]) -> dict:
    import tensorflow as tf

    a = tf.random.normal((MATMUL_N, MATMUL_N))
    b = tf.random.normal((MATMUL_N, MATMUL_N))
    product = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)[0, :1]))
    product(a, b).numpy()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        product(a, b).numpy()
        times.append(time.perf_counter() - start)
    return {"flops": 2 * MATMUL_N**3 / statistics.median(times)}


if __name__ == "__main__":
    harness.child_main(_child)

"""responsiveness: does the window keep up while it trains?

In a fresh process the real window (offscreen) trains the MLP on synthetic
data, one step per call (the busiest case for the GUI thread: the most steps
per second to plot and the training thread's Python competing for the GIL).
A 10 ms precise QTimer on the GUI thread records time.perf_counter at every
tick; a late tick is time the GUI could not react. Ticks while the first call
traces and compiles the step are reported apart from the steady state.
Figures: p99 and max of the steady-state tick intervals; full garbage
collections during the run (they pause every thread) are counted alongside.
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness

NAME = "responsiveness"
TARGET = "p99 <= 20 ms, max <= 100 ms"
TARGET_P99_MS, TARGET_MAX_MS = 20.0, 100.0
PROBE_MS = 10
MODEL, BATCH_SIZE = "mlp", 64


def run(quick: bool) -> list[harness.Result]:
    figures = harness.run_child(NAME, [800 if quick else 4000])
    steady, warm = figures["steady"], figures["warmup"]
    detail = (
        f"{steady['ticks']} ticks, median {steady['median']:.1f} ms; during tracing: p99 {warm['p99']:.1f} ms, "
        f"max {warm['max']:.1f} ms ({warm['ticks']} ticks); during the run: {figures['gc']}"
    )
    return [
        harness.Result(f"{NAME} p99", steady["p99"], "ms", f"<= {TARGET_P99_MS:g} ms", steady["p99"] <= TARGET_P99_MS, detail, figures),
        harness.Result(f"{NAME} max", steady["max"], "ms", f"<= {TARGET_MAX_MS:g} ms", steady["max"] <= TARGET_MAX_MS, "", {}),
    ]


def _child(argv: list[str]) -> dict:
    import time

    from PySide6.QtCore import Qt, QTimer

    steps = int(argv[0])

    def script(app: harness.AppWindow) -> dict:
        app.wait_until_ready()
        app.set_run(MODEL, steps, BATCH_SIZE, 1)
        ticks: list[tuple[float, bool]] = []  # (time, steady steps already plotted)

        def tick() -> None:
            ticks.append((time.perf_counter(), app.steady_steps_plotted() > 0))

        probe = QTimer()
        probe.setTimerType(Qt.TimerType.PreciseTimer)
        probe.setInterval(PROBE_MS)
        probe.timeout.connect(tick)
        probe.start()
        with harness.GcPauses() as pauses:
            finished = app.run()
        probe.stop()
        if not finished.result.ok:
            raise harness.BenchmarkError(f"run {finished.result.status}: {finished.result.message}")
        times = np.array([t for t, _ in ticks])
        steady = np.array([s for _, s in ticks])
        intervals = np.diff(times) * 1e3
        return {"steady": _stats(intervals[steady[1:] & steady[:-1]]), "warmup": _stats(intervals[~steady[1:]]), "gc": pauses.summary()}

    return harness.run_in_app(script)


def _stats(intervals_ms: np.ndarray) -> dict:
    if not len(intervals_ms):
        raise harness.BenchmarkError("no probe ticks in this phase: the run was too short")
    return {
        "ticks": int(len(intervals_ms)),
        "median": float(np.median(intervals_ms)),
        "p99": float(np.percentile(intervals_ms, 99)),
        "max": float(intervals_ms.max()),
    }


if __name__ == "__main__":
    harness.child_main(_child)

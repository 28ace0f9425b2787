"""soak: does the app leak over many runs in one process?

In a fresh process the real window (offscreen) does 100 consecutive runs
(MLP, synthetic data, 300 steps each, Start pressed each time; each run adds a
curve to the plots and a row to the history, as in use). After every run it
notes the process's resident memory, OS threads and open file descriptors
(psutil), after a full garbage collection: a run's traced graphs are cyclic
garbage, which Python frees at its next full collection, so without one RSS
saws up and down by ~30 MB with the collector's rhythm and a single sample
says more about that phase than about what is kept. Figures: resident memory
growth per run after run 5 (the first runs fill caches that are then reused:
TensorFlow's kernels, Keras, the plots), as (RSS after the last run - RSS
after run 5) / runs since; the least-squares slope over the same runs is given
beside it. What the window keeps by design is in it: every run's curves stay
in the plots and its row in the history. Threads and descriptors: from after
the first run to after the last.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "soak"
TARGET = "RSS growth after run 5 <= 0.5 MB per run; no thread or fd growth"
RSS_PER_RUN_TARGET_MB = 0.5
SETTLE_RUNS = 5
RUNS, QUICK_RUNS = 100, 10
MODEL, STEPS = "mlp", 300
SECONDS_PER_RUN_LIMIT = 20


def run(quick: bool) -> list[harness.Result]:
    runs = QUICK_RUNS if quick else RUNS
    samples = harness.run_child(NAME, [runs], timeout_s=120 + runs * SECONDS_PER_RUN_LIMIT)["samples"]
    rss_mb = [s["rss"] / 2**20 for s in samples]
    settled = rss_mb[SETTLE_RUNS - 1 :]
    per_run = (settled[-1] - settled[0]) / max(1, len(settled) - 1)
    first, last = samples[0], samples[-1]
    threads = last["threads"] - first["threads"]
    fds = last["fds"] - first["fds"]
    series = ", ".join(f"{mb:.1f}" for mb in rss_mb)
    return [
        harness.Result(
            f"{NAME} RSS growth per run ({runs} runs)",
            per_run,
            "MB",
            f"<= {RSS_PER_RUN_TARGET_MB:g} MB per run after run {SETTLE_RUNS}",
            per_run <= RSS_PER_RUN_TARGET_MB,
            f"run {SETTLE_RUNS} -> {runs}: {settled[0]:.1f} -> {settled[-1]:.1f} MB; least-squares slope "
            f"{_slope(settled):.3f} MB per run; RSS after each run (MB): {series}",
            {"samples": samples},
        ),
        harness.Result(
            f"{NAME} thread / fd growth",
            float(max(threads, fds)),
            "",
            "0 (no growth)",
            threads <= 0 and fds <= 0,
            f"threads {first['threads']} -> {last['threads']}, open fds {first['fds']} -> {last['fds']}",
        ),
    ]


def _slope(values: list[float]) -> float:
    """Least-squares growth per step of `values` (0 for fewer than two)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    return covariance / sum((x - mean_x) ** 2 for x in range(n))


def _child(argv: list[str]) -> dict:
    import gc

    import psutil

    runs = int(argv[0])
    process = psutil.Process()

    def script(app: harness.AppWindow) -> dict:
        app.wait_until_ready()
        app.set_run(MODEL, STEPS)
        samples = []
        for index in range(runs):
            finished = app.run()
            if not finished.result.ok:
                raise harness.BenchmarkError(f"run {index + 1} {finished.result.status}: {finished.result.message}")
            app.wait_for_workers()
            gc.collect()
            samples.append({"rss": process.memory_info().rss, "threads": process.num_threads(), "fds": process.num_fds()})
        return {"samples": samples}

    return harness.run_in_app(script)


if __name__ == "__main__":
    harness.child_main(_child)

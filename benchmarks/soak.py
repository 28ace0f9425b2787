"""soak: does the app leak over many runs in one process?

In a fresh process the real window (offscreen) does 30 consecutive runs
(MLP, synthetic data, 300 steps each, Start pressed each time; each run adds a
curve to the plots and a row to the history, as in use). After every run it
notes the process's resident memory, OS threads and open file descriptors
(psutil). Figures: growth from after the first run to after the last.
"""

from __future__ import annotations

from benchmarks import harness

NAME = "soak"
TARGET = "RSS growth <= 150 MB; no thread or fd growth"
RSS_TARGET_MB = 150.0
MODEL, STEPS = "mlp", 300


def run(quick: bool) -> list[harness.Result]:
    runs = 5 if quick else 30
    samples = harness.run_child(NAME, [runs], timeout_s=1200)["samples"]
    first, last = samples[0], samples[-1]
    rss_growth = (last["rss"] - first["rss"]) / 2**20
    threads = last["threads"] - first["threads"]
    fds = last["fds"] - first["fds"]
    series = ", ".join(f"{s['rss'] / 2**20:.0f}" for s in samples)
    return [
        harness.Result(
            f"{NAME} RSS growth ({runs} runs)",
            rss_growth,
            "MB",
            f"<= {RSS_TARGET_MB:g} MB after the first run",
            rss_growth <= RSS_TARGET_MB,
            f"RSS after each run (MB): {series}",
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


def _child(argv: list[str]) -> dict:
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
            samples.append({"rss": process.memory_info().rss, "threads": process.num_threads(), "fds": process.num_fds()})
        return {"samples": samples}

    return harness.run_in_app(script)


if __name__ == "__main__":
    harness.child_main(_child)

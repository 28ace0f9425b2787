"""plot_scale: can the live plots (gui/plotting/plots.py) carry three runs of a million steps each?

In a fresh process a PlotsWidget (offscreen, 1000x700, shown) gets three runs
of 1,000,000 steps (noisy decaying loss, step times around 1 ms). Memory per
stored step per run: traced Python/numpy allocations (tracemalloc) after
adding and drawing the third run, minus before, over 1,000,000. Frame time:
the third run keeps growing as a live run does (400 steps per frame through
`append_steps`), then the widget's redraw (`redraw_now`, what its redraw timer
calls) and a synchronous repaint of both plots are timed together; a second
case times a pan (the x range moves, every curve is clipped and downsampled
again). Figures: median and worst frame of each case.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import harness

NAME = "plot_scale"
TARGET = "<= 33 ms per frame; <= 64 bytes per step per run"
FRAME_TARGET_MS = 33.0
BYTES_TARGET = 64.0
RUNS, STEPS = 3, 1_000_000
GROWTH_PER_FRAME = 400


def run(quick: bool) -> list[harness.Result]:
    figures = harness.run_child(NAME, [10 if quick else 40])
    live, pan = figures["live"], figures["pan"]
    return [
        harness.Result(
            f"{NAME} live frame",
            live["median"],
            "ms",
            f"<= {FRAME_TARGET_MS:g} ms",
            live["median"] <= FRAME_TARGET_MS,
            f"3 x {STEPS:,} steps, one run growing {GROWTH_PER_FRAME}/frame; p90 {live['p90']:.1f} ms, worst {live['max']:.1f} ms",
            figures,
        ),
        harness.Result(
            f"{NAME} pan frame",
            pan["median"],
            "ms",
            f"<= {FRAME_TARGET_MS:g} ms",
            pan["median"] <= FRAME_TARGET_MS,
            f"x range moved each frame; p90 {pan['p90']:.1f} ms, worst {pan['max']:.1f} ms",
        ),
        harness.Result(
            f"{NAME} memory",
            figures["bytes_per_step"],
            "B/step",
            f"<= {BYTES_TARGET:g} B per step per run",
            figures["bytes_per_step"] <= BYTES_TARGET,
            "all curves of one run (loss, step time, raw and smoothed), traced by tracemalloc",
        ),
    ]


def _steps(rng: np.random.Generator, offset: int, count: int) -> tuple[np.ndarray, ...]:
    steps = np.arange(offset + 1, offset + count + 1, dtype=np.float64)
    losses = 2.0 * np.exp(-steps / 2e5) + rng.normal(0, 0.05, count)
    times_s = 1e-3 + rng.gamma(2.0, 5e-5, count)
    warmup = steps == 1
    return steps, losses, times_s, warmup


def _child(argv: list[str]) -> dict:
    import tracemalloc

    from PySide6.QtWidgets import QApplication

    from gui.plotting.plots import PlotsWidget

    frames = int(argv[0])
    app = QApplication.instance() or QApplication([])
    rng = np.random.default_rng(0)
    plots = PlotsWidget()
    plots.resize(1000, 700)
    plots.show()
    app.processEvents()
    for index in range(RUNS - 1):
        plots.add_run(f"run-{index}", f"run {index}", batch_size=64)
        plots.append_steps(f"run-{index}", *_steps(rng, 0, STEPS))
    _frame(app, plots)
    live = f"run-{RUNS - 1}"
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    plots.add_run(live, "live run", batch_size=64)
    plots.append_steps(live, *_steps(rng, 0, STEPS))
    _frame(app, plots)
    bytes_per_step = (tracemalloc.get_traced_memory()[0] - before) / STEPS
    tracemalloc.stop()

    live_ms = []
    for frame in range(frames):
        plots.append_steps(live, *_steps(rng, STEPS + frame * GROWTH_PER_FRAME, GROWTH_PER_FRAME))
        live_ms.append(_frame(app, plots))
    pan_ms = []
    view = plots.loss_plot.getPlotItem().getViewBox()
    for frame in range(frames):
        view.setXRange(frame * 10_000, frame * 10_000 + 600_000, padding=0)
        pan_ms.append(_frame(app, plots))
    return {"live": _stats(live_ms), "pan": _stats(pan_ms), "bytes_per_step": bytes_per_step}


def _frame(app, plots) -> float:
    """One redraw as the widget's timer does it, painted synchronously; returns milliseconds."""
    started = time.perf_counter()
    plots.redraw_now()
    app.processEvents()
    for plot in (plots.loss_plot, plots.step_time_plot):
        plot.viewport().repaint()
    return (time.perf_counter() - started) * 1e3


def _stats(values_ms: list[float]) -> dict:
    return {"median": float(np.median(values_ms)), "p90": float(np.percentile(values_ms, 90)), "max": float(max(values_ms))}


if __name__ == "__main__":
    harness.child_main(_child)

"""backend_overhead: does the app's JAX job train as fast as a bare Keras `model.fit` on JAX, and does it report the truth?

Both sides train the same sample model on the same synthetic NumPy data (the
job's: `core.workloads.data.load_arrays`, 4,096 examples, whole batches per
epoch), batch 64, Adam, `steps_per_execution=K`, Keras's default compilation
(XLA on JAX). The app's job runs as `run_training(RunConfig(backend="jax"))`
does everywhere: a child process that streams its steps back; the bare fit
runs in a process of its own with KERAS_BACKEND=jax and a batch-*begin*
callback only (Keras keeps dispatching asynchronously, as bare fit does).
Job and fit alternate (ABAB...), one fresh process each.

Timing from outside: the bare fit over whole call cycles (start of a call to
the start of the next); the job from the app's side, when each call's steps
arrive in the app (the child's own clock is not used), over the same calls.
Both skip the first call and the first 10% of calls. Figures: median of the
paired job/fit ratios (target >= 0.97), and the job's reported samples/s
against that outside clock (target within +-3%, as `truth` for TensorFlow).
"""

from __future__ import annotations

import os
import time

from benchmarks import harness

NAME = "backend_overhead"
TARGET = ">= 0.97 (vs fit); within +-3% (truth)"
RATIO_TARGET = 0.97
TRUTH_TOLERANCE = 0.03
BATCH_SIZE = 64
CASES = (("mlp", 1, 2000), ("mlp", 16, 3200), ("cnn", 1, 200))


def run(quick: bool) -> list[harness.Result]:
    pairs = 2 if quick else 4
    rows = []
    for model, k, steps in CASES:
        steps = steps // 4 if quick else steps
        job_runs, fit_rates = [], []
        for _ in range(pairs):
            job_runs.append(harness.run_child(NAME, ["job", model, k, steps]))
            fit_rates.append(harness.run_child(NAME, ["fit", model, k, steps], env=harness.child_env(KERAS_BACKEND="jax"))["outside"])
        job_rates = [r["outside"] for r in job_runs]
        ratio, ratios = harness.paired_ratio(job_rates, fit_rates)
        deviations = [r["reported"] / r["truth"] - 1 for r in job_runs]
        deviation = harness.median(deviations)
        case = f"{model} K={k}"
        rows.append(
            harness.Result(
                f"{NAME} {case} vs fit",
                ratio,
                "x",
                f">= {RATIO_TARGET:.2f}",
                ratio >= RATIO_TARGET,
                f"job {harness.median(job_rates):,.0f} vs bare JAX fit {harness.median(fit_rates):,.0f} samples/s "
                f"(batch {BATCH_SIZE}, {steps} steps, {pairs} pairs of processes); ratios {harness.spread_text(ratios)}",
                {"job": job_rates, "fit": fit_rates, "ratios": ratios},
            )
        )
        rows.append(
            harness.Result(
                f"{NAME} {case} truth",
                deviation * 100,
                "%",
                f"within +-{TRUTH_TOLERANCE:.0%}",
                abs(deviation) <= TRUTH_TOLERANCE,
                f"reported {harness.median([r['reported'] for r in job_runs]):,.0f} vs outside "
                f"{harness.median([r['truth'] for r in job_runs]):,.0f} samples/s; deviations % "
                f"{harness.spread_text([d * 100 for d in deviations], '+.2f')}",
                {"runs": job_runs},
            )
        )
    return rows


def arrival_rate(arrivals: list[float], steps: list[int], skip_fraction: float = 0.1) -> float:
    """Samples/s between call ends as the app saw them, the first call and the first `skip_fraction` of calls left out."""
    first = max(1, int(len(arrivals) * skip_fraction))
    last = len(arrivals) - 1
    if last <= first:
        raise harness.BenchmarkError(f"only {len(arrivals)} calls: too few to time a steady state")
    return BATCH_SIZE * sum(steps[first + 1 : last + 1]) / (arrivals[last] - arrivals[first])


def _job(model: str, k: int, steps: int) -> dict:
    """The app's JAX job, timed where its steps arrive; with its reported figure and the same span's outside rate."""
    from core.config import RunConfig
    from core.runner import run_training
    from core.training.hooks import RunHook

    arrivals: list[float] = []
    sizes: list[int] = []

    class Arrivals(RunHook):
        def on_step_records(self, records) -> None:
            arrivals.append(time.perf_counter())
            sizes.append(len(records))

    config = RunConfig(model=model, backend="jax", dataset="synthetic", batch_size=BATCH_SIZE, steps=steps, steps_per_call=k)
    result = run_training(config, hooks=[Arrivals()])
    if not result.ok:
        raise harness.BenchmarkError(f"JAX job {result.status}: {result.message}")
    steady = sum(sizes[1:])
    truth = BATCH_SIZE * steady / (arrivals[-1] - arrivals[0])  # the same steady steps the app reports on
    return {"outside": arrival_rate(arrivals, sizes), "reported": result.samples_per_s, "truth": truth}


def _fit(model: str, k: int, steps: int) -> dict:
    """A bare Keras model.fit on JAX (this process has KERAS_BACKEND=jax), timed at the start of every call."""
    import keras

    from core.workloads import data
    from core.workloads.models import get_model_spec

    assert keras.backend.backend() == "jax", "run with KERAS_BACKEND=jax"
    spec = get_model_spec(model)
    x, y, num_classes = data.load_arrays("synthetic", spec, 0)
    net = spec.build(x.shape[1:], num_classes, seed=0)
    net.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=k,
    )
    begins: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None) -> None:
            begins.append(time.perf_counter())

    epochs = -(-steps // (len(y) // BATCH_SIZE))
    net.fit(x, y, batch_size=BATCH_SIZE, epochs=epochs, shuffle=False, verbose=0, callbacks=[Clock()])
    return {"outside": harness.cycle_rate(begins, [k] * len(begins), BATCH_SIZE)}


def _child(argv: list[str]) -> dict:
    mode, model, k, steps = argv[0], argv[1], int(argv[2]), int(argv[3])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return (_job if mode == "job" else _fit)(model, k, steps)


if __name__ == "__main__":
    harness.child_main(_child)

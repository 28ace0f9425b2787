"""bare_steps: Keras's compiled JAX train step alone on the device, back to back: the device's time with no `fit` around it.

    python benchmarks/bare_steps.py --points cnn:1024,resnet:64 [--calls 30] [--repeats 5]

For each sample model and batch (synthetic data, float32, adam: the projection's points'
settings): Keras's JAX `train_step`, lowered as `core.projection.step_costs` lowers it (the state
donated), compiled for JAX's default device (the GPU where there is one), fed one batch already on
the device, called `--calls` times back to back (each call takes the state the last returned; JAX
dispatches ahead) and blocked on at the end, after 3 calls to warm up. The step is the median of
`--repeats` such runs ÷ calls. Each point is printed as one JSON line once measured, so a run
stopped at its time limit keeps the points it had.

What it is for (issue 41): a `main.py run` step is the host's share (Keras's per-step work, its
once-an-epoch work) plus the device's; this is the device's (and JAX's bare dispatch, where that
is longer), so a GPU's points tell the projection's device term apart from its host term. Each
point also counts its compiled step's kernels as `core.projection.step_costs` counts them: on a GPU,
the GPU compiler's own count, to set beside the CPU's that the projection uses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script, as gpu_points runs it

from core.config import RunConfig  # noqa: E402

WARMUP_CALLS = 3


def parse_points(text: str) -> list[tuple[str, int]]:
    """ "cnn:1024,mlp:64" -> [("cnn", 1024), ("mlp", 64)]."""
    return [(model, int(batch)) for model, batch in (item.split(":") for item in text.split(",") if item)]


def bare_step(model_name: str, batch: int, calls: int, repeats: int) -> dict[str, Any]:
    """One point: the compiled train step of the sample model at `batch`, timed back to back on JAX's default device."""
    import jax
    import keras

    from core.backends.job_data import epoch_arrays, first_examples
    from core.backends.step_flops import traced_train_step
    from core.projection.step_costs import compiled_job_model, count_kernels

    data, model, _ = compiled_job_model(RunConfig(model=model_name, backend="jax", batch_size=batch))
    start = time.perf_counter()
    compiled = traced_train_step(model, data.x, data.y, batch, donate=True).lower().compile()
    compile_s = time.perf_counter() - start
    x, y, _ = epoch_arrays(data, batch, 1)
    batch_data = jax.device_put((first_examples(x, batch), first_examples(y, batch)))
    state = jax.device_put(
        model._get_jax_state(trainable_variables=True, non_trainable_variables=True, optimizer_variables=True, metrics_variables=True)
    )

    def run(count: int) -> float:
        nonlocal state
        began = time.perf_counter()
        for _ in range(count):
            _, state = compiled(state, batch_data)
        jax.block_until_ready(state)
        return (time.perf_counter() - began) / count

    run(WARMUP_CALLS)
    steps = [run(calls) for _ in range(repeats)]
    return {
        "model": model_name,
        "batch": batch,
        "step_ms": statistics.median(steps) * 1e3,
        "repeats_ms": [step * 1e3 for step in steps],
        "calls": calls,
        "compile_s": round(compile_s, 2),
        "kernels": count_kernels(compiled.as_text() or "").kernels,
        "device": str(jax.devices()[0].device_kind),
        "versions": {"jax": jax.__version__, "keras": keras.__version__},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=parse_points, required=True, help="MODEL:BATCH,... (sample models, synthetic data)")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args(argv)
    from core.backends.child_job import prepare_environment

    prepare_environment(RunConfig(backend="jax"))  # KERAS_BACKEND=jax, TensorFlow refused, as a backend job
    for model_name, batch in options.points:
        try:
            point = bare_step(model_name, batch, options.calls, options.repeats)
        except Exception as exc:  # one point that cannot be compiled or run leaves the others measured
            point = {"model": model_name, "batch": batch, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
        print(json.dumps(point), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

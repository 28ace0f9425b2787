"""A JAX job for real: trained in its own child process that imports no TensorFlow, its steps streamed back.

Tiny models and few steps; every test here starts a JAX child, so all are slow.
"""

from __future__ import annotations

import statistics
import threading

import psutil
import pytest

from core import RunConfig, RunStatus, run_training
from core.hooks.conditions import ConditionsHook
from core.training.hooks import RunHook
from tests.step_hooks import StepsTo

pytestmark = pytest.mark.slow


class Heard(RunHook):
    """What the hooks hear, as the history recorder and the live plots would."""

    def __init__(self) -> None:
        self.context = None
        self.steps: list[int] = []
        self.result = None

    def on_run_start(self, context) -> None:
        self.context = context

    def on_step_records(self, records) -> None:
        self.steps += [record.step for record in records]

    def on_run_end(self, result) -> None:
        self.result = result


def _job_libraries() -> list[str]:
    """The shared libraries the running JAX child has mapped, read from outside it (/proc/PID/maps)."""
    (child,) = [p for p in psutil.Process().children(recursive=True) if "core.backends.child_job" in " ".join(p.cmdline())]
    return [m.path for m in child.memory_maps()]


def test_a_jax_job_trains_in_a_child_without_tensorflow_and_streams_every_step():
    heard, streamed, libraries = Heard(), [], []

    def on_step_records(records) -> None:
        streamed.extend(records)
        if not libraries:
            libraries.extend(_job_libraries())

    hooks = [ConditionsHook(), heard, StepsTo(on_step_records)]  # the conditions hook, as the job service gives every run one
    result = run_training(RunConfig(model="mlp", backend="jax", steps=24, steps_per_call=4), hooks=hooks)
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.environment["tensorflow_imported"] is False  # checked in the child at the end of the job
    assert any("jax" in path for path in libraries) and not any("tensorflow" in path for path in libraries)
    assert result.environment["backend"] == "jax" and result.environment["jax"]
    assert [r.step for r in streamed] == heard.steps == list(range(1, 25))
    # the warm-up: the first call (a fit of its own) and the steady fit's first 2 calls (its set-up and start: half the run at most)
    assert result.warmup_steps == 12 and [r.warmup for r in streamed[:13]] == [True] * 12 + [False]
    assert heard.context.total_steps == 24 and heard.context.model is None and heard.result is result
    assert result.samples_per_s > 0 and result.step_time_median_ms > 0 and result.warmup_s > 0
    assert result.summary()["backend"] == "jax" and result.config["backend"] == "jax"
    assert result.peak_memory_bytes > 0 and "JAX" in result.peak_memory_source
    # the conditions it was measured in, as every TensorFlow run has them (the job's child is the run's own work)
    assert result.conditions["window"] in ("steady state", "whole run") and result.conditions["other_cpu_share"] is not None


@pytest.mark.heavy  # a TensorFlow and a JAX training side by side
def test_tensorflow_and_jax_start_from_the_same_weights_and_their_loss_curves_overlap():
    """Synthetic data comes in the same order on both: the first steps agree to float32 rounding.
    On the shipped digits each backend shuffles its own way: the curves agree within the noise of the batches."""
    same = {"model": "mlp", "steps": 12, "seed": 5}
    tf_run, jax_run = (run_training(RunConfig(backend=backend, **same)) for backend in ("tensorflow", "jax"))
    assert tf_run.ok and jax_run.ok, (tf_run.message, jax_run.message)
    assert jax_run.losses[:3] == pytest.approx(tf_run.losses[:3], rel=1e-4)
    digits = {"model": "mlp", "dataset": "digits", "steps": 150, "seed": 1, "learning_rate": 3e-3}
    tf_run, jax_run = (run_training(RunConfig(backend=backend, **digits)) for backend in ("tensorflow", "jax"))
    assert tf_run.ok and jax_run.ok, (tf_run.message, jax_run.message)
    for first, last in ((0, 10), (60, 90), (120, 150)):
        tf_part, jax_part = tf_run.losses[first:last], jax_run.losses[first:last]
        noise = 3 * max(statistics.stdev(tf_part), statistics.stdev(jax_part)) / len(tf_part) ** 0.5 + 0.02
        assert abs(statistics.mean(tf_part) - statistics.mean(jax_part)) < noise, (first, tf_part, jax_part)
    assert statistics.mean(jax_run.losses[-30:]) < 0.5 * statistics.mean(jax_run.losses[:10])  # it learned


def test_stop_ends_a_jax_job_after_the_call_in_flight_and_leaves_no_child():
    stop = threading.Event()
    seen: list[int] = []
    steady: list[int] = []
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}

    def on_step_records(records) -> None:
        seen.extend(r.step for r in records)
        steady.extend(r.step for r in records if not r.warmup)
        if len(steady) >= 3:  # past the warm-up, so the run has a steady state to report
            stop.set()

    result = run_training(RunConfig(model="mlp", backend="jax", steps=100_000), stop, [StepsTo(on_step_records)])
    # The steps that had reached the app when Stop was asked are the run's (the job sends calls together, every 10 ms): no more.
    assert result.status == RunStatus.STOPPED and f"after {len(seen)} of 100000 steps" in result.message
    assert result.steps_done == len(seen) and 3 <= len(seen) < 1000 and result.samples_per_s > 0
    alive = [p for p in psutil.Process().children(recursive=True) if p.pid not in children_before and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_a_model_the_job_cannot_build_fails_with_the_reason_not_a_hang(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip file")
    model_file = tmp_path / "model.py"
    model_file.write_text("import keras\ndef build_model():\n    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n")
    result = run_training(RunConfig(model=str(model_file), dataset=str(broken), trust=True, backend="jax", steps=5))
    assert result.status == RunStatus.FAILED and "broken.npz" in result.message and result.steps_done == 0


@pytest.mark.heavy  # a JAX child beside a 1.5 GB parent; the JAX job's own memory figure is checked in the default run's job test
def test_a_jax_jobs_peak_memory_is_its_own_not_the_size_of_the_big_app_that_started_it():
    """Linux's ru_maxrss keeps a forked child's parent size across exec: the job reads VmHWM, which starts afresh."""
    import numpy as np

    app = np.ones(1_500_000_000, dtype=np.uint8)  # this process as big as the app with TensorFlow loaded
    result = run_training(RunConfig(model="mlp", backend="jax", steps=8))
    assert result.ok and result.peak_memory_bytes, result.message
    assert result.peak_memory_bytes < app.nbytes, result.peak_memory_bytes

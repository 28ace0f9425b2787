"""Verdicts from real runs of tiny models, and the input pipeline timed alone and against the model."""

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from core.config import RunConfig
from core.diagnosis import probes
from core.diagnosis.verdict import Bound, Evidence, Point, verdict
from core.hooks.flops import FlopsCounter
from core.runner import run_training
from core.workloads.models import MODELS

SLEEP_S = 0.02  # per batch, in the deliberately slow pipeline


def _run_and_diagnose(config: RunConfig):
    counter = FlopsCounter()
    result = run_training(config, hooks=[counter])
    assert result.ok, result.message
    found, probe_runs = probes.diagnose(config, result, counter=counter)
    return result, found, probe_runs


@pytest.mark.slow
def test_mlp_at_batch_8_is_overhead_bound(two_cpus):
    result, found, probe_runs = _run_and_diagnose(RunConfig(model="mlp", batch_size=8, steps=60))
    probed = [(p.config["batch_size"], p.config["steps_per_call"]) for p in probe_runs]
    if any(run.contended for run in (result, *probe_runs)):  # another process took the CPU meanwhile: no bound is judged
        assert found.bound is Bound.UNKNOWN and found.bound_evidence.startswith("Too noisy to judge"), found.bound_evidence
        # the call probe runs only where the noisy batch evidence showed a fixed share worth splitting
        assert probed[:1] == [(1, 1)] and probed[1:] in ([], [(8, 8)])
    else:
        assert found.bound is Bound.OVERHEAD, found.bound_evidence
        assert probed == [(1, 1), (8, 8)]
    assert all(p.ok for p in probe_runs)
    # runs of the same job already made (as a sweep's) stand in for the probes: nothing more to run
    assert probes.run_probes(RunConfig(model="mlp", batch_size=8, steps=60), result, others=probe_runs) == []
    assert found.achieved_flops is not None and found.pct_of_measured_peak is None  # no ceilings passed


@pytest.mark.slow
def test_cnn_at_batch_256_is_neither_overhead_nor_input_bound(two_cpus):
    result, found, probe_runs = _run_and_diagnose(RunConfig(model="cnn", batch_size=256, steps=8))
    assert found.bound not in (Bound.OVERHEAD, Bound.INPUT), found.bound_evidence
    # the smaller batch showed a small fixed share, so the steps-per-call probe was not needed
    assert [p.config["batch_size"] for p in probe_runs] == [32]


def _mlp_train_steps(batch_size: int):
    """The MLP and a compiled n-step training function of the engine's form, built here for a user pipeline."""
    import keras
    import tensorflow as tf

    model = MODELS["mlp"].build()
    optimizer = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_steps(iterator, n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True))
        return loss

    return lambda iterator, n: train_steps(iterator, tf.constant(n))


def _pipeline(batch_size: int, sleep_s: float = 0.0):
    """A user's tf.data pipeline: batches of in-memory arrays, cached; with `sleep_s`, a map after the cache sleeps per batch."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, *MODELS["mlp"].input_shape), dtype=np.float32)
    y = rng.integers(0, 10, 1024, dtype=np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, drop_remainder=True).cache().repeat()
    if sleep_s:

        def slow(xs, ys):
            time.sleep(sleep_s)
            return xs, ys

        def mapped(xs, ys):
            xs2, ys2 = tf.py_function(slow, [xs, ys], [tf.float32, tf.int32])
            return tf.ensure_shape(xs2, xs.shape), tf.ensure_shape(ys2, ys.shape)

        dataset = dataset.map(mapped)
    return dataset.prefetch(2)


INPUT_REPEATS = 5


@dataclass(frozen=True)
class InputTiming:
    """One training step function timed fed by a pipeline, fed by one in-memory batch, and the pipeline alone."""

    step_s: float
    model_only_step_s: float
    pipeline: probes.PipelineTiming


def measure_input(dataset: Any, train_steps: Callable[[Any, int], Any], steps: int = 20, warmup_steps: int = 2) -> InputTiming:
    """Time `train_steps(iterator, n)` fed by `dataset` and fed one of its batches from memory, then the pipeline alone.

    `train_steps` runs n training steps and returns a tensor (the engine's
    compiled function has this form). The in-memory feed repeats one cached
    batch, so (fed - in memory) / fed is the share of a step spent waiting
    for input. The two feeds take turns, INPUT_REPEATS calls each, and each
    gives its median: load from other processes that drifts meanwhile falls
    on both alike.
    """
    feeds = (iter(dataset), iter(dataset.take(1).cache().repeat()))
    times: tuple[list[float], list[float]] = ([], [])
    for iterator in feeds:
        _read_back(train_steps(iterator, warmup_steps))
    for _ in range(INPUT_REPEATS):
        for iterator, found in zip(feeds, times, strict=True):
            start = time.perf_counter()
            _read_back(train_steps(iterator, steps))
            found.append((time.perf_counter() - start) / steps)
    fed, in_memory = (statistics.median(found) for found in times)
    return InputTiming(fed, in_memory, probes.time_pipeline(dataset, steps, warmup_batches=warmup_steps))


def _read_back(value: Any) -> None:
    numpy = getattr(value, "numpy", None)
    if numpy is not None:
        numpy()


@pytest.mark.slow
def test_a_pipeline_made_slow_on_purpose_is_input_bound(two_cpus):
    timing = measure_input(_pipeline(32, SLEEP_S), _mlp_train_steps(32), steps=10)
    # prefetch(2) holds batches made before the clock starts, so a step may come in a little under the sleep
    assert timing.pipeline.per_batch_s >= 0.8 * SLEEP_S and timing.step_s >= 0.8 * SLEEP_S
    evidence = Evidence(run=Point(32, 1, timing.step_s), pipeline_s=timing.pipeline.per_batch_s, model_only_step_s=timing.model_only_step_s)
    found = verdict(evidence)
    assert found.bound is Bound.INPUT, found.bound_evidence
    assert "waits for data" in found.bound_evidence
    # the pipeline alone, without the in-memory step, says so too
    assert verdict(Evidence(run=evidence.run, pipeline_s=timing.pipeline.per_batch_s)).bound is Bound.INPUT


@pytest.mark.slow
def test_the_same_pipeline_without_the_sleep_is_not_input_bound(two_cpus):
    """As a run's verdict does, the measurement's conditions decide whether it can be judged: beside other work (another
    test process on 2 cores) tf.data's threads lose CPU and the in-memory feed does not, which once read "25% waits for data"."""
    from core.machine.conditions import between, contention_reason, snapshot

    before = snapshot()
    timing = measure_input(_pipeline(256), _mlp_train_steps(256), steps=20)
    noisy = contention_reason(between(before, snapshot(), "input probe"))
    found = verdict(
        Evidence(
            run=Point(256, 1, timing.step_s),
            pipeline_s=timing.pipeline.per_batch_s,
            model_only_step_s=timing.model_only_step_s,
            noisy=noisy,
        )
    )
    assert found.bound is not Bound.INPUT, found.bound_evidence


@pytest.mark.slow
def test_timing_a_pipeline_stops_at_its_time_limit(two_cpus):
    start = time.monotonic()
    timing = probes.time_pipeline(_pipeline(8, 0.2), batches=1000, timeout_s=1.0, warmup_batches=1)
    assert time.monotonic() - start < 10  # the limit is checked between calls of at most ~0.25 s of batches
    assert timing.timed_out and 0 < timing.batches < 1000
    assert timing.per_batch_s == pytest.approx(0.2, rel=0.5)


def test_the_engine_pipeline_of_a_sample_data_set_is_timed_alone(two_cpus):
    timing = probes.time_pipeline(probes.run_pipeline(RunConfig(model="mlp", dataset="digits", batch_size=64)), batches=50)
    assert timing.batches == 50 and not timing.timed_out and timing.per_batch_s > 0


def test_probe_configs_change_one_setting_and_stay_short():
    config = RunConfig(model="cnn", batch_size=256, steps=1000, epochs=None, steps_per_call=2)
    smaller = probes.smaller_batch_config(config, replicas=1, step_s=0.1)
    assert (smaller.batch_size, smaller.steps_per_call, smaller.model) == (32, 2, "cnn")
    assert smaller.steps == 2 * (1 + 30)  # 2 s / (0.1 s x 32/256 x 2 steps per call) = 80 calls, capped at 30, + warm-up
    calls = probes.more_calls_config(config, step_s=0.1)
    assert (calls.batch_size, calls.steps_per_call) == (256, 16)
    assert probes.smaller_batch_config(RunConfig(batch_size=4), replicas=1, step_s=None).batch_size == 32  # cannot halve: x 8
    assert probes.smaller_batch_config(RunConfig(batch_size=64), replicas=2, step_s=None).batch_size == 8
    assert probes.model_only_config(RunConfig(dataset="digits"), 0.01).dataset == "synthetic"

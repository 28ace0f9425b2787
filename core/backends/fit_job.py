"""The training of a backend job: Keras's own compiled train step through `model.fit`, timed per call (`call_timer`).

Imported by `child_job` after KERAS_BACKEND is set. The warm-up call is a `fit`
of its own, one call of the data's first batches, so that Keras's one-off work
at an epoch's end (on JAX its loss mean's first `result()` compiles three small
XLA programs: ~175 ms, which a 200-step MLP run spread over its steady steps and
read half the samples/s of a 2,000-step run) falls in the warm-up. Then
`model.fit` gets one epoch of whole calls at a time (`job_data.epoch_arrays`,
going on from the warm-up's batches) and as many epochs as the run's other steps need,
its first calls warm-up calls too (`start_calls`): the first carries that fit's
set-up, and the next run slower as a fit starts (on JAX the MLP's first calls of a
fit took 1.3-3.8 ms, later ones 0.6: a 20-step run read 0.70-0.74 of a 2,000-step
one's samples/s, 1.12 with them in the warm-up; read one by one instead of in
flight, the calls after them started cold and read 0.59);
the callback stops it at the run's end or when the parent asks, after the call
in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from core.backends.call_timer import CallClock, timed_calls_class
from core.backends.initial_weights import load_initial_weights
from core.backends.job_data import epoch_arrays, first_examples, job_data
from core.backends.job_setup import (
    PRECISION_POLICIES,
    backend_devices,
    environment,
    jit_setting,
    make_optimizer,
    placement,
    planned_steps,
)
from core.backends.step_flops import step_flops
from core.config import RunConfig
from core.job_messages import Send, Started
from core.training.parent_turns import ParentTurns
from core.workloads.file_optimizer import learning_rate_used

START_CALLS = 8
"""The steady fit's first calls read as warm-up at most: its set-up, and the slower calls as a fit starts."""


def train(
    config: RunConfig,
    send: Send,
    stop: threading.Event,
    initial_weights: str | None = None,
    count_flops: bool = True,
    takes_turns: bool = False,
) -> None:
    """Build, compile and fit the run's model, sending the start, then each call's step records; `stop` ends it after a call.

    `initial_weights` is the `.npz` of the weights the model starts from (`initial_weights.write_initial_weights`);
    `count_flops` off (a max-batch probe, which reports none) skips lowering the step for XLA's FLOP count;
    `takes_turns`: every call waits for its turn in interleaved rounds (`core.training.parent_turns`).
    """
    import keras

    keras.config.set_dtype_policy(PRECISION_POLICIES[config.precision])
    data = job_data(config)
    place, replicas = placement(config)
    x, y, batches = epoch_arrays(data, config.batch_size, config.steps_per_call)
    total, per_call, notes = planned_steps(config, data.workload, batches)
    if hasattr(data.workload, "run_notes"):  # a model file: legacy fixes, synthetic ids, whose optimizer trains it
        notes += data.workload.run_notes(config.optimizer)
    if per_call != config.steps_per_call:
        x, y, batches = epoch_arrays(data, config.batch_size, per_call)
    devices = backend_devices(config, replicas)
    with place:
        model = data.workload.build_model(seed=config.seed)
        if initial_weights:
            load_initial_weights(model, initial_weights)
        optimizer = make_optimizer(config, data.workload.make_optimizer(config.learning_rate, config.optimizer))
        model.compile(
            optimizer=optimizer,
            loss=data.loss,
            loss_weights=data.loss_weights,
            steps_per_execution=per_call,
            jit_compile=jit_setting(config),
        )
        estimate = _memory_estimate(model, optimizer, config, replicas)
        send(
            Started(
                total_steps=total,
                steps_per_call=per_call,
                replicas=replicas,
                devices=tuple(devices),
                memory_estimate=estimate,
                flops=step_flops(model, x, y, config.batch_size) if count_flops else {},
                notes=tuple(notes),
                environment=environment(config, devices),
                learning_rate=learning_rate_used(optimizer),
            )
        )
        clock = CallClock(per_call, send, stop, config.backend)
        turns = ParentTurns(send, stop) if takes_turns else None
        timed_calls = timed_calls_class()
        shuffle = not data.synthetic
        try:
            warmup = per_call * config.batch_size
            warmup_fit = timed_calls(clock, per_call, model, 1, per_call, turns=turns)
            fit = _plain_fit(model)
            fit(
                first_examples(x, warmup),
                first_examples(y, warmup),
                batch_size=config.batch_size,
                epochs=1,
                shuffle=shuffle,
                verbose=0,
                callbacks=warmup_fit,
            )
            rest = total - clock.steps_done
            if rest > 0 and not stop.is_set():
                x, y, _ = epoch_arrays(data, config.batch_size, per_call, start_batch=per_call)  # on from the warm-up's batches
                epochs = -(-rest // batches)
                steady_fit = timed_calls(clock, rest, model, epochs, batches, start_calls(total // per_call), turns)
                fit(x, y, batch_size=config.batch_size, epochs=epochs, shuffle=shuffle, verbose=0, callbacks=steady_fit)
        finally:
            clock.flush()  # the steps of a run that failed part-way are the run's too


def start_calls(total_calls: int) -> int:
    """The steady fit's warm-up calls: up to START_CALLS, leaving at least as many calls measured as the warm-up holds."""
    return max(1, min(START_CALLS, (total_calls - 2) // 2))


def _plain_fit(model: Any) -> Callable[..., Any]:
    """Keras's own `fit` of the model, where a keras-hub task would wrap it.

    A keras-hub task (a `PipelineModel`: GPT2CausalLM, BertTextClassifier) builds a
    grain or tf.data pipeline around the arrays in its `fit` to run its preprocessor;
    the job feeds the model's own inputs (token ids, masks), already what the
    preprocessor would give, and neither library is there on JAX or PyTorch.
    """
    import keras

    if callable(getattr(model, "preprocess_samples", None)):
        return lambda *args, **kwargs: keras.Model.fit(model, *args, **kwargs)
    return model.fit


def _memory_estimate(model: Any, optimizer: Any, config: RunConfig, replicas: int) -> dict[str, Any]:
    """Weights, gradients and optimizer state of the built model ({} when it cannot be estimated before the first step)."""
    from core.workloads.memory_estimate import estimate_for_model

    try:
        optimizer.build(model.trainable_variables)
        return estimate_for_model(model, optimizer, config.precision, replicas).to_dict()
    except Exception:  # an estimate is a nicety: never the reason a run fails
        return {}

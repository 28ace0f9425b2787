"""The training engine: `train_in_this_process(config, on_steps, stop_event) -> RunResult`.

One engine for every strategy: a custom training loop in which a
`tf.function` runs `steps_per_call` steps per call, each step through
`strategy.run`, and returns each step's own loss. Keras 3 `model.fit` fails
under MultiWorkerMirroredStrategy (keras-team/keras#20585) and under
MirroredStrategy with 2+ replicas and steps_per_execution >= 2
(keras-team/keras#19246); this loop runs under all of them, with a Keras 3
model and optimizer.

Call `run_training` in the thread that trains: Keras keeps the dtype policy and
the strategy scope per thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from core.config import ConfigError, RunConfig
from core.formatting import utc_now
from core.logs import quiet_native_stderr
from core.machine.types import short_name
from core.results import RunResult, RunStatus, StepRecord
from core.training.callbacks import RunCallback, RunContext, amended_result, waited_for_turn
from core.training.conditions_hook import ConditionsHook
from core.training.environment import environment
from core.training.failures import NonFiniteLoss, divergence_message, explain_failure
from core.training.memory import MemoryTracker
from core.training.metrics import Measured, measured_result
from core.training.run_checks import batch_warning, call_size
from core.training.strategies import SetupStopped, check_mirrored_devices, make_strategy
from core.training.traces import TrainSteps
from core.workloads.memory_estimate import estimate_for_model
from core.workloads.workload import open_checked_workload, open_workload

OnSteps = Callable[[Sequence[StepRecord]], None]

PRECISION_POLICIES = {"off": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}


@dataclass
class _Session:
    """Everything a run needs once set up: strategy, model, compiled step function, data."""

    strategy: Any
    model: Any
    train_steps: TrainSteps | None
    iterator: Any
    total_steps: int
    device_names: tuple[str, ...]
    input_shapes: tuple[tuple[int | None, ...], ...] = ()  # each model input's shape per example, as the data gives it

    def close(self) -> None:
        """Free what tracing left behind, then the compiled function before the data iterator (the other order takes up to 0.5 s)."""
        if self.train_steps is not None and self.iterator is not None:
            self.train_steps.release(self.iterator)
        self.train_steps = None
        self.iterator = None
        self.model = None


def train_in_this_process(
    config: RunConfig,
    on_steps: OnSteps | None = None,
    stop_event: threading.Event | None = None,
    callbacks: Sequence[RunCallback] = (),
) -> RunResult:
    """Train `config` here, streaming step records to `on_steps` after every call.

    `core.runner.run_training` calls this for every strategy but a local
    multi-worker run. Raises ConfigError when the config does not fit this
    machine (a device that does not exist, Mirrored over one device). Every
    other problem ends the run with status "failed" and a readable message;
    setting `stop_event` ends it with status "stopped" after the call in
    flight (or at once while a TPU is being probed). The result's warnings
    say what was questionable (float16 on a CPU, a batch larger than the data
    set, a call size lowered so that steady-state steps remain, other work on
    the machine); its `conditions` what else the machine did (`ConditionsHook`).

    A cluster worker calls this with TF_CONFIG set, so MultiWorkerMirroredStrategy
    joins the cluster TF_CONFIG describes.
    """
    check_against_machine(config)
    stop_event = stop_event or threading.Event()
    listeners = [ConditionsHook(), *callbacks]  # every run records the conditions it was measured in
    started_at = utc_now()
    start = time.perf_counter()
    tally = _Tally(MemoryTracker(), config)
    status, message = RunStatus.COMPLETED, ""
    previous_policy = _set_precision(config.precision)
    session: _Session | None = None
    try:
        with quiet_native_stderr():
            session = _prepare(config, tally, stop_event)
        _start_run(session, tally, listeners)
        _run_calls(session, tally, on_steps, stop_event, listeners)
        if stop_event.is_set() and len(tally.losses) < session.total_steps:
            status, message = RunStatus.STOPPED, f"Stopped by the user after {len(tally.losses)} of {session.total_steps} steps."
    except SetupStopped as exc:
        status, message = RunStatus.STOPPED, str(exc)
    except Exception as exc:  # every failure becomes a readable, recorded result
        status, message = RunStatus.FAILED, explain_failure(exc)
    finally:
        if session is not None:
            session.close()
        _set_precision_policy(previous_policy)
    result = amended_result(_make_result(tally, status, message, started_at, start), listeners)
    for listener in listeners:
        listener.on_run_end(result)
    return result


@dataclass
class _Tally:
    """What a run has measured so far: per-step losses and times, warm-up steps, replicas, devices, memory.

    `config` is the job as it really ran (steps per call may be lowered, see
    `run_checks.call_size`); `notes` are warnings found while setting it up;
    `memory_estimate` is the weights, gradients and optimizer state of the built model.
    """

    memory: MemoryTracker
    config: RunConfig
    notes: list[str] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    warmup_steps: int = 0
    replicas: int = 1
    device_names: tuple[str, ...] = ()
    memory_estimate: dict[str, Any] = field(default_factory=dict)

    def add_call(self, call_losses: list[float], count: int, per_step: float) -> list[StepRecord]:
        """Record one call of `count` steps, each `per_step` seconds; the first call is the warm-up."""
        first_call = not self.losses
        if first_call:
            self.warmup_steps = count
        records = [StepRecord(len(self.losses) + i + 1, loss, per_step, first_call) for i, loss in enumerate(call_losses)]
        self.losses.extend(call_losses)
        self.times.extend([per_step] * count)
        return records


def _start_run(session: _Session, tally: _Tally, listeners: Sequence[RunCallback]) -> None:
    """Note the replicas and devices, start the memory tracker, and tell the hooks the run is set up."""
    tally.replicas = session.strategy.num_replicas_in_sync
    tally.device_names = session.device_names
    tally.memory.start(tally.device_names)
    context = RunContext(tally.config, session.total_steps, tally.replicas, tally.device_names, session.model, session.input_shapes)
    for listener in listeners:
        listener.on_run_start(context)


def _run_calls(
    session: _Session,
    tally: _Tally,
    on_steps: OnSteps | None,
    stop_event: threading.Event,
    listeners: Sequence[RunCallback],
) -> None:
    """Call the compiled function until every step ran or `stop_event` is set.

    A call's steps each take (end of this call - end of the call before) /
    steps: the time between calls (hooks, bookkeeping) is part of the step time,
    the time a hook held the run for its turn in interleaved rounds is not.
    The first call (tracing, graph rewrites, compilation) runs with TF's C++
    log lines kept off the terminal (`quiet_native_stderr`).
    """
    config, train_steps = tally.config, session.train_steps
    if train_steps is None:
        raise RuntimeError("the session's compiled function was released before its run")
    previous_end = time.perf_counter()
    while len(tally.losses) < session.total_steps and not stop_event.is_set():
        previous_end += waited_for_turn(listeners, len(tally.losses) + 1)
        if stop_event.is_set():
            break
        count = min(config.steps_per_call, session.total_steps - len(tally.losses))
        for listener in listeners:
            listener.on_call_begin(len(tally.losses) + 1, count)
        with quiet_native_stderr() if not tally.losses else nullcontext():
            call_losses = train_steps(session.iterator, count).numpy().tolist()
        call_end = time.perf_counter()
        per_step = (call_end - previous_end) / count
        previous_end = call_end
        records = tally.add_call(call_losses, count, per_step)
        tally.memory.sample(call_end)
        if on_steps is not None:
            on_steps(records)
        for listener in listeners:
            listener.on_steps(records)
        _check_finite(records, config)


def _make_result(tally: _Tally, status: RunStatus, message: str, started_at: str, start: float) -> RunResult:
    """The run's result from what it measured; `start` is its perf_counter start, for the wall time."""
    measured = Measured(
        times=tally.times,
        warmup_steps=tally.warmup_steps,
        losses=tally.losses,
        replicas=tally.replicas,
        devices=tally.device_names,
        memory=tally.memory.result_fields(),
        memory_estimate=tally.memory_estimate,
        environment=environment(tally.device_names, tally.config.precision),
        notes=tally.notes,
    )
    return measured_result(tally.config, status, message, measured, started_at, time.perf_counter() - start)


def check_against_machine(config: RunConfig) -> None:
    """Raise ConfigError when the config names devices TensorFlow does not have, or mirrors over one device.

    A run on another backend is checked by that backend, in its own child process (`core.backends`).
    """
    if config.backend != "tensorflow":
        return
    check_mirrored_devices(config)
    if not config.devices:
        return
    import tensorflow as tf

    known = [short_name(d.name) for d in tf.config.list_logical_devices()]
    for name in config.devices:
        if name not in known:
            raise ConfigError("devices", name, "devices TensorFlow sees here: " + ", ".join(known))


def total_steps(config: RunConfig, workload: Any = None) -> int:
    """Steps the run will do: `steps`, or `epochs` whole passes over the data (one epoch of an endless data set: `steps`)."""
    if config.epochs is None:
        return config.steps
    workload = workload or open_workload(config.model_ref, config.dataset, config.seed)
    per_epoch = workload.steps_per_epoch(config.batch_size)
    return config.epochs * (per_epoch or config.steps)


def _prepare(config: RunConfig, tally: _Tally, stop_event: threading.Event) -> _Session:
    """Strategy, data, model, optimizer and the compiled function; notes questionable choices in `tally`.

    The strategy comes first: MultiWorkerMirrored (and a TPU) must set up the
    runtime before anything runs on it, and opening a model file loads a model
    (a cluster worker has checked the file's bytes before, `check_model_file`).
    """
    import tensorflow as tf

    strategy = make_strategy(config, stop_event)
    workload = open_checked_workload(config.model_ref, config.dataset, config.seed)
    if getattr(workload, "source", None) is not None and not config.model_sha256:
        config = tally.config = config.with_changes(model_sha256=workload.source.sha256)
    steps = total_steps(config, workload)
    per_call, why = call_size(config.steps_per_call, steps)
    tally.notes += [note for note in (batch_warning(config, workload.num_examples), why) if note]
    tally.notes += workload.run_notes(config.optimizer)
    if per_call != config.steps_per_call:
        config = tally.config = config.with_changes(steps_per_call=per_call)
    if config.batch_size % strategy.num_replicas_in_sync:
        raise ConfigError(
            "batch_size",
            config.batch_size,
            f"a multiple of the {strategy.num_replicas_in_sync} replicas (the global batch is split evenly)",
        )
    tf.random.set_seed(config.seed)
    with strategy.scope():
        model = workload.build_model(seed=config.seed)
        optimizer = _make_optimizer(config, workload.make_optimizer(config.learning_rate, config.optimizer))
        optimizer.build(model.trainable_variables)
    tally.memory_estimate = estimate_for_model(model, optimizer, config.precision, strategy.num_replicas_in_sync).to_dict()
    dataset = workload.make_dataset(config.batch_size, config.seed)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    train_steps = _make_train_function(strategy, model, optimizer, config, workload.loss_fn)
    input_shapes = tuple(tuple(spec.shape[1:]) for spec in tf.nest.flatten(dataset.element_spec[0]))
    return _Session(strategy, model, train_steps, iterator, steps, _device_names(strategy, config), input_shapes)


def _device_names(strategy, config: RunConfig) -> tuple[str, ...]:
    """Short names ("CPU:0") of the devices the replicas run on."""
    import tensorflow as tf

    if config.strategy == "default":
        gpus = tf.config.list_logical_devices("GPU")
        return (short_name(gpus[0].name) if gpus else "CPU:0",)
    return tuple(short_name(d) for d in strategy.extended.worker_devices)


def _make_optimizer(config: RunConfig, chosen: Any = None):
    """`chosen` (the model file's own optimizer) or the run's setting; wrapped for loss scaling under float16."""
    import keras

    optimizers = {
        "adam": keras.optimizers.Adam,
        "adamw": keras.optimizers.AdamW,
        "sgd": keras.optimizers.SGD,
        "rmsprop": keras.optimizers.RMSprop,
    }
    optimizer = chosen if chosen is not None else optimizers[config.optimizer](learning_rate=config.learning_rate)
    if config.precision == "float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def _make_train_function(strategy, model, optimizer, config: RunConfig, loss_fn: Callable[[Any, Any], Any]) -> TrainSteps:
    """A tf.function running n steps per call and returning the n per-step losses; `loss_fn` gives the loss per example."""
    import keras
    import tensorflow as tf

    global_batch = config.batch_size
    scale_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def one_step(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            scaled = optimizer.scale_loss(loss) if scale_loss else loss
        gradients = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    step = tf.function(one_step, jit_compile=True) if config.xla else one_step

    def train_steps(iterator, n):
        losses = tf.TensorArray(tf.float32, size=n)
        for i in tf.range(n):
            per_replica = strategy.run(step, args=(next(iterator),))
            losses = losses.write(i, tf.cast(strategy.reduce("SUM", per_replica, axis=None), tf.float32))
        return losses.stack()

    return TrainSteps(train_steps)


def _check_finite(records: Sequence[StepRecord], config: RunConfig) -> None:
    message = divergence_message(records, config)
    if message:
        raise NonFiniteLoss(message)


def _set_precision(precision: str) -> str:
    import keras

    previous = keras.config.dtype_policy().name
    keras.config.set_dtype_policy(PRECISION_POLICIES[precision])
    return previous


def _set_precision_policy(name: str) -> None:
    import keras

    keras.config.set_dtype_policy(name)

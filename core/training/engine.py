"""The training engine: `train_in_this_process(config, stop_event, hooks) -> RunResult`.

One engine for every strategy: a custom training loop in which a
`tf.function` runs `steps_per_call` steps per call, each step through
`strategy.run`, and returns each step's own loss. Keras 3 `model.fit` fails
under MultiWorkerMirroredStrategy (keras-team/keras#20585) and under
MirroredStrategy with 2+ replicas and steps_per_execution >= 2
(keras-team/keras#19246); this loop runs under all of them, with a Keras 3
model and optimizer.

Call `run_training` in the thread that trains: Keras keeps the dtype policy and
the strategy scope per thread.

The compiled function and what tracing it leaves behind (`TrainSteps`): Keras's
optimizer sums gradients across replicas with `ReplicaContext.all_reduce`, under
every strategy, and in graph mode `all_reduce` is a `tf.custom_gradient`. Each
traced call registers its gradient function under a fresh name
("CustomGradient-N") in TensorFlow's process-wide gradient registry, and nothing
removes it (tensorflow/tensorflow#97697, #27492); its closure holds the traced
graph's tensors, so each run's FuncGraphs stayed alive (~3.5 MB per MLP run).
`TrainSteps.release` reads the names the traced graph uses (each op's
`_gradient_op_type`, nested functions included) and drops exactly those entries:
the gradients were taken while tracing, so nothing looks them up again.

A run's peak memory (`MemoryTracker`): TensorFlow's allocator peak on
accelerators. On the CPU TensorFlow keeps no allocator figure, so two are given:
the process's RSS peak (`peak_memory_bytes`: the whole process, TensorFlow, the
app and earlier runs included, so hundreds of MB even for a tiny model) and what
the run added to it, the RSS peak less the RSS when the run started
(`memory_added_bytes`): the figure to read beside the model's memory estimate.
"""

from __future__ import annotations

import logging
import platform
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from core.config import ConfigError, RunConfig
from core.formatting import utc_now
from core.logs import quiet_native_stderr
from core.machine.cpu import cpu_model
from core.machine.peak_estimates import run_peak_environment
from core.machine.types import short_name
from core.results import RunResult, RunStatus, StepRecord
from core.training.failures import NonFiniteLoss, divergence_message, explain_failure
from core.training.hooks import RunContext, RunHook, amended_result, end_run, waited_for_turn
from core.training.metrics import Measured, call_size, measured_result
from core.training.strategies import SetupStopped, check_mirrored_devices, make_strategy
from core.workloads.data import batch_warning
from core.workloads.file_optimizer import learning_rate_used, with_learning_rate_used
from core.workloads.memory_estimate import estimate_for_model
from core.workloads.workload import open_checked_workload, open_workload

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
    stop_event: threading.Event | None = None,
    hooks: Sequence[RunHook] = (),
) -> RunResult:
    """Train `config` here, passing each call's step records to the hooks in `hooks`.

    `core.runner.run_training` calls this for every strategy but a local
    multi-worker run. Raises ConfigError when the config does not fit this
    machine (a device that does not exist, Mirrored over one device). Every
    other problem ends the run with status "failed" and a readable message;
    setting `stop_event` ends it with status "stopped" after the call in
    flight (or at once while a TPU is being probed). The result's warnings
    say what was questionable (float16 on a CPU, a batch larger than the data
    set, a call size lowered so that steady-state steps remain). Its hooks are
    the caller's: the job service gives a run its standard ones
    (`core.jobs.run_hooks`, the conditions it was measured in among them); every
    one is ended (`end_run`) once the result is made.

    A cluster worker calls this with TF_CONFIG set, so MultiWorkerMirroredStrategy
    joins the cluster TF_CONFIG describes.
    """
    check_against_machine(config)
    stop_event = stop_event or threading.Event()
    hooks = list(hooks)
    started_at = utc_now()
    start = time.perf_counter()
    tally = _Tally(MemoryTracker(), config)
    status, message = RunStatus.COMPLETED, ""
    previous_policy = _set_precision(config.precision)
    session: _Session | None = None
    try:
        with quiet_native_stderr():
            session = _prepare(config, tally, stop_event)
        _start_run(session, tally, hooks)
        _run_calls(session, tally, stop_event, hooks)
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
    result = amended_result(_make_result(tally, status, message, started_at, start), hooks)
    end_run(hooks, result)
    return result


@dataclass
class _Tally:
    """What a run has measured so far: per-step losses and times, warm-up steps, replicas, devices, memory.

    `config` is the job as it really ran (steps per call may be lowered, see
    `metrics.call_size`); `notes` are warnings found while setting it up;
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


def _start_run(session: _Session, tally: _Tally, hooks: Sequence[RunHook]) -> None:
    """Note the replicas and devices, start the memory tracker, and tell the hooks the run is set up."""
    tally.replicas = session.strategy.num_replicas_in_sync
    tally.device_names = session.device_names
    tally.memory.start(tally.device_names)
    context = RunContext(tally.config, session.total_steps, tally.replicas, tally.device_names, session.model, session.input_shapes)
    for hook in hooks:
        hook.on_run_start(context)


def _run_calls(
    session: _Session,
    tally: _Tally,
    stop_event: threading.Event,
    hooks: Sequence[RunHook],
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
        previous_end += waited_for_turn(hooks, len(tally.losses) + 1)
        if stop_event.is_set():
            break
        count = min(config.steps_per_call, session.total_steps - len(tally.losses))
        for hook in hooks:
            hook.on_call_begin(len(tally.losses) + 1, count)
        with quiet_native_stderr() if not tally.losses else nullcontext():
            call_losses = train_steps(session.iterator, count).numpy().tolist()
        call_end = time.perf_counter()
        per_step = (call_end - previous_end) / count
        previous_end = call_end
        records = tally.add_call(call_losses, count, per_step)
        tally.memory.sample(call_end)
        for hook in hooks:
            hook.on_step_records(records)
        _check_finite(records, config, tally.notes)


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
    config = tally.config = with_learning_rate_used(config, learning_rate_used(optimizer))  # a file's optimizer brings its own
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


def _check_finite(records: Sequence[StepRecord], config: RunConfig, notes: Sequence[str]) -> None:
    message = divergence_message(records, config, notes)
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


def environment(device_names: Sequence[str] = (), precision: str = "off") -> dict[str, Any]:
    """Versions and hardware a result was measured on, for the history and exports.

    `devices` are the run's, `logical_devices` all TensorFlow had (two logical
    CPUs split one CPU). With the devices' estimated peak FLOP/s for `precision` and whether the CPU
    has native bfloat16 (`run_peak_environment`): a comparison shown later reads
    these instead of the hardware.
    """
    import keras
    import tensorflow as tf

    env: dict[str, Any] = {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "devices": list(device_names),
        "logical_devices": [short_name(d.name) for d in tf.config.list_logical_devices()],
        "cpu": cpu_model(),
    }
    build = tf.sysconfig.get_build_info()
    env["cuda_build"] = bool(build.get("is_cuda_build"))
    env["cuda"] = build.get("cuda_version", "")
    env["cudnn"] = build.get("cudnn_version", "")
    env.update(run_peak_environment(device_names, precision))
    return env


GRADIENT_OP_TYPE = "_gradient_op_type"

logger = logging.getLogger(__name__)


class TrainSteps:
    """`train_steps(iterator, n)` runs n steps and returns their losses; `release` frees its traces."""

    def __init__(self, function: Callable[..., Any]):
        import tensorflow as tf

        self._function = tf.function(function)
        self._traced = False

    def __call__(self, iterator: Any, n: int) -> Any:
        import tensorflow as tf

        losses = self._function(iterator, tf.constant(n, tf.int32))
        self._traced = True
        return losses

    def release(self, iterator: Any) -> int:
        """Drop the gradient functions its tracing registered; returns how many. Call once the run is over.

        Only after a call succeeded: then the signature is traced, and looking
        it up again is a cache hit. A trace that failed is not retried (it
        could register more), so what it registered stays.
        """
        import tensorflow as tf

        if not self._traced:
            return 0
        try:
            graph = self._function.get_concrete_function(iterator, tf.constant(1, tf.int32)).graph
            return forget_custom_gradients(custom_gradient_names(graph.as_graph_def()))
        except Exception:  # freeing memory must never turn a finished run into a failed one
            logger.warning("Could not free the traced training function's gradient registrations.", exc_info=True)
            return 0


def custom_gradient_names(graph_def: Any) -> set[str]:
    """The custom-gradient names a GraphDef's ops use, in its library's functions too."""
    nodes = [*graph_def.node, *(node for function in graph_def.library.function for node in function.node_def)]
    return {node.attr[GRADIENT_OP_TYPE].s.decode() for node in nodes if GRADIENT_OP_TYPE in node.attr}


def forget_custom_gradients(names: Iterable[str]) -> int:
    """Remove these names from TensorFlow's gradient registry; returns how many were there.

    The registry has no public way to unregister, so this reaches into its dict
    and does nothing if a later TensorFlow stores it differently.
    """
    from tensorflow.python.framework import ops

    entries = getattr(getattr(ops, "gradient_registry", None), "_registry", None)
    if not isinstance(entries, dict):
        return 0
    return sum(entries.pop(name, None) is not None for name in names)


DEVICE_PEAK = "device allocator peak"
RSS_PEAK = "host process RSS peak"
RSS_ADDED = "host process RSS peak less its RSS when the run started"


class MemoryTracker:
    """Peak memory of the run: TF's allocator peak on accelerators, else the process's RSS and what the run added to it.

    None until `start`: a run that failed while setting up (no TPU answered,
    data missing) used no memory of its own worth reporting.
    """

    SAMPLE_INTERVAL_S = 0.25

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._accelerators: list[str] = []
        self._rss_baseline = 0
        self._rss_peak = 0
        self._last_sample = -float("inf")
        self._started = False

    def start(self, device_names: Sequence[str]) -> None:
        """Reset the accelerators' peak counters and take the first RSS sample (the run's baseline)."""
        import tensorflow as tf

        self._started = True
        self._accelerators = [d for d in device_names if not d.startswith("CPU")]
        for device in self._accelerators:
            try:
                tf.config.experimental.reset_memory_stats(device)
            except (ValueError, RuntimeError):
                pass
        self._rss_baseline = self._process.memory_info().rss
        self.sample()

    def sample(self, now: float | None = None) -> None:
        """Read the process RSS, at most every SAMPLE_INTERVAL_S when `now` is given (cheap per call)."""
        if now is not None and now - self._last_sample < self.SAMPLE_INTERVAL_S:
            return
        self._last_sample = time.perf_counter() if now is None else now
        self._rss_peak = max(self._rss_peak, self._process.memory_info().rss)

    def peak(self) -> tuple[int | None, str]:
        """(peak bytes or None, where the figure comes from); (None, "") when the run never started."""
        return self._figure(lambda: ((self._rss_peak or None), RSS_PEAK))

    def added(self) -> tuple[int | None, str]:
        """(bytes the run itself used, how it was found): the allocator peak, or RSS growth since the start on the CPU."""
        return self._figure(lambda: (max(0, self._rss_peak - self._rss_baseline), RSS_ADDED))

    def _figure(self, on_host: Callable[[], tuple[int | None, str]]) -> tuple[int | None, str]:
        """The device allocator's peak where there is one, else `on_host()` from the RSS samples; (None, "") before the run."""
        if not self._started:
            return None, ""
        self.sample()
        device = self._device_peak()
        return (device, DEVICE_PEAK) if device is not None else on_host()

    def result_fields(self) -> dict[str, Any]:
        """The memory figures under `RunResult`'s field names."""
        peak, source = self.peak()
        added, added_source = self.added()
        return {"peak_memory_bytes": peak, "peak_memory_source": source, "memory_added_bytes": added, "memory_added_source": added_source}

    def _device_peak(self) -> int | None:
        if not self._accelerators:
            return None
        import tensorflow as tf

        try:
            return sum(tf.config.experimental.get_memory_info(d)["peak"] for d in self._accelerators)
        except (ValueError, RuntimeError):
            return None

"""Strategy choice -> `tf.distribute.Strategy`, with a plain-language reason when unavailable."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from core.config import ConfigError, RunConfig
from core.errors import ExplainedError
from core.machine.tpu import probe_tpu
from core.machine.types import DeviceInfo, short_name

STRATEGY_LABELS = {
    "default": "Default (TensorFlow places ops)",
    "one-device": "One device",
    "mirrored": "Mirrored (several devices, one machine)",
    "multi-worker": "Multi-worker (several processes)",
    "tpu": "TPU",
}


MIRRORED_NEEDS = (
    "Mirrored needs two or more devices to mirror the model across, and TensorFlow sees one here ({device}). "
    "Split the CPU with --logical-cpus 2 (in the window: Settings > Logical CPUs; takes effect after a restart), "
    "add a second GPU, or pick the devices with --devices; for a one-device run use the strategy 'one-device'"
)


class TpuUnavailable(ExplainedError, RuntimeError):
    """The time-boxed TPU probe found no TPU that answers; the message is the probe's."""


class SetupStopped(RuntimeError):
    """The user stopped the run before its first step (while the TPU probe ran)."""


@dataclass(frozen=True)
class StrategyChoice:
    """One entry of the strategy menu: usable or not, and why."""

    name: str
    label: str
    available: bool
    reason: str = ""


def strategy_choices(devices: Sequence[DeviceInfo], tpu_connected: bool = False) -> list[StrategyChoice]:
    """What the user can pick on this machine, each unavailable choice with its reason."""
    usable = [d for d in devices if d.available and d.tf_name]
    cpus = [d for d in usable if d.kind == "CPU"]
    gpus = [d for d in usable if d.kind == "GPU"]
    tpus = [d for d in usable if d.kind == "TPU"]
    choices = [
        StrategyChoice("default", STRATEGY_LABELS["default"], True),
        StrategyChoice("one-device", STRATEGY_LABELS["one-device"], bool(usable), "" if usable else "No device is usable."),
    ]
    if len(gpus) >= 2 or len(cpus) >= 2:
        choices.append(StrategyChoice("mirrored", STRATEGY_LABELS["mirrored"], True))
    else:
        choices.append(
            StrategyChoice(
                "mirrored",
                STRATEGY_LABELS["mirrored"],
                False,
                "Needs two or more GPUs, or the CPU split into logical devices "
                "(Settings > Logical CPUs, or --logical-cpus 2 on the CLI; takes effect after restart).",
            )
        )
    choices.append(StrategyChoice("multi-worker", STRATEGY_LABELS["multi-worker"], True))
    if tpus or tpu_connected:
        choices.append(StrategyChoice("tpu", STRATEGY_LABELS["tpu"], True))
    else:
        choices.append(
            StrategyChoice("tpu", STRATEGY_LABELS["tpu"], False, "No TPU connected: enter a TPU address and press Connect first.")
        )
    return choices


def make_strategy(config: RunConfig, stop_event: threading.Event | None = None):
    """The `tf.distribute.Strategy` for `config` (call in the thread that trains).

    A TPU is first probed in a child process, time-boxed by `config.tpu_timeout_s`,
    as the window's Connect does: TensorFlow's own TPU initialisation against an
    address where nothing answers hangs for minutes and cannot be interrupted.
    Raises TpuUnavailable with the probe's message, or SetupStopped when
    `stop_event` was set during the probe.
    """
    import tensorflow as tf

    if config.strategy == "default":
        return tf.distribute.get_strategy()
    if config.strategy == "one-device":
        return tf.distribute.OneDeviceStrategy(_tf_device(config.devices[0]))
    if config.strategy == "mirrored":
        devices = [_tf_device(d) for d in config.devices] or None
        cross_device_ops = tf.distribute.ReductionToOneDevice() if _all_cpus(config.devices) else None
        return tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops)
    if config.strategy == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if config.strategy == "tpu":
        return _tpu_strategy(config, stop_event)
    raise ConfigError("strategy", config.strategy, ", ".join(STRATEGY_LABELS))


def check_mirrored_devices(config: RunConfig) -> None:
    """Refuse Mirrored without devices named when TensorFlow would mirror over one device only.

    With no devices named, MirroredStrategy takes every GPU, or every (logical)
    CPU when there is no GPU; one device there is a one-replica run that
    measures no scaling, which the window does not offer either.
    """
    if config.strategy != "mirrored" or config.devices:
        return
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    used = gpus or tf.config.list_logical_devices("CPU")
    if len(used) < 2:
        device = short_name(used[0].name) if used else "no device"
        raise ConfigError("strategy", config.strategy, MIRRORED_NEEDS.format(device=device))


def _tpu_strategy(config: RunConfig, stop_event: threading.Event | None):
    """Probe the TPU in a child process first; initialise it here only once it has answered there."""
    import tensorflow as tf

    address = config.tpu_address.strip()
    if not tf.config.list_logical_devices("TPU"):  # not yet initialised by this process
        probe = probe_tpu(address, config.tpu_timeout_s, stop_event)
        if stop_event is not None and stop_event.is_set():
            raise SetupStopped(f"Stopped by the user while the TPU at {address!r} was being probed, before the first step.")
        if not probe.ok:
            raise TpuUnavailable(probe.message)
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _tf_device(short_name: str) -> str:
    return f"/device:{short_name}"


def _all_cpus(devices: Sequence[str]) -> bool:
    return bool(devices) and all(d.startswith("CPU:") for d in devices)

"""Strategy choice -> `tf.distribute.Strategy`, with a plain-language reason when unavailable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config import ConfigError, RunConfig

if TYPE_CHECKING:
    from core.machine.types import DeviceInfo

STRATEGY_LABELS = {
    "default": "Default (TensorFlow places ops)",
    "one-device": "One device",
    "mirrored": "Mirrored (several devices, one machine)",
    "multi-worker": "Multi-worker (several processes)",
    "tpu": "TPU",
}


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


def make_strategy(config: RunConfig):
    """The `tf.distribute.Strategy` for `config` (call in the thread that trains)."""
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
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=config.tpu_address.strip())
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ConfigError("strategy", config.strategy, ", ".join(STRATEGY_LABELS))


def _tf_device(short_name: str) -> str:
    return f"/device:{short_name}"


def _all_cpus(devices: Sequence[str]) -> bool:
    return bool(devices) and all(d.startswith("CPU:") for d in devices)


"""What a setting sweep will run: the settings varied (its axes), their values, and the values left out.

A sweep trains one job many times, changing one or two settings and nothing
else: batch size, steps per call, precision, XLA, the Keras backend. The values come as text
("16,32,64", "off,bfloat16"); a setting given one value is fixed for every
point, and one or two settings with two or more values are the axes. Values the
target cannot run usefully (float16 on a CPU-only target, bfloat16 on a CPU
without AVX-512 or AMX) are left out with the reason, so the sweep does not
spend minutes proving what is known.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import BACKENDS, MAX_BATCH_SIZE, MAX_STEPS_PER_CALL, PRECISIONS, ConfigError, RunConfig, is_whole_number
from core.workloads.workload import model_title

AXES = ("batch_size", "steps_per_call", "precision", "xla", "backend")
"""The settings a sweep can vary, in the order their columns are shown."""
AXIS_TITLES = {"batch_size": "batch", "steps_per_call": "steps per call", "precision": "precision", "xla": "XLA", "backend": "backend"}
BACKEND_ALIASES = {"tf": "tensorflow", "pytorch": "torch"}
BACKEND_TITLES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
MAX_AXES = 2
MAX_POINTS = 100
PRECISION_ALIASES = {"float32": "off", "fp32": "off", "bf16": "bfloat16", "fp16": "float16"}
XLA_WORDS = {"off": False, "no": False, "false": False, "0": False, "on": True, "yes": True, "true": True, "1": True}
FLOAT16_ON_CPU = (
    "CPUs have no fast float16 math: a float16 run on a CPU-only target is roughly 50x slower than float32 "
    "(sweep it on a GPU, or sweep bfloat16 instead)."
)
BFLOAT16_WITHOUT_AVX512 = "this CPU has neither AVX-512 nor AMX: TensorFlow emulates bfloat16 math there, slower than float32."
BFLOAT16_CPU_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
_SWEEP_GROUP = re.compile(r"^sweep (\d+):")


@dataclass(frozen=True)
class SweepAxis:
    """One setting and the values a sweep gives it, in order."""

    name: str
    values: tuple[Any, ...]

    @property
    def title(self) -> str:
        return AXIS_TITLES[self.name]


@dataclass(frozen=True)
class LeftOut:
    """A value the sweep does not run, and why."""

    axis: str
    value: Any
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "value": self.value, "reason": self.reason}


@dataclass(frozen=True)
class SweepPlan:
    """The points of a sweep: `base` with each combination of the axes' values (the first axis varies slowest)."""

    base: RunConfig
    axes: tuple[SweepAxis, ...]
    left_out: tuple[LeftOut, ...] = ()

    @property
    def title(self) -> str:
        """'batch × precision'."""
        return " × ".join(axis.title for axis in self.axes)

    def points(self) -> list[dict[str, Any]]:
        """Each point's settings, {axis name: value}, in the order they run."""
        names = [axis.name for axis in self.axes]
        return [dict(zip(names, values, strict=True)) for values in itertools.product(*(axis.values for axis in self.axes))]

    def config_at(self, settings: Mapping[str, Any]) -> RunConfig:
        """The job of one point (ConfigError when the combination is invalid)."""
        return self.base.with_changes(**settings)

    def describe(self) -> str:
        """'Small CNN on CPU:0, 100 steps: batch × precision, 4 points'."""
        count = len(self.points())
        return f"{model_title(self.base.model)} on {target_text(self.base)}, {self.base.steps:,} steps: {self.title}, {count} point{'s' * (count != 1)}"


def parse_values(name: str, text: str, field_name: str = "") -> tuple[Any, ...]:
    """'16,32' -> (16, 32) for `name` (one of AXES); ConfigError names `field_name` (default: `name`) and the allowed form."""
    if name not in AXES:
        raise ConfigError("axis", name, ", ".join(AXES))
    label = field_name or name
    parts = [part.strip() for part in str(text).split(",")]
    if not parts or any(not part for part in parts):
        raise ConfigError(label, text, _allowed(name))
    values = [_parse_value(name, part, label, text) for part in parts]
    return tuple(dict.fromkeys(values))  # each value once, in the order given


def _parse_value(name: str, part: str, label: str, text: str) -> Any:
    word = part.lower()
    if name in ("batch_size", "steps_per_call"):
        high = MAX_BATCH_SIZE if name == "batch_size" else MAX_STEPS_PER_CALL
        if not is_whole_number(word) or not 1 <= int(word) <= high:
            raise ConfigError(label, text, _allowed(name))
        return int(word)
    if name == "precision":
        word = PRECISION_ALIASES.get(word, word)
        if word not in PRECISIONS:
            raise ConfigError(label, text, _allowed(name))
        return word
    if name == "backend":
        word = BACKEND_ALIASES.get(word, word)
        if word not in BACKENDS:
            raise ConfigError(label, text, _allowed(name))
        return word
    if word not in XLA_WORDS:
        raise ConfigError(label, text, _allowed(name))
    return XLA_WORDS[word]


def _allowed(name: str) -> str:
    return {
        "batch_size": f"comma-separated whole numbers from 1 to {MAX_BATCH_SIZE}, such as 16,32,64",
        "steps_per_call": f"comma-separated whole numbers from 1 to {MAX_STEPS_PER_CALL}, such as 1,4,16",
        "precision": "comma-separated precisions: off (float32), bfloat16, float16",
        "xla": "off, on, or off,on",
        "backend": "comma-separated Keras backends: " + ", ".join(BACKENDS),
    }[name]


def plan_sweep(
    base: RunConfig,
    values: Mapping[str, Sequence[Any]],
    has_accelerator: bool | None = None,
    cpu_flags: Iterable[str] | None = None,
    keep_slow: bool = False,
) -> SweepPlan:
    """The plan for `values` ({setting: its values}): one value fixes a setting, two or more make it an axis.

    Raises ConfigError unless one or two settings have two or more values.
    `has_accelerator` (None: ask TensorFlow about the target) and `cpu_flags`
    (None: read this CPU's) decide which precisions are left out; `keep_slow`
    runs them all anyway (to measure how slow they are).
    """
    unknown = [name for name in values if name not in AXES]
    if unknown:
        raise ConfigError("axis", unknown[0], ", ".join(AXES))
    for name, given in values.items():
        if not given:
            raise ConfigError(name, list(given), "one or more values")
        for value in given:
            base.with_changes(**{name: value})  # ConfigError for a value no run takes
    varied = varied_settings(values)
    fixed = {name: values[name][0] for name in AXES if name in values and name not in varied}
    base = base.with_changes(**fixed)
    left_out: list[LeftOut] = []
    axes = []
    for name in varied:
        kept = list(values[name])
        if name == "precision" and not keep_slow:
            kept, dropped = _usable_precisions(base, kept, has_accelerator, cpu_flags)
            left_out += [LeftOut(name, value, reason) for value, reason in dropped]
        axes.append(SweepAxis(name, tuple(kept)))
    plan = SweepPlan(base, tuple(axes), tuple(left_out))
    count = len(plan.points())
    if count == 0:
        reasons = "; ".join(f"{item.value}: {item.reason}" for item in left_out)
        raise ConfigError(
            "precision", [item.value for item in left_out], f"off (float32) or a precision this target runs usefully ({reasons})"
        )
    if count > MAX_POINTS:
        raise ConfigError("settings varied", f"{count} points", f"at most {MAX_POINTS} points: fewer values")
    return plan


def varied_settings(values: Mapping[str, Sequence[Any]], names: Mapping[str, str] | None = None) -> list[str]:
    """The settings given two or more values; ConfigError unless there are one or two (`names`: how the user calls each)."""
    names = names or {}
    varied = [name for name in AXES if len(values.get(name, ())) >= 2]
    if not 1 <= len(varied) <= MAX_AXES:
        choices = ", ".join(names.get(name, name) for name in AXES)
        given = ", ".join(names.get(name, name) for name in varied) or "none"
        raise ConfigError("settings varied", given, f"two or more values for one or two of {choices} (the others stay fixed at one value)")
    return varied


def _usable_precisions(
    base: RunConfig, precisions: Sequence[str], has_accelerator: bool | None, cpu_flags: Iterable[str] | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """(the precisions the target runs usefully, [(precision, why it is left out)])."""
    if has_accelerator is None:
        has_accelerator = target_has_accelerator(base)
    if has_accelerator:
        return list(precisions), []
    flags = set(_cpu_flags() if cpu_flags is None else cpu_flags)
    fast_bf16 = not flags or any(flag in flags for flag in BFLOAT16_CPU_FLAGS)  # unknown flags: let it run
    kept, dropped = [], []
    for precision in precisions:
        if precision == "float16":
            dropped.append((precision, FLOAT16_ON_CPU))
        elif precision == "bfloat16" and not fast_bf16:
            dropped.append((precision, BFLOAT16_WITHOUT_AVX512))
        else:
            kept.append(precision)
    return kept, dropped


def target_has_accelerator(config: RunConfig) -> bool:
    """True when the job runs on a GPU or TPU: its named devices, a TPU strategy, or (unnamed) a GPU its backend sees.

    JAX and PyTorch train on the first GPU where the driver lists one (found through NVML, without starting them).
    """
    if config.devices:
        return any(not device.startswith("CPU") for device in config.devices)
    if config.strategy == "tpu":
        return True
    if config.backend != "tensorflow":
        from core.machine.gpu import driver_gpu_count

        return driver_gpu_count() > 0
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


def _cpu_flags() -> list[str]:
    from core.machine.cpu import raw_cpu_info

    return list(raw_cpu_info().get("flags") or ())


def format_setting(name: str, value: Any) -> str:
    """A point's setting as people read it: 'batch 32', '16 steps/call', 'float32', 'bfloat16', 'XLA on', 'JAX', 'learning rate 0.064'."""
    if name == "batch_size":
        return f"batch {value}"
    if name == "steps_per_call":
        return f"{value} step{'s' * (value != 1)}/call"
    if name == "precision":
        return "float32" if value == "off" else str(value)
    if name == "backend":
        return BACKEND_TITLES.get(value, str(value))
    if name == "learning_rate":
        return f"learning rate {value:.3g}"
    return "XLA on" if value else "XLA off"


def settings_text(settings: Mapping[str, Any]) -> str:
    """'JAX · batch 64 · 16 steps/call · float32 · XLA off': the tuned settings present in `settings`, as people read them."""
    names = ("backend", "batch_size", "learning_rate", "steps_per_call", "precision", "xla")
    return " · ".join(format_setting(name, settings[name]) for name in names if name in settings)


def point_label(settings: Mapping[str, Any]) -> str:
    """'batch 32 · bfloat16'."""
    return " · ".join(format_setting(name, value) for name, value in settings.items())


def target_text(config: RunConfig) -> str:
    """Where the job runs, as the sweep names it: 'CPU:0', 'mirrored:CPU:0,CPU:1', 'default'; after its backend if not TensorFlow: 'jax:CPU:0'."""
    if config.strategy == "one-device" and config.devices:
        place = config.devices[0]
    elif config.devices:
        place = f"{config.strategy}:{','.join(config.devices)}"
    else:
        place = config.strategy
    return place if config.backend == "tensorflow" else f"{config.backend}:{place}"


def next_sweep_group(existing_groups: Iterable[str], plan: SweepPlan) -> str:
    """The history group of a new sweep: 'sweep 3: batch × precision', numbered after the sweeps already there."""
    numbers = [int(match.group(1)) for match in map(_SWEEP_GROUP.match, existing_groups) if match]
    return f"sweep {max(numbers, default=0) + 1}: {plan.title}"

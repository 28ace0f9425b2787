"""The usual memory estimate before a run: weights + gradients + optimizer state.

bytes = parameters x bytes per parameter x (1 weights + 1 gradients + optimizer
slots), with non-trainable parameters (batch-norm statistics) counted as weights
only. Keras mixed precision (mixed_float16 / mixed_bfloat16) keeps variables in
float32 and computes in the lower precision, so gradients and optimizer slots
are float32 too: the estimate is the same as for float32 (activations, which it
leaves out, are what mixed precision shrinks). The slot counts are Keras 3's:
the optimizer variables shaped like each trainable variable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from core.config import FILE_OPTIMIZER

FLOAT32_BYTES = 4
BASE_SLOTS = {"adam": 2, "adamw": 2, "adamax": 2, "nadam": 2, "adadelta": 2, "ftrl": 2, "rmsprop": 1, "adagrad": 1, "lion": 1, "sgd": 0}
UNKNOWN_SLOTS = 2  # an optimizer not in the table is taken to hold Adam's two slots
MIXED_NOTE = "mixed precision keeps Keras variables, gradients and optimizer slots in float32: the same bytes as float32"


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of weights, gradients and optimizer state a run holds before activations."""

    weight_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    optimizer_slots: int
    note: str = ""

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.gradient_bytes + self.optimizer_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "weight_bytes": self.weight_bytes,
            "gradient_bytes": self.gradient_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "optimizer_slots": self.optimizer_slots,
            "total_bytes": self.total_bytes,
            "note": self.note,
        }


def optimizer_slots(optimizer: str, config: dict[str, Any] | None = None) -> tuple[int, str]:
    """Variables per trainable parameter that `optimizer` keeps (Keras 3), and a note when it is a guess.

    `config` may hold the options that add slots: amsgrad (Adam/AdamW), momentum
    (SGD, RMSprop), centered (RMSprop), use_ema (any).
    """
    config = config or {}
    name = optimizer.lower().replace("_", "")
    slots = BASE_SLOTS.get(name)
    note = ""
    if slots is None:
        slots, note = UNKNOWN_SLOTS, f"optimizer {optimizer!r} is not in the table: assumed {UNKNOWN_SLOTS} slots like Adam"
    if name in ("adam", "adamw") and config.get("amsgrad"):
        slots += 1
    if name in ("sgd", "rmsprop") and config.get("momentum"):
        slots += 1
    if name == "rmsprop" and config.get("centered"):
        slots += 1
    if config.get("use_ema"):
        slots += 1
    return slots, note


def estimate_memory(
    trainable_params: int,
    non_trainable_params: int = 0,
    optimizer: str = "adam",
    precision: str = "off",
    optimizer_config: dict[str, Any] | None = None,
    bytes_per_param: int = FLOAT32_BYTES,
) -> MemoryEstimate:
    """The estimate for a model of these parameter counts trained with `optimizer` at `precision`.

    `precision` is the run's setting ("off", "float16", "bfloat16"); it does not
    change the bytes (see the module docstring), only the note that says so.
    """
    slots, note = optimizer_slots(optimizer, optimizer_config)
    notes = [n for n in (note, MIXED_NOTE if precision != "off" else "") if n]
    return MemoryEstimate(
        weight_bytes=(trainable_params + non_trainable_params) * bytes_per_param,
        gradient_bytes=trainable_params * bytes_per_param,
        optimizer_bytes=trainable_params * bytes_per_param * slots,
        optimizer_slots=slots,
        note="; ".join(notes),
    )


def estimate_for_model(model: Any, optimizer: Any, precision: str = "off", replicas: int = 1) -> MemoryEstimate:
    """The estimate for a built Keras model and the built optimizer that trains it.

    A LossScaleOptimizer is read through its inner optimizer. Bytes per parameter
    are the trainable variables' own (float32 under mixed precision too). With
    several replicas the bytes are per replica: each holds all of them.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    trainable = _parameters(model.trainable_weights)
    non_trainable = _parameters(model.non_trainable_weights)
    sizes = {_itemsize(v.dtype) for v in model.trainable_weights}
    estimate = estimate_memory(
        trainable,
        non_trainable,
        type(inner).__name__,
        precision,
        inner.get_config(),
        sizes.pop() if len(sizes) == 1 else FLOAT32_BYTES,
    )
    if replicas > 1:
        per_replica = f"per replica: each of the {replicas} replicas holds all of it"
        return replace(estimate, note="; ".join(n for n in (estimate.note, per_replica) if n))
    return estimate


def estimate_from_description(described: dict[str, Any], optimizer: str, precision: str = "off") -> MemoryEstimate:
    """The estimate before a run, from a model file's description (`describe_model_file`) and the run's optimizer.

    The optimizer is the one the run will use: a .py's `optimizer` always; the
    file's compiled one (with its momentum, centered, amsgrad settings) when
    `optimizer` is "file"; else the run's. "file" without one is Adam.
    """
    name, settings = optimizer_for_run(described, optimizer)
    return estimate_memory(
        int(described["trainable_params"]),
        int(described.get("non_trainable_params", 0)),
        name,
        precision,
        settings,
    )


def optimizer_for_run(described: dict[str, Any], optimizer: str) -> tuple[str, dict[str, Any] | None]:
    """(name, the file's settings) of the optimizer a run on the described file uses; settings None: the run's own."""
    own = described.get("optimizer")
    if own and (optimizer == FILE_OPTIMIZER or described.get("kind") == "python"):
        return own, dict(described.get("optimizer_settings") or {})
    return ("adam" if optimizer == FILE_OPTIMIZER else optimizer), None


def _parameters(variables: Any) -> int:
    return int(sum(math.prod(v.shape) for v in variables))


def _itemsize(dtype: Any) -> int:
    name = str(getattr(dtype, "name", dtype))
    return 2 if "16" in name else 8 if "64" in name else FLOAT32_BYTES

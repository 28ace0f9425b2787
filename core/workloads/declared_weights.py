"""The weights a Keras model config declares, counted from its JSON without building it, and whether they can fit.

Keras 3 saves each layer's `build_config` (its input shape) in a `.keras` file's
config.json; with it, the weights of the layers that hold most of a model's
(Dense, Embedding, convolutions, LSTM/GRU/SimpleRNN) follow from their config
alone, nested models' included. Other layers count nothing, so the count is a
lower bound. `oversized_reason` refuses a model whose weights alone cannot fit
in the memory available: building it would ask the allocator for them first
(a Dense of 10**12 units once took TensorFlow 17-20 s to refuse in raw OOM text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.formatting import format_bytes

CONVOLUTIONS = ("Conv1D", "Conv2D", "Conv3D")
TRANSPOSED = ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}
ITEM_BYTES = {"float16": 2, "bfloat16": 2, "float64": 8}  # a weight's bytes by its layer's dtype; float32 (4) otherwise


@dataclass(frozen=True)
class DeclaredWeights:
    """The weights a config declares (a lower bound), their bytes, and the layer that holds the most."""

    params: int = 0
    bytes: int = 0
    largest_layer: str = ""  # "Dense 'big'"
    largest_params: int = 0


def declared_weights(config: Any) -> DeclaredWeights:
    """The weights of every layer in a Keras config (a .keras file's config.json) whose size its config tells."""
    params = size = largest = 0
    name = ""
    for layer in _layer_configs(config):
        count = layer_params(layer)
        if not count:
            continue
        params += count
        size += count * _item_bytes(layer)
        if count > largest:
            largest, name = count, f"{layer.get('class_name')} '{(layer.get('config') or {}).get('name', '?')}'"
    return DeclaredWeights(params, size, name, largest)


def oversized_reason(config: Any, available_bytes: int) -> str:
    """Why a model whose declared weights alone take more than `available_bytes` cannot be built here ("" when they fit)."""
    declared = declared_weights(config)
    if declared.bytes <= available_bytes:
        return ""
    return (
        f"the memory estimate refuses it: its weights alone take at least {format_bytes(declared.bytes)} "
        f"({declared.params:,} parameters; {declared.largest_layer} holds {declared.largest_params:,}), more than the "
        f"{format_bytes(available_bytes)} of memory available here (training adds gradients and optimizer state): building "
        "it could only fail. Make that layer smaller."
    )


def _layer_configs(node: Any) -> list[dict[str, Any]]:
    """Every layer config in the tree (nested models' and wrapped layers' too), a shared one once."""
    found: list[dict[str, Any]] = []
    seen: set[Any] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if isinstance(item.get("class_name"), str) and isinstance(item.get("config"), dict):
                shared = item.get("shared_object_id")  # Keras writes an object it serialises twice with one id
                key = ("shared", shared) if shared is not None else ("layer", id(item))
                if key in seen:
                    continue
                seen.add(key)
                found.append(item)
            stack.extend(item.values())
    return found


def layer_params(layer: dict[str, Any]) -> int:
    """The weights one layer config declares (0 for a layer of another kind, or one whose input shape is not saved)."""
    kind, config = layer.get("class_name"), layer.get("config") or {}
    if kind == "Embedding":
        return _positive(config.get("input_dim")) * _positive(config.get("output_dim"))
    shape = (layer.get("build_config") or {}).get("input_shape")
    channels_first = config.get("data_format") == "channels_first"
    inputs = _positive(shape[1 if channels_first else -1]) if isinstance(shape, list) and len(shape) > 1 else 0
    bias = bool(config.get("use_bias", True))
    if kind == "Dense":
        units = _positive(config.get("units"))
        return inputs * units + (units if bias else 0)
    if kind in CONVOLUTIONS or kind in TRANSPOSED:
        filters, kernel = _positive(config.get("filters")), _kernel(config.get("kernel_size"))
        groups = max(1, _positive(config.get("groups", 1))) if kind in CONVOLUTIONS else 1
        return kernel * (inputs // groups) * filters + (filters if bias else 0)
    if kind in RECURRENT_GATES:
        gates, units = RECURRENT_GATES[kind], _positive(config.get("units"))
        biases = 2 if kind == "GRU" and config.get("reset_after", True) else 1
        return gates * units * (inputs + units) + (biases * gates * units if bias else 0)
    return 0


def _positive(value: Any) -> int:
    """A positive whole number from a config value (JSON may hold 1e12 as a float); 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return 0
    return int(value)


def _kernel(size: Any) -> int:
    sizes = size if isinstance(size, list) else [size]
    return math.prod(_positive(s) for s in sizes) if sizes else 0


def _item_bytes(layer: dict[str, Any]) -> int:
    """A weight's bytes under the layer's dtype policy (mixed policies keep float32 weights)."""
    dtype = (layer.get("config") or {}).get("dtype")
    name = (dtype.get("config") or {}).get("name") if isinstance(dtype, dict) else dtype
    return ITEM_BYTES.get(str(name), 4)

"""A user's own model as a workload the engine can train: `open_user_workload(path, ...) -> UserWorkload`.

Opening loads the model once here to read its signature (what it eats, what it
gives, which loss each output trains with), checks the data against it, and
keeps only that description. The engine then calls `build_model()` inside
`strategy.scope()`, `make_dataset(...)` for its batches and `loss_fn` for the
per-example loss, exactly as it does for a sample model.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.config import FILE_OPTIMIZER
from core.formatting import format_bytes
from core.workloads import legacy_compat
from core.workloads.data import SYNTHETIC_EPOCH_EXAMPLES
from core.workloads.file_optimizer import build_optimizer, optimizer_name, optimizer_settings
from core.workloads.model_data import (
    UNKNOWN_DIM,
    ModelDataError,
    array_dataset,
    check_element_spec,
    ids_past_tables,
    load_npz,
    npz_array_bytes,
    npz_headers,
    rebatched_dataset,
    synthetic_arrays,
    synthetic_example_count,
)
from core.workloads.model_file import (
    PYTHON,
    ModelFileError,
    ModelSource,
    build_from_module,
    check_model_path,
    compiled_config,
    import_model_module,
    load_model_file,
)
from core.workloads.model_signature import LossChoice, ModelSignature, OutputInfo, choose_losses, infer_loss, read_signature

SYNTHETIC, PYTHON_DATA = "synthetic", "build_dataset"
OPTIMIZER_NOTE = "optimizer: "
TF_ONLY_LAYERS = ("TextVectorization", "StringLookup", "IntegerLookup", "Hashing", "HashedCrossing")
"""Keras layers built on TensorFlow ops (their constructors ask for TensorFlow): a model holding one trains on TensorFlow only."""


@dataclass
class _Facts:
    """What opening the file found out, kept after the model itself is dropped."""

    params: int
    trainable_params: int
    weight_bytes: int
    compiled: bool
    notes: list[str] = field(default_factory=list)
    legacy_fixes: list[str] = field(default_factory=list)
    optimizer_config: Any = None
    tf_only_layers: list[str] = field(default_factory=list)


class UserWorkload:
    """A user's model and its data, ready for the engine (see the module docstring)."""

    def __init__(
        self, source: ModelSource, signature: ModelSignature, losses: tuple[LossChoice, ...], facts: _Facts, data: str, module: Any = None
    ) -> None:
        self.source = source
        self.signature = signature
        self.losses = losses
        self.facts = facts
        self.data = data
        self._module = module
        self._loss_objects: list[Any] | None = None
        self._arrays: tuple[Any, Any, int] | None = None
        if data not in (SYNTHETIC, PYTHON_DATA):
            self._arrays = load_npz(data, signature, losses)
        if data != PYTHON_DATA:
            facts.notes += ids_past_tables(signature, self._arrays[0] if self._arrays else None)

    @property
    def npz_arrays(self) -> tuple[Any, Any, int] | None:
        """(x, y, examples) of the user's .npz as NumPy arrays; None for synthetic data and a build_dataset()."""
        return self._arrays

    @property
    def num_examples(self) -> int | None:
        """Examples in the user's .npz; None for synthetic data and a build_dataset() (endless or unknown)."""
        return self._arrays[2] if self._arrays else None

    def steps_per_epoch(self, global_batch_size: int) -> int | None:
        """Whole batches in one pass: the .npz's, a finite build_dataset()'s, or 60,000 synthetic examples'."""
        if self._arrays:
            return max(1, self._arrays[2] // global_batch_size)
        if self.data == SYNTHETIC:
            return max(1, SYNTHETIC_EPOCH_EXAMPLES // global_batch_size)
        cardinality = int(self._user_dataset(global_batch_size).cardinality())
        return cardinality if cardinality > 0 else None

    def check_data(self, global_batch_size: int) -> None:
        """Raise ModelDataError now when the data cannot feed the model (an .npz was checked on opening).

        Synthetic data needs a known id range for integer inputs and a known class
        count; a build_dataset() must give (x, y) batches the model's inputs take.
        """
        if self.data == SYNTHETIC:
            synthetic_arrays(self.signature, self.losses, 1, 0, self.source.path)
        elif self.data == PYTHON_DATA:
            self._user_dataset(global_batch_size)

    def build_model(self, seed: int = 0) -> Any:
        """A fresh model from the file, under the current dtype policy; call inside `strategy.scope()`."""
        import keras

        keras.utils.set_random_seed(seed)
        if self.source.kind == PYTHON:
            return build_from_module(self.source, self._module)
        model = load_model_file(self.source)
        if not model.built:  # a subclassed model saved unbuilt: built on the data's shapes, as opening it was
            symbolic_model(model, self.data)
        apply_dtype_policy(model)
        return model

    def make_dataset(self, global_batch_size: int, seed: int = 0):
        """An endless, batched, prefetched tf.data.Dataset of (x, y) global batches."""
        if self._arrays:
            x, y, examples = self._arrays
            return array_dataset(x, y, examples, global_batch_size, seed, synthetic=False)
        if self.data == PYTHON_DATA:
            return rebatched_dataset(self._user_dataset(global_batch_size), global_batch_size)
        examples = synthetic_example_count(self.signature, self.losses)
        x, y = synthetic_arrays(self.signature, self.losses, examples, seed, self.source.path)
        return array_dataset(x, y, examples, global_batch_size, seed, synthetic=True)

    def loss_fn(self, y_true: Any, y_pred: Any) -> Any:
        """The per-example loss (no reduction): each output's loss averaged over its non-batch axes, weighted and summed."""
        import tensorflow as tf

        if self._loss_objects is None:
            self._loss_objects = [make_loss(choice) for choice in self.losses]
        names = [o.name for o in self.signature.outputs]
        total = None
        for choice, fn, true, pred in zip(self.losses, self._loss_objects, _flat(y_true, names), _flat(y_pred, names), strict=True):
            pred = tf.cast(pred, tf.float32)
            if true.dtype.is_floating:
                true = tf.cast(true, tf.float32)
            per_example = fn(true, pred)
            if per_example.shape.rank and per_example.shape.rank > 1:
                per_example = tf.reduce_mean(per_example, axis=list(range(1, per_example.shape.rank)))
            term = per_example * choice.weight if choice.weight != 1.0 else per_example
            total = term if total is None else total + term
        return total

    def optimizer_name(self) -> str | None:
        """The file's own optimizer: the Python file's `optimizer` (a name or an object), else the compiled one; None: none."""
        spec = getattr(self._module, "optimizer", None) if self._module else None
        if spec is None:
            return optimizer_name(self.facts.optimizer_config)
        return spec.lower() if isinstance(spec, str) else type(spec).__name__.lower()

    def make_optimizer(self, learning_rate: float, setting: str = FILE_OPTIMIZER) -> Any:
        """A fresh optimizer, or None for the run's `setting`.

        The Python file's `optimizer` always wins (a name gets the run's learning
        rate). With `setting` FILE_OPTIMIZER the file's compiled optimizer and its
        settings, or Adam at `learning_rate` when it was not compiled with one.
        """
        import keras

        spec = getattr(self._module, "optimizer", None) if self._module else None
        if isinstance(spec, str):
            optimizer = keras.optimizers.get(spec)
            optimizer.learning_rate = learning_rate
            return optimizer
        if spec is not None:
            return type(spec).from_config(spec.get_config())
        if setting != FILE_OPTIMIZER:
            return None
        if self.facts.optimizer_config is None:
            return keras.optimizers.Adam(learning_rate=learning_rate)
        return build_optimizer(self.facts.optimizer_config)[0]

    def optimizer_note(self, setting: str) -> str:
        """Which optimizer a run with the optimizer `setting` trains with, and whose it is ("" when only the run's)."""
        own = self.optimizer_name()
        if own is None:
            return ""
        if self.source.kind == PYTHON:
            return f"{OPTIMIZER_NOTE}{own} (the Python file's)"
        if setting == FILE_OPTIMIZER:
            return f"{OPTIMIZER_NOTE}the file's {_with_settings(self.facts.optimizer_config)}"
        return f"{OPTIMIZER_NOTE}{setting} (the run's choice) replaces the file's {_with_settings(self.facts.optimizer_config)}"

    def run_notes(self, optimizer_setting: str) -> list[str]:
        """What a run on this file should say in its details: legacy fixes, synthetic masks and ids, the optimizer used."""
        kept = [note for note in self.facts.notes if not note.startswith(OPTIMIZER_NOTE)]
        return [*kept, *([note] if (note := self.optimizer_note(optimizer_setting)) else [])]

    def _user_dataset(self, global_batch_size: int):
        import tensorflow as tf

        try:
            ds = self._module.build_dataset(global_batch_size)
        except Exception as exc:
            raise ModelDataError(self.source.path, f"build_dataset({global_batch_size}) failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(ds, tf.data.Dataset):
            raise ModelDataError(self.source.path, f"build_dataset() returned {type(ds).__name__}, not a tf.data.Dataset of (x, y).")
        check_element_spec(ds.element_spec, self.signature, self.source.path)
        return ds

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description: file, hash, inputs, outputs, parameters, losses and why, data."""
        return {
            "path": self.source.path,
            "kind": self.source.kind,
            "sha256": self.source.sha256,
            "trusted": self.source.trusted,
            "compiled": self.facts.compiled,
            "params": self.facts.params,
            "trainable_params": self.facts.trainable_params,
            "non_trainable_params": self.facts.params - self.facts.trainable_params,
            "weight_bytes": self.facts.weight_bytes,
            **self.signature.to_dict(),
            "losses": [
                {
                    "output": c.output,
                    "loss": c.loss,
                    "from_logits": c.from_logits,
                    "target": c.target,
                    "weight": c.weight,
                    "reason": c.reason,
                }
                for c in self.losses
            ],
            "data": self.data,
            "has_build_dataset": bool(self._module is not None and callable(getattr(self._module, "build_dataset", None))),
            "optimizer": self.optimizer_name(),
            "optimizer_settings": optimizer_settings(self.facts.optimizer_config),
            "legacy_fixes": list(self.facts.legacy_fixes),
            "custom_objects": self.source.custom_objects,
            "notes": list(self.facts.notes),
            "tf_only_layers": list(self.facts.tf_only_layers),
        }


def _flat(value: Any, names: list[str]) -> list[Any]:
    """A model's outputs or targets as a list in output order, from a dict by name, a tuple/list or one tensor."""
    if isinstance(value, dict):
        return [value[name] for name in names]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def make_loss(choice: LossChoice) -> Any:
    """A callable giving the unreduced loss for one output (a Keras Loss with reduction=None, or a loss function)."""
    import keras

    if choice.config is None:
        inferred = {
            "sparse_categorical_crossentropy": lambda: keras.losses.SparseCategoricalCrossentropy(
                from_logits=choice.from_logits, reduction=None
            ),
            "binary_crossentropy": lambda: keras.losses.BinaryCrossentropy(from_logits=choice.from_logits, reduction=None),
            "mean_squared_error": lambda: keras.losses.MeanSquaredError(reduction=None),
        }
        return inferred[choice.loss]()
    loss = keras.losses.get(choice.config) if isinstance(choice.config, (str, dict)) else choice.config
    if isinstance(loss, keras.losses.Loss):
        try:
            return type(loss).from_config({**loss.get_config(), "reduction": None})
        except (TypeError, ValueError, NotImplementedError):
            return loss.call
    if not callable(loss):
        raise ValueError(f"{choice.config!r} is not a loss")
    return loss


def apply_dtype_policy(model: Any) -> None:
    """Give a loaded model the current global dtype policy (mixed precision), keeping output layers float32.

    A saved model carries each layer's policy (float32 when it was saved without
    mixed precision), so loading ignores the run's precision; its variables stay
    float32 under a mixed policy either way, so switching the policy after loading
    is the same as building under it. Outputs stay float32 for a stable loss.
    """
    import keras

    policy = keras.config.dtype_policy()
    if policy.name == "float32":
        return
    outputs = {id(t._keras_history.operation) for t in model.outputs or []}
    for layer in _all_layers(model):
        if isinstance(layer, keras.layers.InputLayer) or id(layer) in outputs or layer.dtype_policy.name != "float32":
            continue
        layer.dtype_policy = policy


def _all_layers(model: Any) -> list[Any]:
    """Every layer of the model, those of nested models included."""
    layers = []
    for layer in getattr(model, "layers", []):
        layers.append(layer)
        layers.extend(_all_layers(layer) if hasattr(layer, "layers") else [])
    return layers


def tf_only_layers(model: Any) -> list[str]:
    """The model's layers that train on the TensorFlow backend only ("TextVectorization 'text_vectorization'"), nested ones included."""
    return [
        f"{type(layer).__name__} '{layer.name}'"
        for layer in _all_layers(model)
        if any(cls.__name__ in TF_ONLY_LAYERS for cls in type(layer).__mro__)
    ]


def check_backend_layers(described: dict[str, Any], backend: str) -> None:
    """ModelFileError (its file, the layers) when a described model holds layers that train on TensorFlow only and `backend` is another."""
    layers = described.get("tf_only_layers") or []
    if backend == "tensorflow" or not layers:
        return
    raise ModelFileError(
        described["path"],
        f"{', '.join(layers)} trains on the TensorFlow backend only (Keras builds it on TensorFlow ops), not on {backend}: "
        "use --backend tensorflow.",
    )


def open_user_workload(
    path: str | os.PathLike,
    trust: bool = False,
    data: str | None = None,
    vocab: int | None = None,
    custom_objects: str | os.PathLike | None = None,
    vocab_by_input: Sequence[tuple[str, int]] = (),
) -> UserWorkload:
    """Open the model file and its data; raises ModelFileError (or ModelDataError) with the path and the reason.

    `data` is "synthetic", "build_dataset" (the .py's) or an .npz path; None picks the
    .py's build_dataset when it has one, else synthetic. `vocab` bounds integer
    inputs whose range nothing in the model says; `vocab_by_input` sets named inputs'
    ranges over what the model says. `custom_objects` is a trusted .py defining the file's custom classes.
    """
    source = check_model_path(path, trust, custom_objects)
    module = import_model_module(source) if source.kind == PYTHON else None
    data = _resolve_data(source, module, data)
    model = build_from_module(source, module) if module is not None else load_model_file(source)
    signature = _signature(source, model, vocab, vocab_by_input, data)
    compiled = compiled_config(source) if module is None else None
    loss_config, weights, origin = _loss_config(model, module, compiled)
    losses, notes = _restorable(choose_losses(signature, loss_config, weights, origin), signature)
    is_compiled = bool(getattr(model, "compiled", False)) if module is not None else loss_config is not None
    facts = _Facts(int(model.count_params()), _count(model.trainable_weights), _bytes(model.weights), is_compiled, notes)
    facts.notes += signature.notes()
    facts.tf_only_layers = tf_only_layers(model)
    if any(d is None for i in signature.inputs for d in i.shape[1:]):
        facts.notes.append(f"open input dimensions get {UNKNOWN_DIM} in synthetic data")
    if module is None:
        _file_facts(source, compiled, facts)
    facts.notes += inflation_note(data)
    return UserWorkload(source, signature, losses, facts, data, module)


INFLATION_WARNING_RATIO, INFLATION_WARNING_BYTES = 10, 32 * 2**20


def inflation_note(data: str) -> list[str]:
    """A warning for an .npz whose arrays take far more memory than the file (compressed): its size and what it inflates to."""
    if data in (SYNTHETIC, PYTHON_DATA) or not os.path.isfile(data):
        return []
    try:
        inflated = sum(npz_array_bytes(data).values())
    except ModelDataError:
        return []  # refused with its reason when the data is loaded
    size = os.path.getsize(data)
    if inflated < INFLATION_WARNING_BYTES or inflated < INFLATION_WARNING_RATIO * max(size, 1):
        return []
    return [
        f"warning: the data file {os.path.basename(data)} is {format_bytes(size)} but its arrays take {format_bytes(inflated)} "
        "in memory once inflated (training holds about twice that)"
    ]


def _file_facts(source: ModelSource, compiled: Any, facts: _Facts) -> None:
    """The legacy fixes the file needed and its compiled optimizer (checked to rebuild here), into `facts`."""
    fixes = legacy_compat.legacy_fixes(source.path, source.kind)
    facts.legacy_fixes = [str(fix) for fix in fixes]
    if fixes:
        facts.notes.insert(0, legacy_compat.summary(fixes))
    if compiled is None or compiled.optimizer is None:
        return
    try:
        _, dropped = build_optimizer(compiled.optimizer)
    except Exception as exc:
        facts.notes.append(f"the file's optimizer {optimizer_name(compiled.optimizer)} cannot be rebuilt here ({exc}): Adam instead")
        return
    facts.optimizer_config = compiled.optimizer
    facts.notes.append(f"{OPTIMIZER_NOTE}the file's {_with_settings(compiled.optimizer)}, unless the run picks another")
    if dropped:
        facts.notes.append(f"the file's optimizer arguments Keras 3 has no use for were left out: {', '.join(dropped)}")


def _resolve_data(source: ModelSource, module: Any, data: str | None) -> str:
    has_dataset = module is not None and callable(getattr(module, "build_dataset", None))
    if data is None:
        return PYTHON_DATA if has_dataset else SYNTHETIC
    if data == PYTHON_DATA and not has_dataset:
        raise ModelFileError(
            source.path, "the file defines no build_dataset(batch_size) to take the data from; use synthetic data or an .npz."
        )
    if data in (SYNTHETIC, PYTHON_DATA):
        return data
    return str(os.path.abspath(os.path.expanduser(data)))


def _signature(source: ModelSource, model: Any, vocab: int | None, vocab_by_input: Sequence[tuple[str, int]], data: str) -> ModelSignature:
    symbolic = symbolic_model(model, data)
    try:
        signature = read_signature(symbolic, vocab, dict(vocab_by_input))
    except ValueError as exc:
        raise ModelFileError(source.path, str(exc)) from None
    return fix_open_dims(symbolic, signature)


def symbolic_model(model: Any, data: str | None = None) -> Any:
    """`model` when its inputs are known; else (a subclassed model) a functional model calling it on keras.Input made from its
    build config's input shape (what Keras saved when it was built), or from the .npz `data`'s input arrays; `model` when
    neither says (read_signature refuses it)."""
    import keras

    try:
        if model.inputs:
            return model
    except (AttributeError, ValueError):
        pass
    specs = _build_config_specs(model)
    if specs is None and data not in (None, SYNTHETIC, PYTHON_DATA):
        specs = _npz_input_specs(str(data))
    if specs is None:
        return model
    try:
        if isinstance(specs, dict):
            inputs: Any = {name: keras.Input(shape[1:], dtype=dtype, name=name) for name, (shape, dtype) in specs.items()}
        else:
            inputs = [keras.Input(shape[1:], dtype=dtype) for shape, dtype in specs]
            inputs = inputs[0] if len(inputs) == 1 else inputs
        return keras.Model(inputs, model(inputs))
    except Exception:  # a model its own shapes do not build: refused as before
        return model


_Spec = tuple[tuple[int | None, ...], str]


def _build_config_specs(model: Any) -> list[_Spec] | dict[str, _Spec] | None:
    """[(shape, dtype)] (or by name) from a built model's `get_build_config()` ({'input_shape': [None, 24]}); None: none saved."""
    try:
        config = model.get_build_config() or {}
    except Exception:
        return None
    shape: Any = config.get("input_shape")
    if shape is None and isinstance(config.get("shapes_dict"), dict) and len(config["shapes_dict"]) == 1:
        shape = next(iter(config["shapes_dict"].values()))

    def is_shape(value: Any) -> bool:
        return isinstance(value, (list, tuple)) and len(value) >= 1 and all(d is None or isinstance(d, int) for d in value)

    if is_shape(shape):
        return [(tuple(shape), "float32")]
    if isinstance(shape, (list, tuple)) and shape and all(is_shape(s) for s in shape):
        return [(tuple(s), "float32") for s in shape]
    if isinstance(shape, dict) and shape and all(is_shape(s) for s in shape.values()):
        return {str(name): (tuple(s), "float32") for name, s in shape.items()}
    return None


def _npz_input_specs(path: str) -> list[_Spec] | None:
    """[(shape, dtype)] of an .npz's input array ('x', else the one array besides 'y'), read from its header; None: no such array."""
    try:
        headers = npz_headers(path)
    except ModelDataError:
        return None  # refused with its reason when the data is loaded
    names = ["x"] if "x" in headers else [name for name in headers if name != "y"]
    if len(names) != 1:
        return None
    shape, dtype = headers[names[0]]
    kind = "string" if dtype.kind in "US" else "float32" if dtype.kind == "f" else str(dtype)
    return [((None, *shape[1:]), kind)]


def fix_open_dims(model: Any, signature: ModelSignature) -> ModelSignature:
    """The signature with output shapes computed for UNKNOWN_DIM in the inputs' open dimensions."""
    import keras

    if not any(d is None for o in signature.outputs for d in o.shape[1:]):
        return signature
    specs = [keras.KerasTensor((1, *(UNKNOWN_DIM if d is None else d for d in i.shape[1:])), dtype=i.dtype) for i in signature.inputs]
    fed = (
        {i.name: s for i, s in zip(signature.inputs, specs, strict=True)}
        if signature.dict_inputs
        else (specs[0] if len(specs) == 1 else specs)
    )
    try:
        results = _flat(model.compute_output_spec(fed), [o.name for o in signature.outputs])
    except Exception:  # a model that cannot say: synthetic targets use UNKNOWN_DIM too
        return signature
    outputs = tuple(OutputInfo(o.name, (None, *r.shape[1:]), o.activation) for o, r in zip(signature.outputs, results, strict=True))
    return ModelSignature(signature.inputs, outputs, signature.dict_inputs, signature.dict_outputs)


def _with_settings(config: Any) -> str:
    """ "rmsprop (learning_rate 0.01, momentum 0.5)": an optimizer config's name and the settings worth showing."""
    settings = ", ".join(f"{key} {value}" for key, value in optimizer_settings(config).items())
    return f"{optimizer_name(config)} ({settings})" if settings else str(optimizer_name(config))


def _loss_config(model: Any, module: Any, compiled: Any) -> tuple[Any, Any, str]:
    """The loss the file asks for (None: infer it), its per-output weights, and where it came from."""
    if module is not None:
        if getattr(module, "loss", None) is not None:
            return module.loss, None, "the loss in the Python file"
        if getattr(model, "compiled", False) and getattr(model, "loss", None) is not None:
            weights = (model.get_compile_config() or {}).get("loss_weights")
            return model.loss, weights, "the loss build_model() compiled"
        return None, None, ""
    return compiled.loss, compiled.loss_weights, "the compiled loss in the file"


def _restorable(losses: tuple[LossChoice, ...], signature: ModelSignature) -> tuple[tuple[LossChoice, ...], list[str]]:
    """Each loss made once now; one that cannot be (a custom loss not defined here) falls back to the inferred one."""
    kept, notes = [], []
    for choice, output in zip(losses, signature.outputs, strict=True):
        try:
            make_loss(choice)
            kept.append(choice)
        except Exception as exc:
            fallback = infer_loss(output)
            reason = f"{choice.loss} cannot be restored here ({type(exc).__name__}), so {fallback.reason}"
            kept.append(LossChoice(fallback.output, fallback.loss, fallback.from_logits, fallback.target, reason, None, choice.weight))
            notes.append(f"output '{output.name}': {reason}")
    return tuple(kept), notes


def _count(variables: Any) -> int:
    return int(sum(math.prod(v.shape) for v in variables))


def _bytes(variables: Any) -> int:
    return int(sum(math.prod(v.shape) * (2 if str(v.dtype) == "bfloat16" else np.dtype(str(v.dtype)).itemsize) for v in variables))

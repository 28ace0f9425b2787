"""What a user's model eats and gives: its inputs, its outputs, and the loss each output trains with.

`read_signature` walks a built Keras model (functional or Sequential): each input's
shape and dtype; for an input that feeds a layer with an `input_dim` (Embedding,
keras-hub's ReversibleEmbedding) or a `vocabulary_size` (TokenAndPositionEmbedding),
its id range, integer or float (keras.io models declare token inputs float32), the
walk going on into a nested model the input feeds (a keras-hub backbone inside a
classifier: its own `vocabulary_size` is its token table's, not every input's); a
mask input (named so: `padding_mask`) is filled with ones; for a text (string)
input, the words of the TextVectorization or StringLookup it feeds (synthetic
sentences are made of them); each output's shape and last activation. `choose_losses` picks the loss per output:
the file's compiled loss when it has one, else one inferred from the output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

CLASS_IDS, ONE_HOT, BINARY, VALUES = "class_ids", "one_hot", "binary", "values"
INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_MAX_WALK = 64  # integer-preserving layers followed from an input towards its Embedding
MASK_ONES = "ones"  # an input's synthetic fill: every position real
RANGE_ATTRIBUTES = ("input_dim", "vocabulary_size")
TEXT_DTYPE = "string"
MAX_WORDS = 5000
"""The most words of a text layer's vocabulary kept for synthetic sentences (its most frequent, as adapt() orders them)."""
SHIPPED_WORDS = tuple(
    "the of and to in is it that for on was with as by at from this be are or an have not they which one you had "
    "all were but can there their has more been if when time will would no about up out so what some into than "
    "them these two its only other new could may first way years over also after most made did many before must "
    "through back where much well should because each just those people how too little state good very make world "
    "still own see men work long here get both between life being under never day same another know while last "
    "might great old year off come since against go came right used take three small large number water house".split()
)
"""Words for synthetic text where the model names no vocabulary (a text layer adapted to nothing, or none at all)."""


@dataclass(frozen=True)
class InputInfo:
    """One model input: the key it is fed by, its shape (None = any), dtype and id range for integers."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str
    vocab: int | None = None
    vocab_source: str = ""
    fill: str = ""
    words: tuple[str, ...] = ()  # a text input's words for synthetic sentences (vocab_source says whose)
    table: int | None = None  # the rows of the smallest id table the input feeds, whatever --vocab says (None: none found)
    table_source: str = ""

    @property
    def is_integer(self) -> bool:
        return self.dtype in INTEGER_DTYPES

    @property
    def is_text(self) -> bool:
        return self.dtype == TEXT_DTYPE

    @property
    def float_ids(self) -> bool:
        """A float input that feeds an embedding: it gets integer ids in [0, vocab) cast to its dtype."""
        return self.vocab is not None and not self.is_integer and self.dtype != "bool"

    def note(self) -> str:
        """What synthetic data puts in this input when it is not plain random values: masks, text, ids and whose range ("" otherwise)."""
        if self.fill == MASK_ONES:
            return f"input '{self.name}' is a mask: all ones in synthetic data (every position real)"
        if self.is_text:
            return f"input '{self.name}' is text: synthetic sentences of 4-24 words from {self.vocab_source}"
        if self.float_ids:
            return f"input '{self.name}' is {self.dtype} but feeds an embedding: integer ids in [0, {self.vocab}) ({self.vocab_source}) cast to {self.dtype}"
        if self.is_integer and self.vocab is not None:
            return f"input '{self.name}': ids in [0, {self.vocab}) ({self.vocab_source})"
        return ""


@dataclass(frozen=True)
class OutputInfo:
    """One model output: its name, shape and the activation of the layer that produces it."""

    name: str
    shape: tuple[int | None, ...]
    activation: str

    @property
    def units(self) -> int | None:
        return self.shape[-1] if len(self.shape) > 1 else 1


@dataclass(frozen=True)
class LossChoice:
    """The loss one output trains with, the targets it needs, and why it was chosen."""

    output: str
    loss: str
    from_logits: bool
    target: str
    reason: str
    config: Any = None
    weight: float = 1.0


@dataclass(frozen=True)
class ModelSignature:
    """A model's inputs and outputs; `dict_inputs`/`dict_outputs` say whether it takes/gives a dict."""

    inputs: tuple[InputInfo, ...]
    outputs: tuple[OutputInfo, ...]
    dict_inputs: bool = False
    dict_outputs: bool = False

    def notes(self) -> list[str]:
        """The inputs' notes (masks, float ids) for the model's description."""
        return [note for info in self.inputs if (note := info.note())]

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": [{**asdict(i), "shape": list(i.shape)} for i in self.inputs],
            "outputs": [{**asdict(o), "shape": list(o.shape)} for o in self.outputs],
        }


def read_signature(model: Any, vocab: int | None = None, vocab_by_input: dict[str, int] | None = None) -> ModelSignature:
    """The inputs and outputs of a built model; raises ValueError when it has no symbolic inputs or `vocab_by_input` names none.

    `vocab` is the id range of integer inputs nothing in the model bounds; `vocab_by_input` the range of named inputs,
    over what the embedding they feed says.
    """
    try:
        inputs = list(model.inputs or [])
        outputs = list(model.outputs or [])
    except (AttributeError, ValueError):
        inputs, outputs = [], []
    if not inputs or not outputs:
        raise ValueError(
            "the model has no known inputs and outputs (a subclassed model never built, or a Sequential model without an Input): "
            "build it once before saving (model.build(shape), or fit it), give --data FILE.npz whose 'x' has its input's shape, "
            "or build it from keras.Input(...) layers so its signature is known."
        )
    input_keys = dict_keys(model, "input", len(inputs))
    output_keys = dict_keys(model, "output", len(outputs))
    in_keys: list[str | None] = list(input_keys) if input_keys else [None] * len(inputs)
    infos = tuple(_input_info(tensor, key, vocab) for tensor, key in zip(inputs, in_keys, strict=True))
    by_input = vocab_by_input or {}
    unknown = sorted(set(by_input) - {info.name for info in infos})
    if unknown:
        raise ValueError(f"--vocab names no input {', '.join(unknown)}: its inputs are {', '.join(info.name for info in infos)}")
    infos = tuple(
        replace(info, vocab=by_input[info.name], vocab_source=f"--vocab {info.name}={by_input[info.name]}", fill="", words=())
        if info.name in by_input
        else info
        for info in infos
    )
    out_keys: list[str | None] = list(output_keys) if output_keys else [None] * len(outputs)
    outs = tuple(_output_info(tensor, key, i) for i, (tensor, key) in enumerate(zip(outputs, out_keys, strict=True)))
    return ModelSignature(infos, outs, input_keys is not None, output_keys is not None)


def dict_keys(model: Any, attribute: str, count: int) -> list[str] | None:
    """The names of `model.input` / `model.output` in `model.inputs` / `model.outputs` order (sorted, as Keras flattens a
    dict) when the model takes / gives a dict of `count` tensors; None otherwise, or where Keras cannot say (a loaded Sequential)."""
    try:
        structure = getattr(model, attribute)
    except (AttributeError, ValueError):
        return None
    return sorted(structure) if isinstance(structure, dict) and len(structure) == count else None


def _input_info(tensor: Any, key: str | None, vocab: int | None) -> InputInfo:
    # Keras 3 has no public graph walk: a symbolic tensor's `_keras_history` names the layer
    # that made it, and a layer's `_outbound_nodes` the calls that consumed its outputs.
    layer = tensor._keras_history.operation
    name = key or layer.name or tensor.name
    dtype = str(tensor.dtype)
    info = InputInfo(name, tuple(tensor.shape), dtype)
    if "mask" in name.lower():
        return InputInfo(name, info.shape, dtype, fill=MASK_ONES)
    if info.is_text:
        return _text_input(info, layer)
    embedding = _embedding_fed_by(layer)
    if embedding is not None and (info.is_integer or "float" in dtype):
        size, attribute = _id_range(embedding)
        source = f"{attribute} of {type(embedding).__name__} '{embedding.name}'"
        return InputInfo(name, info.shape, dtype, size, source, table=size, table_source=source)
    if info.is_integer and vocab is not None:
        return InputInfo(name, info.shape, dtype, vocab, "--vocab")
    return info


def _text_input(info: InputInfo, input_layer: Any) -> InputInfo:
    """A text input with the words of the first layer it feeds that has a vocabulary (TextVectorization, StringLookup)."""
    for node in getattr(input_layer, "_outbound_nodes", []):
        layer = node.operation
        try:
            vocabulary = [str(word) for word in layer.get_vocabulary()] if hasattr(layer, "get_vocabulary") else []
        except Exception:  # a layer not adapted yet
            vocabulary = []
        words = tuple(word for word in vocabulary if word and word != "[UNK]" and " " not in word)[:MAX_WORDS]
        if words:
            source = f"the vocabulary of {type(layer).__name__} '{layer.name}' ({len(words):,} words)"
            return InputInfo(info.name, info.shape, info.dtype, vocab_source=source, words=words)
    return InputInfo(info.name, info.shape, info.dtype, vocab_source="a built-in list of common English words", words=SHIPPED_WORDS)


def _id_range(layer: Any) -> tuple[int, str]:
    """The number of ids a layer takes and the attribute that says it (input_dim, vocabulary_size)."""
    for attribute in RANGE_ATTRIBUTES:
        value = getattr(layer, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, attribute
    raise ValueError(f"{layer.name} has no id range")


def _takes_ids(layer: Any) -> bool:
    try:
        _id_range(layer)
    except ValueError:
        return False
    return True


def _embedding_fed_by(input_layer: Any) -> Any:
    """The layer with the smallest id range (an `input_dim`, a `vocabulary_size`) the input reaches through integer-valued
    layers, and through nested models: from the nested model's own input that the ids feed."""
    found, frontier, seen = [], [input_layer], {id(input_layer)}
    while frontier and len(seen) < _MAX_WALK:
        layer = frontier.pop()
        for node in getattr(layer, "_outbound_nodes", []):
            consumer = node.operation
            inner = _nested_inputs_fed(node, layer)
            if inner is not None:
                frontier += [entry for entry in inner if id(entry) not in seen]
                seen.update(id(entry) for entry in inner)
                continue
            if id(consumer) in seen:
                continue
            seen.add(id(consumer))
            if _takes_ids(consumer):
                found.append(consumer)
            elif all(str(out.dtype) in INTEGER_DTYPES for out in node.outputs):
                frontier.append(consumer)
    return min(found, key=lambda layer: _id_range(layer)[0], default=None)


def _nested_inputs_fed(node: Any, layer: Any) -> list[Any] | None:
    """The input layers of the nested model that `node` calls which `layer`'s outputs feed; None when `node` calls no model
    with known inputs (a layer, or a subclassed model: its own id range, if any, is taken)."""
    import keras

    model = node.operation
    if not isinstance(model, keras.Model):
        return None
    try:
        inner, structure = list(model.inputs or []), model.input
    except (AttributeError, ValueError):
        return None
    if not inner:
        return None
    args = node.arguments.args
    fed = args[0] if args else node.arguments.kwargs.get("inputs")
    if isinstance(fed, dict) and isinstance(structure, dict):
        pairs = [(fed[key], structure[key]) for key in fed if key in structure]
    else:
        outer = keras.tree.flatten(fed)
        pairs = list(zip(outer, inner, strict=True)) if len(outer) == len(inner) else []
    return [
        inner_tensor._keras_history.operation
        for outer_tensor, inner_tensor in pairs
        if getattr(getattr(outer_tensor, "_keras_history", None), "operation", None) is layer and hasattr(inner_tensor, "_keras_history")
    ]


def _output_info(tensor: Any, key: str | None, index: int) -> OutputInfo:
    layer = tensor._keras_history.operation
    return OutputInfo(key or layer.name or f"output_{index}", tuple(tensor.shape), _activation_of(layer))


def _activation_of(layer: Any) -> str:
    """The name of the layer's last activation ("linear" for none, "unknown" when it cannot be told)."""
    import keras

    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    activation = getattr(layer, "activation", None)
    if activation is None:
        return "unknown"
    return getattr(activation, "__name__", type(activation).__name__).lower()


def infer_loss(output: OutputInfo) -> LossChoice:
    """The loss for an output of an uncompiled model, from its units and last activation."""
    units, activation = output.units, output.activation
    shown = "no activation seen (treated as linear)" if activation == "unknown" else f"{activation} activation"
    if activation == "sigmoid":
        target = "a 0/1 label" if units == 1 else "0/1 labels per unit (multi-label)"
        return LossChoice(output.name, "binary_crossentropy", False, BINARY, f"{units} sigmoid unit(s): {target}")
    if units is not None and units > 1 and activation == "softmax":
        return LossChoice(
            output.name, "sparse_categorical_crossentropy", False, CLASS_IDS, f"{units} units with softmax: class probabilities"
        )
    if units is not None and units > 1 and activation in ("linear", "unknown"):
        return LossChoice(output.name, "sparse_categorical_crossentropy", True, CLASS_IDS, f"{units} units with {shown}: class logits")
    return LossChoice(output.name, "mean_squared_error", False, VALUES, f"{units} unit(s) with {shown}: regression values")


def choose_losses(signature: ModelSignature, loss_config: Any = None, loss_weights: Any = None, source: str = "") -> tuple[LossChoice, ...]:
    """One LossChoice per output: from `loss_config` (compiled or the .py's `loss`) when given, else inferred.

    `loss_config` may be one loss for every output, a list in output order or a
    dict by output name; `source` says where it came from, for the reason.
    """
    choices = []
    for index, output in enumerate(signature.outputs):
        config = _per_output(loss_config, output.name, index)
        weight = _per_output(loss_weights, output.name, index)
        choice = infer_loss(output) if config is None else _configured_loss(output, config, source)
        choices.append(_with_weight(choice, 1.0 if weight is None else float(weight)))
    return tuple(choices)


def _per_output(structure: Any, name: str, index: int) -> Any:
    if structure is None:
        return None
    if isinstance(structure, dict) and "class_name" not in structure:
        return structure.get(name)
    if isinstance(structure, (list, tuple)):
        return structure[index] if index < len(structure) else None
    return structure


def _with_weight(choice: LossChoice, weight: float) -> LossChoice:
    return LossChoice(choice.output, choice.loss, choice.from_logits, choice.target, choice.reason, choice.config, weight)


def _configured_loss(output: OutputInfo, config: Any, source: str) -> LossChoice:
    name, from_logits = loss_name(config)
    return LossChoice(output.name, name, from_logits, target_for(name), f"{source or 'the loss given'}: {name}", config)


def loss_name(config: Any) -> tuple[str, bool]:
    """A readable name and from_logits for a loss given as a name, a serialized config, an object or a function."""
    if isinstance(config, str):
        return config, False
    if isinstance(config, dict):
        inner = config.get("config") or {}
        fn = inner.get("fn") if isinstance(inner, dict) else None
        return _snake(inner.get("name") or fn or config.get("class_name", "loss")), bool(inner.get("from_logits", False))
    if hasattr(config, "get_config"):
        try:
            inner = config.get_config() or {}
        except (NotImplementedError, TypeError):
            inner = {}
        return _snake(inner.get("name") or type(config).__name__), bool(inner.get("from_logits", False))
    return _snake(getattr(config, "__name__", type(config).__name__)), False


def _snake(name: str) -> str:
    out = "".join(f"_{c.lower()}" if c.isupper() else c for c in str(name)).lstrip("_")
    return out.replace("__", "_")


def target_for(loss: str) -> str:
    """The kind of target a named loss expects (class ids, one-hot, 0/1 or plain values)."""
    lowered = loss.lower()
    if "sparse" in lowered:
        return CLASS_IDS
    if "categorical" in lowered or lowered in ("kl_divergence", "kld", "poisson"):
        return ONE_HOT
    if "binary" in lowered or "hinge" in lowered:
        return BINARY
    return VALUES


def target_shape(choice: LossChoice, output: OutputInfo) -> tuple[int | None, ...]:
    """The shape of one example's target for `output` (without the batch dimension)."""
    shape = output.shape[1:]
    return shape[:-1] if choice.target == CLASS_IDS else shape

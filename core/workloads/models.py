"""The sample-model registry: what each model is, what it eats, and how to build it.

Models are built for the data set's input shape, so the MLP and the CNNs train
on the shipped 8x8 digits as well as on MNIST or CIFAR-10. TensorFlow is
imported only inside the builders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Protocol

IMAGE = "image"
TEXT = "text"
TEXT_VOCAB_SIZE = 20_000
TEXT_SEQUENCE_LENGTH = 128


class HasInputKind(Protocol):
    """Anything that says what it holds (a data set spec): `input_kind` is IMAGE, TEXT or "any"."""

    @property
    def input_kind(self) -> str: ...


@dataclass(frozen=True)
class ModelSpec:
    """A sample model: its registry name, a one-line description and its default input."""

    name: str
    title: str
    description: str
    input_kind: str
    input_shape: tuple[int, ...]
    num_classes: int
    default_dataset: str
    builder: Callable[..., Any]

    def accepts(self, dataset: HasInputKind) -> bool:
        """True when the model can train on this data set (synthetic fits every model)."""
        return dataset.input_kind in (self.input_kind, "any")

    def build(self, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None, seed: int = 0):
        """A fresh, uncompiled Keras model; call inside `strategy.scope()` to place its variables."""
        import keras

        keras.utils.set_random_seed(seed)
        return self.builder(tuple(input_shape or self.input_shape), num_classes or self.num_classes)


def _mlp(input_shape, num_classes):
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Flatten(),
            layers.Dense(256, activation="relu"),
            layers.Dense(128, activation="relu"),
            layers.Dense(num_classes, dtype="float32"),
        ],
        name="mlp",
    )


def _small_cnn(input_shape, num_classes):
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dense(num_classes, dtype="float32"),
        ],
        name="small_cnn",
    )


def _residual_block(x, filters, stride):
    from keras import layers

    shortcut = x
    y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    y = layers.BatchNormalization()(y)
    y = layers.Activation("relu")(y)
    y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    y = layers.BatchNormalization()(y)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
        shortcut = layers.BatchNormalization()(shortcut)
    return layers.Activation("relu")(layers.Add()([y, shortcut]))


def _resnet(input_shape, num_classes):
    import keras
    from keras import layers

    inputs = keras.Input(input_shape)
    x = layers.Conv2D(32, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    for filters, stride in ((32, 1), (64, 2), (128, 2)):
        x = _residual_block(x, filters, stride)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name="resnet_small")


@lru_cache(maxsize=1)
def _position_embedding_class():
    """A layer adding one learned vector per sequence position (defined lazily: keras is imported late)."""
    import keras

    class PositionEmbedding(keras.layers.Layer):
        def build(self, input_shape):
            self.positions = self.add_weight(shape=tuple(input_shape[1:]), initializer="uniform", name="positions")

        def call(self, inputs):
            return inputs + self.positions

    return PositionEmbedding


def _transformer(input_shape, num_classes, vocab_size=TEXT_VOCAB_SIZE, dim=64, heads=4, blocks=2):
    import keras
    from keras import layers

    tokens = keras.Input(input_shape, dtype="int32")
    x = _position_embedding_class()()(layers.Embedding(vocab_size, dim)(tokens))
    for _ in range(blocks):
        attention = layers.MultiHeadAttention(num_heads=heads, key_dim=dim // heads)(x, x)
        x = layers.LayerNormalization(epsilon=1e-6)(x + attention)
        feed_forward = layers.Dense(dim * 2, activation="relu")(x)
        feed_forward = layers.Dense(dim)(feed_forward)
        x = layers.LayerNormalization(epsilon=1e-6)(x + feed_forward)
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(num_classes, dtype="float32")(x)
    return keras.Model(tokens, outputs, name="transformer_small")


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "mlp",
            "MLP",
            "Two dense hidden layers (256, 128): the quickest model, shows fixed per-step overhead.",
            IMAGE,
            (8, 8, 1),
            10,
            "digits",
            _mlp,
        ),
        ModelSpec(
            "cnn",
            "Small CNN",
            "Two conv + pooling layers and a dense head, built for the data's image size (28x28x1 on synthetic data).",
            IMAGE,
            (28, 28, 1),
            10,
            "synthetic",
            _small_cnn,
        ),
        ModelSpec(
            "resnet",
            "ResNet-style CNN",
            "Three residual stages with batch norm on 32x32x3 images: compute-heavy, loads a GPU.",
            IMAGE,
            (32, 32, 3),
            10,
            "synthetic",
            _resnet,
        ),
        ModelSpec(
            "transformer",
            "Transformer text classifier",
            "Two self-attention blocks over 128 tokens (vocabulary 20,000), IMDB-style binary labels.",
            TEXT,
            (TEXT_SEQUENCE_LENGTH,),
            2,
            "synthetic",
            _transformer,
        ),
    )
}


def get_model_spec(name: str) -> ModelSpec:
    """The spec for `name`, or a KeyError listing the known models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None


@cache
def param_count(name: str, input_shape: tuple[int, ...] | None = None, num_classes: int | None = None) -> int:
    """Trainable + non-trainable parameters of the model built for `input_shape` (default: its own) and classes (imports TF).

    The CNNs' dense heads grow with the image size: the small CNN has 421,642
    parameters on 28x28x1 images and far fewer on the 8x8 digits.
    """
    return int(get_model_spec(name).build(input_shape, num_classes).count_params())


def describe_models(with_params: bool = True) -> list[dict[str, Any]]:
    """One JSON-ready row per sample model, for the CLI and the run panel."""
    rows = []
    for spec in MODELS.values():
        row = {
            "name": spec.name,
            "title": spec.title,
            "description": spec.description,
            "input_shape": list(spec.input_shape),
            "num_classes": spec.num_classes,
            "default_dataset": spec.default_dataset,
        }
        if with_params:
            row["params"] = param_count(spec.name)
        rows.append(row)
    return rows

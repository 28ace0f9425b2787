"""Real model files for the user-model tests, saved by Keras into each test's tmp_path.

Every test here runs after the shared TF runtime is configured (two logical
CPUs, see tests/core/conftest.py), so TensorFlow starts the same way whichever
test file runs first.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

VOCAB = 50
CLASSES = 5


@pytest.fixture(autouse=True)
def _runtime(two_cpus):
    """TensorFlow configured once for the session before any model is built here."""
    return two_cpus


def two_io_model(as_dict: bool = False):
    """Two inputs (integer ids through an Embedding, float features) and two outputs (5 logits, one sigmoid)."""
    import keras

    keras.utils.set_random_seed(1)
    ids = keras.Input((6,), dtype="int32", name="ids")
    feat = keras.Input((3,), name="feat")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(VOCAB, 4)(ids))
    hidden = keras.layers.Dense(8, activation="relu", name="hidden")(keras.layers.Concatenate()([pooled, feat]))
    cls = keras.layers.Dense(CLASSES, name="cls")(hidden)
    flag = keras.layers.Dense(1, activation="sigmoid", name="flag")(hidden)
    if as_dict:
        return keras.Model({"ids": ids, "feat": feat}, {"cls": cls, "flag": flag})
    return keras.Model([ids, feat], [cls, flag])


@pytest.fixture(scope="module")
def two_io_keras(tmp_path_factory, two_cpus) -> Path:
    """The two-input, two-output model saved uncompiled as .keras (once per module: tests only read it)."""
    path = tmp_path_factory.mktemp("two_io") / "two_io.keras"
    two_io_model().save(path)
    return path


@pytest.fixture(scope="module")
def compiled_h5(tmp_path_factory, two_cpus) -> Path:
    """A small Sequential model compiled with mean absolute error, saved as legacy .h5 (once per module)."""
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)], name="seq")
    model.compile(optimizer="adam", loss="mean_absolute_error")
    path = tmp_path_factory.mktemp("compiled") / "compiled.h5"
    model.save(path)
    return path


@pytest.fixture(scope="module")
def lambda_keras(tmp_path_factory, two_cpus) -> Path:
    """A model with a Lambda layer: Keras refuses its bytecode in safe mode (saved once per module)."""
    import keras

    inputs = keras.Input((4,))
    doubled = keras.layers.Lambda(lambda t: t * 2.0)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(doubled))
    path = tmp_path_factory.mktemp("lambda") / "lambda.keras"
    model.save(path)
    return path


def write_py(folder: Path, name: str, body: str) -> Path:
    """A Python model file with `body` (dedented)."""
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


PY_MODEL = """
    import keras
    import numpy as np
    import tensorflow as tf

    optimizer = "sgd"
    loss = "sparse_categorical_crossentropy"

    def build_model():
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3, activation="softmax")])

    def build_dataset(batch_size):
        rng = np.random.default_rng(0)
        x = rng.standard_normal((40, 4)).astype("float32")
        y = rng.integers(0, 3, size=40).astype("int32")
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
"""


@pytest.fixture
def py_model(tmp_path: Path) -> Path:
    """A .py with build_model, build_dataset, a loss name and an optimizer name."""
    return write_py(tmp_path, "my_model.py", PY_MODEL)


def save_text_vectorization_model(path: Path) -> Path:
    """A .keras text classifier whose first layer is a TextVectorization (a layer built on TensorFlow ops), saved at `path`."""
    import keras
    import numpy as np

    text = keras.layers.TextVectorization(max_tokens=50, output_sequence_length=8)
    text.adapt(np.array(["the cat sat on the mat", "a dog ran in the park"]))
    inputs = keras.Input((1,), dtype="string")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 4)(text(inputs)))
    keras.Model(inputs, keras.layers.Dense(2)(pooled)).save(path)
    return path

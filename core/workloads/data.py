"""Data sets: synthetic (pure device benchmark), shipped offline digits, and keras.datasets.

`load_arrays` gives numpy arrays; `make_dataset` turns them into the repeating,
batched, prefetched `tf.data.Dataset` the engine consumes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from core.config import RunConfig
from core.errors import ExplainedError
from core.formatting import format_value
from core.workloads.models import IMAGE, TEXT, TEXT_SEQUENCE_LENGTH, TEXT_VOCAB_SIZE, ModelSpec

RESOURCES = Path(__file__).resolve().parents[2] / "resources"
SYNTHETIC_EXAMPLES = 4096
SYNTHETIC_EPOCH_EXAMPLES = 60_000


class DataUnavailable(ExplainedError, RuntimeError):
    """A data set could not be loaded; the message says which file to place where."""


@dataclass(frozen=True)
class DatasetSpec:
    """A data set: what it holds, where it comes from, and which models it fits."""

    name: str
    title: str
    input_kind: str
    description: str
    cache_file: str = ""
    offline: bool = True
    example_shape: tuple[int, ...] = ()  # one example's shape; () for synthetic data, shaped like the model's input
    num_classes: int = 0  # 0 for synthetic data, which takes the model's


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "synthetic",
            "Synthetic",
            "any",
            "Random inputs in the model's shape, generated once and cached: measures the device, not the input pipeline.",
        ),
        DatasetSpec(
            "digits",
            "Digits 8x8 (shipped)",
            IMAGE,
            "1,797 handwritten digits, 8x8 grey (UCI, CC BY 4.0), shipped in resources/: trains offline.",
            example_shape=(8, 8, 1),
            num_classes=10,
        ),
        DatasetSpec(
            "mnist", "MNIST", IMAGE, "70,000 handwritten digits, 28x28 grey (keras.datasets).", "mnist.npz", False, (28, 28, 1), 10
        ),
        DatasetSpec(
            "fashion_mnist",
            "Fashion-MNIST",
            IMAGE,
            "70,000 clothing images, 28x28 grey (keras.datasets).",
            "fashion-mnist/",
            False,
            (28, 28, 1),
            10,
        ),
        DatasetSpec(
            "cifar10",
            "CIFAR-10",
            IMAGE,
            "60,000 colour images, 32x32x3, 10 classes (keras.datasets).",
            "cifar-10-batches-py.tar.gz",
            False,
            (32, 32, 3),
            10,
        ),
        DatasetSpec(
            "imdb",
            "IMDB reviews",
            TEXT,
            "50,000 movie reviews as word ids, 2 classes (keras.datasets).",
            "imdb.npz",
            False,
            (TEXT_SEQUENCE_LENGTH,),
            2,
        ),
    )
}


def model_input(dataset: str, model: ModelSpec) -> tuple[tuple[int, ...], int]:
    """(example shape, classes) `model` is built for when it trains on `dataset`, without loading the data."""
    spec = DATASETS.get(dataset)
    if spec is None or not spec.example_shape:
        return model.input_shape, model.num_classes
    return spec.example_shape, spec.num_classes


def load_arrays(dataset: str, model: ModelSpec, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """(x, y, num_classes) for training `model` on `dataset`; raises DataUnavailable offline."""
    if dataset == "synthetic":
        return _synthetic(model, seed)
    loader = _LOADERS[dataset]
    try:
        return loader()
    except DataUnavailable:
        raise
    except Exception as exc:  # keras raises plain Exception on a failed download
        spec = DATASETS[dataset]
        cache = keras_datasets_dir()
        raise DataUnavailable(
            f"Could not load {spec.title}: {exc}. This machine looks offline. Download it once while online, or place "
            f"{spec.cache_file} in {cache}/ by hand; the 'digits' and 'synthetic' data sets work offline."
        ) from None


def keras_datasets_dir() -> Path:
    """Where keras.datasets caches downloads ($KERAS_HOME/datasets, default ~/.keras/datasets)."""
    return Path(os.environ.get("KERAS_HOME", "~/.keras")).expanduser() / "datasets"


def steps_per_epoch(dataset: str, model: ModelSpec, batch_size: int) -> int:
    """Whole batches in one pass over the data (a synthetic epoch is 60,000 examples)."""
    if dataset == "synthetic":
        examples = SYNTHETIC_EPOCH_EXAMPLES
    else:
        examples = len(load_arrays(dataset, model)[1])
    return max(1, examples // batch_size)


def make_dataset(x: np.ndarray, y: np.ndarray, batch_size: int, seed: int, synthetic: bool):
    """An endless dataset of global batches (drop_remainder: static shapes for XLA and replicas)."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if synthetic:
        ds = ds.repeat().batch(batch_size, drop_remainder=True).take(max(1, SYNTHETIC_EXAMPLES // batch_size)).cache().repeat()
    else:
        ds = ds.shuffle(min(len(y), 10_000), seed=seed, reshuffle_each_iteration=True).repeat().batch(batch_size, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    # Nothing here to tune (in-memory tensors, no parallel map; prefetch keeps its own buffer
    # heuristic), and the autotune thread made deleting the iterator wait for it: 0.1-1.2 s after
    # every stopped run (benchmarks/stop_latency).
    options.autotune.enabled = False
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def _synthetic(model: ModelSpec, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    shape = (SYNTHETIC_EXAMPLES, *model.input_shape)
    x: np.ndarray
    if model.input_kind == TEXT:
        x = rng.integers(1, TEXT_VOCAB_SIZE, size=shape, dtype=np.int32)
    else:
        x = rng.standard_normal(shape, dtype=np.float32)
    y = rng.integers(0, model.num_classes, size=SYNTHETIC_EXAMPLES, dtype=np.int32)
    return x, y, model.num_classes


@cache
def _digits() -> tuple[np.ndarray, np.ndarray, int]:
    path = RESOURCES / "digits.npz"
    if not path.exists():
        raise DataUnavailable(f"The shipped digits file is missing: {path}. Reinstall Device Lab.")
    with np.load(path) as data:
        x = (data["x"].astype(np.float32) / 16.0)[..., None]
        y = data["y"].astype(np.int32)
    return x, y, 10


def _images(loader: Callable[[], Any]) -> tuple[np.ndarray, np.ndarray, int]:
    (x, y), _ = loader()
    x = x.astype(np.float32) / 255.0
    if x.ndim == 3:
        x = x[..., None]
    return x, y.reshape(-1).astype(np.int32), 10


@cache
def _mnist():
    import keras

    return _images(keras.datasets.mnist.load_data)


@cache
def _fashion_mnist():
    import keras

    return _images(keras.datasets.fashion_mnist.load_data)


@cache
def _cifar10():
    import keras

    return _images(keras.datasets.cifar10.load_data)


@cache
def _imdb():
    import keras

    (x, y), _ = keras.datasets.imdb.load_data(num_words=TEXT_VOCAB_SIZE)
    padded = keras.utils.pad_sequences(x, maxlen=TEXT_SEQUENCE_LENGTH, padding="post", truncating="post")
    return padded.astype(np.int32), y.astype(np.int32), 2


_LOADERS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, int]]] = {
    "digits": _digits,
    "mnist": _mnist,
    "fashion_mnist": _fashion_mnist,
    "cifar10": _cifar10,
    "imdb": _imdb,
}


def batch_warning(config: RunConfig, examples: int | None) -> str | None:
    """A batch larger than a real data set repeats its examples inside every batch; synthetic data is exempt.

    Synthetic data only measures the device, so repeats there change nothing;
    `examples` None (a user's build_dataset()) is a size not known in advance.
    """
    if config.dataset == "synthetic" or examples is None or config.batch_size <= examples:
        return None
    batch, size = format_value(config.batch_size, "count"), format_value(examples, "count")
    repeats = config.batch_size / examples
    return (
        f"The batch ({batch} examples) is larger than the {_data_title(config.dataset)} data set ({size} examples): "
        f"each batch holds every example about {repeats:.{1 if repeats < 10 else 0}f} times, so the loss says little "
        f"about learning. The speed figures stay valid; to train on the data, use a batch of at most {size}."
    )


def _data_title(dataset: str) -> str:
    return DATASETS[dataset].title if dataset in DATASETS else os.path.basename(dataset)

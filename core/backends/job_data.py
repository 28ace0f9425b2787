"""What a backend job trains on, as NumPy arrays and Keras compile arguments: no TensorFlow anywhere.

A sample model gets the same arrays the TensorFlow engine batches (synthetic
with the same seed, the shipped digits, a keras.datasets set); a model file
gets synthetic arrays from its signature or the user's `.npz`, and the losses
it trains with as Keras compile arguments. One epoch is whole batches only
(a whole number of calls), the data repeated when it holds fewer, so every
call has the same shapes and nothing is traced twice; where it holds enough,
the epoch is a view of the data, not a copy (a large `.npz` is held once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.config import RunConfig
from core.workloads.model_data import synthetic_arrays, synthetic_example_count
from core.workloads.model_file import ModelFileError
from core.workloads.workload import SampleWorkload, open_workload


@dataclass
class JobData:
    """The model to build, one epoch of (x, y), the compile losses, and whether the data is synthetic (not shuffled)."""

    workload: Any
    x: Any
    y: Any
    loss: Any
    loss_weights: Any
    synthetic: bool

    @property
    def examples(self) -> int:
        return len(_first(self.y))


def job_data(config: RunConfig) -> JobData:
    """The model, data and losses of `config` (ModelFileError / DataUnavailable when they cannot be had)."""
    import keras

    workload = open_workload(config.model_ref, config.dataset, config.seed)
    if isinstance(workload, SampleWorkload):
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return JobData(workload, workload.x, workload.y, loss, None, config.dataset == "synthetic")
    if config.model_sha256 and workload.source.sha256 != config.model_sha256:
        raise ModelFileError(workload.source.path, "the file changed since the run was set up: open it again to train what it holds now.")
    if workload.npz_arrays is not None:
        x, y, _ = workload.npz_arrays
    else:
        examples = synthetic_example_count(workload.signature, workload.losses)
        x, y = synthetic_arrays(workload.signature, workload.losses, examples, config.seed, workload.source.path)
    losses = [compile_loss(choice) for choice in workload.losses]
    weights = [choice.weight for choice in workload.losses]
    single = len(losses) == 1
    return JobData(workload, x, y, losses[0] if single else losses, None if single else weights, config.dataset == "synthetic")


def compile_loss(choice: Any) -> Any:
    """A Keras loss (mean over the batch) for one output's LossChoice, as the TF engine's per-example loss averages it."""
    import keras

    if choice.config is None:
        inferred = {
            "sparse_categorical_crossentropy": lambda: keras.losses.SparseCategoricalCrossentropy(from_logits=choice.from_logits),
            "binary_crossentropy": lambda: keras.losses.BinaryCrossentropy(from_logits=choice.from_logits),
            "mean_squared_error": lambda: keras.losses.MeanSquaredError(),
        }
        return inferred[choice.loss]()
    return keras.losses.get(choice.config) if isinstance(choice.config, (str, dict)) else choice.config


def epoch_arrays(data: JobData, batch_size: int, steps_per_call: int, start_batch: int = 0) -> tuple[Any, Any, int]:
    """(x, y, batches): the data cut or repeated to whole calls of whole batches (at least one call).

    The epoch begins at `start_batch`, the batches before it last, so that epochs after a warm-up
    of that many batches go on in the order TensorFlow's runs take (the data's, cycled).
    """
    examples = data.examples
    batches = batches_per_epoch(examples, batch_size, steps_per_call)
    wanted = batches * batch_size
    if wanted <= examples and (start_batch == 0 or not data.synthetic):
        return first_examples(data.x, wanted), first_examples(data.y, wanted), batches  # shuffled each epoch: its start does not matter
    index = (np.arange(wanted) + start_batch * batch_size) % wanted % examples
    return _map(data.x, lambda array: array[index]), _map(data.y, lambda array: array[index]), batches


def batches_per_epoch(examples: int, batch_size: int, steps_per_call: int) -> int:
    """Batches in one of a backend job's epochs: the data's whole batches, a whole number of calls, one call at least."""
    batches = max(1, examples // batch_size)
    return max(steps_per_call, batches // steps_per_call * steps_per_call)


def first_examples(value: Any, count: int) -> Any:
    """The first `count` examples of an array, or of each array in a dict or list of model inputs or targets: views, no copy."""
    return _map(value, lambda array: array[:count])


def _map(value: Any, cut: Any) -> Any:
    if isinstance(value, dict):
        return {key: cut(np.asarray(array)) for key, array in value.items()}
    if isinstance(value, (list, tuple)):
        return [cut(np.asarray(array)) for array in value]
    return cut(np.asarray(value))


def _first(value: Any) -> Any:
    if isinstance(value, dict):
        return next(iter(value.values()))
    if isinstance(value, (list, tuple)):
        return value[0]
    return value

"""The same initial weights on every backend: a sample model's starting weights as the TensorFlow engine draws them.

Keras draws initial weights with the backend's own random generator, so one
seed gives different weights on TensorFlow, JAX and PyTorch. For a sample
model the app (which runs Keras on TensorFlow) builds it as the engine does
and hands its weights to the job in an `.npz`; a `.keras`/`.h5` file carries
its own weights. A `.py`'s build_model() and an app without TensorFlow leave
the job to draw its own (the run says so).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

from core.config import RunConfig
from core.workloads.models import get_model_spec
from core.workloads.workload import SampleWorkload, is_model_file

NOT_SHARED = "initial weights drawn by {backend}'s own random generator: the same seed gives other weights than on TensorFlow"


def write_initial_weights(config: RunConfig, folder: str | os.PathLike) -> str | None:
    """The `.npz` of the weights a TensorFlow run of this sample model starts from; None where there are none to share."""
    if is_model_file(config.model) or importlib.util.find_spec("tensorflow") is None:
        return None
    import keras

    if keras.backend.backend() != "tensorflow":
        return None
    workload = SampleWorkload(get_model_spec(config.model), config.dataset, config.seed)
    model = workload.build_model(seed=config.seed)
    path = os.path.join(folder, "initial_weights.npz")
    np.savez(path, *model.get_weights())
    return path


def load_initial_weights(model, path: str) -> None:
    """Give `model` the weights written by `write_initial_weights`, in order."""
    with np.load(path) as saved:
        model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])

"""One interface for what a run trains: a sample model on a data set, or the user's own model file.

`open_workload(model_ref, dataset, seed)` gives an object the engine and the probes
use alike (`model_ref`: a `ModelRef`, the model and how its file may be opened): `build_model(seed)` inside `strategy.scope()`, `make_dataset(batch,
seed)`, `loss_fn(y, logits)` (per example), `make_optimizer(lr, setting)` (None:
the run's optimizer setting), `steps_per_epoch(batch)`, `num_examples` and `run_notes(optimizer)` (for the run's details).
`is_model_file` tells a file path from a sample model's name without opening anything;
`check_workload(config)` checks a run's model and data against the catalogue (a plain
`RunConfig` knows none).
"""

from __future__ import annotations

import os
from typing import Any

from core.config import FILE_OPTIMIZER, NPZ_SUFFIX, OPTIMIZERS, ConfigError, ModelRef, RunConfig, names_a_file
from core.workloads import data as data_module
from core.workloads.model_file import check_content, check_model_path
from core.workloads.models import MODELS, ModelSpec, get_model_spec, param_count


def is_model_file(model: str) -> bool:
    """True when `model` names a file or folder (a path, a known model-file suffix, or a folder here), not a sample model."""
    if not isinstance(model, str) or not model or model in MODELS:
        return False
    return names_a_file(model) or os.path.exists(model)


def check_workload(config: RunConfig) -> RunConfig:
    """`config` checked against the catalogue: a sample model and a data set it accepts, or a model file with data it can
    take (whether the file opens is checked where it is opened); a model file named bare (a folder here) made absolute.

    Raises ConfigError naming the field, the value and what is allowed.
    """
    from core.workloads.user_workload import PYTHON_DATA, SYNTHETIC

    if is_model_file(config.model):
        if not os.path.isabs(config.model):
            config = config.with_changes(model=os.path.abspath(config.model))
        if config.dataset not in (SYNTHETIC, PYTHON_DATA) and not config.dataset.lower().endswith(NPZ_SUFFIX):
            raise ConfigError("dataset", config.dataset, f"for a model file: {SYNTHETIC}, {PYTHON_DATA} (a .py's) or an .npz file")
        return config
    if config.model not in MODELS:
        raise ConfigError("model", config.model, ", ".join(MODELS) + ", or a .keras, .h5 or .py model file")
    if config.custom_objects:
        raise ConfigError("custom_objects", config.custom_objects, "none for a sample model: custom classes belong to a model file")
    datasets = data_module.DATASETS
    if config.dataset not in datasets:
        own_file = " (an .npz file is for your own model file: --model FILE)" if config.dataset.lower().endswith(NPZ_SUFFIX) else ""
        raise ConfigError("dataset", config.dataset, f"for a sample model: {', '.join(datasets)}{own_file}")
    spec = MODELS[config.model]
    if not spec.accepts(datasets[config.dataset]):
        usable = [name for name, ds in datasets.items() if spec.accepts(ds)]
        raise ConfigError("dataset", config.dataset, f"for model {config.model!r}: " + ", ".join(usable))
    if config.optimizer == FILE_OPTIMIZER:
        raise ConfigError("optimizer", config.optimizer, ", ".join(OPTIMIZERS))
    return config


def model_title(model: str) -> str:
    """A sample model's title, or a model file's name."""
    if model in MODELS:
        return MODELS[model].title
    return os.path.basename(str(model).rstrip("/" + os.sep)) or str(model or "model")


class SampleWorkload:
    """A sample model and one of the shipped (or downloadable) data sets, loaded into memory."""

    def __init__(self, spec: ModelSpec, dataset: str, seed: int = 0) -> None:
        self.spec = spec
        self.dataset = dataset
        self.x, self.y, self.num_classes = data_module.load_arrays(dataset, spec, seed)

    @property
    def num_examples(self) -> int:
        return len(self.y)

    def steps_per_epoch(self, global_batch_size: int) -> int:
        return data_module.steps_per_epoch(self.dataset, self.spec, global_batch_size)

    def build_model(self, seed: int = 0) -> Any:
        return self.spec.build(self.x.shape[1:], self.num_classes, seed=seed)

    def make_dataset(self, global_batch_size: int, seed: int = 0) -> Any:
        return data_module.make_dataset(self.x, self.y, global_batch_size, seed, self.dataset == "synthetic")

    def loss_fn(self, y_true: Any, logits: Any) -> Any:
        import keras

        return keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)

    def run_notes(self, optimizer_setting: str) -> list[str]:
        """Nothing to add to a sample model's run details."""
        return []

    def make_optimizer(self, learning_rate: float, setting: str = "") -> None:
        """Sample models train with the run's optimizer setting."""
        return None


def open_workload(model: ModelRef, dataset: str, seed: int = 0) -> Any:
    """The workload for a run's `model` and `dataset` (a SampleWorkload or a UserWorkload); `model.sha256` is not checked.

    Raises ModelFileError (a file that cannot be used) or DataUnavailable (a data set that cannot be loaded).
    """
    if is_model_file(model.path_or_name):
        from core.workloads.user_workload import open_user_workload

        return open_user_workload(
            model.path_or_name,
            trust=model.trust,
            data=dataset,
            vocab=model.vocab,
            custom_objects=model.custom_objects or None,
            vocab_by_input=model.vocab_by_input,
        )
    return SampleWorkload(get_model_spec(model.path_or_name), dataset, seed)


def check_model_file(model: ModelRef) -> None:
    """For a model file: raise ModelFileError unless it is there, usable and of the content the run was set up with.

    Reads the file's bytes only (TensorFlow untouched): a cluster worker calls it
    first, so a worker whose file differs says so before it joins the cluster.
    A sample model's name passes.
    """
    if is_model_file(model.path_or_name):
        check_content(check_model_path(model.path_or_name, model.trust, model.custom_objects or None), model.sha256)


def open_checked_workload(model: ModelRef, dataset: str, seed: int) -> Any:
    """`open_workload`; for a model file, refused when its content is not `model.sha256`, the one the run was set up with."""
    workload = open_workload(model, dataset, seed)
    source = getattr(workload, "source", None)
    if source is not None:
        check_content(source, model.sha256)
    return workload


def sample_param_count(model: str, dataset: str) -> int:
    """Parameters of the sample model `model` as it is built to train on `dataset` (imports TF)."""
    spec = get_model_spec(model)
    return param_count(model, *data_module.model_input(dataset, spec))

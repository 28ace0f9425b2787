"""Device Lab's engine, usable without the window: `from core import RunConfig, run_training`.

The public API is the names below; everything else is imported from the
module where it lives (`core.machine.inspect.inspect_devices`,
`core.history.store.RunStore`, ...). Nothing here imports TensorFlow, and
`run_training` (which brings numpy and the engine) loads on first use, so
`import core.config` stays cheap for the window's start-up. Importing `core`
keeps TensorFlow's later import from loading JAX (`core.tensorflow_import`).
"""

from typing import Any

from core.config import ConfigError, RunConfig
from core.results import FIGURES, RunResult, RunStatus, StepRecord
from core.tensorflow_import import skip_jax_in_tensorflow_import

skip_jax_in_tensorflow_import()

__all__ = ["FIGURES", "ConfigError", "RunConfig", "RunResult", "RunStatus", "StepRecord", "run_training"]


def __getattr__(name: str) -> Any:
    if name == "run_training":
        from core.runner import run_training

        return run_training
    raise AttributeError(f"module 'core' has no attribute {name!r}")

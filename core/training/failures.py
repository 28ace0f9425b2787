"""Why a run failed, in words: the exceptions a run raises on purpose and `explain_failure` for any of them.

The run, compare and sweep commands and the window all turn an exception into
the same paragraph (what happened and the likely fix) through `explain_failure`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

from core.config import ConfigError, RunConfig
from core.results import StepRecord
from core.training.strategies import TpuUnavailable
from core.workloads import data as data_module
from core.workloads.model_file import ModelFileError


class NonFiniteLoss(RuntimeError):
    """The loss became NaN or infinite."""


def divergence_message(records: Sequence[StepRecord], config: RunConfig) -> str:
    """What to say when a step's loss is NaN or infinite (and what to change), or "" when every loss is finite."""
    bad = next((record for record in records if not math.isfinite(record.loss)), None)
    if bad is None:
        return ""
    return f"The loss became {bad.loss} at step {bad.step}: training diverged. Lower the learning rate (now {config.learning_rate:g})" + (
        " or use bfloat16 instead of float16." if config.precision == "float16" else "."
    )


def explain_failure(exc: BaseException) -> str:
    """One readable paragraph: what happened and the likely fix."""
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
    if isinstance(exc, (ConfigError, data_module.DataUnavailable, NonFiniteLoss, TpuUnavailable, ModelFileError)):
        return str(exc)
    tf = sys.modules.get("tensorflow")  # a TensorFlow error comes from a loaded TensorFlow: a JAX or PyTorch job's app may have none
    if tf is None or not hasattr(tf, "errors"):
        return f"{type(exc).__name__}: {first_line}"
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return f"Out of memory on the device: {first_line}. Lower the batch size, pick a smaller model, or use mixed precision."
    if isinstance(exc, tf.errors.InvalidArgumentError):
        return f"TensorFlow rejected the computation: {first_line}. Check the data set fits the model and the batch size divides across replicas."
    if isinstance(exc, tf.errors.UnavailableError):
        return f"A device or worker became unreachable: {first_line}."
    return f"{type(exc).__name__}: {first_line}"

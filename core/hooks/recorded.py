"""The hooks a run had on, recorded with its config: the window does as `main.py run` does."""

from __future__ import annotations

from collections.abc import Sequence

from core.config import RunConfig
from core.hooks.profiler import ProfilerCapture
from core.hooks.tensorboard import TensorBoardWriter
from core.training.callbacks import RunCallback


def with_recorded_hooks(config: RunConfig, callbacks: Sequence[RunCallback]) -> RunConfig:
    """`config` recording the hooks among `callbacks` (TensorBoard folder, profiled steps) in `config.hooks`."""
    tensorboard = next((c.directory.base for c in callbacks if isinstance(c, TensorBoardWriter)), None)
    profile = next(((c.first_step, c.last_step) for c in callbacks if isinstance(c, ProfilerCapture)), None)
    return config.with_hooks(tensorboard, profile)

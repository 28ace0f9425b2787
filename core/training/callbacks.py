"""A small hook API into a run, in the spirit of Keras callbacks.

Hooks are called in the thread that trains, between calls of the compiled
training function, so they never slow a step down. Subclass `RunCallback` and
override what you need; all methods default to doing nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.config import RunConfig
    from core.results import RunResult, StepRecord


@dataclass(frozen=True)
class RunContext:
    """What a hook may want to know once the run is set up."""

    config: RunConfig
    total_steps: int
    replicas: int
    device_names: tuple[str, ...]
    model: Any


class RunCallback:
    """Base class: override any of the hooks below."""

    def on_run_start(self, context: RunContext) -> None:
        """Model, strategy and data are ready; no step has run yet."""

    def on_call_begin(self, first_step: int, steps: int) -> None:
        """The next call will run steps first_step .. first_step + steps - 1 (1-based)."""

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        """One call finished; its per-step records, in order."""

    def on_run_end(self, result: RunResult) -> None:
        """The run ended (completed, stopped or failed); called even after a failure."""

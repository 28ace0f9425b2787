"""`StepsTo(function)`: a plain `function(records)` as a run hook, for tests that only watch the steps go by."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.results import StepRecord
from core.training.hooks import RunHook


class StepsTo(RunHook):
    """Hands each call's step records to `function`."""

    def __init__(self, function: Callable[[Sequence[StepRecord]], None]):
        self._function = function

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        self._function(records)

"""The FLOPs hook: a run's training FLOPs per step, counted once as it starts and written into its result.

The counting itself is `core.training.flops` (TensorFlow's traced graph); a JAX or PyTorch job
counts its own in its child (`core.backends.step_flops`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from core.training.flops import METHOD, TRAINING_TO_FORWARD, count_forward
from core.training.hooks import RunContext, RunHook

if TYPE_CHECKING:
    from core.results import RunResult


def partial_warning(uncounted: tuple[str, ...]) -> str:
    """The run's warning when its FLOPs are partial: which layers, and what it means for % of peak."""
    return f"FLOPs are partial: not counted in {', '.join(uncounted)}. Achieved FLOP/s and % of peak are lower bounds."


class FlopsCounter(RunHook):
    """Counts the model's training FLOPs per step when a run starts (before any step is timed), and adds them to the result.

    Keeps the first count it makes, so one counter can serve every run of a
    comparison (same model, same global batch). Counting never fails a run:
    a problem leaves `flops` None and says why in `method`. The result gets
    `flops_per_step`, `flops_uncounted`, `flops_method` and, when the count is
    partial, a warning. A run on another backend (its model in a child process)
    is left alone: its job counts its own (`core.backends.step_flops`).
    """

    def __init__(self) -> None:
        self.flops: float | None = None
        self.method = "not counted"
        self.params: int | None = None
        self.uncounted: tuple[str, ...] = ()
        self.tried = False  # a count was attempted: a run it never saw (set up failed) is left as it is

    def on_run_start(self, context: RunContext) -> None:
        if self.flops is not None or context.model is None:
            return
        self.tried = True
        try:
            self.params = int(context.model.count_params())
            count = count_forward(context.model, context.config.batch_size, context.input_shapes)
        except Exception as exc:  # instrumentation must never end a run
            self.method = f"not counted: {type(exc).__name__}: {exc}"
            return
        self.flops, self.method, self.uncounted = TRAINING_TO_FORWARD * count.flops, METHOD, count.uncounted

    def amend_result(self, result: RunResult) -> RunResult:
        if result.backend != "tensorflow":
            return result
        if self.flops is None:
            return replace(result, flops_method=self.method) if self.tried else result
        warnings = (*result.warnings, partial_warning(self.uncounted)) if self.uncounted else result.warnings
        return replace(result, flops_per_step=self.flops, flops_uncounted=self.uncounted, flops_method=self.method, warnings=warnings)

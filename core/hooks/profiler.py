"""Profile steps A–B of a run with the TensorFlow profiler, and the callbacks a run gets from the UI.

The trace lands in the run's log folder under `plugins/profile/<time>/`, where
TensorBoard's Profile tab (package `tensorboard-plugin-profile`) finds it.
The engine runs `steps_per_call` steps per call of one compiled function, and
the profiler can only start and stop between calls, so the capture covers
whole calls: with 4 steps per call, "steps 3–5" records steps 1–8.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import ConfigError, RunConfig
from core.hooks.tensorboard import RunDirectory, TensorBoardWriter, as_run_directory
from core.training.callbacks import RunCallback, RunContext

if TYPE_CHECKING:
    from core.results import RunResult, StepRecord

PROFILE_FIELD = "profile_steps"

log = logging.getLogger(__name__)


def check_profile_steps(first_step: int, last_step: int, total_steps: int | None = None) -> None:
    """Raise ConfigError unless 1 <= first_step <= last_step (<= total_steps when known)."""
    given = (first_step, last_step)
    for value in given:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(PROFILE_FIELD, given, "two whole step numbers A-B, e.g. 3-5")
    if first_step < 1:
        raise ConfigError(PROFILE_FIELD, given, "a first step of 1 or more (steps count from 1)")
    if last_step < first_step:
        raise ConfigError(PROFILE_FIELD, given, "a last step at or after the first step, e.g. 3-5")
    if total_steps is not None and last_step > total_steps:
        raise ConfigError(PROFILE_FIELD, given, f"steps within the run's {total_steps} steps")


class ProfilerCapture(RunCallback):
    """Runs the TensorFlow profiler over steps `first_step`..`last_step` (rounded out to whole calls).

    Always stops the profiler when the run ends, also after a failure or a stop.
    """

    def __init__(self, logdir: str | Path | RunDirectory, first_step: int, last_step: int) -> None:
        check_profile_steps(first_step, last_step)
        self.directory = as_run_directory(logdir)
        self.first_step = first_step
        self.last_step = last_step
        self._active = False
        self._captured: tuple[int, int] | None = None
        self._steps_per_call = 1

    @property
    def trace_dir(self) -> Path | None:
        """`<run folder>/plugins/profile` (None before the run started)."""
        run_dir = self.directory.path
        return None if run_dir is None else run_dir / "plugins" / "profile"

    @property
    def captured(self) -> tuple[int, int] | None:
        """First and last step the trace actually covers; None if nothing was captured."""
        return self._captured

    def on_run_start(self, context: RunContext) -> None:
        check_profile_steps(self.first_step, self.last_step, context.total_steps)
        self.directory.resolve(context)
        self._steps_per_call = context.config.steps_per_call
        self._active = False
        self._captured = None

    def on_call_begin(self, first_step: int, steps: int) -> None:
        last_in_call = first_step + steps - 1
        if self._active:
            self._captured = (self._captured[0], last_in_call) if self._captured else None
        elif self._captured is None and first_step <= self.last_step and last_in_call >= self.first_step:
            self._start()
            self._captured = (first_step, last_in_call)

    def on_steps(self, records: Sequence[StepRecord]) -> None:
        if self._active and records and records[-1].step >= self.last_step:
            self._stop()

    def on_run_end(self, result: RunResult) -> None:
        if self._active:
            try:
                self._stop()
            except Exception:  # a hook after the run must not turn a result into a crash
                log.exception("Could not stop the TensorFlow profiler cleanly")

    def how_to_view(self) -> str:
        """Where the trace is and how to open it, in words for the user."""
        if self._captured is None or self.trace_dir is None:
            return f"No profile was captured: the run ended before step {self.first_step}."
        first, last = self._captured
        lines = [f"Profile of steps {first}–{last} saved under {self.trace_dir}."]
        if (first, last) != (self.first_step, self.last_step):
            lines.append(
                f"You asked for steps {self.first_step}–{self.last_step}; the profiler starts and stops "
                f"between calls and this run did {self._steps_per_call} steps per call, so whole calls were captured."
            )
        lines.append(
            f"To view it: tensorboard --logdir {self.directory.base}, then the Profile tab "
            "(needs pip install tensorboard tensorboard-plugin-profile)."
        )
        return "\n".join(lines)

    def _start(self) -> None:
        import tensorflow as tf

        try:
            tf.profiler.experimental.start(str(self.directory.path))
        except tf.errors.AlreadyExistsError as exc:
            raise RuntimeError(
                "The TensorFlow profiler is already running in this process (another capture); "
                "wait until it has finished, then profile again."
            ) from exc
        self._active = True

    def _stop(self) -> None:
        import tensorflow as tf

        self._active = False
        tf.profiler.experimental.stop()


def run_callbacks_for(
    config: RunConfig,
    tensorboard_dir: str | Path | None,
    profile_steps: tuple[int, int] | None,
) -> list[RunCallback]:
    """The callbacks that give a run TensorBoard scalars and/or a profile, sharing one run folder.

    A profile without a TensorBoard folder goes under `<app log folder>/profiles`.
    Raises ConfigError when the profile range does not fit the run, or the run
    is multi-worker (its steps run in worker processes this one cannot profile).
    """
    if tensorboard_dir is None and profile_steps is None:
        return []
    if profile_steps is not None:
        from core.training.engine import total_steps

        if config.strategy == "multi-worker":
            raise ConfigError(
                PROFILE_FIELD,
                profile_steps,
                "no profile for multi-worker runs (the workers train in other processes): profile a one-device or mirrored run",
            )
        check_profile_steps(*profile_steps, total_steps=total_steps(config))
    if tensorboard_dir is None:
        from core.logs import default_log_dir

        base: str | Path = default_log_dir() / "profiles"
    else:
        base = tensorboard_dir
    directory = RunDirectory(base)
    callbacks: list[RunCallback] = []
    if tensorboard_dir is not None:
        callbacks.append(TensorBoardWriter(directory))
    if profile_steps is not None:
        callbacks.append(ProfilerCapture(directory, *profile_steps))
    return callbacks

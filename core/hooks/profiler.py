"""Profile steps A–B of a run with the TensorFlow profiler, and the logging hooks a run's config asks for.

The trace lands in the run's log folder under `plugins/profile/<time>/`, where
TensorBoard's Profile tab (package `tensorboard-plugin-profile`) finds it, and
`profile_report` / core.hooks.trace_summary read its op breakdown directly.
The engine runs `steps_per_call` steps per call of one compiled function, and
the profiler can only start and stop between calls, so the capture covers
whole calls: with 4 steps per call, "steps 3–5" records steps 1–8. Those calls,
and the call after them (it pays for stopping the profiler and writing the
trace), are set apart from the run's steady-state statistics, like warm-up.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import PROFILE_FIELD, ConfigError, RunConfig, check_step_range
from core.hooks.tensorboard import RunDirectory, TensorBoardWriter, as_run_directory
from core.hooks.trace_summary import TraceUnreadable, format_top_ops, summarize_trace
from core.training.hooks import RunContext, RunHook
from core.training.metrics import StepRange, summarize

if TYPE_CHECKING:
    from core.results import RunResult, StepRecord

log = logging.getLogger(__name__)


def check_profile_steps(first_step: int, last_step: int, total_steps: int | None = None) -> None:
    """Raise ConfigError unless 1 <= first_step <= last_step (<= total_steps when known)."""
    check_step_range(first_step, last_step)
    if total_steps is not None and last_step > total_steps:
        raise ConfigError(PROFILE_FIELD, (first_step, last_step), f"steps within the run's {total_steps} steps")


class ProfilerCapture(RunHook):
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
        self._stop_paid_by: StepRange | None = None
        self._stopped_in_run = False
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

    @property
    def set_apart(self) -> list[StepRange]:
        """The steps the profiler slowed: the captured calls and the call that paid for stopping it."""
        return [steps for steps in (self._captured, self._stop_paid_by) if steps is not None]

    def on_run_start(self, context: RunContext) -> None:
        check_profile_steps(self.first_step, self.last_step, context.total_steps)
        self.directory.resolve(context)
        self._steps_per_call = context.config.steps_per_call
        self._active = False
        self._captured = None
        self._stop_paid_by = None
        self._stopped_in_run = False

    def on_call_begin(self, first_step: int, steps: int) -> None:
        last_in_call = first_step + steps - 1
        if self._stopped_in_run and self._stop_paid_by is None:
            self._stop_paid_by = (first_step, last_in_call)
        if self._active:
            self._captured = (self._captured[0], last_in_call) if self._captured else None
        elif self._captured is None and first_step <= self.last_step and last_in_call >= self.first_step:
            self._start()
            self._captured = (first_step, last_in_call)

    def on_step_records(self, records: Sequence[StepRecord]) -> None:
        if self._active and records and records[-1].step >= self.last_step:
            self._stop()
            self._stopped_in_run = True

    def amend_result(self, result: RunResult) -> RunResult:
        """The statistics again without the profiled calls (and the one after), which are named in a warning."""
        stats = summarize(result.step_times_s, result.warmup_steps, int(result.config.get("batch_size") or 0), self.set_apart)
        if not stats.apart_steps or stats.apart_s is None:
            return result
        profiled = _steps_text(self._captured or self.set_apart[0])
        paid = f" and {_steps_text(self._stop_paid_by)} (stopping it)" if self._stop_paid_by else ""
        steady = f"; steady state {stats.median_ms:.3g} ms" if stats.median_ms is not None else ""
        note = (
            f"{profiled.capitalize()} ran under the profiler{paid}: {stats.apart_steps} steps, "
            f"{stats.apart_s * 1e3 / stats.apart_steps:.3g} ms each on average{steady}. "
            "They are left out of the statistics, like warm-up."
        )
        return dataclasses.replace(result, **stats.result_fields(), warnings=(*result.warnings, note))

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
        if profile_plugin_installed():
            lines.append(f"Full trace (timeline, input pipeline): tensorboard --logdir {self.directory.base}, then the Profile tab.")
        else:
            lines.append(
                f"For the full trace (timeline, input pipeline): pip install tensorboard tensorboard-plugin-profile, "
                f"then tensorboard --logdir {self.directory.base} and open the Profile tab."
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


def _steps_text(steps: StepRange) -> str:
    first, last = steps
    return f"step {first}" if first == last else f"steps {first}–{last}"


def profile_plugin_installed() -> bool:
    """Whether TensorBoard's Profile tab can be had here (tensorboard-plugin-profile, or its successor xprof)."""
    return any(importlib.util.find_spec(name) is not None for name in ("tensorboard_plugin_profile", "xprof"))


def profile_report(capture: ProfilerCapture, limit: int = 10) -> str:
    """Where the trace is, how to open it, and its top `limit` ops by time (or why they cannot be read)."""
    text = capture.how_to_view()
    if capture.captured is None or capture.trace_dir is None:
        return text
    try:
        return f"{text}\n{format_top_ops(summarize_trace(capture.trace_dir), limit)}"
    except (TraceUnreadable, OSError) as exc:
        return f"{text}\nThe op breakdown could not be read: {exc}"


def check_profile(config: RunConfig) -> None:
    """Raise ConfigError unless the profile `config.hooks` asks for fits the run: within its steps, and not multi-worker."""
    profile = config.hooks.profile
    if profile is None:
        return
    if config.strategy == "multi-worker":
        raise ConfigError(
            PROFILE_FIELD,
            profile,
            "no profile for multi-worker runs (the workers train in other processes): profile a one-device or mirrored run",
        )
    from core.training.engine import total_steps

    check_profile_steps(*profile, total_steps=total_steps(config))


def logging_hooks(config: RunConfig) -> tuple[TensorBoardWriter | None, ProfilerCapture | None]:
    """The TensorBoard writer and the profiler capture `config.hooks` asks for (None for each it does not), sharing one run folder.

    A profile without a TensorBoard folder goes under `<app log folder>/profiles`.
    Raises ConfigError when the profile does not fit the run (`check_profile`).
    """
    settings = config.hooks
    check_profile(config)
    if not settings:
        return None, None
    if settings.tensorboard:
        base: str | Path = settings.tensorboard
    else:
        from core.logs import default_log_dir

        base = default_log_dir() / "profiles"
    directory = RunDirectory(base)
    writer = TensorBoardWriter(directory) if settings.tensorboard else None
    capture = ProfilerCapture(directory, *settings.profile) if settings.profile else None
    return writer, capture

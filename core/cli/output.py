"""What the CLI prints: progress lines, a run's result, plain tables."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from core.diagnosis.readout import conditions_text, memory_estimate_text, peak_text
from core.formatting import NA, format_bytes, format_elapsed, format_value
from core.hooks.energy import energy_text
from core.results import FIGURES, Figure, RunResult, StepRecord

PROGRESS_INTERVAL_S = 0.5  # the default time between progress lines (benchmarks/crash_loss.py sets 0: every call)
TICK_S = 1.0  # the elapsed time of the first call, said this often while it blocks


def first_call_text(elapsed_s: float, stopping: bool = False) -> str:
    """ "building the model and compiling the step… 1 min 12 s"; after a stop, that it takes effect when the call ends."""
    if stopping:
        return f"stopping when the first call ends (compiling cannot be interrupted)… {format_elapsed(elapsed_s)}"
    return f"building the model and compiling the step… {format_elapsed(elapsed_s)}"


class ProgressPrinter:
    """An `on_step_records` function printing one progress line to stderr at most every `interval_s` (twice a second)."""

    def __init__(self, total_steps: int, batch_size: int, stream=None, interval_s: float | None = None):
        self.total_steps = total_steps
        self.batch_size = batch_size
        self.stream = stream or sys.stderr
        self.interval_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
        self._last_print = 0.0
        self._last: StepRecord | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def ticking(self, stop_event: threading.Event | None = None) -> Iterator[None]:
        """Until the first steps arrive, a line with the elapsed time once a second (the engine's first call blocks).

        With `stop_event` set, the line says the stop takes effect when that call ends.
        """
        done = threading.Event()
        started = time.monotonic()
        ticked = threading.Event()

        def tick() -> None:
            while not done.wait(TICK_S):
                with self._lock:
                    if self._last is not None:
                        return
                    stopping = stop_event is not None and stop_event.is_set()
                    self.stream.write(f"\r{first_call_text(time.monotonic() - started, stopping)}   ")
                    self.stream.flush()
                    ticked.set()

        thread = threading.Thread(target=tick, name="first-call-ticker", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
            if ticked.is_set() and self._last is None:  # no step came: end the ticking line before what follows
                self.stream.write("\n")

    def __call__(self, records: Sequence[StepRecord]) -> None:
        with self._lock:
            self._record(records)

    def _record(self, records: Sequence[StepRecord]) -> None:
        self._last = records[-1]
        now = time.monotonic()
        if now - self._last_print >= self.interval_s or self._last.step == self.total_steps:
            self._last_print = now
            self._print(self._last)

    def _print(self, r: StepRecord) -> None:
        rate = self.batch_size / r.step_time_s if r.step_time_s > 0 else 0.0
        tag = " (warm-up)" if r.warmup else ""
        self.stream.write(
            f"\rstep {r.step}/{self.total_steps}  loss {format_value(r.loss, 'loss')}  {format_value(r.step_time_s * 1e3, 'ms')} ms/step  "
            f"{rate:,.0f} samples/s{tag}   "
        )
        self.stream.flush()

    def finish(self) -> None:
        if self._last is not None:
            self.stream.write("\n")


def format_result(result: RunResult) -> str:
    """The result as aligned 'name: value' lines, the verdict's evidence and advice after the figures."""
    s = result.summary()
    lines = [
        ("status", s["status"]),
        ("model", s["model"]),
        ("data", s["dataset"]),
        ("strategy", s["strategy"]),
        ("devices", ", ".join(result.environment.get("devices", [])) or "-"),
        ("replicas", s["replicas"]),
        ("steps", s["steps"]),
        *((f.title.lower(), _figure_text(f, s, result)) for f in FIGURES),
    ]
    memory = memory_estimate_text(result.memory_estimate)
    lines += [
        (name, value)
        for name, value in (
            ("memory added", _added_text(result)),
            ("memory estimate", memory),
            ("evidence", result.bound_evidence),
            ("advice", result.advice),
        )
        if value
    ]
    lines += [("warning", w) for w in s["warnings"]]
    conditions = conditions_text(result.conditions)
    if conditions:
        lines.append(("conditions", conditions.removeprefix("Conditions")))
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in lines)


def format_columns(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain left-aligned text table."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _added_text(result: RunResult) -> str:
    """'12.5 MiB (host process RSS peak less its RSS when the run started)', '' when not measured."""
    if result.memory_added_bytes is None:
        return ""
    return f"{format_bytes(result.memory_added_bytes)} ({result.memory_added_source})"


def _figure_text(figure: Figure, summary: dict[str, Any], result: RunResult) -> str:
    """A figure's value for `format_result`, with what it needs to be read right (warm-up steps, memory source, ceiling)."""
    value = summary[figure.name]
    text = figure.format(value, NA)
    if figure.name == "pct_of_measured_peak":
        return peak_text(result)
    if figure.name == "joules_per_sample" and value is None:
        return energy_text(result).removeprefix("energy: ")  # not measured, and why
    note = {
        "warmup_s": f"{summary['warmup_steps']} step{'' if summary['warmup_steps'] == 1 else 's'}: tracing and compilation",
        "peak_memory_bytes": summary["peak_memory_source"],
    }.get(figure.name)
    return f"{text} ({note})" if value is not None and note else text


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout to stderr while the block runs, so stdout holds only the result.

    Keras prints "Downloading data from ..." and a library may print anything
    while a run trains: `sys.stdout` and file descriptor 1 (native code) both
    point at stderr until the block ends.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 (stdout closed): Python's own writes are all there is to move
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)

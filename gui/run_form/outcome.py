"""What the run form says about a run: the progress bar's text and the last result, as HTML.

Figures are written the way `core.results.FIGURES` defines them, so the form,
the tables and the exports agree on every number. A completed run's result
line ends with its verdict (what bounds its speed, % of the measured ceiling
with the estimate beside it, the evidence) and one line of advice.
"""

from __future__ import annotations

import html

from core.diagnosis.readout import memory_estimate_text, peak_text
from core.formatting import format_duration, format_elapsed, format_value
from core.results import FIGURES_BY_NAME, RunResult, RunStatus
from gui.controllers.training_worker import FinishedRun
from gui.plotting.theme import FAILED_COLOR, SUCCESS_COLOR, WARNING_COLOR

EVIDENCE_COLOR = "#555555"
DIAGNOSING = "Diagnosing… why is it this fast?"
BOUND_HEADS = {"unknown": "No single limit found"}
# How the result line heads each way a run ends; any status not listed reads as a failure.
STATUS_HEADS: dict[RunStatus, tuple[str, str]] = {
    RunStatus.COMPLETED: ("Completed", SUCCESS_COLOR),
    RunStatus.STOPPED: ("Stopped", WARNING_COLOR),
}


def _figure(result: RunResult, name: str) -> str:
    return FIGURES_BY_NAME[name].format(getattr(result, name))


def _steps(count: int) -> str:
    return f"{format_value(count, 'count')} step{'' if count == 1 else 's'}"


def _rate(samples_per_s: float) -> str:
    return f"{format_value(samples_per_s, 'rate')} samples/s"


def progress_text(done: int, total: int, samples_per_s: float | None, eta_s: float | None) -> str:
    """The bar's text while a run trains: '120 / 300 steps · 5,400 samples/s · ETA 0:12' (total 0: unknown)."""
    parts = [f"{format_value(done, 'count')} / {_steps(total)}" if total else _steps(done)]
    if samples_per_s:
        parts.append(_rate(samples_per_s))
    if eta_s is not None and done < total:
        parts.append(f"ETA {format_duration(eta_s)}")
    return " · ".join(parts)


def status_head(status: RunStatus) -> tuple[str, str]:
    """The word that heads a finished run's result line, and its colour."""
    return STATUS_HEADS.get(status, ("Failed", FAILED_COLOR))


def starting_text(elapsed_s: float, stopping: bool = False) -> str:
    """The busy bar before the first step: the first call (build, trace, compile) blocks, so its elapsed time shows it lives."""
    if stopping:
        return f"Stopping when the first call ends (compiling cannot be interrupted)… {format_elapsed(elapsed_s)}"
    return f"Starting: building the model and compiling the step… {format_elapsed(elapsed_s)}"


def diagnosing_text(what: str = "") -> str:
    """The bar's text while a completed run is diagnosed: 'Diagnosing… why is it this fast? (probe run 1: batch 8 instead of 64, 31 steps)'."""
    return f"{DIAGNOSING} ({what})" if what else DIAGNOSING


def final_progress_text(result: RunResult) -> str:
    """The bar's text once a run has ended: 'Completed: 300 steps · 5,400 samples/s'."""
    text = f"{status_head(result.status)[0]}: {_steps(result.steps_done)}"
    return text + (f" · {_rate(result.samples_per_s)}" if result.samples_per_s else "")


def result_figures(result: RunResult) -> list[str]:
    """The headline figures of a finished run, as HTML fragments (those it has)."""
    figures = [_steps(result.steps_done)]
    if result.samples_per_s:
        figures.append(f"<b>{_rate(result.samples_per_s)}</b>")
    if result.step_time_median_ms is not None:
        median, p95 = _figure(result, "step_time_median_ms"), _figure(result, "step_time_p95_ms")
        figures.append(f"median step {median} ms (p95 {p95} ms)")
    if result.warmup_s is not None:
        figures.append(f"warm-up {_figure(result, 'warmup_s')} s")
    if result.final_loss is not None:
        figures.append(f"final loss {_figure(result, 'final_loss')}")
    memory = _memory_text(result)
    if memory:
        figures.append(memory)
    if result.replicas > 1:
        figures.append(f"{result.replicas} replicas")
    return figures


def _memory_text(result: RunResult) -> str:
    """'peak memory 581 MiB (host process RSS peak) · estimate 794 KiB (weights … + gradients … + optimizer state …)'."""
    estimate = memory_estimate_text(result.memory_estimate)
    parts = []
    if result.peak_memory_bytes is not None:
        source = f" ({html.escape(result.peak_memory_source)})" if result.peak_memory_source else ""
        parts.append(f"peak memory {_figure(result, 'peak_memory_bytes')}{source}")
    if estimate:
        parts.append(f"estimate {html.escape(estimate)}")
    return ", ".join(parts)


def verdict_html(result: RunResult) -> list[str]:
    """The verdict's lines: the bound and % of the measured ceiling (estimate beside), the advice, the evidence; [] without one."""
    if not result.bound:
        return []
    head = BOUND_HEADS.get(result.bound, f"{result.bound.capitalize()}-bound")
    lines = [f"<b>Verdict: {html.escape(head)}</b> · {html.escape(peak_text(result))}"]
    if result.advice:
        lines.append(f"<b>Try</b>: {html.escape(result.advice)}")
    if result.bound_evidence:
        lines.append(f"<span style='color:{EVIDENCE_COLOR}'>{html.escape(result.bound_evidence)}</span>")
    return lines


def result_html(finished: FinishedRun) -> str:
    """The result line of a finished run: status and figures, its verdict, its message and warnings, where it was saved."""
    result = finished.result
    head, color = status_head(result.status)
    lines = [f"<b style='color:{color}'>{head}</b>: " + " · ".join(result_figures(result))]
    lines.extend(verdict_html(result))
    if result.message:
        lines.append(f"<span style='color:{color}'>{html.escape(result.message)}</span>")
    lines.extend(html.escape(w) for w in result.warnings)
    saved = f"Saved to the history as run #{finished.run_id}." if finished.run_id is not None else finished.history_error
    if saved:
        lines.append(html.escape(saved))
    return "<br>".join(lines)


def failure_html(head: str, message: str) -> str:
    """A red `head` and the escaped message: why a run failed or did not start."""
    return f"<b style='color:{FAILED_COLOR}'>{head}</b>: {html.escape(message)}"

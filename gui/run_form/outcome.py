"""What the window says about a run: the progress bar's text, the form's result line, and the Result tab (RunResultPanel).

Figures are written the way `core.results.FIGURES` defines them, so the form,
the tables and the exports agree on every number. A completed run's result
line ends with its verdict (what bounds its speed, % of the measured ceiling
with the estimate beside it) and its advice; the Result tab (`report_html`)
says it all, advice first, with the evidence.
"""

from __future__ import annotations

import html

from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from core.diagnosis.readout import conditions_text, memory_estimate_text, peak_text
from core.diagnosis.verdict import TOO_NOISY
from core.formatting import format_bytes, format_duration, format_elapsed, format_value
from core.results import FIGURES_BY_NAME, RunResult, RunStatus
from gui.job_data import FinishedRun
from gui.style import FAILED_COLOR, SUCCESS_COLOR, WARNING_COLOR
from gui.window_words import window_words

EVIDENCE_COLOR = "#555555"
RESULT_LINK = "result-tab"
FORM_FIGURES = (
    3  # the form's result line: steps, samples/s, median step; the Result tab has them all  # the result line's link to the Result tab
)
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
    figures = [_steps(result.steps_done) + (f" on {result.replicas} replicas" if result.replicas > 1 else "")]
    if result.samples_per_s:
        figures.append(f"<b>{_rate(result.samples_per_s)}</b>")
    if result.step_time_median_ms is not None:  # the mean first: samples/s is the batch over it
        median, p95 = _figure(result, "step_time_median_ms"), _figure(result, "step_time_p95_ms")
        mean = f"mean step {_figure(result, 'mean_step_ms')} ms, " if result.mean_step_ms is not None else ""
        figures.append(f"{mean}median {median} ms (p95 {p95} ms)")
    if result.warmup_s is not None:
        figures.append(f"warm-up {_figure(result, 'warmup_s')} s")
    if result.final_loss is not None:
        figures.append(f"final loss {_figure(result, 'final_loss')}")
    memory = _memory_text(result)
    if memory:
        figures.append(memory)
    return figures


def _memory_text(result: RunResult) -> str:
    """'peak memory 581 MiB (host process RSS peak) · estimate 794 KiB (weights … + gradients … + optimizer state …)'."""
    estimate = memory_estimate_text(result.memory_estimate)
    parts = []
    if result.peak_memory_bytes is not None:
        source = f" ({html.escape(result.peak_memory_source)})" if result.peak_memory_source else ""
        parts.append(f"peak memory {_figure(result, 'peak_memory_bytes')}{source}")
    if result.memory_added_bytes is not None and result.memory_added_source != result.peak_memory_source:
        parts.append(f"added by this run {format_bytes(result.memory_added_bytes)} ({html.escape(result.memory_added_source)})")
    if estimate:
        parts.append(f"estimate {html.escape(estimate)}")
    return ", ".join(parts)


def verdict_html(result: RunResult) -> list[str]:
    """The verdict's lines: the bound and % of the measured ceiling (estimate beside), the advice, the evidence; [] without one."""
    if not result.bound:
        return []
    head = BOUND_HEADS.get(result.bound, f"{result.bound.capitalize()}-bound")
    if result.bound_evidence.startswith(TOO_NOISY):  # not "no single limit found": nothing was judged
        head = TOO_NOISY
    lines = [f"<b>Verdict: {html.escape(head)}</b> · {html.escape(peak_text(result))}"]
    if result.advice:
        lines.append(f"<b>Try</b>: {html.escape(result.advice)}")
    if result.bound_evidence:
        lines.append(f"<span style='color:{EVIDENCE_COLOR}'>{html.escape(result.bound_evidence)}</span>")
    return lines


def result_html(finished: FinishedRun) -> str:
    """The run form's result line: status and figures, the verdict's head and advice, its message and warnings, where it was saved."""
    result = finished.result
    head, color = status_head(result.status)
    lines = [f"<b style='color:{color}'>{head}</b>: " + " · ".join(result_figures(result)[:FORM_FIGURES])]
    verdict = verdict_html(result)
    if verdict:
        lines.extend(verdict[:2] if result.advice else verdict[:1])
        lines.append(f"<a href='{RESULT_LINK}'>The evidence: Result tab</a>")
    lines.extend(_tail(finished))
    return "<br>".join(lines)


def report_html(finished: FinishedRun) -> str:
    """The Result tab: what to try first, then the verdict and its evidence, the figures, the message and where it was saved."""
    result = finished.result
    head, color = status_head(result.status)
    lines = []
    if result.advice:
        lines.append(f"<h3>Try: {html.escape(result.advice)}</h3>")
    verdict = verdict_html(result)
    if verdict:
        lines.append(verdict[0])
        if result.bound_evidence:
            lines.append(f"<b>Evidence</b>: {html.escape(result.bound_evidence)}")
    lines.append(f"<b style='color:{color}'>{head}</b>: " + " · ".join(result_figures(result)))
    lines.extend(_tail(finished))
    return "<p>" + "</p><p>".join(lines) + "</p>"


def _tail(finished: FinishedRun) -> list[str]:
    """The run's message (coloured as its status), its warnings, and where the history saved it."""
    result = finished.result
    color = status_head(result.status)[1]
    lines = [f"<span style='color:{color}'>{html.escape(window_words(result.message))}</span>"] if result.message else []
    lines.extend(html.escape(window_words(w)) for w in result.warnings)
    conditions = conditions_text(result.conditions)
    if conditions:
        shade = WARNING_COLOR if result.contended else EVIDENCE_COLOR
        lines.append(f"<span style='color:{shade}'>{html.escape(conditions)}</span>")
    saved = f"Saved to the history as run #{finished.run_id}." if finished.run_id is not None else finished.history_error
    if saved:
        lines.append(html.escape(saved))
    return lines


def failure_html(head: str, message: str) -> str:
    """A red `head` and the escaped message: why a run failed or did not start."""
    return f"<b style='color:{FAILED_COLOR}'>{head}</b>: {html.escape(window_words(message))}"


NO_RESULT = "No result yet: press Start (Ctrl+R). When a run ends, what to try, its verdict and the evidence appear here."


class RunResultPanel(QWidget):
    """The Result tab, beside the plots, room enough at 1400×900 without scrolling: the last run's result, advice first (`show_result`), or why it failed (`show_failure`)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runResultPanel")
        self.view = QTextBrowser()
        self.view.setObjectName("resultView")
        self.view.setOpenExternalLinks(False)
        self.view.setPlaceholderText(NO_RESULT)
        layout = QVBoxLayout(self)
        layout.addWidget(self.view)

    def show_result(self, finished: FinishedRun) -> None:
        self.view.setHtml(report_html(finished))

    def show_failure(self, head: str, message: str) -> None:
        self.view.setHtml(failure_html(head, message))

    def show_running(self, label: str) -> None:
        """A new run started: the last one's result would be stale."""
        self.view.setPlainText(f"Running {label}: its result appears here when it ends.")

    def text(self) -> str:
        """What the tab says, as plain text."""
        return self.view.toPlainText()

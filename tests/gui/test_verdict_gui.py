"""The verdict in the window: a completed run is diagnosed in its training thread, Stop ends the probes, the result line says it."""

from __future__ import annotations

import html

import pytest

from core.diagnosis.ceilings import peaks_path
from core.diagnosis.readout import memory_estimate_text, peak_text
from core.diagnosis.run_verdict import STOPPED
from core.formatting import format_bytes, format_si
from core.history.store import RunStore
from core.machine.peaks import PeaksReport
from core.results import RunResult, RunStatus
from gui.job_data import FinishedRun
from gui.run_form.outcome import report_html, result_html
from gui.settings import KEY_DIAGNOSE, read_bool
from tests.ceilings_cache import FLOAT32, write_ceilings_cache
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import set_one_device, start_and_wait

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def peaks_cache(isolated_folders) -> PeaksReport:
    return write_ceilings_cache(peaks_path())


@pytest.fixture
def diagnose_runs() -> bool:
    """The window diagnoses each completed run, as it does by default."""
    return True


@pytest.mark.slow
def test_a_completed_run_is_diagnosed_and_stop_ends_a_diagnosis(peaks_cache, ready_window, qtbot):
    window, panel = ready_window, ready_window.run_panel
    qtbot.waitUntil(lambda: window.device_panel.ceilings.report is not None, timeout=RUN_TIMEOUT_MS)
    set_one_device(window, "CPU:0", steps=40)
    panel.batch_edit.setText("8")
    seen: list[tuple[str, str, bool]] = []
    window.run_controller.diagnosing.connect(lambda what: seen.append((what, panel.progress_bar.format(), panel.stop_button.isEnabled())))

    result = start_and_wait(qtbot, window).result

    assert result.status == RunStatus.COMPLETED and result.bound in ("overhead", "compute", "input", "unknown"), result.message
    assert seen[0][0] == "" and all(text.startswith("Diagnosing") and stop for _, text, stop in seen)
    assert any(what.startswith("probe run 1:") for what, _, _ in seen)
    assert result.pct_of_measured_peak == pytest.approx(100 * result.achieved_flops / FLOAT32)
    shown = panel.result_label.text()
    assert (
        "Verdict: " in shown and html.escape(result.advice) in shown and f"of the measured {format_si(FLOAT32, 'FLOP/s')} ceiling" in shown
    )
    report = window.result_panel.text()
    assert report.startswith(f"Try: {result.advice}") and result.bound_evidence in report
    assert "estimate " in report and "weights" in report  # the memory estimate beside the measured peak
    with RunStore.open() as store:
        (stored,) = store.list_runs()
    assert stored.figures["bound"] == result.bound

    seen.clear()
    window.run_controller.diagnosing.connect(lambda what: window.run_controller.stop() if what.startswith("probe") else None)
    stopped = start_and_wait(qtbot, window).result
    assert stopped.status == RunStatus.COMPLETED and stopped.bound is None and STOPPED in stopped.warnings
    assert len([what for what, _, _ in seen if what.startswith("probe")]) == 1, "a probe run started after Stop"
    assert STOPPED in panel.result_label.text() and "Verdict" not in panel.result_label.text()

    seen.clear()
    assert window.diagnose_action.isChecked()
    window.diagnose_action.trigger()  # Run > Diagnose each completed run: off, and remembered
    assert not window.diagnose_action.isChecked() and not read_bool(window.settings, KEY_DIAGNOSE, True)
    plain = start_and_wait(qtbot, window).result
    assert plain.status == RunStatus.COMPLETED and plain.bound is None and seen == []
    assert "Verdict" not in panel.result_label.text() and STOPPED not in panel.result_label.text()


def test_the_result_line_gives_verdict_and_advice_the_result_tab_the_evidence_and_memory_estimate():
    result = RunResult(
        status=RunStatus.COMPLETED,
        config={"model": "mlp", "batch_size": 8},
        steps_done=200,
        samples_per_s=5000.0,
        peak_memory_bytes=600 * 2**20,
        peak_memory_source="host process RSS peak",
        bound="overhead",
        bound_evidence="Overhead-bound: all of the step is a fixed cost.",
        advice="Raise steps per call (to 8 or more).",
        achieved_flops=1.5e9,
        pct_of_measured_peak=2.5,
        memory_estimate={"weight_bytes": 1024, "gradient_bytes": 1024, "optimizer_bytes": 2048, "total_bytes": 4096},
        environment={"peak_flops": 150e9, "peak_flops_how": "2 cores x 2.45 GHz x 32"},
    )
    shown = result_html(FinishedRun(result, 7))
    assert "Verdict: Overhead-bound" in shown and f"Try</b>: {result.advice}" in shown and "Result tab" in shown
    assert result.bound_evidence not in shown, "the form's line stays short: the evidence is in the Result tab"
    report = report_html(FinishedRun(result, 7))
    assert report.index(f"Try: {result.advice}") < report.index("Verdict: Overhead-bound") < report.index(result.bound_evidence)
    assert peak_text(result) in report  # % of the measured ceiling, the estimate beside
    peak = f"peak memory {format_bytes(result.peak_memory_bytes)} ({result.peak_memory_source})"
    assert f"{peak}, estimate {memory_estimate_text(result.memory_estimate)}" in report  # measured, then estimated


def test_a_run_too_noisy_to_judge_is_headed_so_not_as_no_single_limit_found():
    from dataclasses import replace

    from core.diagnosis.verdict import TOO_NOISY

    noisy = RunResult(
        status=RunStatus.COMPLETED,
        config={"model": "mlp", "batch_size": 8},
        steps_done=200,
        samples_per_s=5000.0,
        bound="unknown",
        bound_evidence=f"{TOO_NOISY}: other processes used 80% of the CPU; the bound is not judged from these figures.",
    )
    shown = result_html(FinishedRun(noisy, 7))
    assert f"Verdict: {TOO_NOISY}" in shown and "No single limit found" not in shown
    judged = replace(noisy, bound_evidence="No rule matched: compute 20% of peak.")
    assert "Verdict: No single limit found" in result_html(FinishedRun(judged, 7))

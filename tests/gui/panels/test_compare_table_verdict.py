"""The Compare tab's table: each row's verdict, % of the measured peak with the estimate beside it, efficiency over 100% flagged."""

from __future__ import annotations

import socket

from core.compare.table import compare_results
from core.config import RunConfig
from core.machine.peaks import DevicePeaks, PeaksReport
from core.results import RunResult, RunStatus
from gui.panels.compare_table import COLUMNS, ROLE_VALUE, CompareTable, column_index

PEAKS = PeaksReport({"cpu": "test CPU"}, (DevicePeaks("CPU:0", "CPU", "test CPU", {"float32": 80e9}),))


def _run(median_ms: float, replicas: int = 1, strategy: str = "default") -> RunResult:
    return RunResult(
        status=RunStatus.COMPLETED,
        config=RunConfig(model="mlp", steps=100, batch_size=64, strategy=strategy).to_dict(),
        steps_done=100,
        replicas=replicas,
        warmup_steps=1,
        step_time_median_ms=median_ms,
        samples_per_s=64 / (median_ms / 1e3),
        environment={"devices": ["CPU:0"], "host": socket.gethostname(), "peak_flops": 160e9, "peak_flops_how": "cores x clock"},
    )


def test_each_row_shows_its_verdict_both_peaks_and_a_flagged_efficiency(qtbot):
    table = CompareTable()
    qtbot.addWidget(table)
    comparison = compare_results(
        [("CPU:0", _run(5.0)), ("multi-worker:2", _run(28.0, 2, "multi-worker"))], baseline_index=1, flops_per_step=1e8, peaks=PEAKS
    )
    table.show_comparison(comparison)

    bound = table.item(0, column_index("bound"))
    assert bound.text() == comparison.rows[0].result.bound and comparison.rows[0].result.advice in bound.toolTip()
    peak, estimate = table.item(0, column_index("fraction_of_peak")), table.item(0, column_index("fraction_of_estimate"))
    assert peak.data(ROLE_VALUE) == comparison.rows[0].fraction_of_peak and "Measured ceiling 80.00 GFLOP/s" in peak.toolTip()
    assert estimate.data(ROLE_VALUE) == comparison.rows[0].fraction_of_estimate and "160.00 GFLOP/s" in peak.toolTip()
    efficiency = table.item(0, column_index("scaling_efficiency"))
    assert efficiency.text().endswith("(!)") and efficiency.toolTip().startswith("CPU:0: efficiency")
    assert not table.item(1, column_index("scaling_efficiency")).text().endswith("(!)")
    titles = [column.title for column in COLUMNS]
    assert titles.count("% of peak") == 1 and "% of peak (%)" not in titles and "Achieved (FLOP/s)" not in titles

"""The Compare tab's table: each row's verdict, % of the measured peak with the estimate beside it, efficiency over 100% flagged."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

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


def test_each_row_shows_its_time_to_the_common_loss_and_a_row_that_never_got_there_says_so(qtbot):
    table = CompareTable()
    qtbot.addWidget(table)
    learns = RunResult(**{**_run(5.0).__dict__, "losses": tuple(2.0 * 0.9**i for i in range(100)), "step_times_s": (0.005,) * 100})
    slow = RunResult(**{**_run(2.0).__dict__, "losses": tuple(2.0 * 0.999**i for i in range(100)), "step_times_s": (0.002,) * 100})
    comparison = compare_results([("learns", learns), ("slow", slow)], peaks=PEAKS)
    table.show_comparison(comparison)
    column = column_index("time_to_target_s")
    first, second = table.item(0, column), table.item(1, column)
    target = comparison.common_target()
    assert target is not None and 1.8 < target < 1.9, "the higher smoothed final loss: the slow learner's"
    assert first.data(ROLE_VALUE) < 0.005 * 5 < second.data(ROLE_VALUE) == pytest.approx(0.2), "2.5x the step time, first there"
    assert f"To loss {target:.4g}" in second.toolTip() and "100 steps" in second.toolTip()
    table.show_comparison(replace(comparison, target_loss=0.5))
    assert table.item(1, column).text() == "not reached" and "not reached in 100 steps" in table.item(1, column).toolTip()

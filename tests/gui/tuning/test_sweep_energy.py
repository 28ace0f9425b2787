"""The Sweep tab's energy: a column of the points' measured joules per sample, and a chart only where some point measured it.
The rows are made here from results with and without energy: no energy counter exists on this machine."""

from __future__ import annotations

import pytest

from core.config import RunConfig
from core.results import RunResult, RunStatus
from core.tuning.sweep import SweepRow
from core.tuning.sweep_plan import plan_sweep
from gui.tuning.sweep_chart import SweepChart
from gui.tuning.sweep_table import ROLE_VALUE, SweepTable
from tests.fakes.fake_powercap import energy_record

BASE = RunConfig(model="mlp", dataset="digits", steps=100, batch_size=32)


def _row(batch: int, joules_per_sample: float | None) -> SweepRow:
    energy = energy_record(joules_per_sample, "NVML total energy, GPU:0", "the run's GPUs")
    result = RunResult(
        status=RunStatus.COMPLETED,
        config=BASE.with_changes(batch_size=batch).to_dict(),
        samples_per_s=1000.0 * batch / 32,
        mean_step_ms=32.0,
        energy=energy,
        energy_reason="" if energy else "no powercap (RAPL) counters",
        joules_per_sample=joules_per_sample,
    )
    return SweepRow({"batch_size": batch}, result)


def test_the_energy_column_and_chart_show_what_was_measured(qtbot):
    plan = plan_sweep(BASE, {"batch_size": (32, 64)})
    table, chart = SweepTable(), SweepChart()
    qtbot.addWidget(table)
    qtbot.addWidget(chart)
    measured = [_row(32, 0.002), _row(64, 0.001)]
    table.show_sweep(plan, measured, None)
    column = table.column_index("joules_per_sample")
    assert [table.item(row, column).data(ROLE_VALUE) for row in range(2)] == pytest.approx([0.002, 0.001])
    assert table.item(0, column).toolTip().startswith("energy: 2 mJ/sample")
    chart.show_sweep(plan, measured, None)
    assert chart.energy_plot.isVisibleTo(chart)
    chart.show_sweep(plan, [_row(32, None), _row(64, None)], None)
    assert not chart.energy_plot.isVisibleTo(chart)
    table.show_sweep(plan, [_row(32, None), _row(64, None)], None)
    assert "no powercap" in table.item(0, column).toolTip()

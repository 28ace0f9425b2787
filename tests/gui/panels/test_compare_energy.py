"""The Compare tab's energy: a column from the runs' measured joules per sample (why not, in its tooltip) and a chart
only where some row measured energy. The runs are made here: no energy counter exists on this machine."""

from __future__ import annotations

import pytest

from core.compare.table import compare_results
from core.config import RunConfig
from core.results import RunResult, RunStatus
from gui.panels.compare_table import ROLE_VALUE, CompareTable, column_index
from tests.fakes.fake_powercap import energy_record
from tests.gui.helpers import bar_heights


def _run(samples_per_s: float, joules_per_sample: float | None, reason: str = "") -> RunResult:
    energy = energy_record(joules_per_sample)
    return RunResult(
        status=RunStatus.COMPLETED,
        config=RunConfig(model="mlp", steps=100, batch_size=64).to_dict(),
        steps_done=100,
        warmup_steps=1,
        samples_per_s=samples_per_s,
        energy=energy,
        energy_reason=reason,
        joules_per_sample=joules_per_sample,
        environment={"devices": ["CPU:0"]},
    )


def test_the_energy_column_shows_the_measured_figure_and_says_why_where_there_is_none(qtbot):
    table = CompareTable()
    qtbot.addWidget(table)
    table.show_comparison(
        compare_results([("CPU:0", _run(1000.0, 0.0005)), ("jax:CPU:0", _run(2000.0, None, "no powercap (RAPL) counters"))])
    )
    column = column_index("joules_per_sample")
    measured, unmeasured = table.item(0, column), table.item(1, column)
    assert measured.data(ROLE_VALUE) == pytest.approx(0.0005) and measured.text() == "500 µJ"
    assert unmeasured.data(ROLE_VALUE) is None and "no powercap" in unmeasured.toolTip()


@pytest.mark.slow
def test_the_energy_chart_shows_only_where_a_row_measured_energy(ready_window, qtbot):
    panel = ready_window.compare_panel
    panel.show_comparison(compare_results([("CPU:0", _run(1000.0, None, "no counter")), ("jax:CPU:0", _run(2000.0, None, "no counter"))]))
    assert not panel.energy_chart.isVisibleTo(panel)
    panel.show_comparison(compare_results([("CPU:0", _run(1000.0, 0.0005)), ("jax:CPU:0", _run(2000.0, 0.00025))]))
    assert panel.energy_chart.isVisibleTo(panel)
    assert bar_heights(panel.energy_chart) == pytest.approx([0.5, 0.25])

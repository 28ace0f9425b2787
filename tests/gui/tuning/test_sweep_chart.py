"""The sweep chart's stars: samples/s stars the highest point, step time the lowest (the chart alone, finished rows given)."""

from __future__ import annotations

from core.config import RunConfig
from core.results import RunResult, RunStatus
from core.tuning.sweep import SweepRow
from core.tuning.sweep_plan import SweepAxis, SweepPlan
from gui.tuning.sweep_chart import SweepChart
from tests.gui.helpers import star_on


def _row(batch: int, mean_step_ms: float) -> SweepRow:
    """A completed point whose samples/s is, by its definition, global batch / mean step."""
    result = RunResult(
        status=RunStatus.COMPLETED,
        config={"batch_size": batch},
        samples_per_s=batch / (mean_step_ms / 1e3),
        mean_step_ms=mean_step_ms,
        step_time_median_ms=mean_step_ms * 0.9,
    )
    return SweepRow({"batch_size": batch}, result)


def test_step_time_stars_the_lowest_step_and_samples_per_s_the_highest_rate(qtbot) -> None:
    chart = SweepChart()
    qtbot.addWidget(chart)
    plan = SweepPlan(RunConfig(), (SweepAxis("batch_size", (16, 64, 256)),))
    rows = [_row(16, 2.0), _row(64, 4.0), _row(256, 12.0)]  # 8,000, 16,000 and 21,333 samples/s
    rates = [row.result.samples_per_s for row in rows]
    chart.show_sweep(plan, rows, best=rates.index(max(rates)))
    assert star_on(chart.rate_plot) == (2.0, rates[2]), "the highest samples/s: batch 256"
    assert star_on(chart.time_plot) == (0.0, 2.0), "the lowest step time: batch 16, not the sweep's best"

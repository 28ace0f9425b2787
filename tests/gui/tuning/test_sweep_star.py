"""The Sweep tab's star on the data given (issue 38): only on a point better beyond noise, and "× best" compares what it does.

A real SweepPanel with its real controllers: each sweep runs in the controller's worker thread, as Start sweep runs it
(here with the rounds chosen), and the table, heat map, chart and labels are read back.
"""

from __future__ import annotations

import pytest

from core.config import RunConfig
from gui.controllers.sweep import SweepController
from gui.controllers.tuning import TuningController
from gui.job_data import SweepJob
from gui.tuning.sweep_panel import SweepPanel
from gui.tuning.sweep_table import BEST_MARK, ROLE_VALUE, TIED_MARK, VERSUS_KEY, VERSUS_TITLES
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import star_on

pytestmark = pytest.mark.slow

DIGITS = RunConfig(model="mlp", dataset="digits", steps=200, batch_size=32)


@pytest.fixture
def panel(qtbot):
    shown = SweepPanel(SweepController(), TuningController(), config_source=lambda: DIGITS)
    qtbot.addWidget(shown)
    shown.resize(1200, 800)
    shown.show()
    yield shown
    shown.shutdown(60)


def sweep_in(qtbot, panel: SweepPanel, job: SweepJob):
    """Run `job` through the panel's controller and wait for its end; returns the Sweep."""
    with qtbot.waitSignal(panel.controller.sweep_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        assert panel.controller.start(job)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    return blocker.args[0].sweep


def test_a_best_tied_with_others_is_neither_starred_nor_named_best(qtbot, panel) -> None:
    """MLP on the digits, batch 32, 256, 2048, 200 steps: batch 256 was starred and named "(best)" while its own status
    read "= tied". Measured in one round, which tells no points apart, every point is tied."""
    sweep = sweep_in(qtbot, panel, SweepJob(DIGITS, {"batch_size": (32, 256, 2048)}, rounds=1))
    data = sweep.to_dict()
    best = data["best"]
    assert best is not None and data["best_beyond_noise"] is False and len(data["tied_with_best"]) == 2
    assert panel.best == best and panel.starred is None

    status = panel.table.column_index("status")
    texts = [panel.table.item(index, status).text() for index in range(3)]
    assert all(text.endswith(TIED_MARK) for text in texts) and not any(BEST_MARK in text for text in texts)
    assert not panel.table.item(best, status).font().bold()
    assert star_on(panel.chart.rate_plot) is None, "the chart stars no point on a tie"
    assert not panel.heat_map.isVisible()
    assert not panel.chosen_label.text().endswith("(best)") and "tied" in panel.chosen_label.text()
    assert "Best:" not in panel.progress_label.text()
    assert panel.use_settings()["batch_size"] == sweep.rows[best].settings["batch_size"], "Use these settings still applies it"


def test_the_times_best_column_compares_what_the_star_compares(qtbot, panel) -> None:
    """The column read "× best (95%)" and compared samples/s while the star and "tied" compared time to the target."""
    sweep = sweep_in(qtbot, panel, SweepJob(DIGITS, {"batch_size": (32, 256)}, rounds=4))
    data = sweep.to_dict()
    by = data["best_by"]
    assert panel.table.compares() == by
    column = panel.table.column_index(VERSUS_KEY)
    assert panel.table.horizontalHeaderItem(column).text() == VERSUS_TITLES[by][0]
    other = 1 - data["best"]
    versus = data["rows"][other]["versus_best"]
    assert versus["of"] == by
    shown = panel.table.item(other, column).data(ROLE_VALUE)
    assert (shown is None and versus["ratio"] is None) or shown == pytest.approx(versus["ratio"])
    assert (other in data["tied_with_best"]) == (versus["beyond_noise"] is not True)
    assert (panel.starred is None) == bool(data["tied_with_best"])

"""The Sweep tab through the window: a real two-setting sweep of the CNN, its table, heat map and chart, the best applied, and Stop."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from core.history.store import RunStore
from core.results import RunStatus
from core.tuning.sweep import best_index, target_decision, tied_with_best
from gui.tuning.sweep_panel import NO_SWEEP_YET
from gui.tuning.sweep_table import BEST_MARK, LR_KEY, ROLE_VALUE, TIED_MARK, VERSUS_KEY
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device, star_on

pytestmark = pytest.mark.slow


def sweep_and_wait(qtbot, panel):
    """Click Start sweep and wait until it has ended; returns the SweepOutcome."""
    with qtbot.waitSignal(panel.controller.sweep_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    return blocker.args[0]


def test_a_cnn_sweep_of_batch_by_precision_shows_table_heat_map_chart_and_its_best_fills_the_form(ready_window, qtbot) -> None:
    window, panel = ready_window, ready_window.sweep_panel
    choose(window.run_panel.model_combo, "cnn")
    set_one_device(window, "CPU:0", steps=3)
    window.run_panel.batch_edit.setText("16")
    window.show_panel(panel)
    panel.axes_box.set_axes("batch_size", "8,16", "precision", "off,bfloat16")
    panel.axes_box.slow_check.setChecked(True)  # bfloat16 runs whether or not this CPU has AVX-512
    outcome = sweep_and_wait(qtbot, panel)

    sweep = outcome.sweep
    assert [row.status for row in sweep.rows] == [RunStatus.COMPLETED] * 4 and not outcome.history_error
    rates = [row.result.samples_per_s for row in sweep.rows]
    best = sweep.best  # the first to the common loss where that decides, else the most samples/s (core.tuning.sweep)
    assert best is not None and panel.best == best == best_index(sweep.rows)
    status_column, lr_column = panel.table.column_index("status"), panel.table.column_index(LR_KEY)
    loss_column = panel.table.column_index("final_loss")
    assert panel.table.rowCount() == 4 and lr_column == panel.table.column_index("batch_size") + 1
    # 2 steady steps per point are too few for an interval: nothing shows the best is better, so it reads "tied"
    assert tied_with_best(sweep.rows) and panel.table.item(best, status_column).text().endswith(TIED_MARK)
    assert BEST_MARK not in panel.table.item(best, status_column).text()
    assert [panel.table.item(i, lr_column).data(ROLE_VALUE) for i in range(4)] == pytest.approx([5e-4, 5e-4, 1e-3, 1e-3])
    assert all(panel.table.item(i, loss_column).data(ROLE_VALUE) == sweep.rows[i].result.final_loss for i in range(4))
    target_column = panel.table.column_index("time_to_target_steady_s")
    to_target = [panel.table.item(i, target_column).data(ROLE_VALUE) for i in range(4)]
    # 3 steps are too few to tell whether a loss fell beyond noise: time to a loss decides nothing, samples/s does
    assert not target_decision(sweep.rows).decides and best == rates.index(max(rates)) and to_target == [None] * 4
    assert panel.table.compares() == "samples_per_s" and panel.table.horizontalHeaderItem(
        panel.table.column_index(VERSUS_KEY)
    ).text().startswith("Samples/s")
    assert panel.heat_map.isVisible() and (panel.heat_map.rowCount(), panel.heat_map.columnCount()) == (2, 2)
    assert [panel.heat_map.item(i // 2, i % 2).data(ROLE_VALUE) for i in range(4)] == rates
    assert panel.starred is None and not any(panel.heat_map.item(i // 2, i % 2).text().startswith("★") for i in range(4)), (
        "no star on a tie"
    )
    window.resize(1024, 700)
    qtbot.waitUntil(lambda: window.width() == 1024, timeout=5000)
    heat_map, metrics = panel.heat_map, panel.heat_map.fontMetrics()
    for column in range(2):  # headers and cells whole at 1024x700 ("★ 1,234", not "★ …")
        texts = [heat_map.horizontalHeaderItem(column).text()] + [heat_map.item(row, column).text() for row in range(2)]
        assert heat_map.columnWidth(column) >= max(metrics.horizontalAdvance(text) for text in texts), texts
    window.resize(1400, 880)
    assert panel.chart.series() == {"float32": [rates[0], rates[2]], "bfloat16": [rates[1], rates[3]]}
    assert star_on(panel.chart.rate_plot) is None, "no star on a tie"

    expected = dict(sweep.rows[best].settings)
    if expected["batch_size"] != 16:
        expected["learning_rate"] = 1e-3 * expected["batch_size"] / 16
    with qtbot.waitSignal(panel.settings_chosen) as chosen:
        qtbot.mouseClick(panel.use_button, Qt.MouseButton.LeftButton)
    assert chosen.args[0] == pytest.approx(expected)
    form = window.run_panel.config()
    assert (form.batch_size, form.precision) == (expected["batch_size"], expected["precision"])
    with RunStore.open() as store:
        assert store.groups() == [sweep.group] == ["sweep 1: batch × precision"]


def test_stop_ends_the_turn_in_flight_and_every_point_set_up(ready_window, qtbot) -> None:
    window, panel = ready_window, ready_window.sweep_panel
    set_one_device(window, "CPU:0", steps=100_000)
    panel.axes_box.set_axes("batch_size", "8,16,32")
    assert panel.progress_bar.text() == NO_SWEEP_YET, "no point count (Qt's default 0 of 100) before the sweep is planned"
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "· step" in panel.progress_label.text(), timeout=RUN_TIMEOUT_MS)
    assert panel.progress_bar.text() == "0 of 3 points"
    form = window.run_panel
    assert "A sweep is running" in form.result_label.text() and form.progress_bar.text().startswith("Sweep running")
    assert not window.run_panel.start_button.isEnabled()  # the run form waits for the sweep
    with qtbot.waitSignal(panel.controller.sweep_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    sweep = blocker.args[0].sweep
    # every point was set up before the rounds began: each ends stopped, after its call in flight
    assert [row.status for row in sweep.rows] == [RunStatus.STOPPED] * 3
    assert all(row.result.steps_done < 100_000 for row in sweep.rows) and any(row.result.steps_done for row in sweep.rows)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    assert panel.progress_label.text().startswith("Sweep stopped: 0 of 3 points completed.")
    assert "The sweep has ended" in form.result_label.text()
    assert window.run_panel.start_button.isEnabled()

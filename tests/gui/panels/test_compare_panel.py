"""The Compare tab: real comparisons (CPU:0 against Mirrored over two logical CPUs) through the window."""

from __future__ import annotations

import csv
import json

import pytest
from PySide6.QtCore import Qt

from gui.panels.compare_table import ROLE_VALUE, column_index
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import bar_heights, start_and_wait

pytestmark = pytest.mark.slow

STEPS = 20
MIRRORED = "mirrored:CPU:0,CPU:1"
COL_TARGET, COL_SAMPLES, COL_SPEEDUP, COL_EFFICIENCY, COL_PEAK = (
    column_index(key) for key in ("target", "samples_per_s", "speedup", "scaling_efficiency", "fraction_of_peak")
)


@pytest.fixture
def compare_window(ready_window, qtbot):
    """The window with devices listed and Mirrored over the session's two logical CPUs offered."""
    panel = ready_window.compare_panel
    qtbot.waitUntil(lambda: MIRRORED in panel.target_specs(), timeout=RUN_TIMEOUT_MS)
    ready_window.run_panel.steps_edit.setText(str(STEPS))
    return ready_window


def run_comparison(qtbot, panel, button=None):
    """Click Compare (or `button`) and wait until the comparison has ended; returns the Comparison."""
    with qtbot.waitSignal(panel.comparison_changed, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(button or panel.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    return blocker.args[0]


def cell(panel, row, column):
    return panel.table.item(row, column)


def test_two_targets_side_by_side_with_speedup_chart_and_history(compare_window, qtbot, tmp_path):
    window, panel = compare_window, compare_window.compare_panel
    assert panel.target_specs()[:2] == ["CPU:0", MIRRORED] and "multi-worker:2" in panel.target_specs()
    panel.set_targets(["CPU:0", MIRRORED])
    messages: list[str] = []
    panel.message.connect(messages.append)
    busy: list[bool] = []
    panel.running_changed.connect(lambda running: busy.append(window.run_panel.start_button.isEnabled()))

    comparison = run_comparison(qtbot, panel)

    assert busy[0] is False, "Start stayed enabled while the comparison ran"
    assert window.run_panel.start_button.isEnabled() and panel.compare_button.isEnabled()
    assert any("run 1 of 2: CPU:0" in m for m in messages) and any(f"run 2 of 2: {MIRRORED}" in m for m in messages)
    assert [row.status for row in comparison.rows] == ["completed", "completed"], [r.result.message for r in comparison.rows]
    assert panel.table.rowCount() == 2
    single, mirrored = (cell(panel, row, COL_SAMPLES).data(ROLE_VALUE) for row in range(2))
    assert single > 0 and mirrored > 0
    assert (single, mirrored) == (comparison.rows[0].samples_per_s, comparison.rows[1].samples_per_s)
    busy = " (busy)" if comparison.rows[0].result.contended else ""  # measured while another process used the CPU
    assert cell(panel, 0, COL_TARGET).text() == f"CPU:0 (baseline){busy}"
    assert cell(panel, 0, COL_SPEEDUP).data(ROLE_VALUE) == 1.0
    assert cell(panel, 1, COL_SPEEDUP).data(ROLE_VALUE) == mirrored / single
    within_noise = " ≈" if comparison.rows[1].beyond_noise is False else ""  # its 95% interval holds 1
    assert cell(panel, 1, COL_SPEEDUP).text() == f"{mirrored / single:.2f}x{within_noise}"
    assert cell(panel, 1, COL_EFFICIENCY).data(ROLE_VALUE) == pytest.approx(mirrored / single / 2)
    assert cell(panel, 0, COL_PEAK).toolTip(), "the % of peak cell explains itself"
    assert bar_heights(panel.throughput_chart) == [single, mirrored]
    assert panel.efficiency_chart.isVisibleTo(panel) and len(bar_heights(panel.efficiency_chart)) == 2
    assert "share the same physical cores" in panel.notes_label.text()

    panel.baseline_combo.setCurrentIndex(1)
    busy = " (busy)" if comparison.rows[1].result.contended else ""
    assert cell(panel, 1, COL_TARGET).text() == f"{MIRRORED} (baseline){busy}"
    assert cell(panel, 1, COL_SPEEDUP).data(ROLE_VALUE) == 1.0
    assert cell(panel, 0, COL_SPEEDUP).data(ROLE_VALUE) == single / mirrored
    assert panel.comparison.rows[0].result is comparison.rows[0].result, "changing the baseline re-ran something"

    keys = [panel.controller.plot_key(index) for index in range(2)]
    assert [window.plots.series(key).size for key in keys] == [STEPS, STEPS]
    history = window.history_panel.runs()
    assert sorted(run.figures["samples_per_s"] for run in history) == sorted([single, mirrored])
    assert {run.status for run in history} == {"completed"}

    panel.export(tmp_path / "comparison.json")
    panel.export(tmp_path / "comparison.csv")
    document = json.loads((tmp_path / "comparison.json").read_text())
    assert document["baseline"] == MIRRORED
    assert [row["samples_per_s"] for row in document["rows"]] == [single, mirrored]
    assert [row["speedup"] for row in document["rows"]] == [single / mirrored, 1.0]
    lines = (tmp_path / "comparison.csv").read_text().splitlines()
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert [float(row["samples_per_s"]) for row in rows] == [single, mirrored]
    assert [float(row["speedup"]) for row in rows] == [single / mirrored, 1.0]


def test_scaling_sweep_runs_one_then_two_devices_with_an_efficiency_chart(compare_window, qtbot):
    panel = compare_window.compare_panel
    compare_window.run_panel.steps_edit.setText("8")
    assert panel.sweep_button.isEnabled()
    comparison = run_comparison(qtbot, panel, panel.sweep_button)
    assert [row.replicas for row in comparison.rows] == [1, 2], [r.result.message for r in comparison.rows]
    assert [row.devices for row in comparison.rows] == [("CPU:0",), ("CPU:0", "CPU:1")]
    assert len(bar_heights(panel.throughput_chart)) == 2
    assert bar_heights(panel.efficiency_chart) == [100.0, comparison.rows[1].scaling_efficiency * 100]


def test_stop_ends_the_turn_in_flight_and_every_target_set_up(compare_window, qtbot):
    window, panel = compare_window, compare_window.compare_panel
    window.run_panel.steps_edit.setText("100000")
    panel.set_targets(["CPU:0", MIRRORED])
    with qtbot.waitSignal(panel.comparison_changed, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(panel.compare_button, Qt.MouseButton.LeftButton)
        keys = [panel.controller.plot_key(index) for index in range(2)]  # which target trains first in a round is random
        qtbot.waitUntil(
            lambda: any(key in window.plots.run_keys() and window.plots.series(key).size > 3 for key in keys), timeout=RUN_TIMEOUT_MS
        )
        assert window.run_panel.stop_button.isEnabled()
        qtbot.mouseClick(window.run_panel.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=RUN_TIMEOUT_MS)
    comparison = blocker.args[0]
    # both targets were set up before the rounds began: each ends stopped, after its call in flight
    assert [row.status for row in comparison.rows] == ["stopped", "stopped"]
    assert all(row.result.steps_done < 100000 for row in comparison.rows)
    target = cell(panel, 1, COL_TARGET).text()
    assert target.startswith(MIRRORED) and target.endswith(" [stopped]"), target  # "(busy)" between when contended
    assert [run.status for run in window.history_panel.runs()] == ["stopped", "stopped"]


def test_compare_waits_while_a_single_run_trains(compare_window, qtbot):
    window, panel = compare_window, compare_window.compare_panel
    window.run_panel.steps_edit.setText("5")
    enabled: list[bool] = []
    window.run_controller.running_changed.connect(lambda running: enabled.append(panel.compare_button.isEnabled()))
    start_and_wait(qtbot, window)
    assert enabled == [False, True]
    assert len(window.history_panel.runs()) == 1, "the finished run did not reach the History tab"


def test_a_bad_typed_target_is_explained_and_nothing_runs(compare_window, qtbot):
    panel = compare_window.compare_panel
    panel.set_targets(["CPU:0", "GPU"])
    assert not panel.compare_button.isEnabled()
    assert not panel.start_comparison()
    assert "Target 'GPU' is not understood. Use 'CPU:0', 'GPU:1'" in panel.progress_label.text()
    assert not panel.is_running()


def test_a_compare_in_rounds_shows_each_rows_rounds_and_the_interval_from_them(compare_window, qtbot):
    """Two targets in three interleaved rounds through the real widgets: the Rounds column, the interval's tooltip, the progress."""
    panel = compare_window.compare_panel
    panel.set_targets(["CPU:0", MIRRORED])
    panel.rounds_spin.setValue(3)
    messages: list[str] = []
    panel.message.connect(messages.append)

    comparison = run_comparison(qtbot, panel)

    assert [row.status for row in comparison.rows] == ["completed", "completed"], [r.result.message for r in comparison.rows]
    assert [row.rounds for row in comparison.rows] == [3, 3]
    rounds_column = column_index("rounds")
    assert [cell(panel, row, rounds_column).data(ROLE_VALUE) for row in range(2)] == [3, 3]
    assert any("round 3 of 3" in m for m in messages), messages[-5:]
    low, high = comparison.rows[1].speedup_ci
    assert cell(panel, 1, COL_SPEEDUP).toolTip().startswith(f"95% interval {low:.2f}–{high:.2f}× (over 3 interleaved rounds)")
    spans = [row.result.rounds["spans"] for row in comparison.rows]
    assert [len(s) for s in spans] == [3, 3] and all(s[-1][1] == STEPS for s in spans), spans

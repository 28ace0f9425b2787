"""The Compare tab's "What would … give?": the run form's job projected on a catalogue GPU, shown apart from the measured table."""

from __future__ import annotations

import html

import pytest
from PySide6.QtCore import Qt

from gui.panels.projection import COLUMNS
from tests.gui.helpers import choose

pytestmark = pytest.mark.slow

PROJECTION_TIMEOUT_MS = 180_000


def test_a_projection_fills_its_own_table_labelled_as_one_and_leaves_the_measured_table_alone(ready_window, qtbot):
    panel = ready_window.compare_panel
    view = panel.projection
    measured_rows = panel.table.rowCount()
    assert not view.caveats_button.isEnabled()  # nothing projected yet
    view.device_combo.setCurrentText("H100-SXM")
    qtbot.mouseClick(view.project_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.is_running(), timeout=PROJECTION_TIMEOUT_MS)
    assert view.document is not None, view.label.text()
    assert view.document["projection"] is True and "PROJECTION" in view.label.text()
    points = view.document["calibration"]["points"]
    assert f"calibrated on {len(points)} measured points</b> (not stored): runs on H100-SXM, H200 (" in view.label.text()
    rows = view.document["rows"]
    assert view.table.rowCount() == len(rows) >= 1
    for index, row in enumerate(rows):
        assert row["samples_per_s"]["low"] <= row["samples_per_s"]["high"] <= 2.0001 * row["samples_per_s"]["low"]
        assert view.table.item(index, 0).font().italic()  # drawn apart from the measured rows
        assert view.table.item(index, 3).text() in ("fixed-cost-bound", "compute-bound", "memory-bound")
    assert panel.table.rowCount() == measured_rows  # nothing measured was added
    assert view.table.isColumnHidden(COLUMNS.index("Time to target (projected)")) and "Time to target" not in view.label.text()
    # its caveats, a button away (not only a tooltip): each one said in a box that leaves the table in view
    caveats = view.document["caveats"]
    assert caveats and view.caveats_button.isEnabled() and view.caveats_button.text() == f"Caveats ({len(caveats)})…"
    qtbot.mouseClick(view.caveats_button, Qt.MouseButton.LeftButton)
    box = view.caveats_box
    assert box is not None and box.isVisible() and not box.isModal()
    assert all(html.escape(caveat) in box.informativeText() for caveat in caveats)
    assert any("hosts differ" in caveat for caveat in caveats)  # the points' own machines, computed from them
    box.close()


def test_a_refused_projection_says_why_in_words_and_keeps_the_table_empty(ready_window, qtbot):
    """A TPU has no float16 units: the refusal is said as the CLI says it, with no exception's class name."""
    choose(ready_window.run_panel.precision_combo, "float16")
    view = ready_window.compare_panel.projection
    view.device_combo.setCurrentText("TPU-v4")
    qtbot.mouseClick(view.project_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.is_running(), timeout=PROJECTION_TIMEOUT_MS)
    text = view.label.text()
    assert text.startswith("No projection: TPU-v4 cannot run --precision float16:") and "bfloat16" in text, text
    assert "Refused" not in text and "Error" not in text
    assert view.document is None and view.table.rowCount() == 0 and not view.caveats_button.isEnabled()
    assert view.project_button.isEnabled()  # another device can be tried at once


def test_after_a_comparison_of_the_same_training_the_projection_adds_the_time_to_its_target_loss(ready_window, qtbot):
    """The MLP learns the digits within 80 steps: the comparison's target decides, and the projection of that job turns the
    samples its run needed into a projected time to the target; a job that learns otherwise (another learning rate) gets none."""
    window, panel, view = ready_window, ready_window.compare_panel, ready_window.compare_panel.projection
    choose(window.run_panel.model_combo, "mlp")
    choose(window.run_panel.dataset_combo, "digits")
    window.run_panel.batch_edit.setText("64")
    window.run_panel.steps_edit.setText("80")
    panel.set_targets(["CPU:0"])
    panel.rounds_spin.setValue(1)
    with qtbot.waitSignal(panel.comparison_changed, timeout=PROJECTION_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(panel.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=PROJECTION_TIMEOUT_MS)
    comparison = blocker.args[0]
    config = window.run_panel.config()
    reached = comparison.samples_to_target(config)
    assert reached is not None, comparison.target_decision().why
    [row] = comparison.to_rows_dict()
    assert reached.samples == row["samples_to_target"] and reached.label == row["label"]

    view.device_combo.setCurrentText("H100-SXM")
    qtbot.mouseClick(view.project_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.is_running(), timeout=PROJECTION_TIMEOUT_MS)
    assert view.document is not None, view.label.text()
    assert f"Time to target: {reached.samples:,} samples ({reached.label}'s, to loss {reached.target_loss:.4g})." in view.label.text()
    column = COLUMNS.index("Time to target (projected)")
    assert not view.table.isColumnHidden(column)
    first, *others = view.document["rows"]
    assert first["batch"] == 64 and first["time_to_target_s"]["low"] == pytest.approx(reached.samples / first["samples_per_s"]["high"])
    assert view.table.item(0, column).text().endswith(" s")
    assert all(not view.table.item(i + 1, column).text() for i in range(len(others)))
    # and set against this machine's newest quiet run of the job: the comparison's, unless the machine was busy meanwhile
    measured, measured_column = view.document["measured_here"], COLUMNS.index("× measured here")
    if not comparison.rows[0].result.contended:
        assert measured is not None and measured["samples_per_s"] == pytest.approx(row["samples_per_s"])
    if measured is None:
        assert view.table.isColumnHidden(measured_column) and " here (" not in view.label.text()
    else:
        assert f"of run #{measured['run_id']} here ({measured['where']}, " in view.label.text()
        assert not view.table.isColumnHidden(measured_column)
        assert view.table.item(0, measured_column).text().startswith("×") and not view.table.item(1, measured_column).text()

    window.run_panel.lr_edit.setText("0.01")  # another training: the comparison says nothing of its samples to the target
    qtbot.mouseClick(view.project_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.is_running(), timeout=PROJECTION_TIMEOUT_MS)
    assert view.document is not None and view.document["samples_to_target"] is None
    assert "Time to target" not in view.label.text() and view.table.isColumnHidden(column)
    assert view.document["measured_here"] == measured  # the learning rate sets no speed: the same run is still the job's

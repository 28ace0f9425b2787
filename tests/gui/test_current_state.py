"""What you see is what ran: hooks recorded with the run, runs told apart, and the window's state always current.

One window, three tiny real runs (MLP, 6 steps, batch 16) and one real comparison:
a run with TensorBoard logging, a run without it at another learning rate, the
two compared from the History tab, a comparison while the run panel watches,
and a run closed mid-way.
"""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from core.results import RunStatus
from gui.qt_threads import running_threads
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import set_one_device, start_and_wait

pytestmark = pytest.mark.timeout(300)


def legend_texts(window) -> list[str]:
    legend = window.plots.loss_plot.getPlotItem().legend
    return [label.text for _, label in legend.items]


def run_list_texts(window) -> list[str]:
    run_list = window.plots.run_list
    return [run_list.item(row).text().splitlines()[0] for row in range(run_list.count())]


@pytest.mark.slow
def test_hooks_are_recorded_runs_are_told_apart_and_the_state_is_current(ready_window, qtbot, tmp_path):
    window, panel = ready_window, ready_window.run_panel
    set_one_device(window, "CPU:0", steps=6)
    panel.batch_edit.setText("16")
    window.run_options.tensorboard_check.setChecked(True)
    window.run_options.logdir_edit.setText(str(tmp_path / "tb"))
    logged = start_and_wait(qtbot, window)
    assert logged.result.status == RunStatus.COMPLETED, logged.result.message
    assert logged.result.config["extra"]["hooks"] == {"tensorboard": str(tmp_path / "tb")}
    assert logged.result.summary()["hooks"] == {"tensorboard": str(tmp_path / "tb")}

    # A new run's header names the new run, not the last run's figures, until its first step.
    window.run_options.tensorboard_check.setChecked(False)
    panel.lr_edit.setText("0.01")
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
        header = window.plots.info_label.text()
        assert "no steps yet" in header and "samples/s" not in header, header
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=RUN_TIMEOUT_MS)
    plain = finished.args[0]
    assert plain.result.status == RunStatus.COMPLETED and "hooks" not in plain.result.config["extra"]
    assert " · 6 steps · " in window.plots.info_label.text(), "the header ends on the run's final figures"

    # Legend and run list: history number and what differs.
    first, second = logged.run_id, plain.run_id
    listed, legend = run_list_texts(window), legend_texts(window)
    assert listed[0].startswith(f"#{first} MLP · digits") and "TensorBoard" in listed[0] and listed[0].endswith("lr 0.001"), listed
    assert listed[1].startswith(f"#{second} MLP · digits") and listed[1].endswith(" · lr 0.01, no hooks"), listed
    assert legend[0].startswith(f"#{first} · ") and "TensorBoard" in legend[0] and legend[0].endswith("lr 0.001"), legend
    assert legend[1] == f"#{second} · lr 0.01, no hooks", "the legend: the number and only what differs"

    # The stored run and its export carry the TensorBoard folder; History's Compare selected warns.
    history = window.history_panel
    history.refresh()
    stored = history.store.load(first, with_steps=False)
    assert stored.config["extra"]["hooks"]["tensorboard"] == str(tmp_path / "tb")
    history.select_ids([first, second])
    exported = json.loads(history.export_selected(tmp_path / "runs.json").read_text())
    assert {run["id"]: run["config"]["extra"].get("hooks") for run in exported["runs"]} == {
        first: {"tensorboard": str(tmp_path / "tb")},
        second: None,
    }
    history.compare_selected()
    warnings = window.compare_panel.notes_label.text()
    hooks_warning = next(line for line in warnings.split("<br>") if "The runs differ in hooks (" in line)
    assert "TensorBoard" in hooks_warning and "no hooks" in hooks_warning and "learning_rate" in warnings, warnings

    # While a comparison runs, the run panel says so, then how it ended.
    compare = window.compare_panel
    compare.set_targets(["CPU:0"])
    window.run_options.tensorboard_check.setChecked(True)  # the form's hooks are not the compared runs' hooks
    seen: list[tuple[str, str]] = []
    compare.running_changed.connect(lambda _: seen.append((panel.progress_bar.format(), panel.result_label.text())))
    with qtbot.waitSignal(compare.comparison_changed, timeout=RUN_TIMEOUT_MS):
        qtbot.mouseClick(compare.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not compare.is_running(), timeout=RUN_TIMEOUT_MS)
    assert seen[0][0].startswith("Comparing") and "A comparison is running" in seen[0][1], seen
    assert seen[-1][0] == "Comparison ended" and "Comparison done: 1 of 1 runs completed" in seen[-1][1], seen
    assert "hooks" not in compare.comparison.rows[0].result.config["extra"], "a compared run had no TensorBoard writer"
    window.run_options.tensorboard_check.setChecked(False)
    assert legend_texts(window)[-1].startswith(f"#{first + 2} · "), "the compared run is labelled with its history number too"

    # Closing mid-run says "Stopping…" while it waits for the step in flight.
    panel.steps_edit.setText("100000")
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.plots.series(window.run_controller.current_key).size > 0, timeout=RUN_TIMEOUT_MS)
    window.close()
    assert "Stopping the run after the step in flight" in window.statusBar().currentMessage()
    assert panel.progress_bar.format() == "Stopping…" and not panel.stop_button.isEnabled()
    assert not running_threads(), "the close waited for the run to stop"


@pytest.mark.slow
def test_the_compare_tab_keeps_rows_in_view_at_1024x700(window, qtbot):
    window.resize(1024, 700)
    window.show_panel(window.compare_panel)
    qtbot.waitUntil(lambda: window.compare_panel.table.isVisible(), timeout=5000)
    table = window.compare_panel.table
    assert window.width() == 1024 and window.height() == 700
    rows_in_view = table.viewport().height() / table.verticalHeader().defaultSectionSize()
    assert rows_in_view >= 3.5, f"{rows_in_view:.1f} rows in view"

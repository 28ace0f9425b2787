"""The History tab: runs survive a restart, overlay in the plots, compare, export, delete; a corrupt file is set aside."""

from __future__ import annotations

import csv
import html
import json
import os
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from core.config import RunConfig
from core.history.store import FILE_NAME, RunStore
from core.results import RunResult
from gui.panels.compare import ComparePanel
from gui.panels.compare_table import ROLE_VALUE as COMPARE_VALUE
from gui.panels.compare_table import column_index
from gui.panels.history import HistoryPanel, plot_key, target_text
from gui.panels.history_table import COLUMNS, ROLE_VALUE
from gui.plotting.plots import PlotsWidget
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device, start_and_wait, wired_compare_controller

STEPS = 12
SAMPLES_COLUMN = next(i for i, (_, name) in enumerate(COLUMNS) if name == "samples_per_s")
STATUS_COLUMN = next(i for i, (_, name) in enumerate(COLUMNS) if name == "status")


def history_path():
    return os.path.join(os.environ["DEVICE_LAB_DATA_DIR"], FILE_NAME)


def stored(status: str, model: str, samples: float | None, message: str = "", started: str = "2026-01-01T10:00:00+00:00"):
    """A result as the engine would record it (for listing, filter and sort; no step series)."""
    config = RunConfig(model=model, dataset="synthetic", strategy="one-device", devices=("CPU:0",)).to_dict()
    return RunResult(status=status, config=config, message=message, steps_done=10, samples_per_s=samples, started_at=started)


def new_window(qtbot):
    from gui.main_window import MainWindow
    from gui.settings import effective_runtime_settings, open_settings

    settings = open_settings()
    runtime, note = effective_runtime_settings(settings)
    window = MainWindow(settings, runtime, note)
    qtbot.addWidget(window)
    return window


@pytest.mark.slow
def test_runs_survive_a_restart_with_their_step_series(ready_window, qtbot, tmp_path, monkeypatch):
    first = ready_window
    first.run_panel.steps_edit.setText(str(STEPS))
    finished = [start_and_wait(qtbot, first)]
    set_one_device(first, "CPU:0", STEPS)
    finished.append(start_and_wait(qtbot, first))
    assert [f.result.status for f in finished] == ["completed", "completed"], [f.result.message for f in finished]
    assert len(first.history_panel.runs()) == 2, "the History tab did not refresh when the runs finished"
    first.close()

    window = new_window(qtbot)
    history = window.history_panel
    runs = history.runs()
    assert [run.id for run in runs] == [finished[1].run_id, finished[0].run_id], "newest first"
    assert [run.figures["samples_per_s"] for run in runs] == [finished[1].result.samples_per_s, finished[0].result.samples_per_s]
    table_rates = [history.table.item(row, SAMPLES_COLUMN).data(ROLE_VALUE) for row in range(history.table.rowCount())]
    assert table_rates == [run.figures["samples_per_s"] for run in runs]

    history.select_ids([run.id for run in runs])
    qtbot.mouseClick(history.plot_button, Qt.MouseButton.LeftButton)
    assert window.tabs.currentWidget() is window.plots
    for run, done in zip(runs, reversed(finished), strict=True):
        series = window.plots.series(plot_key(run.id))
        assert series.size == STEPS
        assert list(series.losses.values) == list(done.result.losses)
        assert series.warmup_steps == done.result.warmup_steps

    qtbot.mouseClick(history.compare_button, Qt.MouseButton.LeftButton)
    compare = window.compare_panel
    assert window.tabs.currentWidget() is compare
    assert compare.table.rowCount() == 2
    rates = [compare.table.item(row, column_index("samples_per_s")).data(COMPARE_VALUE) for row in range(2)]
    assert rates == table_rates
    speedups = [compare.table.item(row, column_index("speedup")).data(COMPARE_VALUE) for row in range(2)]
    assert speedups == [1.0, rates[1] / rates[0]], "baseline: the single-CPU run"

    history.export_selected(tmp_path / "runs.csv")
    history.export_selected(tmp_path / "runs.json")
    lines = (tmp_path / "runs.csv").read_text().splitlines()
    assert lines[0].startswith("id,label,group,"), "the first line is the column header"
    assert json.loads((tmp_path / "runs.csv.meta.json").read_text())["runs"] == [run.id for run in runs], "the metadata beside it"
    rows = list(csv.DictReader(lines))
    assert [int(row["id"]) for row in rows] == [run.id for run in runs]
    assert [float(row["samples_per_s"]) for row in rows] == table_rates
    document = json.loads((tmp_path / "runs.json").read_text())
    assert [run["samples_per_s"] for run in document["runs"]] == table_rates
    assert [len(run["losses"]) for run in document["runs"]] == [STEPS, STEPS]

    history.select_ids([runs[0].id])
    answers = [QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes]
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **kwargs: answers.pop(0))
    qtbot.keyClick(history.table, Qt.Key.Key_Delete)
    assert len(answers) == 1, "Delete did not ask first"
    assert len(history.runs()) == 2, "No must keep the run"
    qtbot.keyClick(history.table, Qt.Key.Key_Delete)
    assert [run.id for run in history.runs()] == [runs[1].id]
    assert plot_key(runs[0].id) not in window.plots.run_keys()
    with RunStore.open() as store:
        assert [run.id for run in store.list_runs()] == [runs[1].id]
    window.close()


def test_filter_status_and_sort(qtbot):
    with RunStore.open() as store:
        store.save(stored("completed", "mlp", 500.0, started="2026-01-01T10:00:00+00:00"), label="fast mlp")
        store.save(stored("completed", "cnn", 900.0, started="2026-01-02T10:00:00+00:00"), label="cnn run")
        store.save(stored("failed", "mlp", None, "Out of memory on GPU:0.", started="2026-01-03T10:00:00+00:00"), label="broken")
    panel = HistoryPanel(PlotsWidget())
    qtbot.addWidget(panel)
    assert [run.label for run in panel.runs()] == ["broken", "cnn run", "fast mlp"]
    panel.filter_edit.setText("cnn")
    assert [run.label for run in panel.runs()] == ["cnn run"]
    assert panel.count_label.text() == "1 of 3 runs match"
    panel.filter_edit.clear()
    choose(panel.status_combo, "failed")
    assert [run.label for run in panel.runs()] == ["broken"]
    assert panel.table.item(0, STATUS_COLUMN).toolTip() == "Out of memory on GPU:0."
    panel.status_combo.setCurrentIndex(0)
    header = panel.table.horizontalHeader()
    header.sectionClicked.emit(SAMPLES_COLUMN)
    assert [run.label for run in panel.runs()][:2] == ["cnn run", "fast mlp"]
    header.sectionClicked.emit(SAMPLES_COLUMN)
    assert [run.label for run in panel.runs()][1:] == ["fast mlp", "cnn run"]
    panel.close_store()


@pytest.mark.slow
def test_a_corrupt_history_is_set_aside_and_the_app_starts_empty(qtbot):
    garbage = b"this is not a database " * 200
    os.makedirs(os.path.dirname(history_path()), exist_ok=True)
    with open(history_path(), "wb") as file:
        file.write(garbage)
    window = new_window(qtbot)
    history = window.history_panel
    assert history.runs() == [] and history.table.rowCount() == 0
    assert history.notice and "could not be read" in history.notice
    assert history.notice_label.isVisibleTo(history) and "moved to" in history.notice_label.text()
    assert window.statusBar().currentMessage() == history.notice
    aside = history.store.recovered_from
    assert aside is not None and aside.read_bytes() == garbage
    history.store.save(stored("completed", "mlp", 100.0), label="after recovery")
    history.refresh()
    assert [run.label for run in history.runs()] == ["after recovery"]
    window.close()


@pytest.mark.slow
def test_failed_runs_of_a_comparison_are_in_the_history_with_their_message(qtbot):
    plots = PlotsWidget()
    config = RunConfig(model="mlp", dataset="digits", steps=5, batch_size=63)
    compare = ComparePanel(plots, wired_compare_controller(plots), lambda: config)
    history = HistoryPanel(plots)
    qtbot.addWidget(compare)
    qtbot.addWidget(history)
    compare.run_saved.connect(history.refresh)
    compare.set_targets(["CPU:99", "mirrored:CPU:0,CPU:1"])
    with qtbot.waitSignal(compare.comparison_changed, timeout=RUN_TIMEOUT_MS) as blocker:
        assert compare.start_comparison()
    qtbot.waitUntil(lambda: not compare.is_running(), timeout=RUN_TIMEOUT_MS)
    rows = blocker.args[0].rows
    assert [row.status for row in rows] == ["failed", "failed"]
    runs = history.runs()
    assert [run.status for run in runs] == ["failed", "failed"]
    assert sorted(run.message for run in runs) == sorted(row.result.message for row in rows)
    missing_device = next(run for run in runs if "CPU:99" in run.message)
    history.select_ids([missing_device.id])
    assert html.escape(missing_device.message) in history.details_label.text()
    history.close_store()


def test_show_in_plots_never_adds_a_run_that_is_shown_already(qtbot):
    """A run trained in the window is in the plots under its live key; showing it from the history shows that curve, no copy."""
    losses, times = [2.0, 1.5, 1.2, 1.0], [0.5, 0.01, 0.01, 0.011]
    trained = replace(stored("completed", "mlp", 500.0), losses=losses, step_times_s=times, warmup_steps=1)
    with RunStore.open() as store:
        live_id = store.save(trained, label="trained here")
        other_id = store.save(trained, label="trained earlier")
    plots = PlotsWidget()
    panel = HistoryPanel(plots)
    qtbot.addWidget(plots)
    qtbot.addWidget(panel)
    plots.add_run("live-1", "trained here", losses, times, 1, 64)  # as the window plots a run, then numbers it once saved
    plots.describe_run("live-1", live_id, trained.config)
    plots.set_run_visible("live-1", False)

    panel.select_ids([live_id])
    assert panel.show_selected_in_plots() == ["live-1"]
    assert plots.run_keys() == ["live-1"] and plots.series("live-1").visible, "shown where it was, not added again"
    panel.select_ids([live_id, other_id])
    panel.show_selected_in_plots()
    panel.show_selected_in_plots()
    assert plots.run_keys() == ["live-1", plot_key(other_id)], "each run once, however often it is shown"
    panel.close_store()


def test_a_run_on_another_backend_is_labelled_with_it_when_compared_from_the_history():
    """History -> Compare labelled a JAX run "CPU:0 #5", like a TensorFlow run on the same device."""
    tensorflow = RunConfig(strategy="one-device", devices=("CPU:0",)).to_dict()
    assert target_text(tensorflow) == "CPU:0"
    assert target_text({**tensorflow, "backend": "jax"}) == "jax:CPU:0"
    assert target_text({"strategy": "mirrored", "devices": ["CPU:0", "CPU:1"], "backend": "jax"}) == "jax:mirrored:CPU:0,CPU:1"
    assert target_text({"strategy": "one-device", "devices": ["CPU:0"]}) == "CPU:0", "runs from before backends were TensorFlow's"

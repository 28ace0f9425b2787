"""Real training from the window: curves, Stop, closing mid-run, failures, mirrored, history."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QObject, Qt

from core.formatting import format_value
from core.history.store import RunStore
from core.results import RunStatus
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device, start_and_wait

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
LONG_RUN = 1_000_000


def curve_lengths(window, key: str) -> dict[str, int]:
    items = window.plots.series(key).items
    return {name: len(items[name].getOriginalDataset()[1]) for name in ("loss", "loss_raw", "time", "time_raw")}


def test_run_on_cpu0_plots_every_step_and_shows_the_result(ready_window, qtbot):
    set_one_device(ready_window, "CPU:0", steps=30)
    finished = start_and_wait(qtbot, ready_window)
    result = finished.result
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.steps_done == 30 and result.config["devices"] == ["CPU:0"]
    key = ready_window.run_controller.current_key
    assert curve_lengths(ready_window, key) == {"loss": 30, "loss_raw": 30, "time": 30, "time_raw": 30}
    series = ready_window.plots.series(key)
    assert list(series.losses.values) == pytest.approx(list(result.losses))
    assert series.warmup_steps == result.warmup_steps == 1
    panel = ready_window.run_panel
    assert "Completed" in panel.result_label.text()
    # beside samples/s the step it is made from: the mean (batch / samples/s), then the median
    assert result.mean_step_ms == pytest.approx(result.config["batch_size"] / result.samples_per_s * 1e3)
    shown = f"mean step {format_value(result.mean_step_ms, 'ms')} ms, median {format_value(result.step_time_median_ms, 'ms')} ms"
    assert "samples/s" in panel.result_label.text() and shown in panel.result_label.text()
    assert panel.progress_bar.value() == 30
    assert "samples/s" in ready_window.plots.info_label.text()
    with RunStore.open() as store:
        stored = store.list_runs()
    assert [run.id for run in stored] == [finished.run_id]
    assert stored[0].status == RunStatus.COMPLETED and stored[0].steps == 30
    assert f"run #{finished.run_id}" in panel.result_label.text()
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()


def test_stop_ends_the_run_and_keeps_its_curves(ready_window, qtbot):
    set_one_device(ready_window, "CPU:0", steps=LONG_RUN)
    panel = ready_window.run_panel
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    key = ready_window.run_controller.current_key
    qtbot.waitUntil(lambda: ready_window.plots.series(key).size >= 5, timeout=RUN_TIMEOUT_MS)
    assert not panel.start_button.isEnabled(), "a second Start must be impossible while running"
    assert not ready_window.run_controller.start(panel.config() or ready_window.run_controller._config, "again")
    with qtbot.waitSignal(ready_window.run_controller.run_finished, timeout=60_000) as blocker:
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
    result = blocker.args[0].result
    assert result.status == RunStatus.STOPPED
    assert "Stopped by the user" in result.message
    assert 5 <= result.steps_done < LONG_RUN
    qtbot.waitUntil(lambda: not ready_window.run_controller.is_running(), timeout=10_000)
    assert ready_window.plots.series(key).size == result.steps_done
    assert "Stopped" in panel.result_label.text()


def test_escape_stops_and_ctrl_r_starts(ready_window, qtbot):
    assert ready_window.start_action.shortcut().toString() == "Ctrl+R"
    assert ready_window.stop_action.shortcut().toString() == "Esc"
    set_one_device(ready_window, "CPU:0", steps=LONG_RUN)
    with qtbot.waitSignal(ready_window.run_controller.run_started, timeout=10_000):
        ready_window.start_action.trigger()
    key = ready_window.run_controller.current_key
    qtbot.waitUntil(lambda: ready_window.plots.series(key).size >= 2, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(ready_window.run_controller.run_finished, timeout=60_000) as blocker:
        ready_window.stop_action.trigger()
    assert blocker.args[0].result.status == RunStatus.STOPPED


def test_closing_the_window_mid_run_stops_it_cleanly(ready_window, qtbot):
    set_one_device(ready_window, "CPU:0", steps=LONG_RUN)
    qtbot.mouseClick(ready_window.run_panel.start_button, Qt.MouseButton.LeftButton)
    key = ready_window.run_controller.current_key
    qtbot.waitUntil(lambda: ready_window.plots.series(key).size >= 3, timeout=RUN_TIMEOUT_MS)
    ready_window.close()
    from gui.qt_threads import running_threads

    assert not running_threads()
    with RunStore.open() as store:
        runs = store.list_runs()
    assert len(runs) == 1 and runs[0].status == RunStatus.STOPPED and runs[0].steps >= 3


def test_a_diverging_run_shows_its_error_and_the_next_run_works(ready_window, qtbot):
    panel = ready_window.run_panel
    set_one_device(ready_window, "CPU:0", steps=100)
    panel.lr_edit.setText("10")
    panel.optimizer_combo.setCurrentText("sgd")
    choose(panel.precision_combo, "float16")
    failed = start_and_wait(qtbot, ready_window).result
    assert failed.status == RunStatus.FAILED
    assert "The loss became nan" in failed.message
    assert "Lower the learning rate" in panel.result_label.text()
    failed_key = ready_window.run_controller.current_key
    assert ready_window.plots.series(failed_key).size == failed.steps_done > 0, "partial curves stay"
    panel.lr_edit.setText("0.001")
    panel.optimizer_combo.setCurrentText("adam")
    choose(panel.precision_combo, "off")
    panel.steps_edit.setText("10")
    again = start_and_wait(qtbot, ready_window).result
    assert again.status == RunStatus.COMPLETED
    assert set(ready_window.plots.run_keys()) == {failed_key, ready_window.run_controller.current_key}
    with RunStore.open() as store:
        assert sorted(run.status for run in store.list_runs()) == [RunStatus.COMPLETED, RunStatus.FAILED]


def test_a_device_tensorflow_does_not_have_fails_readably(ready_window, qtbot):
    from core.config import RunConfig

    controller = ready_window.run_controller
    config = RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=("CPU:7",), steps=5)
    with qtbot.waitSignal(controller.run_finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert controller.start(config, "missing device")
    result = blocker.args[0].result
    assert result.status == RunStatus.FAILED and "CPU:7" in result.message and "CPU:0" in result.message
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    assert "CPU:7" in ready_window.run_panel.result_label.text()
    assert ready_window.run_panel.progress_bar.maximum() > 0, "no busy indicator left spinning"


def test_mirrored_on_two_logical_cpus(ready_window, qtbot):
    panel = ready_window.run_panel
    assert next(c for c in panel.state.strategies if c.name == "mirrored").available
    choose(panel.strategy_combo, "mirrored")
    assert panel.config().devices == ("CPU:0", "CPU:1")
    panel.steps_edit.setText("12")
    result = start_and_wait(qtbot, ready_window).result
    assert result.status == RunStatus.COMPLETED, result.message
    assert result.replicas == 2 and result.steps_done == 12
    assert "2 replicas" in panel.result_label.text()


def test_closing_mid_run_says_stopping_before_it_waits(ready_window, qtbot):
    painted: list[str] = []

    class PaintWatcher(QObject):
        def eventFilter(self, watched, event):
            if event.type() == QEvent.Type.Paint:
                painted.append(ready_window.statusBar().currentMessage())
            return False

    set_one_device(ready_window, "CPU:0", steps=LONG_RUN)
    qtbot.mouseClick(ready_window.run_panel.start_button, Qt.MouseButton.LeftButton)
    key = ready_window.run_controller.current_key
    qtbot.waitUntil(lambda: ready_window.plots.series(key).size >= 3, timeout=RUN_TIMEOUT_MS)
    watcher = PaintWatcher()
    ready_window.statusBar().installEventFilter(watcher)
    ready_window.close()
    ready_window.statusBar().removeEventFilter(watcher)
    assert any(text.startswith("Stopping the run after the step in flight, then closing") for text in painted), painted
    with RunStore.open() as store:
        assert [run.status for run in store.list_runs()] == [RunStatus.STOPPED]


def test_a_history_that_cannot_be_written_leaves_the_result_shown_with_one_reason(ready_window, qtbot, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(blocker / "data"))
    set_one_device(ready_window, "CPU:0", steps=6)
    finished = start_and_wait(qtbot, ready_window)
    assert finished.result.status == RunStatus.COMPLETED and finished.run_id is None
    text = ready_window.run_panel.result_label.text()
    assert "Completed" in text and "samples/s" in text
    assert text.count("The run was not saved to the history") == 1 and str(blocker) in text
    assert "Run completed after 6 steps" in ready_window.statusBar().currentMessage()

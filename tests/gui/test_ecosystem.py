"""The finished program: TensorBoard and profiler from the window, remembered settings, About, Help, log view, tooltips, menus, theme."""

from __future__ import annotations

import logging
import platform
import threading
import urllib.request
from importlib import metadata
from pathlib import Path

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QUrl, qVersion
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QMenuBar,
    QSlider,
    QTabBar,
    QWidget,
)

from core.hooks.tensorboard import HOST_MEMORY_TAG, TENSORBOARD_MISSING
from core.logs import log_buffer, setup_logging
from core.results import RunStatus
from tests.gui.conftest import DETECTION_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device, start_and_wait

pytestmark = pytest.mark.timeout(300)
CONTROLS = (QAbstractButton, QComboBox, QLineEdit, QAbstractSpinBox, QSlider)
QT_COMPOSITES = (QTabBar, QMenuBar, QLineEdit, QAbstractSpinBox, QComboBox)
TENSORBOARD_START_MS = 150_000


def event_scalars(run_dir: Path) -> dict[str, list[int]]:
    """Tag -> steps, as TensorBoard's event reader sees them (tf.summary writes scalars as tensors)."""
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    return {tag: [event.step for event in accumulator.Tensors(tag)] for tag in accumulator.Tags()["tensors"]}


def controls_without_tooltip(root: QWidget) -> list[str]:
    """Every button, combo box, text field, spin box and slider under `root` (shown or not) that has no tooltip.

    Qt's own parts (tab-bar arrows, a line edit's clear button, a spin box's text field) are not ours to label.
    """
    missing = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, CONTROLS) or widget.objectName().startswith("qt_") or isinstance(widget.parent(), QT_COMPOSITES):
            continue
        if not widget.toolTip().strip():
            text = widget.text() if hasattr(widget, "text") else ""
            missing.append(f"{type(widget).__name__} {widget.objectName() or '(no name)'} {text!r}")
    return missing


# --- TensorBoard and the profiler --------------------------------------------------------------


@pytest.mark.slow
def test_a_run_with_tensorboard_on_writes_event_files_tensorboard_can_read(ready_window, qtbot, tmp_path):
    options = ready_window.run_options
    options.tensorboard_check.setChecked(True)
    options.logdir_edit.setText(str(tmp_path / "tb"))
    set_one_device(ready_window, "CPU:0", steps=12)
    finished = start_and_wait(qtbot, ready_window)
    assert finished.result.status == RunStatus.COMPLETED, finished.result.message
    run_dirs = [p for p in (tmp_path / "tb").iterdir() if p.is_dir()]
    assert len(run_dirs) == 1 and run_dirs[0].name.endswith("-mlp-one-device")
    scalars = event_scalars(run_dirs[0])
    steps = list(range(1, 13))
    assert scalars["loss"] == steps and scalars["step_time_ms"] == steps and scalars["samples_per_s"] == steps
    assert scalars[HOST_MEMORY_TAG], "a CPU run records the process's memory"
    assert str(run_dirs[0]) in options.outputs_label.text()


@pytest.mark.slow
def test_profile_steps_from_the_window_leave_a_trace_in_the_run_folder(ready_window, qtbot, tmp_path):
    options = ready_window.run_options
    options.tensorboard_check.setChecked(True)
    options.logdir_edit.setText(str(tmp_path / "tb"))
    options.profile_check.setChecked(True)
    options.first_step_spin.setValue(3)
    options.last_step_spin.setValue(4)
    set_one_device(ready_window, "CPU:0", steps=8)
    finished = start_and_wait(qtbot, ready_window)
    assert finished.result.status == RunStatus.COMPLETED, finished.result.message
    (run_dir,) = [p for p in (tmp_path / "tb").iterdir() if p.is_dir()]
    traces = list((run_dir / "plugins" / "profile").rglob("*.xplane.pb"))
    assert traces and all(t.stat().st_size > 0 for t in traces)
    said = options.outputs_label.text()
    assert "Profile of steps 3–4 saved under" in said and "tensorboard --logdir" in said
    breakdown = options.profile_view  # opened by itself: the ops that took the time, read from the trace
    qtbot.waitUntil(lambda: breakdown.isVisible() and not breakdown.loading)
    ops = [op.name for op in breakdown.summary.ops] if breakdown.summary is not None else []
    assert any("MatMul" in name for name in ops), ops  # "MatMul", or oneDNN's "_MklMatMul" on CPUs where TF uses it
    assert any("ran under the profiler" in warning for warning in finished.result.warnings), "profiled steps kept apart"


@pytest.mark.slow
def test_a_profile_range_past_the_run_keeps_the_run_from_starting(ready_window, qtbot):
    options = ready_window.run_options
    options.profile_check.setChecked(True)
    options.first_step_spin.setValue(50)
    options.last_step_spin.setValue(60)
    set_one_device(ready_window, "CPU:0", steps=10)
    ready_window.run_panel.request_start()
    assert not ready_window.run_controller.is_running()
    message = ready_window.statusBar().currentMessage()
    assert message.startswith("Not started: profile_steps") and "10 steps" in message
    assert "Not started" in ready_window.run_panel.result_label.text()
    assert "profile_steps" in ready_window.run_panel.result_label.text()


@pytest.mark.slow
def test_open_in_tensorboard_serves_the_folder_on_localhost_and_stops_with_the_window(window, qtbot, tmp_path, monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(QUrl(url).toString()) or True))
    options = window.run_options
    options.logdir_edit.setText(str(tmp_path / "tb"))
    qtbot.mouseClick(options.open_button, pg.QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(opened) or "Could not" in options.status_label.text(), timeout=TENSORBOARD_START_MS)
    assert opened, options.status_label.text()
    assert opened[0].startswith("http://127.0.0.1:")
    server = options.tensorboard
    assert server is not None and server.running and server.logdir == tmp_path / "tb"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(opened[0], timeout=10) as response:
        assert response.status == 200
    window.close()
    assert not server.running


@pytest.mark.slow
def test_open_in_tensorboard_says_how_to_install_it_when_missing(window, qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr("core.hooks.tensorboard.find_tensorboard", lambda: None)
    options = window.run_options
    options.logdir_edit.setText(str(tmp_path / "tb"))
    qtbot.mouseClick(options.open_button, pg.QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: TENSORBOARD_MISSING in options.status_label.text(), timeout=30_000)
    assert options.tensorboard is None and options.open_button.isEnabled()


# --- settings across restarts ------------------------------------------------------------------


@pytest.fixture
def new_window(qtbot):
    """Opens main windows on the test's settings folder, ready to run; closes those still open afterwards."""
    from gui.main_window import MainWindow
    from gui.settings import effective_runtime_settings, open_settings

    opened = []

    def open_window(charts_later: bool = False):
        settings = open_settings()
        runtime, note = effective_runtime_settings(settings)
        window = MainWindow(settings, runtime, note, charts_later=charts_later)
        opened.append(window)
        window.show()
        window.start()
        qtbot.waitUntil(window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
        return window

    yield open_window
    for window in opened:
        if window.isVisible():
            window.close()
        window.deleteLater()


@pytest.mark.slow
@pytest.mark.parametrize("charts_later", [False, True], ids=["charts-at-once", "charts-after-devices"])
def test_the_run_form_and_options_survive_closing_and_reopening(new_window, tmp_path, charts_later):
    first = new_window()
    panel = first.run_panel
    choose(panel.model_combo, "cnn")
    choose(panel.dataset_combo, "synthetic")
    set_one_device(first, "CPU:1", steps=77)
    panel.batch_edit.setText("32")
    panel.lr_edit.setText("0.01")
    panel.optimizer_combo.setCurrentText("sgd")
    panel.xla_check.setChecked(True)
    first.run_options.tensorboard_check.setChecked(True)
    first.run_options.logdir_edit.setText(str(tmp_path / "boards"))
    first.run_options.profile_check.setChecked(True)
    first.run_options.first_step_spin.setValue(2)
    first.run_options.last_step_spin.setValue(4)
    first.compare_panel.set_targets(["CPU:1", "mirrored:CPU:0,CPU:1"])
    chosen_targets = first.compare_panel.chosen_targets()
    first.close()

    second = new_window(charts_later)
    panel = second.run_panel
    assert panel.model_combo.currentData() == "cnn" and panel.dataset_combo.currentData() == "synthetic"
    assert panel.strategy_combo.currentData() == "one-device" and panel.device_combo.currentData() == "CPU:1"
    assert (panel.steps_edit.text(), panel.batch_edit.text(), panel.lr_edit.text()) == ("77", "32", "0.01")
    assert panel.optimizer_combo.currentText() == "sgd" and panel.xla_check.isChecked()
    options = second.run_options
    assert options.tensorboard_check.isChecked() and options.log_dir() == tmp_path / "boards"
    assert options.profile_steps() == (2, 4)
    assert second.compare_panel.chosen_targets() == chosen_targets
    config = panel.config()
    assert config is not None and (config.model, config.batch_size, config.learning_rate) == ("cnn", 32, 0.01)


# --- About, Help, log, tooltips, menus, theme --------------------------------------------------


def test_about_lists_the_versions_actually_installed(qtbot):
    import keras
    import tensorflow as tf

    from gui.dialogs.about import LOADING, AboutDialog

    dialog = AboutDialog()
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.versions["TensorFlow"] != LOADING, timeout=60_000)
    versions = dialog.versions
    assert versions["TensorFlow"] == tf.__version__ == metadata.version("tensorflow")
    assert versions["Keras"] == keras.__version__ == metadata.version("keras")
    assert versions["PySide6"] == metadata.version("PySide6-Essentials") and versions["Qt"] == qVersion()
    assert versions["Python"].startswith(platform.python_version())
    try:
        assert versions["Device Lab"] == metadata.version("device-lab")
    except metadata.PackageNotFoundError:
        assert versions["Device Lab"] == "dev"
    build = tf.sysconfig.get_build_info()
    expected_cuda = str(build["cuda_version"]) if build.get("is_cuda_build") else "not a CUDA build"
    assert versions["CUDA (TF build)"] == expected_cuda
    shown = dialog.versions_label.text()
    for name, version in versions.items():
        assert name in shown and version in shown
    dialog.copy_versions()
    assert f"TensorFlow: {tf.__version__}" in QApplication.clipboard().text()


@pytest.mark.slow
def test_help_shows_how_to_use_the_window(window):
    dialog = window.show_help()
    assert dialog.isVisible() and window.show_help() is dialog, "F1 again brings the same dialog forward"
    shown = dialog.browser.toPlainText()
    steps = ["Pick what to train", "Start, and read the plots", "Compare devices", "Read the verdict", "Find fast settings"]
    assert all(step in shown for step in steps), shown[:400]
    assert "pip install" not in shown and "pytest" not in shown, "the README's install and test commands stay in the README"
    assert "# " not in shown.splitlines()[0], "Markdown is rendered, not shown as source"


@pytest.fixture
def app_logging(tmp_path):
    """The app's logging set-up (file + in-app buffer) for one test, undone afterwards."""
    root = logging.getLogger()
    level = root.level
    setup_logging(tmp_path / "logs")
    yield tmp_path / "logs"
    for handler in [h for h in root.handlers if getattr(h, "_device_lab", False)]:
        root.removeHandler(handler)
        if handler is not log_buffer():
            handler.close()
    root.setLevel(level)
    log_buffer().clear()


def test_log_view_shows_tensorflow_log_lines_old_and_new(qtbot, app_logging):
    from gui.panels.log_dock import LogView

    logging.getLogger("tensorflow").warning("before the view opened")
    view = LogView()
    qtbot.addWidget(view)
    assert "tensorflow: before the view opened" in view.text.toPlainText()
    thread = threading.Thread(target=lambda: logging.getLogger("tensorflow").warning("from a training thread"))
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: "WARNING tensorflow: from a training thread" in view.text.toPlainText(), timeout=5_000)
    logging.getLogger("device_lab.test").info("an info line")
    assert "an info line" in view.text.toPlainText()
    choose(view.level_combo, logging.WARNING)
    assert "an info line" not in view.text.toPlainText() and "from a training thread" in view.text.toPlainText()
    assert "from a training thread" in (app_logging / "device-lab.log").read_text(encoding="utf-8")
    view.close_down()


@pytest.mark.slow
def test_every_control_has_a_tooltip(ready_window, qtbot, tmp_path):
    from gui.dialogs.about import LOADING, AboutDialog
    from gui.dialogs.help import HelpDialog
    from gui.dialogs.settings import SettingsDialog
    from gui.settings import open_settings

    ready_window.log_dock.show()
    dialogs = [AboutDialog(), HelpDialog(), SettingsDialog(open_settings(tmp_path), ready_window.runtime)]
    for dialog in dialogs:
        qtbot.addWidget(dialog)
    assert ready_window.findChildren(QAbstractButton), "the walk must see the window's controls"
    missing = [name for root in [ready_window, *dialogs] for name in controls_without_tooltip(root)]
    assert not missing, "controls without a tooltip:\n" + "\n".join(missing)
    qtbot.waitUntil(lambda: dialogs[0].versions["TensorFlow"] != LOADING, timeout=60_000)


@pytest.mark.slow
def test_menus_list_the_shortcuts(window):
    shortcuts = {}
    for menu_action in window.menuBar().actions():
        for action in menu_action.menu().actions():
            if not action.isSeparator():
                shortcuts[action.text()] = action.shortcut().toString()
    assert shortcuts["Start"] == "Ctrl+R" and shortcuts["Stop"] == "Esc"
    assert shortcuts["Quit"] == "Ctrl+Q" and shortcuts["Refresh"] == "F5" and shortcuts["Quick start"] == "F1"
    assert shortcuts["Save plots as image…"] == "Ctrl+S" and shortcuts["Device settings…"] == "Ctrl+,"
    assert shortcuts["Log"] == "Ctrl+L"
    assert "About Device Lab" in shortcuts


@pytest.mark.slow
def test_plots_follow_a_dark_palette_and_back(window, qtbot):
    from gui.plotting.theme import DARK, LIGHT, is_dark

    app = QApplication.instance()
    plots = window.findChildren(pg.PlotWidget)
    assert len(plots) >= 4 and not is_dark()
    assert {p.backgroundBrush().color().name() for p in plots} == {LIGHT.background}
    light = app.palette()
    dark = QPalette(light)
    dark.setColor(QPalette.ColorRole.Window, pg.QtGui.QColor("#202124"))
    dark.setColor(QPalette.ColorRole.WindowText, pg.QtGui.QColor("#e8eaed"))
    app.setPalette(dark)
    try:
        qtbot.waitUntil(lambda: {p.backgroundBrush().color().name() for p in plots} == {DARK.background}, timeout=5_000)
        axis = window.plots.loss_plot.getPlotItem().getAxis("left")
        assert axis.textPen().color().name() == DARK.foreground
    finally:
        app.setPalette(light)
    qtbot.waitUntil(lambda: {p.backgroundBrush().color().name() for p in plots} == {LIGHT.background}, timeout=5_000)


@pytest.mark.slow
def test_the_app_icon_ships_in_resources(window):
    from gui.icons import APP_ICON_PNG, APP_ICON_SVG, app_icon

    assert APP_ICON_SVG.is_file() and APP_ICON_PNG.is_file()
    icon = app_icon()
    assert not icon.isNull() and not icon.pixmap(256, 256).isNull()
    assert not window.windowIcon().isNull()

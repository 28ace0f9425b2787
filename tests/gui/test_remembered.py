"""What the window remembers: where file dialogs start, its size on a smaller screen, the run form across windows and versions."""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QSplitter

from core.machine.types import DeviceInfo, DeviceReport
from gui.remembered import FOLDER_EXPORT, FOLDER_MODEL, FormMemory, WindowMemory, documents_folder, last_folder, remember_folder
from gui.settings import open_settings
from gui.state.run_form import RunFormState
from gui.state.saved_form import saved_values

SOURCE_TREE = Path(__file__).resolve().parents[2]


def test_a_dialog_never_used_starts_in_the_documents_folder_not_the_source_tree(monkeypatch, tmp_path):
    monkeypatch.chdir(SOURCE_TREE)  # where the app is often started from
    settings = open_settings()
    start = last_folder(settings, FOLDER_EXPORT)
    assert start == documents_folder() and os.path.isdir(start)
    assert not Path(start).resolve().is_relative_to(SOURCE_TREE)
    remember_folder(settings, FOLDER_EXPORT, str(tmp_path / "plots.png"))
    assert last_folder(open_settings(), FOLDER_EXPORT) == str(tmp_path), "then the folder last used"
    assert last_folder(settings, FOLDER_MODEL) == documents_folder(), "each kind of file keeps its own folder"


def test_a_window_saved_larger_than_the_screen_reopens_whole_on_it(qtbot, tmp_path, monkeypatch):
    """Saved at 1400x880 (another screen), restored on this one (the offscreen screen, smaller): it fits, Start in reach."""
    from PySide6.QtWidgets import QMainWindow, QPushButton

    from gui.settings import KEY_WINDOW_GEOMETRY, open_settings
    from tests.gui.conftest import opened_main_window

    big = QMainWindow()
    qtbot.addWidget(big)
    big.setGeometry(300, 200, 1400, 880)
    area = big.screen().availableGeometry()
    assert big.width() > area.width() or big.height() > area.height(), "the test needs a screen smaller than the saved window"
    monkeypatch.setenv("DEVICE_LAB_SETTINGS_DIR", str(tmp_path / "settings"))
    open_settings().setValue(KEY_WINDOW_GEOMETRY, big.saveGeometry())

    windows = opened_main_window(True)
    window = next(windows)
    try:
        frame = window.frameGeometry()
        assert area.top() <= frame.top() and frame.bottom() <= area.bottom(), f"{frame} is taller than the screen's {area}"
        assert frame.left() >= area.left() and window.width() <= max(area.width(), window.minimumSizeHint().width())
        start = window.findChild(QPushButton, "startButton")
        bottom = start.mapToGlobal(start.rect().bottomLeft()).y()
        assert area.top() <= bottom <= area.bottom(), "Start lies on the screen"
    finally:
        next(windows, None)


def test_a_first_start_on_a_small_screen_opens_whole_on_it(qtbot, tmp_path, monkeypatch):
    """No saved geometry: the default 1400x880 is fitted to the screen too (it was not: a 1024x700 screen, 2026-11-28)."""
    from PySide6.QtWidgets import QPushButton

    from tests.gui.conftest import opened_main_window

    monkeypatch.setenv("DEVICE_LAB_SETTINGS_DIR", str(tmp_path / "settings"))
    windows = opened_main_window(True)
    window = next(windows)
    try:
        assert not window._restored_geometry
        area = window.screen().availableGeometry()
        assert area.width() < 1400, "the test needs a screen smaller than the default size"
        frame = window.frameGeometry()
        assert area.top() <= frame.top() and frame.bottom() <= area.bottom(), f"{frame} is taller than the screen's {area}"
        assert window.width() <= max(area.width(), window.minimumSizeHint().width())
        start = window.findChild(QPushButton, "startButton")
        assert area.top() <= start.mapToGlobal(start.rect().bottomLeft()).y() <= area.bottom(), "Start lies on the screen"
    finally:
        next(windows, None)


# --- the run form ------------------------------------------------------------------------------------------------------

CPU0 = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})
CPU1 = DeviceInfo("CPU", "Test CPU", "CPU:1", 8 << 30, 2 << 30, 6 << 30, {})


def write_previous_layout(folder: Path) -> Path:
    """A settings file as the version before the form's state wrote it: QSettings values under the widgets' objectNames
    (texts, a JSON list for the device list) and the logging box's own keys (a bool, ints)."""
    settings = QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat)
    for name, value in {"modelCombo": "cnn", "datasetCombo": "synthetic", "strategyCombo": "one-device", "deviceCombo": "CPU:1",
                        "deviceList": json.dumps(["CPU:0", "CPU:1"]), "batchSizeEdit": "32", "stepsEdit": "77",
                        "stepsUnitCombo": "steps", "learningRateEdit": "0.01", "optimizerCombo": "sgd", "xlaCheck": "true",
                        "workersSpin": "3", "allowNetworkWorkersCheck": "true"}.items():  # fmt: skip
        settings.setValue(f"runForm/{name}", value)
    settings.setValue("logging/tensorboard", True)
    settings.setValue("logging/tensorboard_dir", str(folder / "boards"))
    settings.setValue("logging/profile", True)
    settings.setValue("logging/profile_first", 2)
    settings.setValue("logging/profile_last", 4)
    settings.sync()
    return folder / "settings.ini"


def form_window(qtbot, settings):
    """The run form, its logging box and the window's memory, wired as the main window wires them; restored once."""
    from gui.run_form.hooks_box import RunOptionsBox
    from gui.run_form.panel import RunPanel

    panel = RunPanel(settings)
    qtbot.addWidget(panel)
    options = RunOptionsBox(settings, panel.state)
    panel.add_section(options)
    splitter = QSplitter()
    qtbot.addWidget(splitter)
    memory = WindowMemory(settings, panel.state, splitter, panel)
    memory.restore()
    return panel, options, memory


def test_settings_of_the_previous_version_are_read_once_and_saved_in_the_new_form(tmp_path):
    path = write_previous_layout(tmp_path)
    state = RunFormState()
    FormMemory(open_settings(tmp_path), state).restore()
    assert (state.model, state.dataset, state.strategy, state.device, state.batch_size, state.length) == (
        "cnn", "synthetic", "one-device", "CPU:1", "32", "77"
    )  # fmt: skip
    assert (state.optimizer, state.xla, state.workers, state.profile_first, state.profile_last) == ("sgd", True, 3, 2, 4)
    assert state.tensorboard and state.tensorboard_dir == str(tmp_path / "boards") and not state.allow_network_workers
    reread = QSettings(str(path), QSettings.Format.IniFormat)
    assert reread.allKeys() == ["runForm/state"], "the previous layout is gone, the state saved in its place"
    again = RunFormState()
    FormMemory(open_settings(tmp_path), again).restore()
    assert saved_values(again) == saved_values(state)


def test_an_old_settings_file_restores_the_form_and_the_device_choices_wait_for_the_devices(qtbot, tmp_path):
    settings = open_settings(write_previous_layout(tmp_path).parent)
    panel, options, _memory = form_window(qtbot, settings)
    assert panel.model_combo.currentData() == "cnn" and panel.dataset_combo.currentData() == "synthetic"
    assert (panel.batch_edit.text(), panel.steps_edit.text(), panel.lr_edit.text()) == ("32", "77", "0.01")
    assert panel.optimizer_combo.currentData() == "sgd" and panel.xla_check.isChecked() and panel.workers_spin.value() == 3
    assert options.tensorboard_check.isChecked() and options.log_dir() == tmp_path / "boards" and options.profile_steps() == (2, 4)
    assert panel.strategy_combo.currentData() == "one-device" and panel.device_combo.count() == 0
    assert panel.state.device == "CPU:1", "held until the devices are listed"
    panel.set_devices(DeviceReport((CPU0, CPU1), ()))
    assert panel.device_combo.currentData() == "CPU:1" and panel.start_button.isEnabled()
    config = panel.config()
    assert (config.model, config.strategy, config.devices, config.batch_size, config.steps) == ("cnn", "one-device", ("CPU:1",), 32, 77)
    assert config.hooks.to_dict() == {"tensorboard": str(tmp_path / "boards"), "profile": "2-4"}


def test_a_change_in_the_form_is_remembered_by_the_next_window(qtbot, tmp_path):
    from tests.gui.helpers import choose

    first, options, memory = form_window(qtbot, open_settings(tmp_path))
    first.set_devices(DeviceReport((CPU0, CPU1), ()))
    choose(first.model_combo, "transformer")
    choose(first.strategy_combo, "mirrored")
    first.steps_unit.setCurrentText("epochs")
    first.steps_edit.setText("3")
    first.precision_combo.setCurrentIndex(first.precision_combo.findData("bfloat16"))
    options.profile_check.setChecked(True)
    memory.save()  # as the window does on Start and on close

    second, options, _memory = form_window(qtbot, open_settings(tmp_path))
    assert second.model_combo.currentData() == "transformer" and second.strategy_combo.currentData() == "mirrored"
    assert (second.steps_unit.currentText(), second.steps_edit.text(), second.precision_combo.currentData()) == ("epochs", "3", "bfloat16")
    assert options.profile_check.isChecked()
    second.set_devices(DeviceReport((CPU0, CPU1), ()))
    config = second.config()
    assert config is not None and (config.model, config.strategy, config.devices, config.epochs) == (
        "transformer",
        "mirrored",
        ("CPU:0", "CPU:1"),
        3,
    )

"""Start-up device settings: stored where tests say, overridable by env, saved by the dialog, restart offered."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QMessageBox

from core.machine.runtime import RuntimeSettings
from gui.dialogs.settings import RESTART_NOTE, SettingsDialog
from gui.settings import effective_runtime_settings, open_settings, save_runtime_settings, saved_runtime_settings


def test_settings_live_in_the_folder_named_by_the_environment(isolated_folders):
    settings = open_settings()
    assert Path(settings.fileName()).parent == isolated_folders / "settings"
    save_runtime_settings(settings, RuntimeSettings(logical_cpus=4, gpu_memory_growth=False, gpu_memory_limit_mb=2048))
    assert saved_runtime_settings(open_settings()) == RuntimeSettings(4, False, 2048)


def test_unreadable_saved_settings_fall_back_to_defaults(tmp_path):
    settings = open_settings(tmp_path)
    settings.setValue("runtime/logical_cpus", "many")
    assert saved_runtime_settings(settings) == RuntimeSettings()


def test_environment_overrides_the_logical_cpu_count(tmp_path, monkeypatch):
    settings = open_settings(tmp_path)
    save_runtime_settings(settings, RuntimeSettings(logical_cpus=4))
    monkeypatch.setenv("DEVICE_LAB_LOGICAL_CPUS", "2")
    runtime, note = effective_runtime_settings(settings)
    assert runtime.logical_cpus == 2 and "DEVICE_LAB_LOGICAL_CPUS" in note
    monkeypatch.setenv("DEVICE_LAB_LOGICAL_CPUS", "lots")
    runtime, note = effective_runtime_settings(settings)
    assert runtime.logical_cpus == 4 and note.startswith("Ignored DEVICE_LAB_LOGICAL_CPUS")
    monkeypatch.delenv("DEVICE_LAB_LOGICAL_CPUS")
    assert effective_runtime_settings(settings) == (RuntimeSettings(logical_cpus=4), "")


def test_dialog_saves_and_says_a_restart_is_needed(qtbot, tmp_path):
    settings = open_settings(tmp_path)
    dialog = SettingsDialog(settings, active=RuntimeSettings(logical_cpus=2))
    qtbot.addWidget(dialog)
    assert RESTART_NOTE in dialog.findChild(QLabel, "restartNote").text()
    assert dialog.needs_restart(), "saved defaults (no split) differ from the running 2 logical CPUs"
    dialog.logical_cpus_spin.setValue(2)
    assert not dialog.needs_restart()
    dialog.memory_limit_spin.setValue(1024)
    assert not dialog.memory_growth_check.isEnabled()
    dialog.accept()
    assert saved_runtime_settings(settings) == RuntimeSettings(logical_cpus=2, gpu_memory_growth=True, gpu_memory_limit_mb=1024)


@pytest.mark.slow
def test_accepting_the_restart_closes_the_window_and_asks_for_a_restart(ready_window, monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *args, **kwargs: QMessageBox.StandardButton.Yes))
    ready_window.offer_restart()
    assert ready_window.restart_requested
    assert not ready_window.isVisible()


@pytest.mark.slow
def test_declining_the_restart_keeps_the_window(ready_window, monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *args, **kwargs: QMessageBox.StandardButton.No))
    ready_window.offer_restart()
    assert not ready_window.restart_requested and ready_window.isVisible()
    assert "take effect after a restart" in ready_window.statusBar().currentMessage()

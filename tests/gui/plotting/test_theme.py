"""Light, dark or the system's theme, chosen in Settings: the app's palette and the plots follow at once."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QComboBox, QLabel, QWidget

from core.machine.runtime import MEMORY_GROWTH_NOTE, RuntimeSettings
from gui.dialogs.settings import SettingsDialog
from gui.plotting.plots import PlotsWidget
from gui.plotting.theme import DARK, LIGHT, ThemeFollower, apply_theme, is_dark
from gui.settings import open_settings, saved_theme
from tests.gui.helpers import choose


@pytest.fixture
def window_with_plots(qtbot):
    """A window holding the plots and the follower that keeps them in the theme's colours; the system theme after."""
    root = QWidget()
    plots = PlotsWidget(root)
    follower = ThemeFollower(root)
    qtbot.addWidget(root)
    root.show()
    yield plots, follower
    apply_theme("system")


def save_theme_in_dialog(qtbot, settings, theme: str) -> SettingsDialog:
    dialog = SettingsDialog(settings, RuntimeSettings())
    qtbot.addWidget(dialog)
    choose(dialog.findChild(QComboBox, "themeCombo"), theme)
    dialog.accept()
    return dialog


def window_lightness() -> int:
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness()


def test_choosing_dark_then_light_then_system_restyles_widgets_and_plots(window_with_plots, qtbot, tmp_path):
    plots, follower = window_with_plots
    settings = open_settings(tmp_path)
    assert saved_theme(settings) == "system"
    system_window = QGuiApplication.palette().color(QPalette.ColorRole.Window).name()

    save_theme_in_dialog(qtbot, settings, "dark")
    assert saved_theme(open_settings(tmp_path)) == "dark" and is_dark()
    assert window_lightness() < 128
    qtbot.waitUntil(lambda: plots.palette().color(QPalette.ColorRole.Window).lightness() < 128)
    qtbot.waitUntil(lambda: plots.loss_plot.background().name() == DARK.background)
    assert follower.dark and plots.step_time_plot.background().name() == DARK.background

    save_theme_in_dialog(qtbot, settings, "light")
    assert saved_theme(open_settings(tmp_path)) == "light" and not is_dark() and window_lightness() > 128
    qtbot.waitUntil(lambda: plots.loss_plot.background().name() == LIGHT.background)

    dialog = save_theme_in_dialog(qtbot, settings, "system")
    assert saved_theme(open_settings(tmp_path)) == "system"
    assert QGuiApplication.palette().color(QPalette.ColorRole.Window).name() == system_window
    assert not dialog.needs_restart(), "the theme applies at once; only device settings need a restart"


def test_settings_explain_why_tensorflow_seems_to_take_the_whole_gpu(qtbot, tmp_path):
    dialog = SettingsDialog(open_settings(tmp_path), RuntimeSettings())
    qtbot.addWidget(dialog)
    note = dialog.findChild(QLabel, "memoryGrowthNote").text()
    assert note == MEMORY_GROWTH_NOTE and "take the whole GPU" in note and "memory growth" in note
    assert dialog.memory_growth_check.isChecked(), "memory growth is on by default"

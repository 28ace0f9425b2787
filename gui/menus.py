"""The window's menu bar: File (open a model file, recent ones, save the plots, quit), Run, Devices, View, Help."""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence

from gui.remembered import recent_models
from gui.settings import KEY_DIAGNOSE, read_bool
from gui.window_words import DEVICE_SETTINGS


class WindowMenus:
    """Builds `window`'s menus; keeps the actions the window enables, disables or reads (Start, Stop, Device settings, Diagnose)."""

    def __init__(self, window: Any):
        """`window` is the MainWindow (its run form, plots, device panel, log dock and dialogs): `Any`, as it imports this module."""
        self._window = window
        bar = window.menuBar()
        file_menu = bar.addMenu("&File")
        self.open_model_action = self._action("Open model…", QKeySequence.StandardKey.Open, window.run_panel.model_choice.ask_model_file)
        file_menu.addAction(self.open_model_action)
        self.recent_menu = file_menu.addMenu("Recent models")
        self.recent_menu.aboutToShow.connect(self._fill_recent_models)
        window.run_panel.model_choice.recent_changed.connect(self._fill_recent_models)  # enabled once a first file is opened
        self._fill_recent_models()
        file_menu.addSeparator()
        self.save_plots_action = self._action("Save plots as image…", QKeySequence.StandardKey.Save, lambda: window.plots.ask_save())
        file_menu.addAction(self.save_plots_action)
        file_menu.addSeparator()
        file_menu.addAction(self._action("Quit", QKeySequence("Ctrl+Q"), window.close))
        run_menu = bar.addMenu("&Run")
        self.start_action = self._action("Start", QKeySequence("Ctrl+R"), window.run_panel.request_start)
        self.stop_action = self._action("Stop", QKeySequence(Qt.Key.Key_Escape), window.run_panel.request_stop)
        self.start_action.setEnabled(False)
        self.stop_action.setEnabled(False)
        run_menu.addAction(self.start_action)
        run_menu.addAction(self.stop_action)
        run_menu.addSeparator()
        self.diagnose_action = self._action("Diagnose each completed run", None, lambda on: window.settings.setValue(KEY_DIAGNOSE, on))
        self.diagnose_action.setCheckable(True)
        self.diagnose_action.setChecked(read_bool(window.settings, KEY_DIAGNOSE, True))
        self.diagnose_action.setStatusTip("Short probe runs after a completed run find what limits its speed (the verdict).")
        run_menu.addAction(self.diagnose_action)
        run_menu.addAction(self._action("Clear plots", None, lambda: window.plots.clear()))
        devices_menu = bar.addMenu("&" + DEVICE_SETTINGS[0])
        devices_menu.addAction(self._action("Refresh", QKeySequence("F5"), lambda: window.device_panel.detect(None)))
        self.settings_action = self._action(DEVICE_SETTINGS[1], QKeySequence("Ctrl+,"), window.open_settings)
        devices_menu.addAction(self.settings_action)
        view_menu = bar.addMenu("&View")
        log_action = window.log_dock.toggleViewAction()
        log_action.setShortcut(QKeySequence("Ctrl+L"))
        view_menu.addAction(log_action)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("Quick start", QKeySequence(Qt.Key.Key_F1), window.show_help))
        help_menu.addAction(self._action("About Device Lab", None, window.show_about))

    def _fill_recent_models(self) -> None:
        """File → Recent models: the model files opened lately, newest first (each opens as Open model… would)."""
        window = self._window
        self.recent_menu.clear()
        for path in recent_models(window.settings):
            action = self.recent_menu.addAction(os.path.basename(path))
            action.setToolTip(path)
            action.setStatusTip(path)
            action.triggered.connect(lambda _checked=False, chosen=path: window.run_panel.open_model_file(chosen))
        self.recent_menu.setEnabled(not self.recent_menu.isEmpty())

    def _action(self, text: str, shortcut, slot) -> QAction:
        action = QAction(text, self._window)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(slot)
        return action

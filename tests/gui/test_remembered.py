"""Where file dialogs start: the folder last used for that kind of file, else the user's documents, never the source tree."""

from __future__ import annotations

import os
from pathlib import Path

from gui.remembered import FOLDER_EXPORT, FOLDER_MODEL, documents_folder, last_folder, remember_folder
from gui.settings import open_settings

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

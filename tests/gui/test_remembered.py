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

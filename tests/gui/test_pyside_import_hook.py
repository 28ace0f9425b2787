"""PySide6's per-import scan, made cheap: same answer for each module, no source kept in linecache."""

from __future__ import annotations

import importlib
import linecache
import sys

from gui import pyside_import_hook


def test_the_hook_is_installed_on_this_pyside6():
    feature = sys.modules[pyside_import_hook.FEATURE_MODULE]
    assert getattr(feature, pyside_import_hook.SCAN_FUNCTION) is pyside_import_hook.module_uses_pyside


def test_modules_imported_later_get_shibokens_answer_without_filling_linecache(tmp_path, monkeypatch):
    (tmp_path / "uses_qt_for_hook_test.py").write_text("from PySide6.QtCore import QObject\n")
    (tmp_path / "plain_for_hook_test.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plain_for_hook_test  # noqa: F401  (an import statement: the hook sits on builtins.__import__)
    import uses_qt_for_hook_test  # noqa: F401

    seen = sys.modules[pyside_import_hook.FEATURE_MODULE].pyside_feature_dict
    assert seen["uses_qt_for_hook_test"] == 0  # uses PySide6: features may switch for it
    assert seen["plain_for_hook_test"] == -1  # ignored by feature switching
    assert not any(str(tmp_path) in name for name in linecache.cache)


def test_a_module_without_a_source_file_does_not_use_pyside():
    assert not pyside_import_hook.module_uses_pyside(sys)
    assert not pyside_import_hook.module_uses_pyside(importlib.import_module("math"))

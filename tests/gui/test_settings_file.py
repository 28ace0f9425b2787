"""The settings file is read as text, numbers and layout bytes only: an object in it never loads, a bad value never stops
the window.

A `@Variant(…PyObjectWrapper…)` value is a pickle: Qt's INI reader unpickled it (running its code) as soon as any key
of its section was read, or any key written. Such values are now taken out of the file before Qt reads it (the
original kept beside it), and said. A value of the wrong kind (`window/state=@Rect(…)`, a word where a number goes)
is ignored, said once, and the default used: the window starts. The objects here are real pickles written by PySide
itself in a child process, whose code would write a marker file; the windows are real.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QDate, QDateTime, QPoint, QRect, QSettings, QSize, QTime

from core.machine.runtime import RuntimeSettings
from gui.settings import (
    KEY_LOGICAL_CPUS,
    KEY_WINDOW_GEOMETRY,
    KEY_WINDOW_STATE,
    ini_entries,
    open_settings,
    read_bool,
    read_int,
    saved_runtime_settings,
    take_setting_notes,
)

ROOT = Path(__file__).resolve().parents[2]

PICKLE_WRITER = r"""
import sys
from PySide6.QtCore import QSettings

class Marker:
    def __reduce__(self):  # unpickling it opens (creates) the marker file
        return (open, (sys.argv[2], "w"))

settings = QSettings(sys.argv[1], QSettings.Format.IniFormat)
settings.setValue("pickle/value", Marker())
settings.sync()
"""

WINDOW_SCRIPT = r"""
import json, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from gui.main_window import MainWindow
from gui.settings import effective_runtime_settings, open_settings
settings = open_settings()
runtime, note = effective_runtime_settings(settings)
window = MainWindow(settings, runtime, note, charts_later=True)
window.show()
app.processEvents()
shown = {"status": window.statusBar().currentMessage(), "logical_cpus": runtime.logical_cpus, "size": [window.width(), window.height()]}
window.close()
settings.sync()
print("RESULT " + json.dumps(shown))
"""


def pickled_value(tmp_path: Path, marker: Path) -> str:
    """The raw INI text of a PyObjectWrapper value whose unpickling creates `marker`, as PySide writes it."""
    source = tmp_path / "writer" / "pickle.ini"
    source.parent.mkdir()
    subprocess.run([sys.executable, "-c", PICKLE_WRITER, str(source), str(marker)], check=True, timeout=60)
    assert not marker.exists(), "writing the pickle runs nothing"
    [line] = [line for line in source.read_text(encoding="latin-1").splitlines() if line.startswith("value=")]
    value = line.removeprefix("value=")
    assert value.startswith("@Variant(") and "PyObjectWrapper" in value
    return value


FORMS = {
    "as-written": lambda value: value,
    "escaped-at": lambda value: "\\x40" + value[1:],  # "\x40" is "@" once Qt unescapes it
    "octal-at": lambda value: "\\100" + value[1:],
    "quoted": lambda value: f'"{value}"',
    "in-a-list": lambda value: f"first, {value}",
    "after-spaces-before-a-comment": lambda value: f"   {value}   ; a comment",
}


@pytest.mark.parametrize("form", list(FORMS))
def test_a_pickled_object_in_the_settings_file_never_runs(tmp_path: Path, form: str) -> None:
    marker = tmp_path / "marker"
    value = FORMS[form](pickled_value(tmp_path, marker))
    folder = tmp_path / "settings"
    folder.mkdir()
    ini = folder / "settings.ini"
    original = f"[runForm]\nstepsEdit=1000\nbatchSizeEdit={value}\nmodelCombo=mlp\n\n[window]\nsplitter=@ByteArray(abc)\n"
    ini.write_bytes(original.encode("latin-1"))
    settings = open_settings(folder)
    keys = settings.allKeys()  # Qt parses every section here: an object left in the file would load now
    settings.setValue("appearance/theme", "dark")
    settings.sync()  # a write makes Qt parse and rewrite the whole file
    assert not marker.exists(), "the pickle's code ran"
    assert (
        "runForm/batchSizeEdit" not in keys
        and settings.value("runForm/stepsEdit") == "1000"
        and settings.value("runForm/modelCombo") == "mlp"
    )
    assert settings.value("window/splitter") == QByteArray(b"abc"), "layout bytes are kept"
    assert "PyObjectWrapper" not in ini.read_text(encoding="latin-1")
    assert (folder / "settings.ini.rejected").read_bytes() == original.encode("latin-1"), "the original is kept beside it"
    notes = dict(take_setting_notes())
    assert "runForm/batchSizeEdit" in notes and "@Variant" in notes["runForm/batchSizeEdit"]
    open_settings(folder).allKeys()
    assert "runForm/batchSizeEdit" not in dict(take_setting_notes()), "said once"


@pytest.mark.slow
def test_the_window_starts_on_a_settings_file_with_a_pickle_and_bad_values_and_says_so(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    value = pickled_value(tmp_path, marker)
    folder = tmp_path / "settings"
    folder.mkdir()
    (folder / "settings.ini").write_bytes(
        f"[runtime]\nlogical_cpus=many\n\n[window]\ngeometry={value}\nstate=@Rect(0 0 10 10)\n".encode("latin-1")
    )
    env = {**os.environ, "DEVICE_LAB_SETTINGS_DIR": str(folder), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}
    env.pop("DEVICE_LAB_LOGICAL_CPUS", None)
    done = subprocess.run([sys.executable, "-c", WINDOW_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not marker.exists(), "the pickle's code ran when the window started or closed"
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    shown = json.loads(line.removeprefix("RESULT "))
    assert shown["logical_cpus"] == RuntimeSettings().logical_cpus, "the default, not 'many'"
    assert shown["status"].startswith("Detecting devices…")
    for key in ("window/geometry", "window/state", "runtime/logical_cpus"):
        assert key in shown["status"], shown["status"]
    saved = QSettings(str(folder / "settings.ini"), QSettings.Format.IniFormat)
    assert isinstance(saved.value(KEY_WINDOW_GEOMETRY), QByteArray) and isinstance(saved.value(KEY_WINDOW_STATE), QByteArray), (
        "closing saves a good layout over the bad one"
    )


@pytest.mark.slow
def test_a_window_state_that_is_a_rect_is_ignored_said_once_and_the_default_used(qtbot, tmp_path: Path, caplog) -> None:
    from gui.main_window import MainWindow

    folder = tmp_path / "settings"
    folder.mkdir()
    (folder / "settings.ini").write_text("[window]\nstate=@Rect(0 0 10 10)\ngeometry=not a layout\n[runtime]\nlogical_cpus=many\n")
    caplog.set_level(logging.WARNING, logger="gui.settings")
    settings = open_settings(folder)
    runtime = saved_runtime_settings(settings)
    assert runtime == RuntimeSettings() and saved_runtime_settings(settings) == runtime
    window = MainWindow(settings, runtime, charts_later=True)
    qtbot.addWidget(window)
    assert not window._restored_geometry, "the default size, not a restored one"
    message = window.statusBar().currentMessage()
    assert all(key in message for key in ("window/state", "window/geometry", KEY_LOGICAL_CPUS)), message
    said = [record.getMessage() for record in caplog.records]
    assert sum(KEY_LOGICAL_CPUS in line for line in said) == 1, "each bad value is said once"
    assert sum("window/state" in line for line in said) == 1 and sum("window/geometry" in line for line in said) == 1
    window.close()


def test_typed_readers_take_only_their_kind_and_say_what_else_they_found(tmp_path: Path) -> None:
    settings = open_settings(tmp_path)
    take_setting_notes()
    for key, value in {"a/flag": "maybe", "a/yes": "on", "a/count": "12", "a/big": "99999", "a/list": "x, y"}.items():
        settings.setValue(key, value)
    settings.sync()
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)  # read back from the file, as text
    assert read_bool(settings, "a/flag", True) is True and read_bool(settings, "a/yes", False) is True
    assert read_int(settings, "a/count", 0) == 12 and read_int(settings, "a/big", 5, maximum=100) == 5
    assert read_int(settings, "a/list", 3) == 3 and read_int(settings, "a/missing", 7) == 7
    assert [key for key, _ in take_setting_notes()] == ["a/flag", "a/big", "a/list"]


def test_the_screen_finds_every_value_qt_reads_as_an_object(tmp_path: Path) -> None:
    """Harmless objects (two date-times, one whose bytes hold a comma; a rect, a size, a point) written by Qt, then disguised the ways Qt still reads them:
    escaped, quoted, in a list, split over lines, in each kind of section. The screen must flag every one Qt loads."""
    written = tmp_path / "written.ini"
    qt = QSettings(str(written), QSettings.Format.IniFormat)
    objects = {
        "dt": QDateTime(QDate(2026, 11, 29), QTime(1, 2, 3, 4)),
        "dt-comma": QDateTime(QDate(2026, 11, 29), QTime(0, 0, 0, 44)),  # 44 ms: a "," among its bytes, so Qt quotes the value
        "rect": QRect(1, 2, 3, 4),
        "size": QSize(3, 4),
        "point": QPoint(1, 2),
    }
    for key, value in objects.items():
        qt.setValue(f"o/{key}", value)
    qt.sync()
    raw = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in written.read_text(encoding="latin-1").splitlines() if "=" in line}
    forms = {
        "plain": lambda v: v,
        "quoted": lambda v: f'"{v}"',
        "hex": lambda v: "\\x40" + v[1:],
        "hex-zeros": lambda v: "\\x0040" + v[1:],
        "octal": lambda v: "\\100" + v[1:],
        "list": lambda v: f"a, {v}",
        "quoted-list": lambda v: f'"x,y", {v}',
        "comment": lambda v: f"  {v} ; c",
        "continued": lambda v: v[:3] + "\\\n" + v[3:],
        "half-quoted": lambda v: f'"{v[:4]}"{v[4:]}',
    }
    plain_texts = ["plain", '"a, b"', "@@Variant(x)", "@String(abc)", "@ByteArray(abc)", "@Invalid()", "x\\,y", "@Rect(1 2 3 4"]
    cases = [form(value) for value in raw.values() for form in forms.values()] + plain_texts
    for index, text in enumerate(cases):
        for section in ("[s]\n", "[General]\n", ""):
            path = tmp_path / f"case{index}.ini"
            path.write_bytes(f"{section}k={text}\nother=1\n".encode("latin-1"))
            loaded = QSettings(str(path), QSettings.Format.IniFormat)
            objects = {key for key in loaded.allKeys() if _is_object(loaded.value(key))}
            flagged = {entry.key for entry in ini_entries(path.read_bytes()) if entry.wrapped}
            assert objects == flagged, f"{section!r}{text!r}: Qt loads objects for {objects}, the screen flags {flagged}"


def _is_object(value: object) -> bool:
    if isinstance(value, list):
        return any(_is_object(item) for item in value)
    return not (value is None or isinstance(value, (str, QByteArray)))


def test_remembered_values_of_the_wrong_kind_are_ignored_and_said(qtbot, tmp_path: Path) -> None:
    from PySide6.QtWidgets import QSplitter

    from gui.remembered import WindowMemory, recent_models, saved_compare_targets
    from gui.state.run_form import RunFormState

    (tmp_path / "settings.ini").write_text(
        "[compare]\ntargets=not json\n[models]\nrecent=[1\n[runForm]\nstepsEdit=a, b\nbatchSizeEdit=12\n[window]\nsplitter=hello\n"
    )
    settings = open_settings(tmp_path)
    take_setting_notes()
    state = RunFormState()
    splitter = QSplitter()
    qtbot.addWidget(splitter)
    memory = WindowMemory(settings, state, splitter)
    memory.restore()
    assert state.batch_size == "12" and state.length == RunFormState().length
    assert saved_compare_targets(settings) is None and recent_models(settings) == []
    said = [key for key, _ in take_setting_notes()]
    assert sorted(said) == ["compare/targets", "models/recent", "runForm/stepsEdit", "window/splitter"], said
    settings.setValue("runForm/state", json.dumps({"batch_size": 12, "xla": True, "length": "50"}))
    state = RunFormState()
    WindowMemory(settings, state, splitter).restore()
    assert (state.batch_size, state.xla, state.length) == (RunFormState().batch_size, True, "50")
    assert [key for key, _ in take_setting_notes()] == ["runForm/state.batch_size"]


def test_a_settings_file_that_is_a_named_pipe_is_not_read_and_the_session_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "settings"
    folder.mkdir()
    os.mkfifo(folder / "settings.ini")  # Qt would wait on it for a writer, forever
    script = (
        "import json\n"
        "from gui.settings import open_settings, take_setting_notes\n"
        "first, second = open_settings(), open_settings()\n"
        "first.setValue('appearance/theme', 'dark'); first.sync()\n"
        "print(json.dumps([second.fileName() == first.fileName(), second.value('appearance/theme'), dict(take_setting_notes())]))\n"
    )
    env = {**os.environ, "DEVICE_LAB_SETTINGS_DIR": str(folder)}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    shared, theme, notes = json.loads(done.stdout)
    assert shared and theme == "dark", "one stand-in file for the session, shared by every QSettings"
    assert list(notes) == ["the settings file"] and "named pipe (FIFO)" in notes["the settings file"], "said once"
    assert stat.S_ISFIFO(os.lstat(folder / "settings.ini").st_mode), "left as it is"

"""What the window remembers across restarts (QSettings): the run form, the compare targets,
the model files opened lately and the ones trusted, and the last folder of each kind of file dialog.

The run form is remembered as its state (`gui.state.run_form`), one JSON value
("runForm/state") read once at start-up: the widgets follow the state's change
events, and choices that need the devices (the device, the strategy) stay in the
state until the form has the device list. Settings saved by the previous
version, one value per form widget, are read the first time, saved in the new
form and removed (`gui.state.saved_form`).

Trust is remembered per file content (sha256), never per path: a changed file
is asked about again. File dialogs open in the folder last used for their kind
(model files, data, exports, images, log folders). This module sits low in the
GUI's layers, so panels, the run form and the plots can all use it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from PySide6.QtCore import QObject, QSettings, QStandardPaths
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QSplitter, QWidget

from gui.settings import (
    KEY_COMPARE_TARGETS,
    KEY_RUN_FORM_STATE,
    KEY_WINDOW_SPLITTER,
    open_settings,
    read_bytes,
    read_text,
    report_bad_setting,
)
from gui.state.run_form import RunFormState
from gui.state.saved_form import PREVIOUS_FORM_GROUP, PREVIOUS_KEYS, apply_saved, read_previous, read_saved, saved_values

KEY_RECENT_MODELS = "models/recent"
KEY_TRUSTED_MODELS = "models/trusted"
KEY_LAST_FOLDER = "folders/"  # + the dialog's kind
MAX_RECENT_MODELS = 8
JsonT = TypeVar("JsonT", list[Any], dict[str, Any])
FOLDER_MODEL, FOLDER_DATA, FOLDER_EXPORT, FOLDER_IMAGE, FOLDER_LOGS = "model", "data", "export", "image", "logs"


class TargetChooser(Protocol):
    """What the window memory needs of the compare panel: the targets chosen, and setting them."""

    def chosen_targets(self) -> list[str]: ...

    def set_targets(self, specs: Sequence[str]) -> None: ...


def fit_on_screen(window: QWidget) -> None:
    """Shrink and move `window` so that it lies whole on the screen it opens on.

    A geometry saved on a larger screen (or at a larger size) would otherwise reopen with
    its bottom rows, Start and Stop among them, out of reach.
    """
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    area = screen.availableGeometry()
    frame = window.frameGeometry()
    extra_w, extra_h = frame.width() - window.width(), frame.height() - window.height()
    width, height = min(window.width(), area.width() - extra_w), min(window.height(), area.height() - extra_h)
    if (width, height) != (window.width(), window.height()):
        window.resize(width, height)  # no smaller than its minimum size: then its left and top edges stay on the screen
    width, height = window.width(), window.height()
    x = max(min(frame.x(), area.left() + area.width() - width - extra_w), area.left())
    y = max(min(frame.y(), area.top() + area.height() - height - extra_h), area.top())
    if (x, y) != (frame.x(), frame.y()):
        window.move(x, y)


class FormMemory(QObject):
    """Saves the run form's state as one JSON value and restores it, once, at start-up (see the module notes)."""

    def __init__(self, settings: QSettings, state: RunFormState, parent: QObject | None = None):
        super().__init__(parent)
        self._settings = settings
        self._state = state

    def restore(self) -> None:
        """Set the state to the saved choices; settings in the previous version's layout are read, saved anew and removed."""
        text = read_text(self._settings, KEY_RUN_FORM_STATE)
        previous: list[str] = []
        if text:
            values, problems = read_saved(_json_or_text(text))
            problems = [
                (f"{KEY_RUN_FORM_STATE}.{name}" if name else KEY_RUN_FORM_STATE, value, expected) for name, value, expected in problems
            ]
        else:
            previous = [
                key for key in self._settings.allKeys()
                if key in PREVIOUS_KEYS or (key.startswith(PREVIOUS_FORM_GROUP) and key != KEY_RUN_FORM_STATE)
            ]  # fmt: skip
            values, problems = read_previous({key: self._settings.value(key) for key in previous})
        for key, value, expected in problems:
            report_bad_setting(key, value, expected, self._settings.fileName())
        apply_saved(self._state, values)
        if previous:
            self.save()
            for key in previous:
                self._settings.remove(key)
            self._settings.sync()

    def save(self, *_: object) -> None:
        """Store the user's choices (never what the app knows: devices, the described file)."""
        self._settings.setValue(KEY_RUN_FORM_STATE, json.dumps(saved_values(self._state)))
        self._settings.sync()


def _json_or_text(text: str) -> object:
    """The JSON value of `text`, or the text itself when it is no JSON (then said as not an object)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def save_compare_targets(settings: QSettings, targets: Sequence[str]) -> None:
    """Remember the compare targets chosen (ticked and typed), as target texts."""
    settings.setValue(KEY_COMPARE_TARGETS, json.dumps(list(targets)))


def saved_compare_targets(settings: QSettings) -> list[str] | None:
    """The compare targets saved last, or None when none were saved (or the value is unreadable: said once)."""
    text = read_text(settings, KEY_COMPARE_TARGETS)
    if not text:
        return None
    try:
        targets = json.loads(text)
    except ValueError:
        targets = None
    if not isinstance(targets, list):
        report_bad_setting(KEY_COMPARE_TARGETS, text, "a JSON list of targets", settings.fileName())
        return None
    return [str(t) for t in targets]


class WindowMemory(QObject):
    """What the window remembers besides its geometry: the run form, the compare targets, the splitter."""

    def __init__(
        self,
        settings: QSettings,
        form_state: RunFormState,
        splitter: QSplitter,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self._settings = settings
        self._compare: TargetChooser | None = None
        self._splitter = splitter
        self._compare_ready = False
        self.form = FormMemory(settings, form_state, self)

    def restore(self) -> None:
        """At start-up: the splitter and the run form's state (compare targets follow with the devices)."""
        state = read_bytes(self._settings, KEY_WINDOW_SPLITTER)
        if state is not None and not self._splitter.restoreState(state):
            report_bad_setting(KEY_WINDOW_SPLITTER, state, "the splitter's layout as Device Lab saves it", self._settings.fileName())
        self.form.restore()

    def save(self, *_: object) -> None:
        """On run start and on close."""
        self._settings.setValue(KEY_WINDOW_SPLITTER, self._splitter.saveState())
        if self._compare_ready and self._compare is not None:
            save_compare_targets(self._settings, self._compare.chosen_targets())
        self.form.save()

    def attach_compare(self, compare_panel: TargetChooser) -> None:
        """The compare panel, once built; call `compare_ready` when it has its devices."""
        self._compare = compare_panel

    def compare_ready(self, *_: object) -> None:
        """The compare panel has its devices: tick the saved targets (once); they are saved from now on."""
        if self._compare is None or self._compare_ready:
            return
        self._compare_ready = True
        targets = saved_compare_targets(self._settings)
        if targets is not None:
            self._compare.set_targets(targets)


def _json_value(settings: QSettings, key: str, kind: type[JsonT]) -> JsonT:
    """A JSON list or dict saved under `key` (empty when missing; when unreadable too, said once)."""
    text = read_text(settings, key)
    if not text:
        return kind()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, kind):
        return value
    report_bad_setting(key, text, f"a JSON {kind.__name__}", settings.fileName())
    return kind()


def recent_models(settings: QSettings) -> list[str]:
    """The model files opened lately, most recent first; files that are no longer there are left out."""
    return [str(p) for p in _json_value(settings, KEY_RECENT_MODELS, list) if isinstance(p, str) and os.path.isfile(p)]


def remember_model(settings: QSettings, path: str) -> list[str]:
    """Put `path` first among the recent model files (at most MAX_RECENT_MODELS); returns the new list."""
    path = os.path.abspath(path)
    recent = [path, *(p for p in recent_models(settings) if p != path)][:MAX_RECENT_MODELS]
    settings.setValue(KEY_RECENT_MODELS, json.dumps(recent))
    settings.sync()
    return recent


def trusted_hashes(settings: QSettings) -> frozenset[str]:
    """The content hashes (sha256) of the model files the user trusted to run their code."""
    return frozenset(_json_value(settings, KEY_TRUSTED_MODELS, dict))


def is_trusted(settings: QSettings, sha256: str) -> bool:
    """True when the user trusted a file with exactly this content to run its code."""
    return bool(sha256) and sha256 in trusted_hashes(settings)


def remember_trust(settings: QSettings, sha256: str, path: str) -> None:
    """Remember that the user trusts this content (the path is kept to say which file it was)."""
    trusted = _json_value(settings, KEY_TRUSTED_MODELS, dict)
    trusted[sha256] = os.path.abspath(path)
    settings.setValue(KEY_TRUSTED_MODELS, json.dumps(trusted))
    settings.sync()


def documents_folder() -> str:
    """The user's documents folder (their home when the platform names none): where dialogs start the first time."""
    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return documents if documents and os.path.isdir(documents) else os.path.expanduser("~")


def last_folder(settings: QSettings, kind: str, fallback: str = "") -> str:
    """The folder the last dialog of `kind` was left in; else `fallback`, else the user's documents (never the working directory)."""
    folder = read_text(settings, KEY_LAST_FOLDER + kind)
    if folder and os.path.isdir(folder):
        return folder
    return fallback or documents_folder()


def remember_folder(settings: QSettings, kind: str, chosen: str) -> None:
    """Remember the folder of a path chosen in a dialog of `kind` (the path itself when it is a folder)."""
    if chosen:
        folder = chosen if os.path.isdir(chosen) else os.path.dirname(os.path.abspath(chosen))
        settings.setValue(KEY_LAST_FOLDER + kind, folder)
        settings.sync()


def ask_open_file(parent: QWidget | None, kind: str, caption: str, filters: str, settings: QSettings | None = None) -> str:
    """A file chosen to open, starting in the last folder of `kind` ('' when cancelled)."""
    settings = settings or open_settings()
    path, _ = QFileDialog.getOpenFileName(parent, caption, last_folder(settings, kind), filters)
    remember_folder(settings, kind, path)
    return path


def ask_save_file(
    parent: QWidget | None, kind: str, caption: str, file_name: str, filters: str, settings: QSettings | None = None
) -> tuple[str, str]:
    """(path, filter chosen) to save `file_name` to, starting in the last folder of `kind` ('' when cancelled)."""
    settings = settings or open_settings()
    folder = last_folder(settings, kind)
    path, chosen = QFileDialog.getSaveFileName(parent, caption, str(Path(folder) / file_name), filters)
    remember_folder(settings, kind, path)
    return path, chosen


def ask_folder(parent: QWidget | None, kind: str, caption: str, fallback: str, settings: QSettings | None = None) -> str:
    """A folder chosen, starting in the last folder of `kind` (else `fallback`); '' when cancelled."""
    settings = settings or open_settings()
    folder = QFileDialog.getExistingDirectory(parent, caption, last_folder(settings, kind, fallback))
    remember_folder(settings, kind, folder)
    return folder

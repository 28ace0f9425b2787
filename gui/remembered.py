"""What the window remembers across restarts (QSettings): the run form, the compare targets,
the model files opened lately and the ones trusted, and the last folder of each kind of file dialog.

Form fields are found by object name (combo boxes, line edits, spin boxes, check
boxes, checkable lists) under the form's widget, so a field added to the form
later is remembered without code here. Some choices depend on others (the data
sets on the model) or exist only once devices are listed (devices, strategies),
so restoring runs twice over the fields at start-up, and once more for the
fields that could not be set, or that device detection reset, when the devices
arrive.

Trust is remembered per file content (sha256), never per path: a changed file
is asked about again. File dialogs open in the folder last used for their kind
(model files, data, exports, images, log folders). This module sits low in the
GUI's layers, so panels, the run form and the plots can all use it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from PySide6.QtCore import QObject, QSettings, QStandardPaths, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QLineEdit,
    QListWidget,
    QSpinBox,
    QSplitter,
    QWidget,
)

from gui.settings import (
    KEY_COMPARE_TARGETS,
    KEY_RUN_FORM,
    KEY_WINDOW_SPLITTER,
    open_settings,
    read_bytes,
    read_text,
    report_bad_setting,
)

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


FIELD_TYPES = (QComboBox, QLineEdit, QSpinBox, QDoubleSpinBox, QCheckBox, QListWidget)


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


def form_fields(root: QWidget, exclude: Sequence[QWidget] = ()) -> list[QWidget]:
    """The named input widgets under `root`, in creation order, leaving out those inside `exclude`."""
    found: list[QWidget] = []
    for widget in root.findChildren(QWidget):
        name = widget.objectName()
        if not isinstance(widget, FIELD_TYPES) or not name or name.startswith("qt_"):
            continue
        if isinstance(widget, QLineEdit) and isinstance(widget.parent(), (QAbstractSpinBox, QComboBox)):
            continue
        if any(widget is box or box.isAncestorOf(widget) for box in exclude):
            continue
        found.append(widget)
    return found


def field_value(widget: QWidget) -> str | None:
    """The field's value as text for QSettings; None when it has nothing to save (an empty list)."""
    if isinstance(widget, QComboBox):
        if widget.currentIndex() < 0:
            return None
        data = widget.currentData()
        return widget.currentText() if data is None else str(data)
    if isinstance(widget, QCheckBox):
        return "true" if widget.isChecked() else "false"
    if isinstance(widget, (QSpinBox, QDoubleSpinBox)):
        return str(widget.value())
    if isinstance(widget, QLineEdit):
        return widget.text()
    if isinstance(widget, QListWidget):
        if widget.count() == 0:
            return None
        return json.dumps(
            [_item_key(widget, row) for row in range(widget.count()) if widget.item(row).checkState() == Qt.CheckState.Checked]
        )
    return None


def set_field_value(widget: QWidget, value: str) -> bool:
    """Put a saved value back; False when the field cannot take it (yet): no such choice, unreadable."""
    try:
        if isinstance(widget, QComboBox):
            index = next((i for i in range(widget.count()) if _combo_key(widget, i) == value or widget.itemText(i) == value), -1)
            if index < 0:
                return False
            widget.setCurrentIndex(index)
        elif isinstance(widget, QCheckBox):
            widget.setChecked(value.strip().lower() in ("1", "true", "yes", "on"))
        elif isinstance(widget, QSpinBox):
            widget.setValue(int(value))
        elif isinstance(widget, QDoubleSpinBox):
            widget.setValue(float(value))
        elif isinstance(widget, QLineEdit):
            widget.setText(value)
        elif isinstance(widget, QListWidget):
            return _check_items(widget, json.loads(value))
    except (ValueError, TypeError):
        return False
    return True


def _combo_key(combo: QComboBox, index: int) -> str:
    data = combo.itemData(index)
    return combo.itemText(index) if data is None else str(data)


def _item_key(widget: QListWidget, row: int) -> str:
    item = widget.item(row)
    data = item.data(Qt.ItemDataRole.UserRole)
    return item.text() if data is None else str(data)


def _check_items(widget: QListWidget, keys: Iterable[str]) -> bool:
    wanted = set(map(str, keys))
    rows = {_item_key(widget, row): row for row in range(widget.count())}
    if not wanted or not wanted <= rows.keys():
        return False
    for key, row in rows.items():
        widget.item(row).setCheckState(Qt.CheckState.Checked if key in wanted else Qt.CheckState.Unchecked)
    return True


class FormMemory(QObject):
    """Saves the form's fields under `group` in `settings` and restores them (see the module notes)."""

    def __init__(self, settings: QSettings, group: str, root: QWidget, exclude: Sequence[QWidget] = (), parent: QObject | None = None):
        super().__init__(parent)
        self._settings = settings
        self._group = group
        self._root = root
        self._exclude = tuple(exclude)
        self._pending: set[str] = set()
        self._before_devices: dict[str, str | None] | None = None
        self._devices_seen = False

    def saved(self) -> dict[str, str]:
        """The saved values by field name (a value that is not text, such as a list, is left out and said once)."""
        self._settings.beginGroup(self._group)
        try:
            values = {key: self._settings.value(key) for key in self._settings.childKeys()}
        finally:
            self._settings.endGroup()
        found: dict[str, str] = {}
        for key, value in values.items():
            if isinstance(value, str):
                found[key] = value
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                found[key] = str(value)
            elif value is not None:
                report_bad_setting(f"{self._group}/{key}", value, "the text of a form field", self._settings.fileName())
        return found

    def save(self, *_: object) -> None:
        """Store every field's value (a field not restored yet keeps its saved value)."""
        for widget in form_fields(self._root, self._exclude):
            name = widget.objectName()
            value = field_value(widget)
            if value is not None and name not in self._pending:
                self._settings.setValue(f"{self._group}/{name}", value)
        self._settings.sync()

    def restore(self) -> None:
        """Set every field to its saved value; those that cannot take it yet are retried when devices arrive."""
        saved = self.saved()
        self._pending = set()
        for _ in range(2):  # dependent choices (data set after model) need a second pass
            self._pending = self._apply(saved, lambda name: True)

    def before_devices(self, *_: object) -> None:
        """Connect to the device report before the form handles it: notes the values it may reset."""
        if not self._devices_seen:
            self._before_devices = self._values()

    def after_devices(self, *_: object) -> None:
        """Connect after the form handled the first device report: restores what it reset or could not take before."""
        if self._devices_seen:
            return
        self._devices_seen = True
        before = self._before_devices or {}
        now = self._values()
        saved = self.saved()
        retry = {name for name in saved if name in self._pending or now.get(name) != before.get(name)}
        for _attempt in range(2):
            self._pending = self._apply(saved, lambda name: name in retry)
        for name in sorted(self._pending):
            report_bad_setting(
                f"{self._group}/{name}",
                saved[name],
                "a value this field takes (its choices now, a number for a number)",
                self._settings.fileName(),
            )
        self._pending = set()

    def _values(self) -> dict[str, str | None]:
        return {widget.objectName(): field_value(widget) for widget in form_fields(self._root, self._exclude)}

    def _apply(self, saved: dict[str, str], wanted) -> set[str]:
        failed = set()
        for widget in form_fields(self._root, self._exclude):
            name = widget.objectName()
            if name in saved and wanted(name) and field_value(widget) != saved[name] and not set_field_value(widget, saved[name]):
                failed.add(name)
        return failed


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
        run_form: QWidget,
        splitter: QSplitter,
        exclude: Sequence[QWidget] = (),
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self._settings = settings
        self._compare: TargetChooser | None = None
        self._splitter = splitter
        self._compare_ready = False
        self.form = FormMemory(settings, KEY_RUN_FORM, run_form, exclude, self)

    def restore(self) -> None:
        """At start-up: the splitter and the form fields (compare targets follow with the devices)."""
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

    def before_devices(self, *_: object) -> None:
        """Connect to the device report ahead of the panels (see FormMemory.before_devices)."""
        self.form.before_devices()

    def after_devices(self, *_: object) -> None:
        """Connect to the device report after the run form: the fields that needed the devices."""
        self.form.after_devices()

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

"""Where the GUI keeps its settings (QSettings): the start-up device settings and the theme it saves there.

`DEVICE_LAB_SETTINGS_DIR` moves the settings file (tests point it at a temporary
folder so they never touch the user's real settings); `DEVICE_LAB_LOGICAL_CPUS`
overrides the saved logical-CPU split for one process.

Settings are plain text, numbers and the window's layout bytes, nothing else.
Qt's INI reader turns a value written as `@Variant(…)` into an object, and for a
PySide `PyObjectWrapper` that means unpickling it: running whatever code the file
holds. Qt does that as soon as it reads any key of the value's section, or writes
any key at all, so `open_settings` screens the file's raw text first
(`screen_settings_file`, a port of Qt's INI line and value parsing): every value
that Qt would read as an object (@Variant, @DateTime, @Rect, @Size, @Point) is
taken out of the file before Qt sees it, the original kept beside it
(`<file>.rejected`), and said in one log line; the default is used. Only the
file itself is read: Qt's fallback files (the organisation-wide and system-wide
ones) are not.

Every other value is read as what it should be (`read_text`, `read_bytes`,
`read_bool`, `read_int`, the runtime settings, the theme): a value of another
kind is ignored, said once (`report_bad_setting`: a log line, and the window's
status bar at start-up via `take_setting_notes`), and the default used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

from core import files
from core.config import ConfigError
from core.machine.runtime import MAX_LOGICAL_CPUS, RuntimeSettings

SETTINGS_DIR_ENV = "DEVICE_LAB_SETTINGS_DIR"
LOGICAL_CPUS_ENV = "DEVICE_LAB_LOGICAL_CPUS"
ORGANIZATION = "device-lab"
APPLICATION = "Device Lab"

KEY_LOGICAL_CPUS = "runtime/logical_cpus"
KEY_GPU_MEMORY_GROWTH = "runtime/gpu_memory_growth"
KEY_GPU_MEMORY_LIMIT_MB = "runtime/gpu_memory_limit_mb"
KEY_WINDOW_GEOMETRY = "window/geometry"
KEY_WINDOW_STATE = "window/state"
KEY_WINDOW_SPLITTER = "window/splitter"
KEY_RUN_FORM_STATE = "runForm/state"  # the run form's choices, one JSON object (gui.state.saved_form)
KEY_COMPARE_TARGETS = "compare/targets"
KEY_THEME = "appearance/theme"
KEY_DIAGNOSE = "run/diagnose"  # diagnose each completed run (probe runs, the verdict); on unless switched off
THEME_CHOICES = ("system", "light", "dark")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_SHOWN_CHARS = 60  # of a bad value, in the line that says it was ignored

log = logging.getLogger(__name__)
_reported: set[str] = set()  # the key=value pairs said to be ignored in this process (each once)
_notes: list[tuple[str, str, str]] = []  # (file, key, line) said since they were last taken
_stand_ins: dict[str, str] = {}  # a settings file that cannot be made safe -> the session's file used instead


def open_settings(folder: str | Path | None = None) -> QSettings:
    """The app's settings: an INI file in `folder`, else in $DEVICE_LAB_SETTINGS_DIR, else the user's.

    The file is screened before Qt reads it (`screen_settings_file`): values Qt would read as objects are taken out.
    """
    folder = folder if folder is not None else os.environ.get(SETTINGS_DIR_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = os.path.abspath(Path(folder) / "settings.ini")  # absolute, as QSettings.fileName() says it
    else:  # the user's file; this QSettings only names it (Qt reads no value before one is asked for)
        path = os.path.abspath(QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION).fileName())
    try:
        screen_settings_file(Path(path))
    except UnsafeSettingsFile as exc:
        if path not in _stand_ins:  # one stand-in per file for the session, shared by every QSettings opened on it
            _stand_ins[path] = str(Path(tempfile.mkdtemp(prefix="device-lab-settings-")) / "settings.ini")
        path = _stand_ins[path]
        line = (
            f"{exc}: it is not read, and settings are kept only until Device Lab closes ({path}). Move the file away, or make it writable."
        )
        _say_once(f"file:{exc}", path, "the settings file", line)
    settings = QSettings(path, QSettings.Format.IniFormat)  # this file alone: no organisation- or system-wide fallback files
    settings.setFallbacksEnabled(False)
    return settings


def saved_runtime_settings(settings: QSettings) -> RuntimeSettings:
    """The start-up device settings as saved: each one its default where missing, and where unreadable (said once)."""
    defaults = RuntimeSettings()
    logical = read_int(settings, KEY_LOGICAL_CPUS, defaults.logical_cpus, minimum=0, maximum=MAX_LOGICAL_CPUS)
    growth = read_bool(settings, KEY_GPU_MEMORY_GROWTH, defaults.gpu_memory_growth)
    limit = read_int(settings, KEY_GPU_MEMORY_LIMIT_MB, defaults.gpu_memory_limit_mb, minimum=0)
    return RuntimeSettings(logical_cpus=logical, gpu_memory_growth=growth, gpu_memory_limit_mb=limit)


def effective_runtime_settings(settings: QSettings) -> tuple[RuntimeSettings, str]:
    """The settings to apply at start-up, and a note when the environment overrides the saved ones."""
    saved = saved_runtime_settings(settings)
    override = os.environ.get(LOGICAL_CPUS_ENV, "").strip()
    if not override:
        return saved, ""
    try:
        runtime = RuntimeSettings(int(override), saved.gpu_memory_growth, saved.gpu_memory_limit_mb)
    except (ConfigError, ValueError) as exc:
        return saved, f"Ignored {LOGICAL_CPUS_ENV}={override!r}: {exc}."
    return runtime, f"Logical CPUs set to {runtime.logical_cpus} by {LOGICAL_CPUS_ENV} (the saved setting is not used)."


def save_runtime_settings(settings: QSettings, runtime: RuntimeSettings) -> None:
    """Store the start-up device settings (they apply from the next start)."""
    settings.setValue(KEY_LOGICAL_CPUS, runtime.logical_cpus)
    settings.setValue(KEY_GPU_MEMORY_GROWTH, runtime.gpu_memory_growth)
    settings.setValue(KEY_GPU_MEMORY_LIMIT_MB, runtime.gpu_memory_limit_mb)
    settings.sync()


def saved_theme(settings: QSettings) -> str:
    """The saved theme, one of THEME_CHOICES ("system" when missing; when unknown too, said once)."""
    value = read_text(settings, KEY_THEME, "system").strip().lower() or "system"
    if value in THEME_CHOICES:
        return value
    report_bad_setting(KEY_THEME, value, f"one of {', '.join(THEME_CHOICES)}", settings.fileName())
    return "system"


def save_theme(settings: QSettings, theme: str) -> None:
    """Store the theme (one of THEME_CHOICES); it applies at once, no restart."""
    if theme not in THEME_CHOICES:
        raise ValueError(f"theme must be one of {THEME_CHOICES}, not {theme!r}")
    settings.setValue(KEY_THEME, theme)
    settings.sync()


def read_bool(settings: QSettings, key: str, default: bool) -> bool:
    """A saved yes/no (INI files store text: true/false, 1/0, yes/no, on/off); `default` when missing, or unreadable (said once)."""
    value = settings.value(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    report_bad_setting(key, value, "true or false", settings.fileName())
    return default


def read_int(settings: QSettings, key: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    """A saved whole number (within `minimum`..`maximum` when given); `default` when missing, or unreadable (said once)."""
    value = settings.value(key)
    if value is None:
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value.strip())
    if number is None or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        bounds = f" from {minimum}" if minimum is not None else ""
        bounds += f" to {maximum}" if maximum is not None else ""
        report_bad_setting(key, value, f"a whole number{bounds}", settings.fileName())
        return default
    return number


def read_text(settings: QSettings, key: str, default: str = "") -> str:
    """A saved text; `default` when missing, or when the value is not text (a list, bytes: said once)."""
    value = settings.value(key)
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    report_bad_setting(key, value, "a text", settings.fileName())
    return default


def read_bytes(settings: QSettings, key: str) -> QByteArray | None:
    """Saved bytes (the window's and the splitter's layout); None when missing, or when the value is not bytes (said once)."""
    value = settings.value(key)
    if value is None or isinstance(value, QByteArray):
        return value
    if isinstance(value, bytes):
        return QByteArray(value)
    report_bad_setting(key, value, "the layout bytes Device Lab saves", settings.fileName())
    return None


def report_bad_setting(key: str, value: object, expected: str, file: str = "", once: bool = True) -> str:
    """Say that the saved `key` (of the settings `file`) was ignored, its value not `expected`; returns the line.

    Said once per file, key and value in this process, unless `once` is False (a value taken out of the file is said
    each time one is: it is gone after that). A log line (the log file and the Log dock), kept for `take_setting_notes`
    (the window's status bar at start-up).
    """
    shown = _shown(value)
    line = f"Ignored the setting {key} = {shown}: expected {expected}; the default is used (saving the setting again replaces it)."
    _say_once(f"{file}:{key}={shown}" if once else "", file, key, line)
    return line


def _say_once(once: str, file: str, key: str, line: str) -> None:
    """Log `line` and keep it for the window of `file`, unless `once` (a non-empty key) was said already."""
    if once and once in _reported:
        return
    _reported.add(once)
    _notes.append((file, key, line))
    log.warning(line)


def take_setting_notes(file: str | None = None) -> list[tuple[str, str]]:
    """The settings of `file` (None: of any file) ignored since they were last taken, (key, line) each: the window shows them once."""
    taken = [note for note in _notes if file is None or note[0] == file]
    _notes[:] = [note for note in _notes if note not in taken]
    return [(key, line) for _, key, line in taken]


def _shown(value: object) -> str:
    text = value if isinstance(value, str) and value.endswith("(…)") else repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


# --- screening the INI file before Qt reads it ----------------------------------------------------------------------------

_SAFE_WRAPPERS = ("@ByteArray(", "@String(")  # bytes and text: what Qt reads back without making an object
_INI_SPACE = b" \t\r\n"
_INI_SPECIAL = b'\n\r";=\\'
_INI_ESCAPES = {ord("a"): "\a", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n", ord("r"): "\r", ord("t"): "\t", ord("v"): "\v"}
_INI_ESCAPES.update({ord(c): c for c in "\"?'\\"})
_HEX = {ord(c): int(c, 16) for c in "0123456789abcdefABCDEF"}
_OCT = {ord(c): int(c) for c in "01234567"}
_MAX_SCREENS = 8


@dataclass(frozen=True)
class IniEntry:
    """One `key=value` of an INI file as Qt reads it: its byte range in the file, its full key and its value(s) unescaped."""

    start: int
    end: int
    key: str
    values: tuple[str, ...]

    @property
    def wrapped(self) -> str:
        """The wrapper of the first value Qt would read as an object ("@Variant", "@Rect", …), or "" when it reads none.

        Qt reads a value as a wrapper only when it starts with "@" and ends with ")" (QSettingsPrivate::stringToVariant):
        "@DateTime(…" cut short by a list's comma stays text. Any wrapper but the safe ones is flagged, known or not.
        """
        for value in self.values:
            if (
                value.startswith("@")
                and value.endswith(")")
                and not value.startswith("@@")
                and not value.startswith(_SAFE_WRAPPERS)
                and value != "@Invalid()"
            ):
                return value.split("(", 1)[0][:24] if "(" in value else value[:24]
        return ""


class UnsafeSettingsFile(OSError):
    """The settings file cannot be made safe for Qt to read: it is not a regular file, or its unsafe values cannot be taken out."""


def screen_settings_file(path: Path) -> list[str]:
    """Take every value Qt would read as an object out of the INI file at `path`, before Qt reads it; the keys taken out.

    The original file is kept as `<file>.rejected`, the cleaned one written whole (`core.files`), and each key said
    once (`report_bad_setting`). Raises UnsafeSettingsFile when `path` is there but is not a regular file (a FIFO, a
    link to /dev/zero: Qt would wait on it or read it forever), or when the cleaned file cannot be written. A file
    that cannot be read is left as it is: Qt cannot read it either, and takes it for an empty one.
    """
    try:
        with files.open_regular(path) as handle:
            original = handle.read()
    except files.NotARegularFile as exc:
        raise UnsafeSettingsFile(f"The settings file {path} is {exc.kind}, not a regular file") from exc
    except OSError:
        return []
    data, removed = original, []
    for _ in range(_MAX_SCREENS):
        flagged = [entry for entry in ini_entries(data) if entry.wrapped]
        if not flagged:
            break
        removed += [(entry.key, entry.wrapped) for entry in flagged]
        for entry in reversed(flagged):
            data = data[: entry.start] + data[entry.end :]
    else:
        data = b""  # still not clean after taking lines out: keep nothing rather than let Qt load an object
    if not removed:
        return []
    kept = ""
    try:
        aside = files.write_bytes_atomically(path.with_name(path.name + ".rejected"), original)
        kept = f"; the original file is kept as {aside}"
    except OSError:
        pass
    try:
        files.write_bytes_atomically(path, data)
    except OSError as exc:
        raise UnsafeSettingsFile(
            f"The values Qt would load as objects could not be taken out of the settings file {path} ({files.os_error_words(exc)})"
        ) from exc
    for key, wrapper in dict.fromkeys(removed):
        report_bad_setting(
            key,
            f"{wrapper}(…)",
            f"text, a number or layout bytes, not an object, which Device Lab never loads{kept}",
            str(path),
            once=False,
        )
    return [key for key, _ in dict.fromkeys(removed)]


def ini_entries(data: bytes) -> list[IniEntry]:
    """Every `key=value` line of INI `data`, found and unescaped as Qt 6's QSettings reads them (sections, comments, quotes,
    escapes, lists, line continuations)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = b"   " + data[3:]  # the UTF-8 BOM Qt skips; spaces keep the byte offsets
    entries = []
    section = ""
    position = 0
    while True:
        start, end, equals = _ini_line(data, position)
        if end <= start:
            break
        position = end
        line = data[start:end]
        if line.startswith(b"["):
            close = line.find(b"]")
            name = line[1 : close if close >= 0 else len(line)].strip()
            if name.lower() == b"general":
                section = ""
            elif name.lower() == b"%general":
                section = name[1:].decode("latin-1") + "/"
            else:
                section = _ini_key(name) + "/"
            continue
        if equals < 0:
            continue
        key = section + _ini_key(data[start:equals].strip())
        is_list, text, items = _ini_value(data[equals + 1 : end])
        entries.append(IniEntry(start, end, key, tuple(items) if is_list else (text,)))
    return entries


def _ini_line(data: bytes, position: int) -> tuple[int, int, int]:
    """(start, end, position of its "=" or -1) of the INI line at `position`: Qt's readIniLine."""
    size = len(data)
    in_quotes = False
    equals = -1
    start = position
    while start < size and data[start] in _INI_SPACE:
        start += 1
    i = start
    while i < size:
        ch = data[i]
        while ch not in _INI_SPECIAL:
            i += 1
            if i == size:
                return start, i, equals
            ch = data[i]
        i += 1
        if ch == ord("="):
            if not in_quotes and equals == -1:
                equals = i - 1
        elif ch in b"\n\r":
            if i == start + 1:
                start += 1
            elif not in_quotes:
                return start, i - 1, equals
        elif ch == ord("\\"):
            if i < size:
                ch = data[i]
                i += 1
                if i < size and ((ch == ord("\n") and data[i] == ord("\r")) or (ch == ord("\r") and data[i] == ord("\n"))):
                    i += 1
        elif ch == ord('"'):
            in_quotes = not in_quotes
        else:  # ";"
            if i == start + 1:
                while i < size and data[i] not in b"\n\r":
                    i += 1
                while i < size and data[i] in _INI_SPACE:
                    i += 1
                start = i
            elif not in_quotes:
                return start, i - 1, equals
    return start, i, equals


def _ini_key(raw: bytes) -> str:
    """A key as Qt unescapes it: "\\" for "/", %XX and %UXXXX for other characters (Qt's iniUnescapedKey)."""
    text = raw.decode("utf-8", "replace")
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            out.append("/")
            i += 1
            continue
        if ch != "%" or i == len(text) - 1:
            out.append(ch)
            i += 1
            continue
        digits, first = (4, i + 2) if text[i + 1] == "U" else (2, i + 1)
        code = text[first : first + digits]
        if len(code) == digits and all(c in "0123456789abcdefABCDEF" for c in code):
            out.append(chr(int(code, 16)))
            i = first + digits
        else:
            out.append("%")
            i += 1
    return "".join(out)


def _ini_value(raw: bytes) -> tuple[bool, str, list[str]]:
    """(is a list, the text, the list's items) of a raw INI value: Qt's iniUnescapedStringList, state by state."""
    size = len(raw)
    out = ""
    items: list[str] = []
    is_list = in_quoted = current_quoted = False
    i = 0
    state = "skip"
    chop_limit = 0
    escape = 0
    while True:
        if state == "skip":
            while i < size and raw[i] in b" \t":
                i += 1
            state, chop_limit = "normal", len(out)
        elif state in ("hex", "oct"):
            digits, bits = (_HEX, 4) if state == "hex" else (_OCT, 3)
            if i >= size:
                out += chr(escape)
                break
            if raw[i] in digits:
                escape = ((escape << bits) + digits[raw[i]]) & 0xFFFF  # a char16_t in Qt
                i += 1
            else:
                out += chr(escape)
                state, chop_limit = "normal", len(out)
        elif i >= size:
            if not current_quoted:
                out = _chop_spaces(out, chop_limit)
            break
        elif raw[i] == ord("\\"):
            i += 1
            if i >= size:
                break
            ch = raw[i]
            i += 1
            if ch in _INI_ESCAPES:
                out += _INI_ESCAPES[ch]
                chop_limit = len(out)
                continue
            if ch == ord("x"):
                escape = 0
                if i >= size:
                    break
                if raw[i] in _HEX:
                    state = "hex"
                    continue
            elif ch in _OCT:
                escape, state = _OCT[ch], "oct"
                continue
            elif ch in b"\n\r":
                if i < size and raw[i] in b"\n\r" and raw[i] != ch:
                    i += 1
            chop_limit = len(out)
        elif raw[i] == ord('"'):
            i += 1
            current_quoted = True
            in_quoted = not in_quoted
            if not in_quoted:
                state = "skip"
        elif raw[i] == ord(",") and not in_quoted:
            if not current_quoted:
                out = _chop_spaces(out, chop_limit)
            if not is_list:
                is_list, items = True, []
            items.append(out)
            out, current_quoted = "", False
            i += 1
            state = "skip"
        else:
            j = i + 1
            while j < size and raw[j] not in b'\\",':
                j += 1
            out += raw[i:j].decode("utf-8", "replace")
            i = j
    if is_list:
        items.append(out)
    return is_list, out, items


def _chop_spaces(text: str, limit: int) -> str:
    end = len(text)
    while end > limit and text[end - 1] in " \t":
        end -= 1
    return text[:end]

"""Where the GUI keeps its settings (QSettings): the start-up device settings and the theme it saves there.

`DEVICE_LAB_SETTINGS_DIR` moves the settings file (tests point it at a temporary
folder so they never touch the user's real settings); `DEVICE_LAB_LOGICAL_CPUS`
overrides the saved logical-CPU split for one process.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

from core.config import ConfigError
from core.machine.runtime import RuntimeSettings

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
KEY_RUN_FORM = "runForm"
KEY_COMPARE_TARGETS = "compare/targets"
KEY_TENSORBOARD_ENABLED = "logging/tensorboard"
KEY_TENSORBOARD_DIR = "logging/tensorboard_dir"
KEY_PROFILE_ENABLED = "logging/profile"
KEY_PROFILE_FIRST = "logging/profile_first"
KEY_PROFILE_LAST = "logging/profile_last"
KEY_THEME = "appearance/theme"
KEY_DIAGNOSE = "run/diagnose"  # diagnose each completed run (probe runs, the verdict); on unless switched off
THEME_CHOICES = ("system", "light", "dark")


def open_settings(folder: str | Path | None = None) -> QSettings:
    """The app's settings: an INI file in `folder`, else in $DEVICE_LAB_SETTINGS_DIR, else the user's."""
    folder = folder if folder is not None else os.environ.get(SETTINGS_DIR_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return QSettings(str(Path(folder) / "settings.ini"), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)


def saved_runtime_settings(settings: QSettings) -> RuntimeSettings:
    """The start-up device settings as saved (defaults where missing or unreadable)."""
    defaults = RuntimeSettings()
    try:
        return RuntimeSettings(
            logical_cpus=_int(settings.value(KEY_LOGICAL_CPUS, defaults.logical_cpus)),
            gpu_memory_growth=_bool(settings.value(KEY_GPU_MEMORY_GROWTH, defaults.gpu_memory_growth)),
            gpu_memory_limit_mb=_int(settings.value(KEY_GPU_MEMORY_LIMIT_MB, defaults.gpu_memory_limit_mb)),
        )
    except (ConfigError, TypeError, ValueError):
        return defaults


def effective_runtime_settings(settings: QSettings) -> tuple[RuntimeSettings, str]:
    """The settings to apply at start-up, and a note when the environment overrides the saved ones."""
    saved = saved_runtime_settings(settings)
    override = os.environ.get(LOGICAL_CPUS_ENV, "").strip()
    if not override:
        return saved, ""
    try:
        runtime = RuntimeSettings(_int(override), saved.gpu_memory_growth, saved.gpu_memory_limit_mb)
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
    """The saved theme, one of THEME_CHOICES ("system" when missing or unknown)."""
    value = str(settings.value(KEY_THEME, "system") or "system").strip().lower()
    return value if value in THEME_CHOICES else "system"


def save_theme(settings: QSettings, theme: str) -> None:
    """Store the theme (one of THEME_CHOICES); it applies at once, no restart."""
    if theme not in THEME_CHOICES:
        raise ValueError(f"theme must be one of {THEME_CHOICES}, not {theme!r}")
    settings.setValue(KEY_THEME, theme)
    settings.sync()


def read_bool(settings: QSettings, key: str, default: bool) -> bool:
    """A saved yes/no (INI files store text), `default` when missing."""
    value = settings.value(key)
    return default if value is None else _bool(value)


def read_int(settings: QSettings, key: str, default: int) -> int:
    """A saved whole number, `default` when missing or unreadable."""
    try:
        return _int(settings.value(key, default))
    except (TypeError, ValueError):
        return default


def _int(value: object) -> int:
    return int(str(value).strip())


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")

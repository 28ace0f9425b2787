"""The application icon, loaded from resources/icons (SVG for any size, a 256 px PNG where SVG cannot load)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QIcon

ICON_DIR = Path(__file__).resolve().parent.parent / "resources" / "icons"
APP_ICON_SVG = ICON_DIR / "device-lab.svg"
APP_ICON_PNG = ICON_DIR / "device-lab-256.png"


def app_icon() -> QIcon:
    """Device Lab's icon: a chip with a rising curve (empty icon if the files are missing)."""
    icon = QIcon()
    for path in (APP_ICON_SVG, APP_ICON_PNG):
        if path.is_file():
            icon.addFile(str(path))
    return icon

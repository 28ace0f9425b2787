"""Help > Quick start: the top of the README (install, start, what the app does), rendered as Markdown.

The README is read from the source tree when Device Lab runs from one, else
from the installed package's metadata (pip stores it as the long description).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

from gui.dialogs.about import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
QUICK_START_END = "\n## Design"
IMAGE_WIDTH_CHARS = 80  # the README's screenshot, scaled to about the text's width
FALLBACK = (
    "# Device Lab\n\nThe README could not be found. Start a run with **Run > Start** (Ctrl+R), "
    "compare devices in the **Compare** tab, and see past runs in **History**."
)


def readme_text() -> str:
    """The README's Markdown: the source tree's copy, else the installed one; a short fallback if neither exists."""
    if README.is_file() and (ROOT / "pyproject.toml").is_file():  # a source tree, not site-packages
        return README.read_text(encoding="utf-8")
    try:
        installed = metadata.metadata(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return FALLBACK
    description = installed.get_payload() or installed.get("Description", "")
    return description or FALLBACK


def quick_start(markdown: str) -> str:
    """The README up to its design notes: what it is, how to install and run it, what it does, the CLI."""
    end = markdown.find(QUICK_START_END)
    return markdown if end < 0 else markdown[:end].rstrip() + "\n"


def fit_images(document: QTextDocument, width: float) -> None:
    """Scale every image in `document` to `width` (its height follows), so a screenshot fits the view."""
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        fragments = block.begin()
        while not fragments.atEnd():
            fragment = fragments.fragment()
            if fragment.charFormat().isImageFormat():
                image = fragment.charFormat().toImageFormat()
                image.setWidth(width)
                cursor.setPosition(fragment.position())
                cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                cursor.setCharFormat(image)
            fragments += 1
        block = block.next()


class HelpDialog(QDialog):
    """The quick start in a scrollable, link-following text view."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("helpDialog")
        self.setWindowTitle("Device Lab quick start")
        self.browser = QTextBrowser()
        self.browser.setObjectName("helpBrowser")
        self.browser.setOpenExternalLinks(True)
        self.browser.setSearchPaths([str(ROOT)])  # for the README's resources/screenshot.png
        self.browser.setMarkdown(quick_start(readme_text()))
        fit_images(self.browser.document(), self.fontMetrics().averageCharWidth() * IMAGE_WIDTH_CHARS)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close the quick start (Esc).")
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser, 1)
        layout.addWidget(buttons)
        self.resize(self.fontMetrics().averageCharWidth() * 120, self.fontMetrics().height() * 40)

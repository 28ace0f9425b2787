"""A word-wrapped note of the run form that is always as tall as its text at its width.

A wrapped QLabel's size hint is the height of its text at a width QLabel guesses
(about 80 characters, or a golden-ratio box), not at the width the form gives it.
QFormLayout takes that hint: a note whose guessed width is wider than its row
is squashed and, centred, loses a line at its top and its bottom; one whose
guessed width is narrower leaves a gap above and below; and a form that has
laid a row out keeps its height when the row's text changes. `NoteLabel` hints
the height of its text at its own width, asks for a new layout when that width
changes, and has the layouts around it laid out again when its text changes, so
the form shows each note whole and without a gap.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QLayout, QWidget


class NoteLabel(QLabel):
    """A word-wrapped, top-aligned label whose size hint is the height of its text at its current width."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)

    def setText(self, text: str) -> None:
        """Show `text`, and lay the form out again once this change's layout pass is over."""
        super().setText(text)
        QTimer.singleShot(0, self, self._lay_out_again)

    def _lay_out_again(self) -> None:
        """Invalidate the layouts of every widget above this one (a layout keeps a row's old height otherwise)."""
        parent = self.parentWidget()
        while parent is not None and not parent.isWindow():
            layout = parent.layout()
            if layout is not None:
                for inner in layout.findChildren(QLayout):
                    inner.invalidate()
                layout.invalidate()
            parent = parent.parentWidget()

    def text_height(self) -> int:
        """The height its text takes at its width (0 with no text)."""
        return self.heightForWidth(max(1, self.width())) if self.text() else 0

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(hint.width(), self.text_height()) if self.text() else hint

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(hint.width(), self.text_height()) if self.text() else hint

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width() and self.height() != self.text_height():
            self.updateGeometry()  # the text wraps differently at the new width: the layout gives it the height that takes

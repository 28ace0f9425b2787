"""The Sweep tab's parts as big as their content, so that a 1024x700 window keeps the table's rows in view.

`TextArea` holds a word-wrapped line or notes at the height of their text, up to
a number of lines (it scrolls beyond); `rows_height` is the height a table needs
for a number of rows, `whole_width` the width it needs for every column whole.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QTableWidget


class TextArea(QScrollArea):
    """A word-wrapped label in a frameless scroll area as tall as its text at its width, up to `lines` lines (it scrolls
    beyond), hidden while it has no text: long text takes its own lines, never the table's rows. Short of room, the
    layout may take it down to `least_lines`."""

    def __init__(self, label: QLabel, name: str, lines: int, least_lines: int | None = None):
        super().__init__()
        self.setObjectName(name)
        label.setWordWrap(True)
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setWidget(label)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._label = label
        self._lines = lines
        self._least_lines = lines if least_lines is None else least_lines
        self._heights = (0, 0)  # (least, most)
        self.fit()

    def fit(self) -> None:
        """As tall as the text at this width (as if it scrolled: the scroll bar's coming and going changes nothing), at most
        `lines` lines, at least `least_lines` of them (or the whole text, if shorter)."""
        label = self._label
        self.setVisible(bool(label.text()))
        if not label.text():
            return
        width = max(1, self.width() - self.verticalScrollBar().sizeHint().width())
        text, line = label.heightForWidth(width), label.fontMetrics().lineSpacing()
        heights = (min(text, self._least_lines * line), min(text, self._lines * line))
        if heights != self._heights:
            self._heights = heights
            self.setMinimumHeight(heights[0])
            self.setMaximumHeight(heights[1])
            self.updateGeometry()

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self._heights[1])

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), self._heights[0])

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # the label's text changed
            self.fit()
        return super().viewportEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.fit()


def whole_width(table: QTableWidget) -> int:
    """The width `table` needs to show its row header and every column whole (and a vertical scroll bar)."""
    header = table.horizontalHeader()
    columns = sum(max(header.sectionSizeHint(column), table.sizeHintForColumn(column)) for column in range(table.columnCount()))
    row_header = table.verticalHeader().sizeHint().width() if table.rowCount() else 0
    return 2 * table.frameWidth() + row_header + columns + table.verticalScrollBar().sizeHint().width()


def rows_height(table: QTableWidget, rows: int) -> int:
    """The height `table` needs to show its header, `rows` rows and a horizontal scroll bar."""
    frame = 2 * table.frameWidth()
    header = table.horizontalHeader().sizeHint().height()
    return frame + header + rows * table.verticalHeader().defaultSectionSize() + table.horizontalScrollBar().sizeHint().height()

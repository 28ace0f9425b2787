"""A small labelled bar chart (pyqtgraph BarGraphItem): one bar per comparison row.

Used for samples/s per target and scaling efficiency per device count. Bars keep
the rows' order; the baseline bar gets its own colour, and an optional dashed
reference line (e.g. 100 % efficiency) shows what ideal looks like. Row labels
longer than a bar's share of the width are elided in the middle (the chart's
tooltip lists them in full), so neighbouring labels never overlap.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QWidget

BAR_COLOR = "#1f77b4"
HIGHLIGHT_COLOR = "#ff7f0e"
REFERENCE_COLOR = "#2ca02c"
BAR_WIDTH = 0.6
LABEL_GAP_PX = 8  # between neighbouring labels


class BarChart(pg.PlotWidget):
    """Bars with their values written on top and the row labels as x ticks."""

    def __init__(self, object_name: str, title: str, y_label: str, parent: QWidget | None = None):
        super().__init__(parent=parent, background="w")
        self.setObjectName(object_name)
        item = self.getPlotItem()
        item.setTitle(title, size="10pt")
        item.setLabel("left", y_label)
        item.getAxis("left").enableAutoSIPrefix(False)
        item.showGrid(y=True, alpha=0.25)
        item.setMouseEnabled(x=False, y=False)
        item.setMenuEnabled(False)
        item.hideButtons()
        self.setMinimumHeight(160)
        self._bars: pg.BarGraphItem | None = None
        self._texts: list[pg.TextItem] = []
        self._reference = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(REFERENCE_COLOR, width=1.5, style=Qt.PenStyle.DashLine))
        self._reference.setVisible(False)
        item.addItem(self._reference, ignoreBounds=True)
        self._labels: tuple[str, ...] = ()
        self._shown_labels: list[str] = []
        item.getViewBox().sigResized.connect(self._fit_labels)

    def set_bars(
        self,
        labels: Sequence[str],
        values: Sequence[float | None],
        highlight: int | None = None,
        value_format: str = "{:,.0f}",
        reference: float | None = None,
    ) -> None:
        """Draw one bar per label; a None value draws no bar and writes '-' (a run without a speed)."""
        item = self.getPlotItem()
        self.clear_bars()
        heights = [value or 0.0 for value in values]
        brushes = [pg.mkBrush(HIGHLIGHT_COLOR if index == highlight else BAR_COLOR) for index in range(len(values))]
        self._bars = pg.BarGraphItem(x=list(range(len(values))), height=heights, width=BAR_WIDTH, brushes=brushes, pen=None)
        item.addItem(self._bars)
        text_color = item.getAxis("left").textPen().color()  # the axis colour: follows light/dark (gui.plotting.theme)
        for index, value in enumerate(values):
            text = pg.TextItem("-" if value is None else value_format.format(value), color=text_color, anchor=(0.5, 1.0))
            text.setPos(index, value or 0.0)
            item.addItem(text)
            self._texts.append(text)
        self._labels = tuple(labels)
        self._fit_labels()
        self.setToolTip("<br>".join(f"{index + 1}. {html.escape(label)}" for index, label in enumerate(labels)))
        self._reference.setVisible(reference is not None)
        if reference is not None:
            self._reference.setPos(reference)
        top = max([*heights, reference or 0.0, 0.0])
        item.setXRange(-0.6, max(len(values) - 0.4, 0.6), padding=0)
        item.setYRange(0, top * 1.18 if top > 0 else 1.0, padding=0)

    def clear_bars(self) -> None:
        item = self.getPlotItem()
        if self._bars is not None:
            item.removeItem(self._bars)
            self._bars = None
        for text in self._texts:
            item.removeItem(text)
        self._texts = []
        self._labels = ()
        self._reference.setVisible(False)
        item.getAxis("bottom").setTicks([[]])
        self.setToolTip("")

    def label_width(self) -> float:
        """The pixels each row's label may take: its bar's share of the plot's width, less a gap."""
        view_width = self.getPlotItem().getViewBox().width()
        span = max(len(self._labels) - 0.4, 0.6) + 0.6  # the x range set_bars shows
        return max(view_width / span - LABEL_GAP_PX, 12.0)

    def _fit_labels(self) -> None:
        axis = self.getPlotItem().getAxis("bottom")
        metrics = QFontMetrics(axis.style.get("tickFont") or self.font())
        width = round(self.label_width())
        self._shown_labels = [metrics.elidedText(label, Qt.TextElideMode.ElideMiddle, width) for label in self._labels]
        axis.setTicks([list(enumerate(self._shown_labels))])

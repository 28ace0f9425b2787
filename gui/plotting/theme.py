"""Light or dark, as the system says: the plots follow the colour scheme and its changes.

Qt (6.5+) gives the widgets the system's light or dark palette and announces a
change through `QStyleHints.colorSchemeChanged`; pyqtgraph draws with its own
colours, so `ThemeFollower` restyles every plot under its window: background,
axes, titles, legends and value labels. Where the platform reports no scheme,
the palette's window colour decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QWidget


@dataclass(frozen=True)
class PlotColors:
    """Colours of a plot: background, and foreground for axes and text."""

    background: str
    foreground: str


LIGHT = PlotColors(background="#ffffff", foreground="#303030")
DARK = PlotColors(background="#1e1f22", foreground="#d4d4d4")


def is_dark() -> bool:
    """True when the system colour scheme (or, when unknown, the palette) is dark."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    scheme = app.styleHints().colorScheme()
    if scheme != Qt.ColorScheme.Unknown:
        return scheme == Qt.ColorScheme.Dark
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def plot_colors(dark: bool) -> PlotColors:
    return DARK if dark else LIGHT


def style_plot(plot: pg.PlotWidget, colors: PlotColors) -> None:
    """Give one plot the colours: background, axes and their labels, title, legend text, text items."""
    plot.setBackground(colors.background)
    item = plot.getPlotItem()
    for name in ("left", "bottom", "right", "top"):
        axis = item.getAxis(name)
        axis.setPen(colors.foreground)
        axis.setTextPen(colors.foreground)
    title = item.titleLabel
    if title.isVisible() and title.text:
        title.setText(title.text, color=colors.foreground)
    if item.legend is not None:
        item.legend.setLabelTextColor(colors.foreground)
    for child in item.items:
        if isinstance(child, pg.TextItem):
            child.setColor(colors.foreground)


class ThemeFollower(QObject):
    """Keeps the plots under `root` in the system's light or dark colours, now and after each change."""

    def __init__(self, root: QWidget):
        super().__init__(root)
        self._root = root
        self._pending = False
        self.dark = is_dark()
        app = QGuiApplication.instance()
        app.styleHints().colorSchemeChanged.connect(self._schedule)
        root.installEventFilter(self)
        self.apply()

    def apply(self) -> None:
        """Restyle every plot under the window for the current scheme (also the default for new plots)."""
        self._pending = False
        self.dark = is_dark()
        colors = plot_colors(self.dark)
        pg.setConfigOptions(background=colors.background, foreground=colors.foreground)
        for plot in self._root.findChildren(pg.PlotWidget):
            style_plot(plot, colors)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._schedule()
        return False

    def _schedule(self, *_: object) -> None:
        """Restyle once the event loop is free: the scheme and the palette change in separate steps."""
        if not self._pending:
            self._pending = True
            QTimer.singleShot(0, self, self.apply)

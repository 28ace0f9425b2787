"""Light, dark or the system's: the app's palette (Settings) and the plots' colours, which follow it.

`apply_theme` gives the application a light or dark Fusion palette, or the
platform's own ("system"); the choice is saved in Settings and applied at
start-up and when changed. Qt (6.5+) announces a change of the system's scheme
through `QStyleHints.colorSchemeChanged`; pyqtgraph draws with its own colours,
so `ThemeFollower` restyles every plot under its window: background, axes,
titles, legends and value labels. pyqtgraph is imported only when a plot is
styled, so start-up can set the palette before the plots exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    import pyqtgraph as pg

THEMES = {"system": "Follow the system", "light": "Light", "dark": "Dark"}
THEME_PROPERTY = "deviceLabTheme"  # the choice, kept on the application object

Role = QPalette.ColorRole
LIGHT_COLORS = {
    Role.Window: "#efefef", Role.WindowText: "#000000", Role.Base: "#ffffff", Role.AlternateBase: "#f7f7f7",
    Role.ToolTipBase: "#ffffdc", Role.ToolTipText: "#000000", Role.Text: "#000000", Role.Button: "#efefef",
    Role.ButtonText: "#000000", Role.BrightText: "#ffffff", Role.Highlight: "#308cc6", Role.HighlightedText: "#ffffff",
    Role.Link: "#0000ff", Role.PlaceholderText: "#7f7f7f", Role.Light: "#ffffff", Role.Midlight: "#cacaca",
    Role.Mid: "#b8b8b8", Role.Dark: "#9f9f9f", Role.Shadow: "#767676",
}  # fmt: skip
DARK_COLORS = {
    Role.Window: "#2b2d30", Role.WindowText: "#dfe1e5", Role.Base: "#1e1f22", Role.AlternateBase: "#26282b",
    Role.ToolTipBase: "#3c3f41", Role.ToolTipText: "#dfe1e5", Role.Text: "#dfe1e5", Role.Button: "#35373b",
    Role.ButtonText: "#dfe1e5", Role.BrightText: "#ff6b6b", Role.Highlight: "#2f65ca", Role.HighlightedText: "#ffffff",
    Role.Link: "#589df6", Role.PlaceholderText: "#8c8f94", Role.Light: "#4a4d52", Role.Midlight: "#3f4246",
    Role.Mid: "#2f3134", Role.Dark: "#1b1c1f", Role.Shadow: "#0d0d0e",
}  # fmt: skip
DISABLED_TEXT = {"light": "#a0a0a0", "dark": "#6f737a"}


@dataclass(frozen=True)
class PlotColors:
    """Colours of a plot: background, and foreground for axes and text."""

    background: str
    foreground: str


LIGHT = PlotColors(background="#ffffff", foreground="#303030")
DARK = PlotColors(background="#1e1f22", foreground="#d4d4d4")


def theme_palette(choice: str) -> QPalette:
    """The palette of a "light" or "dark" choice; for "system", an empty palette (the platform's is used)."""
    colors = {"light": LIGHT_COLORS, "dark": DARK_COLORS}.get(choice)
    palette = QPalette()
    if colors is None:
        return palette
    for role, color in colors.items():
        palette.setColor(role, QColor(color))
    for role in (Role.WindowText, Role.Text, Role.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(DISABLED_TEXT[choice]))
    return palette


def gui_application() -> QGuiApplication | None:
    """The running QGuiApplication (or QApplication); None before one is made or under a bare QCoreApplication."""
    app = QGuiApplication.instance()
    return app if isinstance(app, QGuiApplication) else None


def apply_theme(choice: str) -> None:
    """Give the application the chosen look (one of THEMES; anything else counts as "system"), plots included."""
    app = gui_application()
    if app is None:
        return
    choice = choice if choice in THEMES else "system"
    app.setProperty(THEME_PROPERTY, choice)
    hints = app.styleHints()
    if choice == "system":
        hints.unsetColorScheme()
    else:
        hints.setColorScheme(Qt.ColorScheme.Dark if choice == "dark" else Qt.ColorScheme.Light)
    app.setPalette(theme_palette(choice))


def is_dark() -> bool:
    """True when the chosen theme is dark, or (following the system) the system scheme or else the palette is."""
    app = gui_application()
    if app is None:
        return False
    choice = app.property(THEME_PROPERTY)
    if choice in ("light", "dark"):
        return choice == "dark"
    scheme = app.styleHints().colorScheme()
    if scheme != Qt.ColorScheme.Unknown:
        return scheme == Qt.ColorScheme.Dark
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def plot_colors(dark: bool) -> PlotColors:
    return DARK if dark else LIGHT


def style_plot(plot: pg.PlotWidget, colors: PlotColors) -> None:
    """Give one plot the colours: background, axes and their labels, title, legend text, text items."""
    import pyqtgraph as pg

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
    """Keeps the plots under `root` in the theme's light or dark colours, now and after each change."""

    def __init__(self, root: QWidget):
        super().__init__(root)
        self._root = root
        self._pending = False
        self.dark = is_dark()
        app = gui_application()
        if app is not None:
            app.styleHints().colorSchemeChanged.connect(self._schedule)
        root.installEventFilter(self)
        self.apply()

    def apply(self) -> None:
        """Restyle every plot under the window for the current scheme (also the default for new plots)."""
        import pyqtgraph as pg

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

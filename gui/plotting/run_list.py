"""The plots' run list: one checkable entry per run, in its colour, with its throughput so far."""

from __future__ import annotations

from collections.abc import Hashable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

from core.formatting import format_value
from gui.plotting.run_series import RunSeries


class RunList(QListWidget):
    """Tick to show a run, untick to hide it; `toggled(key, shown)` says which the user changed."""

    toggled = Signal(object, bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("runList")
        self.setToolTip("Tick to show a run, untick to hide it.")
        self.setWordWrap(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.itemChanged.connect(self._on_item_changed)

    def add(self, series: RunSeries) -> None:
        """An entry for a new run, ticked, with a swatch of its colour."""
        item = QListWidgetItem()
        item.setData(Qt.ItemDataRole.UserRole, series.key)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked)
        pixmap = QPixmap(QSize(12, 12))
        pixmap.fill(QColor(series.color))
        item.setIcon(QIcon(pixmap))
        self.blockSignals(True)
        self.addItem(item)
        self.blockSignals(False)
        self.refresh(series)

    def refresh(self, series: RunSeries) -> None:
        """Bring a run's text up to date: its label (number and differences, see `distinct_labels`) and samples/s so far."""
        item = self.item_of(series.key)
        if item is None:
            return
        rate = series.samples_per_s
        text = (series.shown_label or series.label) + (f"\n{format_value(rate, 'rate')} samples/s" if rate else "")
        self.blockSignals(True)
        item.setText(text)
        item.setToolTip(text)
        self.blockSignals(False)

    def set_shown(self, key: Hashable, shown: bool) -> None:
        """Tick or untick a run's entry (without a `toggled`)."""
        item = self.item_of(key)
        if item is not None:
            self.blockSignals(True)
            item.setCheckState(Qt.CheckState.Checked if shown else Qt.CheckState.Unchecked)
            self.blockSignals(False)

    def remove(self, key: Hashable) -> None:
        """Drop a run's entry, if it has one."""
        item = self.item_of(key)
        if item is not None:
            self.takeItem(self.row(item))

    def item_of(self, key: Hashable) -> QListWidgetItem | None:
        """The entry of the run with this key."""
        for row in range(self.count()):
            item = self.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == key:
                return item
        return None

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        self.toggled.emit(item.data(Qt.ItemDataRole.UserRole), item.checkState() == Qt.CheckState.Checked)

"""A two-setting sweep as a heat map: the first setting down, the second across, samples/s in each cell.

A coloured table rather than an image: every cell carries its number, its
tooltip (step time, final loss, or why the point failed) and can be read
without a colour scale. The greener the cell, the faster; the best cell is bold
and starred when it is better beyond noise (the panel gives no best on a tie).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from core.formatting import format_value
from core.results import RunStatus
from core.tuning.sweep import SweepRow
from core.tuning.sweep_plan import SweepPlan, format_setting

ROLE_VALUE = Qt.ItemDataRole.UserRole
SLOW_COLOR = QColor("#f7fbf4")
FAST_COLOR = QColor("#41ab5d")
FAILED_BACKGROUND = QColor("#f4c7c3")
TEXT_COLOR = QColor("#202020")


def shade(fraction: float) -> QColor:
    """The cell colour for `fraction` of the fastest point's samples/s (0: pale, 1: green)."""
    fraction = min(max(fraction, 0.0), 1.0)
    slow, fast = (SLOW_COLOR.red(), SLOW_COLOR.green(), SLOW_COLOR.blue()), (FAST_COLOR.red(), FAST_COLOR.green(), FAST_COLOR.blue())
    mix = [round(a + (b - a) * fraction) for a, b in zip(slow, fast, strict=True)]
    return QColor(*mix)


class SweepHeatMap(QTableWidget):
    """Samples/s per (first setting, second setting); cells of points not run yet stay empty."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sweepHeatMap")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        # as wide as its header and cells ("★ 12,345"), never cut; the last column takes the room left
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.setToolTip("Samples/s at each pair of settings: the greener, the faster; ★ marks the best.")

    def show_sweep(self, plan: SweepPlan | None, rows: Sequence[SweepRow | None], best: int | None) -> None:
        """Draw the grid of a two-setting `plan` (anything else clears it)."""
        self.clear()
        if plan is None or len(plan.axes) != 2:
            self.setRowCount(0)
            self.setColumnCount(0)
            return
        down, across = plan.axes
        self.setRowCount(len(down.values))
        self.setColumnCount(len(across.values))
        self.setVerticalHeaderLabels([format_setting(down.name, value) for value in down.values])
        self.setHorizontalHeaderLabels([format_setting(across.name, value) for value in across.values])
        rates = [row.result.samples_per_s for row in rows if row is not None and row.status == RunStatus.COMPLETED]
        fastest = max((rate for rate in rates if rate), default=0.0)
        for index, row in enumerate(rows):
            if row is not None:
                self.setItem(index // len(across.values), index % len(across.values), _cell(row, fastest, index == best))


def _cell(row: SweepRow, fastest: float, is_best: bool) -> QTableWidgetItem:
    result = row.result
    rate = result.samples_per_s if row.status == RunStatus.COMPLETED else None
    text = format_value(rate, "rate") if rate is not None else row.status.value
    item = QTableWidgetItem(("★ " if is_best else "") + text)
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    item.setData(ROLE_VALUE, rate)
    item.setForeground(QBrush(TEXT_COLOR))
    item.setBackground(QBrush(shade(rate / fastest) if rate and fastest else FAILED_BACKGROUND))
    if rate is None:
        item.setToolTip(f"{row.label}: {row.status.value}" + (f": {result.message}" if result.message else ""))
    else:
        step, loss = format_value(result.step_time_median_ms, "ms"), format_value(result.final_loss, "loss")
        item.setToolTip(f"{row.label}: {text} samples/s, median step {step} ms, final loss {loss}")
    if is_best:
        font = QFont(item.font())
        font.setBold(True)
        item.setFont(font)
    return item

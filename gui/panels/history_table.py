"""The History tab's table: one row per stored run, its description then one column per headline figure.

The figure columns come from `core.results.FIGURES` (title, tooltip and
formatting included). Every column is named by the field the store sorts it by
(`RunStore.list_runs(order_by=...)`): a RunSummary field or a figure name. Each
cell keeps the run's id in ROLE_ID and its number (or text) in ROLE_VALUE.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from core.compare.significance import CONTENDED_MARK
from core.formatting import MISSING, format_value
from core.history.store import RunSummary
from core.results import FIGURES, FIGURES_BY_NAME, RunStatus
from core.workloads.model_file_states import ModelFileStates
from core.workloads.workload import is_model_file
from gui.style import FAILED_COLOR, WARNING_COLOR

COLUMNS: tuple[tuple[str, str], ...] = (
    ("Date", "started_at"),
    ("Label", "label"),
    ("Status", "status"),
    ("Model", "model"),
    ("Backend", "backend"),
    ("Data", "dataset"),
    ("Strategy / devices", "strategy"),
    ("Replicas", "replicas"),
    ("Steps", "steps"),
    *((figure.title, figure.name) for figure in FIGURES),
)  # (title, the field it sorts by)
NUMERIC_FIELDS = frozenset({"replicas", "steps", *FIGURES_BY_NAME})
ROLE_ID = Qt.ItemDataRole.UserRole
ROLE_VALUE = Qt.ItemDataRole.UserRole + 1
STATUS_COLORS = {RunStatus.FAILED: FAILED_COLOR, RunStatus.STOPPED: WARNING_COLOR, RunStatus.INTERRUPTED: WARNING_COLOR}


def column_of(field: str) -> int:
    """The column sorted by `field` (a RunSummary field or a figure name)."""
    return next(index for index, (_, name) in enumerate(COLUMNS) if name == field)


def _local_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def _cells(run: RunSummary, files: ModelFileStates) -> list[tuple[str, Any]]:
    """(text, value) of each column, in COLUMNS order; a model file by its name, marked when it changed since or is gone."""
    where = (run.strategy or "") + (" " + " ".join(run.devices) if run.devices else "")
    figures = {figure: run.figures.get(figure.name) for figure in FIGURES}
    return [
        (_local_time(run.started_at), run.started_at),
        (run.label, run.label),
        (run.status.value + (f" {CONTENDED_MARK}" if run.contended else ""), run.status.value),
        (files.title(run.model, run.model_sha256) or MISSING, run.model),
        (run.backend, run.backend),
        (os.path.basename(run.dataset) if run.dataset else MISSING, run.dataset),  # an .npz by its name
        (where or MISSING, where),
        (format_value(run.replicas, "count"), run.replicas),
        (format_value(run.steps, "count"), run.steps),
        *((figure.format(value), value) for figure, value in figures.items()),
    ]


class HistoryTable(QTableWidget):
    """The runs, newest first until a header is clicked; the status in colour when a run did not complete."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("historyTable")
        self.setHorizontalHeaderLabels([title for title, _ in COLUMNS])
        for figure in FIGURES:
            if (heading := self.horizontalHeaderItem(column_of(figure.name))) is not None:
                heading.setToolTip(figure.description)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.verticalHeader().setVisible(False)
        self.setWordWrap(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(column_of("label"), QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(60)
        header.setSectionsClickable(True)
        header.setSortIndicatorShown(True)
        header.setSortIndicator(column_of("started_at"), Qt.SortOrder.DescendingOrder)

    def set_sort_indicator(self, field: str, descending: bool) -> None:
        """Show the sort on the column of `field` (the store did the sorting)."""
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        self.horizontalHeader().setSortIndicator(column_of(field), order)

    def fill(self, runs: Sequence[RunSummary]) -> None:
        """One row per run, in the order given."""
        self.setUpdatesEnabled(False)
        self.clearContents()
        self.setRowCount(len(runs))
        files = ModelFileStates()  # each model file hashed once per fill
        for row, run in enumerate(runs):
            for column, (text, value) in enumerate(_cells(run, files)):
                self.setItem(row, column, self._item(run, column, text, value))
        self.setUpdatesEnabled(True)

    @staticmethod
    def _item(run: RunSummary, column: int, text: str, value: Any) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        item.setData(ROLE_ID, run.id)
        item.setData(ROLE_VALUE, value)
        field = COLUMNS[column][1]
        if field in NUMERIC_FIELDS:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if field == "status":
            busy = f"Measured while {run.conditions.get('reason')}: figures are low and noisy." if run.contended else ""
            if run.message or busy:
                item.setToolTip("\n".join(text for text in (busy, run.message) if text))
            color = STATUS_COLORS.get(run.status) or (WARNING_COLOR if run.contended else None)
            if color is not None:
                item.setForeground(QBrush(QColor(color)))
        if field == "label":
            item.setToolTip(f"#{run.id} {run.label}" + (f"\n{run.message}" if run.message else ""))
        if field == "model" and run.model_sha256:
            item.setToolTip(f"{value}\nsha256 {run.model_sha256} when it ran")
        elif field in ("model", "dataset") and value and is_model_file(str(value)):
            item.setToolTip(str(value))  # a data file (or a model file with no hash): its name in the cell, its path here
        return item

"""A profiled run's step breakdown in the app: the ops that took the time, from the trace files, no browser needed.

The trace is read in a worker thread (a long capture is tens of MB); the table
lists each op type (or op name) with its total time, share and count, and the
dialog says how to open the full trace (timeline, input pipeline) in
TensorBoard's Profile tab.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.hooks.trace_summary import TraceSummary, TraceUnreadable, summarize_trace
from gui.qt_threads import run_in_background
from gui.style import ERROR_COLOR

COLUMNS = ("Op", "Total (ms)", "Share", "Count")
GROUPS = {"type": "op type", "name": "op name"}


def load_summary(trace_dir: Path, group_by: str) -> TraceSummary | str:
    """The trace's summary, or the reason it cannot be read (in words, for the dialog)."""
    try:
        return summarize_trace(trace_dir, group_by)
    except (TraceUnreadable, OSError) as exc:
        return str(exc)


class NumberItem(QTableWidgetItem):
    """A table cell shown as text and sorted by its number."""

    def __init__(self, text: str, value: float):
        super().__init__(text)
        self.value = value
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        return self.value < other.value if isinstance(other, NumberItem) else super().__lt__(other)


class ProfileViewDialog(QDialog):
    """Op, total time, share and count of a capture under `trace_dir`, longest first; `how_to_view` below."""

    def __init__(self, trace_dir: str | Path, how_to_view: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("profileViewDialog")
        self.setWindowTitle("Profile: where the step time goes")
        self.resize(720, 520)
        self.trace_dir = Path(trace_dir)
        self.summary: TraceSummary | None = None
        self._loading = False
        self.header = QLabel("Reading the trace…")
        self.header.setObjectName("profileSummaryLabel")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.group_combo = QComboBox()
        self.group_combo.setObjectName("profileGroupCombo")
        for key, text in GROUPS.items():
            self.group_combo.addItem(text, key)
        self.group_combo.setToolTip("Add up the time per op type (MatMul, Relu, …) or per op in the model (dense/MatMul, …).")
        self.group_combo.currentIndexChanged.connect(self._load)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("profileTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.how_to = QLabel(html.escape(how_to_view).replace("\n", "<br>"))
        self.how_to.setObjectName("profileHowTo")
        self.how_to.setWordWrap(True)
        self.how_to.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.how_to.setVisible(bool(how_to_view))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip("Close this breakdown (the trace stays on disk).")
        group_row = QHBoxLayout()
        group_row.addWidget(QLabel("Add up time per"))
        group_row.addWidget(self.group_combo)
        group_row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(group_row)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.how_to)
        layout.addWidget(buttons)
        self._load()

    @property
    def loading(self) -> bool:
        """True while the trace is being read."""
        return self._loading

    def _load(self, *_: object) -> None:
        if self._loading:
            return
        self._loading = True
        self.group_combo.setEnabled(False)
        run_in_background(
            load_summary,
            self.trace_dir,
            self.group_combo.currentData(),
            on_result=self._show,
            on_error=self._show,
            on_finished=self._on_finished,
            name="profile-trace",
        )

    def _on_finished(self) -> None:
        self._loading = False
        self.group_combo.setEnabled(True)

    def _show(self, outcome: TraceSummary | str) -> None:
        if isinstance(outcome, str):
            self.summary = None
            self.header.setText(f"<span style='color:{ERROR_COLOR}'>{html.escape(outcome)}</span>")
            self.table.setRowCount(0)
            return
        self.summary = outcome
        self.header.setText(
            f"<b>{len(outcome.ops)} ops, {outcome.op_total_s * 1e3:.2f} ms in all</b> ({html.escape(outcome.source)}, "
            f"{outcome.timelines} timeline{'s' if outcome.timelines != 1 else ''}, summed: shares are of the time in ops, "
            f"not of the wall clock).<br>Trace: {html.escape(str(outcome.capture_dir))}"
        )
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(outcome.ops))
        for row, op in enumerate(outcome.ops):
            name = QTableWidgetItem(op.name)
            name.setToolTip(op.name)
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, NumberItem(f"{op.total_s * 1e3:.3f}", op.total_s))
            self.table.setItem(row, 2, NumberItem(f"{op.share:.1%}", op.share))
            self.table.setItem(row, 3, NumberItem(f"{op.count:,}", op.count))
        self.table.setSortingEnabled(True)
        self.table.sortItems(1, Qt.SortOrder.DescendingOrder)


def open_profile_view(parent: QWidget, trace_dir: str | Path, how_to_view: str = "") -> ProfileViewDialog:
    """Show the breakdown of the capture under `trace_dir` beside the window (not modal) and return the dialog."""
    dialog = ProfileViewDialog(trace_dir, how_to_view, parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog

"""The Sweep tab's table: one row per point, its settings, status and figures, the best marked.

The best is starred only when it is better beyond noise; rows tied with it (and
it) read "tied". The "× best" column compares what the star compares
(`core.tuning.sweep.best_by`): time to the target loss, or samples/s where time
to the target decides nothing; its title says which.

When the batch is swept, the learning rate the linear scaling rule suggests
(lr x batch / the run form's batch) sits beside it. Cells keep their number in
ROLE_VALUE; find a column with `column_index(key)`: a setting ("batch_size"),
"suggested_learning_rate", "status" or a figure name ("samples_per_s", ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from core.compare.significance import CONTENDED_MARK
from core.formatting import format_value
from core.hooks.energy import energy_text
from core.jobs.rounds import rounds_measured
from core.results import FIGURES_BY_NAME, RunStatus
from core.training.noise import Interval
from core.training.to_target import ToTarget, to_target_text
from core.tuning.sweep import BY_SAMPLES, BY_TIME, SweepRow, best_by, row_reach, tied_with_best, versus_best
from core.tuning.sweep_plan import AXIS_TITLES, SweepPlan, format_setting
from gui.style import FAILED_COLOR

ROLE_VALUE = Qt.ItemDataRole.UserRole
BEST_MARK = "★ best"
TIED_MARK = "= tied (no difference beyond noise)"
ROUNDS_KEY = "rounds"
VERSUS_KEY = "versus_best"
TARGET_KEY = "time_to_target_steady_s"
EXTRA_COLUMNS = {
    TARGET_KEY: (
        "To target",
        "Steady-state seconds (and samples) until the smoothed loss reached the sweep's target: the highest smoothed final "
        "loss of the points whose loss fell beyond noise, which each of them reached (a point whose loss did not fall "
        "beyond noise to it has not reached it). The best point is the first there, unless a point got there within its "
        "warm-up or no loss fell beyond noise: then time to the target decides nothing and samples/s does (see the notes).",
    ),
    ROUNDS_KEY: ("Rounds", "Interleaved rounds the point was measured in: every round ran every point once, in a new random order."),
    VERSUS_KEY: (
        "× best (95%)",
        "This point against the best, in what the star compares, with the 95% interval over the interleaved rounds: "
        "an interval holding 1 is a tie.",
    ),
}
VERSUS_TITLES = {
    BY_TIME: (
        "To target × best (95%)",
        "Steady-state time to the target loss over the best point's, with the 95% interval (the samples/s over the "
        "interleaved rounds, scaled by the samples each needed): above 1 is slower; an interval holding 1 is a tie.",
    ),
    BY_SAMPLES: (
        "Samples/s × best (95%)",
        "Samples/s over the best point's, with the 95% interval over the interleaved rounds: below 1 is slower; an "
        "interval holding 1 is a tie. (The star compares samples/s here: time to the target decides nothing.)",
    ),
}
BEST_REFERENCE = "reference (tied)"
"""The "× best" cell of the point first in what the star compares when others are tied with it: the ratios' reference, not a star."""
PENDING_COLOR = "#808080"
FIGURE_KEYS = ("samples_per_s", "mean_step_ms", "step_time_median_ms", "final_loss", "peak_memory_bytes", "joules_per_sample")
LR_KEY = "suggested_learning_rate"
LR_TIP = "The linear scaling rule's learning rate at this batch: lr x batch / the run form's batch (reach it with a warm-up)."


class SweepTable(QTableWidget):
    """Rows in the sweep's order; pending points greyed, failed ones red with the reason as tooltip."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sweepTable")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.setWordWrap(False)
        self._keys: list[str] = []
        self._by = BY_TIME

    def column_index(self, key: str) -> int:
        """The column of `key`, or -1."""
        return self._keys.index(key) if key in self._keys else -1

    def compares(self) -> str:
        """What the "× best" column (and the star) compares: "time_to_target" or "samples_per_s" (`core.tuning.sweep.best_by`)."""
        return self._by

    def selected_index(self) -> int | None:
        """The row picked by the user, or None."""
        rows = self.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def show_sweep(self, plan: SweepPlan | None, rows: Sequence[SweepRow | None], best: int | None) -> None:
        """Fill the table: one row per point of `plan` (None in `rows`: not run yet)."""
        self.clearContents()
        if plan is None:
            self._keys = []
            self.setColumnCount(0)
            self.setRowCount(0)
            return
        self._keys = _columns(plan)
        self._by = best_by(rows) if best is not None else BY_TIME
        self.setColumnCount(len(self._keys))
        self.setHorizontalHeaderLabels([_title(key, self._by) for key in self._keys])
        for column, key in enumerate(self._keys):
            if (heading := self.horizontalHeaderItem(column)) is not None:
                heading.setToolTip(LR_TIP if key == LR_KEY else _tip(key, self._by))
        points = plan.points()
        self.setRowCount(len(points))
        tied = set(tied_with_best(rows)) if best is not None else set()
        reached = row_reach(rows)
        for index, settings in enumerate(points):
            row = rows[index] if index < len(rows) else None
            versus = versus_best(rows, index)[1] if best is not None and row is not None and index != best else None
            to = reached[index] if row is not None and index < len(reached) else None
            is_tied = index in tied or (index == best and bool(tied))
            for column, key in enumerate(self._keys):
                self.setItem(index, column, _cell(key, settings, row, index == best, is_tied, versus, to, self._by))


def _columns(plan: SweepPlan) -> list[str]:
    keys: list[str] = []
    for axis in plan.axes:
        keys.append(axis.name)
        if axis.name == "batch_size":
            keys.append(LR_KEY)
    return [*keys, "status", *FIGURE_KEYS, TARGET_KEY, ROUNDS_KEY, VERSUS_KEY]


def _title(key: str, by: str = BY_TIME) -> str:
    if key == VERSUS_KEY:
        return VERSUS_TITLES[by][0]
    if key in AXIS_TITLES:
        return AXIS_TITLES[key].capitalize()
    if key == LR_KEY:
        return "Suggested LR"
    if key == "status":
        return "Status"
    if key in EXTRA_COLUMNS:
        return EXTRA_COLUMNS[key][0]
    return FIGURES_BY_NAME[key].title


def _tip(key: str, by: str = BY_TIME) -> str:
    if key == VERSUS_KEY:
        return VERSUS_TITLES[by][1]
    if key in EXTRA_COLUMNS:
        return EXTRA_COLUMNS[key][1]
    return FIGURES_BY_NAME[key].description if key in FIGURES_BY_NAME else ""


def _cell(
    key: str,
    settings: dict[str, Any],
    row: SweepRow | None,
    is_best: bool,
    tied: bool,
    versus: Interval | None = None,
    to: ToTarget | None = None,
    by: str = BY_TIME,
) -> QTableWidgetItem:
    value: Any = None
    tip = ""
    if key in settings:
        value, text = settings[key], format_setting(key, settings[key])
    elif row is None:
        text = "pending" if key == "status" else ""
    elif key == ROUNDS_KEY:
        value = rounds_measured(row.result) or None
        text = format_value(value, "count")
    elif key == VERSUS_KEY:
        value = versus.ratio if versus is not None else None
        text = (BEST_REFERENCE if tied else "best") if is_best else _versus_text(versus, to if by == BY_TIME else None)
        tip = versus.text() if versus is not None else ""
    elif key == TARGET_KEY:
        value = to.steady_seconds if to is not None else None
        text = "" if to is None else "not reached" if value is None else f"{value:.3g} s, {to.samples or 0:,} samples"
        tip = (
            ""
            if to is None or to.target_loss is None
            else f"to loss {to.target_loss:.4g}: {to.reason or to_target_text(to) + ' from the first step'}"
        )
    elif key == LR_KEY:
        value = row.suggested_learning_rate
        text = "" if value is None else f"{value:.3g}"
    elif key == "status":
        mark = TIED_MARK if tied else BEST_MARK if is_best else ""  # the star only on a best beyond noise
        busy = f" {CONTENDED_MARK}" if row.result.contended else ""
        value, text, tip = row.status.value, row.status.value + busy + (f"  {mark}" if mark else ""), row.result.message
        if busy:
            tip = f"Measured while {row.result.conditions.get('reason')}: figures are low and noisy. {tip}".strip()
    else:
        value = getattr(row.result, key)
        text = FIGURES_BY_NAME[key].format(value)
        tip = energy_text(row.result) if key == "joules_per_sample" else ""
    item = QTableWidgetItem(text)
    item.setData(ROLE_VALUE, value)
    item.setToolTip(tip or (row.result.message if row is not None else ""))
    if row is None:
        item.setForeground(QBrush(QColor(PENDING_COLOR)))
    elif row.status in (RunStatus.FAILED, RunStatus.SKIPPED):
        item.setForeground(QBrush(QColor(FAILED_COLOR)))
    if is_best and not tied:
        font = QFont(item.font())
        font.setBold(True)
        item.setFont(font)
    return item


def _versus_text(versus: Interval | None, to: ToTarget | None) -> str:
    """ "1.42× (1.20–1.68)"; "not reached" for a point that never reached the target; "" without an interval."""
    if versus is not None:
        return f"{versus.ratio:.2f}× ({versus.low:.2f}–{versus.high:.2f})"
    return "not reached" if to is not None and to.target_loss is not None and not to.reached else ""

"""The Compare tab's result table: one row per target, one column per headline figure, then the comparison's own.

The figure columns come from `core.results.FIGURES` (title, tooltip and
formatting included), so a new figure appears here without a change. Each cell
keeps its number in ROLE_VALUE; find a column with `column_index(key)`, the key
being a figure name or one of the comparison's own: "target", "replicas",
"speedup", "scaling_efficiency", "achieved_flops", "fraction_of_peak",
"fraction_of_estimate". The verdict is the "bound" figure's column (the
evidence and advice in its tooltip); "% of peak" is against the measured
ceiling, "% of estimate" against the datasheet/ISA figure beside it. The
figures' own FLOP/s columns are shown once, as the comparison's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableWidget, QTableWidgetItem, QWidget

from core.compare.significance import HOLDS_ONE, NO_DIFFERENCE, ONE_ROUND, contended_label, noise_reason, round_loads
from core.compare.table import CompareRow, Comparison, over_linear
from core.diagnosis.readout import share_of_peak_note, verdict_line
from core.formatting import format_si, format_value
from core.hooks.energy import energy_text
from core.results import FIGURES, Figure, RunStatus
from core.training.to_target import target_how, to_target_text
from gui.style import FAILED_COLOR, WARNING_COLOR

ROLE_VALUE = Qt.ItemDataRole.UserRole

Cell = tuple[str, Any, str]  # text, value (ROLE_VALUE), tooltip


@dataclass(frozen=True)
class CompareColumn:
    """One column of the table: its key, header title and tooltip, and how a row fills its cell."""

    key: str
    title: str
    tip: str
    cell: Callable[[CompareRow, bool, Comparison], Cell]  # row, is it the baseline, the comparison


def _target_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    text = contended_label(row.label + (" (baseline)" if is_baseline else ""), row.result)
    text += "" if row.status == RunStatus.COMPLETED else f" [{row.status}]"
    busy = f"Measured while {row.result.conditions.get('reason')}: figures are low and noisy. " if row.result.contended else ""
    return text, row.label, busy + (row.result.message or ", ".join(row.devices) or row.strategy)


def _speedup_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    text = format_value(row.speedup, "ratio")
    if row.speedup_ci is None:
        return text, row.speedup, ""
    low, high = row.speedup_ci
    rounds = row.interval_rounds or 1
    source = f"over {rounds} interleaved rounds" if rounds >= 2 else "the calls' own interval: measured one after another"
    reason = noise_reason(row)
    why = {ONE_ROUND: ": one round claims nothing across runs", HOLDS_ONE: f": {NO_DIFFERENCE}"}.get(reason or "", "")
    tip = f"95% interval {low:.2f}–{high:.2f}× ({source})" + why
    return text + ("" if row.beyond_noise else " ≈"), row.speedup, tip


def _to_target_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    decision = comparison.target_decision()
    target = decision.target_loss
    if target is None or not row.status.ran:
        return "", None, ""
    to = decision.reached[comparison.rows.index(row)]
    tip = f"To loss {target:.4g} ({target_how(comparison.target_loss)}): " + (to.reason or f"{to.steps} steps, {to_target_text(to)}")
    return ("not reached" if to.seconds is None else f"{to.seconds:.3g} s"), to.seconds, tip


def _rounds_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    rounds = row.rounds if row.status.ran else None
    loads = round_loads(row.result)
    tip = f"Other processes used {min(loads):.0%}–{max(loads):.0%} of the CPU during its turns." if loads else ""
    return format_value(rounds, "count"), rounds, tip


def _replicas_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    replicas = row.replicas if row.status.ran else None
    return format_value(replicas, "count"), replicas, ""


def _figure_cell(figure: Figure, row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    value = row.result.figures()[figure.name]
    tips = {
        "peak_memory_bytes": row.result.peak_memory_source,
        "bound": verdict_line(row.result),
        "joules_per_sample": energy_text(row.result),
    }
    return figure.format(value), value, tips.get(figure.name, "")


def _efficiency_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    value = row.scaling_efficiency
    if not over_linear(row, comparison.baseline):
        return format_value(value, "percent"), value, ""
    tip = next((w for w in comparison.warnings if w.startswith(f"{row.label}: efficiency")), "Over 100%: see the warnings.")
    return f"{format_value(value, 'percent')} (!)", value, tip


def _flops_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    recorded = row.result.flops_per_step
    if comparison.flops_per_step is not None:
        tip = f"{comparison.flops_per_step:.4g} FLOPs per training step ({comparison.flops_method})"
    elif recorded is not None:
        tip = f"{recorded:.4g} FLOPs per training step, as the run recorded them"
    elif comparison.flops_method:
        tip = f"FLOPs per step {comparison.flops_method}"
    else:
        tip = "FLOPs per step not recorded with this run (an older version of the app ran it)."
    if row.result.flops_uncounted:
        tip += f"; partial, a lower bound: {', '.join(row.result.flops_uncounted)} not counted"
    return format_si(row.achieved_flops, ""), row.achieved_flops, tip


def _peak_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    ceiling = f"Measured ceiling {format_si(row.peak_flops, 'FLOP/s')}: " if row.peak_flops else "Measured ceiling: "
    estimate = f"; datasheet/ISA estimate {format_si(row.estimate_flops, 'FLOP/s')}" if row.estimate_flops else ""
    tip = f"{ceiling}{row.peak_flops_how}{estimate} ({row.estimate_how})."
    return format_value(row.fraction_of_peak, "fraction"), row.fraction_of_peak, tip


def _estimate_cell(row: CompareRow, is_baseline: bool, comparison: Comparison) -> Cell:
    estimate = f"Estimate {format_si(row.estimate_flops, 'FLOP/s')}: " if row.estimate_flops else "Estimate: "
    tip = share_of_peak_note(row.fraction_of_estimate) + ". " + estimate + row.estimate_how
    return format_value(row.fraction_of_estimate, "fraction"), row.fraction_of_estimate, tip


SHOWN_AS_COMPARISON = frozenset({"achieved_flops", "pct_of_measured_peak"})
"""Figures the comparison's own columns show (with what they divide by), so they are not repeated."""

COLUMNS: tuple[CompareColumn, ...] = (
    CompareColumn("target", "Target", "", _target_cell),
    CompareColumn("replicas", "Replicas", "", _replicas_cell),
    *(CompareColumn(f.name, f.title, f.description, partial(_figure_cell, f)) for f in FIGURES if f.name not in SHOWN_AS_COMPARISON),
    CompareColumn(
        "speedup",
        "Speed-up",
        "Samples/s of this row / samples/s of the baseline row; ≈ marks no difference beyond noise (its 95% interval holds 1).",
        _speedup_cell,
    ),
    CompareColumn(
        "time_to_target_s",
        "To target",
        "Seconds from the first step (warm-up included) until the smoothed loss reached the comparison's target: the highest "
        "of the rows' smoothed final losses, which every row reached (hover a cell for its samples).",
        _to_target_cell,
    ),
    CompareColumn(
        "rounds",
        "Rounds",
        "Interleaved rounds this target was measured in: each round ran every target once, in a new random order, so a load "
        "that came and went hit all alike; the speed-up's interval comes from them (one round claims nothing across runs).",
        _rounds_cell,
    ),
    CompareColumn(
        "scaling_efficiency",
        "Efficiency",
        "Speed-up / (replicas / baseline replicas): 100 % means N replicas ran N times as fast. Same device kind only; "
        "(!) marks over 100%, which is no better-than-linear scaling (hover the cell).",
        _efficiency_cell,
    ),
    CompareColumn(
        "achieved_flops",
        "FLOP/s",
        "Achieved FLOP/s (G = 10^9, T = 10^12): training FLOPs per step x steady-state steps per second.",
        _flops_cell,
    ),
    CompareColumn(
        "fraction_of_peak",
        "% of peak",
        "Achieved FLOP/s / the devices' measured matmul ceiling for the run's precision (hover a cell for how it was measured).",
        _peak_cell,
    ),
    CompareColumn(
        "fraction_of_estimate",
        "% of estimate",
        "Achieved FLOP/s / the datasheet (GPU) or cores x clock x vector width (CPU) estimate, kept beside the measured ceiling.",
        _estimate_cell,
    ),
)
_INDEX = {column.key: index for index, column in enumerate(COLUMNS)}


def column_index(key: str) -> int:
    """The column of a figure name or of one of the comparison's own keys ("target", "speedup", ...)."""
    return _INDEX[key]


class CompareTable(QTableWidget):
    """The comparison's rows; the baseline in bold, rows that did not complete in colour.

    Right-clicking a row offers it as the baseline: `baseline_requested(index)`.
    """

    baseline_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("compareTable")
        self._comparison: Comparison | None = None
        self.setHorizontalHeaderLabels([column.title for column in COLUMNS])
        for index, column in enumerate(COLUMNS):
            if column.tip and (heading := self.horizontalHeaderItem(index)) is not None:
                heading.setToolTip(column.tip)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)

    def show_comparison(self, comparison: Comparison | None) -> None:
        """Fill the table with `comparison`'s rows (empty for None)."""
        self._comparison = comparison
        self.setRowCount(len(comparison.rows) if comparison is not None else 0)
        if comparison is None:
            return
        for row_index, row in enumerate(comparison.rows):
            is_baseline = row_index == comparison.baseline_index
            for position, column in enumerate(COLUMNS):
                cell = column.cell(row, is_baseline, comparison)
                self.setItem(row_index, position, self._item(row, cell, is_baseline, position))

    @staticmethod
    def _item(row: CompareRow, cell: Cell, is_baseline: bool, column: int) -> QTableWidgetItem:
        text, value, tip = cell
        item = QTableWidgetItem(text)
        item.setData(ROLE_VALUE, value)
        if tip:
            item.setToolTip(tip)
        if column:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if row.status != RunStatus.COMPLETED:
            item.setForeground(QBrush(QColor(FAILED_COLOR if row.status == RunStatus.FAILED else WARNING_COLOR)))
        if is_baseline:
            font = QFont(item.font())
            font.setBold(True)
            item.setFont(font)
        return item

    def _menu(self, position: QPoint) -> None:
        row = self.rowAt(position.y())
        if row < 0 or self._comparison is None:
            return
        menu = QMenu(self)
        action = QAction(f"Use {self._comparison.rows[row].label} as baseline", menu)
        action.setEnabled(row != self._comparison.baseline_index)
        action.triggered.connect(lambda: self.baseline_requested.emit(row))
        menu.addAction(action)
        menu.exec(self.viewport().mapToGlobal(position))


def default_baseline(device_lists: Sequence[Sequence[str]]) -> int:
    """The row to measure speed-ups against: the first one on a single CPU device, else the first row."""
    for index, devices in enumerate(device_lists):
        if len(devices) == 1 and devices[0].startswith("CPU:"):
            return index
    return 0

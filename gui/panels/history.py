"""The History tab: every stored run, filtered and sorted, to overlay in the plots, compare, export or delete.

Runs live in the SQLite history (`core.history.store.RunStore`), so they survive restarts.
The table (`gui.panels.history_table`) is re-read from the store on `refresh()` (the
window calls it when a run finishes); sorting and filtering are done by the store's
query. A history file SQLite can not read was moved aside when the store opened: its
notice is shown here in a banner.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.compare.table import compare_results
from core.history.store import RunStore, RunSummary, StoreError
from core.results import FIGURES_BY_NAME, RunResult, RunStatus
from gui.panels.compare_table import default_baseline
from gui.panels.history_table import COLUMNS, NUMERIC_FIELDS, STATUS_COLORS, HistoryTable
from gui.plotting.plots import PlotsWidget
from gui.remembered import FOLDER_EXPORT, ask_save_file

STATUSES = (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING)
DETAIL_FIGURES = ("warmup_s", "step_time_p95_ms")  # shown for a single selected run, beside its batch size
NOTICE_STYLE = "background: #fff4e5; border: 1px solid #e0a040; padding: 6px; color: #5a3d00;"


def plot_key(run_id: int) -> str:
    """The plots' key of a stored run shown from the history."""
    return f"history-{run_id}"


def target_text(config: dict[str, Any]) -> str:
    """Where a run ran, in compare-target words: 'CPU:0', 'mirrored:CPU:0,CPU:1', 'multi-worker:2', after its backend if not
    TensorFlow ('jax:CPU:0'): a JAX run and a TensorFlow run on the same device are told apart."""
    strategy = str(config.get("strategy") or "default")
    devices = list(config.get("devices") or ())
    if strategy == "one-device" and devices:
        place = devices[0]
    elif strategy == "mirrored":
        place = "mirrored:" + ",".join(devices) if devices else "mirrored"
    elif strategy == "multi-worker":
        place = f"multi-worker:{config.get('workers')}"
    elif strategy == "tpu":
        place = f"tpu:{config.get('tpu_address')}"
    else:
        place = strategy
    backend = str(config.get("backend") or "tensorflow")
    return place if backend == "tensorflow" else f"{backend}:{place}"


def _plural(count: int) -> str:
    return "s" if count != 1 else ""


class HistoryPanel(QWidget):
    """The run history table with filter, sort, Show in plots, Compare selected, Export and Delete."""

    compare_requested = Signal(object, str)  # Comparison, description
    show_requested = Signal(object)  # QWidget the window should bring to the front
    message = Signal(str)  # for the status bar

    def __init__(self, plots: PlotsWidget, store: RunStore | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("historyPanel")
        self._plots = plots
        self._open_error = ""
        if store is None:
            try:
                store = RunStore.open()
            except (StoreError, OSError) as exc:
                self._open_error = f"The run history is not available: {exc}"
        self._store = store
        self._runs: list[RunSummary] = []
        self._total = 0
        self._order_by = "started_at"
        self._descending = True
        self._build()
        self._show_notice(self.notice)
        self.refresh()

    # --- public API ----------------------------------------------------------

    @property
    def store(self) -> RunStore | None:
        """The history store (None once closed, or when it could not be opened)."""
        return self._store

    @property
    def notice(self) -> str:
        """Why the history was reset or is unavailable ('' when all is well)."""
        if self._open_error:
            return self._open_error
        return self._store.notice if self._store is not None else ""

    def runs(self) -> list[RunSummary]:
        """The runs in the table, in table order."""
        return list(self._runs)

    def refresh(self, *_: object) -> None:
        """Re-read the history with the current filter and sort, keeping the selection."""
        selected = self.selected_ids()
        if self._store is None:
            self._runs, self._total = [], 0
        else:
            status = self.status_combo.currentData()
            search = self.filter_edit.text().strip()
            self._runs = self._store.list_runs(status=status, search=search, order_by=self._order_by, descending=self._descending)
            self._total = len(self._runs) if not status and not search else len(self._store.list_runs())
        self._fill_table()
        if selected:
            self.select_ids(selected)

    def select_ids(self, run_ids: Sequence[int]) -> None:
        """Select the rows of these runs (those the filter shows)."""
        wanted = set(run_ids)
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for row, run in enumerate(self._runs):
            if run.id in wanted:
                self.table.selectRow(row)
        self.table.setSelectionMode(mode)

    def selected_ids(self) -> list[int]:
        """Ids of the selected runs, in table order."""
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [self._runs[row].id for row in rows if row < len(self._runs)]

    def set_sort(self, field: str, descending: bool) -> None:
        """Sort by a RunSummary field or a figure name (as a header click does)."""
        self._order_by, self._descending = field, descending
        self.table.set_sort_indicator(field, descending)
        self.refresh()

    def show_selected_in_plots(self) -> list[Hashable]:
        """Overlay the selected runs' step series on the plots; returns their plot keys.

        A run already in the plots (trained, compared or shown before) is shown again where it is, never added twice.
        """
        keys: list[Hashable] = []
        for run_id in self._selected_or_warn("show in the plots"):
            shown = self._plots.key_of_run(run_id)
            if shown is not None:
                self._plots.set_run_visible(shown, True)
                keys.append(shown)
                continue
            result = self._open_store().load(run_id)
            label = self._summary(run_id).label or target_text(result.config)
            self._plots.add_run(
                plot_key(run_id), label, result.losses, result.step_times_s, result.warmup_steps, result.config.get("batch_size")
            )
            self._plots.describe_run(plot_key(run_id), run_id, result.config)  # labelled "#id …" and by what differs
            keys.append(plot_key(run_id))
        if keys:
            self.message.emit(f"{len(keys)} run{_plural(len(keys))} from the history shown in the plots.")
            self.show_requested.emit(self._plots)
        return keys

    def compare_selected(self) -> None:
        """Put the selected runs side by side in the Compare tab (no re-run)."""
        run_ids = self._selected_or_warn("compare")
        if not run_ids:
            return
        entries: list[tuple[str, RunResult]] = []
        for run_id in run_ids:
            result = self._open_store().load(run_id)  # with its step series: each speed-up gets its interval
            entries.append((f"{target_text(result.config)} #{run_id}", result))
        comparison = compare_results(entries)
        comparison = comparison.with_baseline(default_baseline([row.devices for row in comparison.rows]))
        described = ", ".join(f"#{run_id}" for run_id in run_ids)
        self.compare_requested.emit(comparison, f"Runs {described} from the history, side by side (not re-run).")

    def delete_selected(self, ask: bool = True) -> list[int]:
        """Delete the selected runs (after a confirmation when `ask`); returns the ids deleted."""
        run_ids = self._selected_or_warn("delete")
        if not run_ids:
            return []
        if ask:
            answer = QMessageBox.question(
                self,
                "Delete runs?",
                f"Delete {len(run_ids)} run{_plural(len(run_ids))} from the history? This can not be undone.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No,
            )
            if answer != QMessageBox.StandardButton.Yes:
                return []
        try:
            self._open_store().delete(run_ids)
        except StoreError as exc:
            self.message.emit(f"Nothing deleted: {exc}")
            return []
        for run_id in run_ids:
            if plot_key(run_id) in self._plots.run_keys():
                self._plots.remove_run(plot_key(run_id))
        self.refresh()
        self.message.emit(f"Deleted {len(run_ids)} run{_plural(len(run_ids))} from the history.")
        return run_ids

    def export_selected(self, path: str | Path) -> Path:
        """Write the selected runs (all shown ones when none is selected) to CSV or JSON, by the suffix."""
        if self._store is None:
            raise ValueError(self.notice or "The run history is not available.")
        run_ids = self.selected_ids() or [run.id for run in self._runs]
        if not run_ids:
            raise ValueError("There are no runs to export: run something first.")
        path = Path(path)
        if path.suffix.lower() == ".csv":
            self._store.export_csv(run_ids, path)
        else:
            self._store.export_json(run_ids, path)
        return path

    def close_store(self) -> None:
        """Close the history file (the window is closing)."""
        if self._store is not None:
            self._store.close()
            self._store = None
        self._update_buttons()

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        notice_row = self._build_notice_row()
        filters = self._build_filter_row()
        self._build_table()
        buttons = self._build_buttons()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(notice_row)
        layout.addLayout(filters)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.details_label)
        layout.addLayout(buttons)

    def _build_notice_row(self) -> QHBoxLayout:
        """The banner saying why the history was reset or is unavailable, with Dismiss."""
        self.notice_label = QLabel()
        self.notice_label.setObjectName("historyNotice")
        self.notice_label.setWordWrap(True)
        self.notice_label.setStyleSheet(NOTICE_STYLE)
        self.notice_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setObjectName("dismissNoticeButton")
        self.dismiss_button.setToolTip("Hide this notice.")
        self.dismiss_button.clicked.connect(lambda: self._show_notice(""))
        notice_row = QHBoxLayout()
        notice_row.addWidget(self.notice_label, 1)
        notice_row.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        return notice_row

    def _build_filter_row(self) -> QHBoxLayout:
        """The text filter, the status filter and the count of runs shown."""
        self.filter_edit = QLineEdit()
        self.filter_edit.setObjectName("historyFilter")
        self.filter_edit.setPlaceholderText("Filter: label, model, data set, strategy, device, status or message")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.setToolTip("Show only runs whose label, model, data set, strategy, device, status or message contains this text.")
        self.filter_edit.textChanged.connect(self.refresh)
        self.status_combo = QComboBox()
        self.status_combo.setObjectName("historyStatusFilter")
        self.status_combo.setToolTip("Show only runs that ended this way.")
        self.status_combo.addItem("All statuses", None)
        for status in STATUSES:
            self.status_combo.addItem(status.value, status.value)
        self.status_combo.currentIndexChanged.connect(self.refresh)
        self.count_label = QLabel()
        self.count_label.setObjectName("historyCount")
        filters = QHBoxLayout()
        filters.addWidget(self.filter_edit, 1)
        filters.addWidget(self.status_combo)
        filters.addWidget(self.count_label)
        return filters

    def _build_table(self) -> None:
        """The run table (header clicks sort, Delete deletes, right-click for actions) and the details line."""
        self.table = HistoryTable()
        self.table.horizontalHeader().sectionClicked.connect(self._on_header_clicked)
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._table_menu)
        self.table.installEventFilter(self)
        self.details_label = QLabel("Select runs to overlay them in the plots, compare, export or delete them.")
        self.details_label.setObjectName("historyDetails")
        self.details_label.setWordWrap(True)
        self.details_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_buttons(self) -> QHBoxLayout:
        """Show in plots, Compare selected, Export, Delete, then Refresh at the far end."""
        self.plot_button = self._button(
            "Show in plots", "showInPlotsButton", "Overlay the selected runs' loss and step-time curves in the Training tab."
        )
        self.plot_button.clicked.connect(self.show_selected_in_plots)
        self.compare_button = self._button(
            "Compare selected", "compareSelectedButton", "Put the selected runs side by side in the Compare tab (nothing is re-run)."
        )
        self.compare_button.clicked.connect(self.compare_selected)
        self.export_button = self._button("Export…", "exportHistoryButton", "Save the selected runs (or all shown) as CSV or JSON.")
        self.export_button.clicked.connect(self._ask_export)
        self.delete_button = self._button("Delete…", "deleteRunsButton", "Delete the selected runs from the history (Delete key).")
        self.delete_button.clicked.connect(lambda: self.delete_selected())
        self.refresh_button = self._button(
            "Refresh", "refreshHistoryButton", "Read the history again (runs saved by another Device Lab or the CLI)."
        )
        self.refresh_button.clicked.connect(self.refresh)
        buttons = QHBoxLayout()
        for button in (self.plot_button, self.compare_button, self.export_button, self.delete_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.refresh_button)
        return buttons

    @staticmethod
    def _button(text: str, name: str, tip: str) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setToolTip(tip)
        return button

    # --- showing -------------------------------------------------------------

    def _show_notice(self, text: str) -> None:
        self.notice_label.setText(html.escape(text))
        self.notice_label.setVisible(bool(text))
        self.dismiss_button.setVisible(bool(text))

    def _fill_table(self) -> None:
        self.table.fill(self._runs)
        shown, total = len(self._runs), self._total
        if self._store is None:
            self.count_label.setText("history unavailable")
        elif shown == total:
            self.count_label.setText(f"{total} run{_plural(total)}")
        else:
            self.count_label.setText(f"{shown} of {total} runs match")
        self._on_selection_changed()

    def _summary(self, run_id: int) -> RunSummary:
        return next(run for run in self._runs if run.id == run_id)

    def _update_buttons(self) -> None:
        has_store = self._store is not None
        selected = bool(self.selected_ids()) if has_store else False
        for widget in (self.plot_button, self.compare_button, self.delete_button):
            widget.setEnabled(selected)
        self.export_button.setEnabled(has_store and bool(self._runs))
        self.refresh_button.setEnabled(has_store)

    def _on_selection_changed(self) -> None:
        self._update_buttons()
        run_ids = self.selected_ids() if self._store is not None else []
        if len(run_ids) == 1:
            self.details_label.setText(self._details(self._summary(run_ids[0])))
        elif run_ids:
            self.details_label.setText(f"{len(run_ids)} runs selected.")
        elif not self._runs and self._store is not None and not self._total:
            self.details_label.setText("No runs yet: every run you start (Start or Compare) is saved here.")
        else:
            self.details_label.setText("Select runs to overlay them in the plots, compare, export or delete them.")

    @staticmethod
    def _details(run: RunSummary) -> str:
        """One selected run in a line: id, label, status, batch, warm-up and p95 step; its message below."""
        parts = [f"<b>#{run.id}</b> {html.escape(run.label)}", html.escape(run.status.value)]
        if run.batch_size:
            parts.append(f"global batch {run.batch_size}")
        for name in DETAIL_FIGURES:
            figure, value = FIGURES_BY_NAME[name], run.figures.get(name)
            if value is not None:
                parts.append(f"{figure.label.lower()} {figure.format(value)} {figure.unit}")
        text = " · ".join(parts)
        if run.message:
            color = STATUS_COLORS.get(run.status, "#333")
            text += f"<br><span style='color:{color}'>{html.escape(run.message)}</span>"
        return text

    # --- user actions --------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """The Delete key in the table deletes the selected runs (after asking)."""
        pressed = event if isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress else None
        if watched is self.table and pressed is not None and pressed.matches(QKeySequence.StandardKey.Delete):
            self.delete_selected()
            return True
        return super().eventFilter(watched, event)

    def _open_store(self) -> RunStore:
        """The history's store, for runs `_selected_or_warn` gave (it gives none while the history is not open)."""
        if self._store is None:
            raise StoreError("the history is not open")
        return self._store

    def _selected_or_warn(self, what: str) -> list[int]:
        """The selected runs' ids, or [] (and a message) when none is selected or the history is not open."""
        run_ids = self.selected_ids() if self._store is not None else []
        if not run_ids:
            self.message.emit(f"Select one or more runs to {what}.")
        return run_ids

    def _on_header_clicked(self, column: int) -> None:
        field = COLUMNS[column][1]
        descending = not self._descending if field == self._order_by else field in NUMERIC_FIELDS | {"started_at"}
        self.set_sort(field, descending)

    def _table_menu(self, position: QPoint) -> None:
        if not self.selected_ids():
            return
        menu = QMenu(self.table)
        for text, slot in (
            ("Show in plots", self.show_selected_in_plots),
            ("Compare selected", self.compare_selected),
            ("Export…", self._ask_export),
        ):
            action = QAction(text, menu)
            action.triggered.connect(slot)
            menu.addAction(action)
        menu.addSeparator()
        delete = QAction("Delete… (Del)", menu)
        delete.triggered.connect(lambda: self.delete_selected())
        menu.addAction(delete)
        menu.exec(self.table.viewport().mapToGlobal(position))

    def _ask_export(self) -> None:
        path, chosen = ask_save_file(self, FOLDER_EXPORT, "Export runs", "device-lab-runs.csv", "CSV table (*.csv);;JSON (*.json)")
        if not path:
            return
        if not Path(path).suffix:
            path += ".json" if "json" in chosen.lower() else ".csv"
        try:
            saved = self.export_selected(path)
        except (OSError, ValueError, KeyError) as exc:
            self.message.emit(f"Could not export the runs: {exc}")
            return
        self.message.emit(f"Runs exported to {saved}")

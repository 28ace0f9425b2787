"""The device list: every CPU/GPU/TPU with memory and measured ceilings, details of the selected one, and what is missing.

The GUI thread never reads hardware: detection (TensorFlow import included) runs in a
worker thread, and GPU memory and utilisation are re-read from NVML every 2 s, also in a
worker thread, one re-read at a time and only when there are GPUs. Each device's
measured ceilings (matmul FLOP/s, bandwidth) stand beside the datasheet/ISA estimate;
they are read from the cache after detection and (re-)measured on request, both in
worker threads (`gui.panels.device_ceilings`).
"""

from __future__ import annotations

import gc
import html
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from PySide6.QtCore import Qt, QThread, QTimer, Signal
from PySide6.QtGui import QBrush, QCloseEvent, QColor, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.machine.inspect import refresh_gpu_usage
from core.machine.runtime import RuntimeSettings
from core.machine.types import DeviceInfo, DeviceReport, NoteTopic, TpuProbe, memory_cells
from gui.panels.device_ceilings import CEILING_COLUMNS, CEILING_TIPS, CeilingsBox, ceiling_cells, ceiling_details
from gui.qt_threads import run_in_background, stop_and_wait
from gui.style import FAILED_COLOR

GPU_REFRESH_MS = 2000
GPU_REFRESH_WAIT_S = 5.0  # closing waits this long for a GPU re-read in flight (NVML answers in milliseconds)
COLUMNS = ("Kind", "Name", "TF name", "Memory total", "Used", "Free", "Utilisation", *CEILING_COLUMNS, "Status")
NUMBER_COLUMNS = range(3, 7 + len(CEILING_COLUMNS))
DETECTING = "Detecting devices… (TensorFlow is starting in the background)"
TPU_MISSING_TOPICS = frozenset({NoteTopic.NO_TPU, NoteTopic.TPU_UNUSED})


_runtime_configured = threading.Lock()  # acquired (never released) by the first detection


def with_tpu_rows(report: DeviceReport, tpu_rows: Sequence[DeviceInfo]) -> DeviceReport:
    """`report` with its TPU rows (and notes on a missing TPU) replaced by those of a connected TPU."""
    devices = tuple(d for d in report.devices if d.kind != "TPU") + tuple(tpu_rows)
    notes = tuple(n for n in report.note_records if n.topic not in TPU_MISSING_TOPICS)
    return DeviceReport(devices, notes)


def with_refreshed_gpus(report: DeviceReport, refreshed: Sequence[DeviceInfo]) -> DeviceReport:
    """`report` with each GPU row replaced by its re-read twin, matched on kind, TF name and bus id.

    Matched by identity, not position: a re-detection may have changed the list while the
    re-read ran. A GPU row with neither TF name nor bus id cannot be told apart and stays.
    """
    fresh = {d.key: d for d in refreshed if d.kind == "GPU" and (d.tf_name or d.bus_id)}
    devices = tuple(fresh.get(d.key, d) if d.kind == "GPU" else d for d in report.devices)
    return DeviceReport(devices, report.note_records)


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while the block runs (TensorFlow's import: ~0.4 s of its ~2.7 s CPU is collections
    scanning the objects it creates, and the window's); the main window freezes what it made once the devices are listed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def detect_devices(runtime: RuntimeSettings | None) -> tuple[DeviceReport, list[str]]:
    """Apply the start-up settings (once per process: TF takes them only before it starts), then list the devices.

    Imports TensorFlow, so it runs in a worker thread.
    """
    from core.logs import import_tensorflow_quietly
    from core.machine.cpu import prefetch_cpu_info
    from core.machine.inspect import inspect_devices
    from core.machine.runtime import configure_runtime

    warnings = []
    if runtime is not None and _runtime_configured.acquire(blocking=False):
        prefetch_cpu_info()  # its subprocess runs while TensorFlow imports
        with collection_paused():
            import_tensorflow_quietly()  # TF's C++ start-up lines go to the log file and the Log dock
        warnings = configure_runtime(runtime)
    return inspect_devices(), warnings


class DevicePanel(QWidget):
    """Table of devices, a details pane, notes on missing devices, and a Refresh button."""

    devices_changed = Signal(object)  # DeviceReport
    detection_failed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("devicePanel")
        self._report = DeviceReport((), ())
        self._warnings: list[str] = []
        self._tpu_rows: tuple[DeviceInfo, ...] = ()
        self._detecting = False
        self._refreshing_gpus = False
        self._gpu_thread: QThread | None = None
        self._closed = False
        self._build()
        self._gpu_timer = QTimer(self)
        self._gpu_timer.setInterval(GPU_REFRESH_MS)
        self._gpu_timer.timeout.connect(self._refresh_gpus)

    # --- public API ----------------------------------------------------------

    @property
    def report(self) -> DeviceReport:
        return self._report

    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._report.devices

    def detect(self, runtime: RuntimeSettings | None = None) -> None:
        """Re-read every device in a worker thread; `runtime` is applied first (only before TF starts)."""
        if self._detecting or self._closed:
            return
        self._detecting = True
        self.refresh_button.setEnabled(False)
        self.status_label.setText(DETECTING if not self._report.devices else "Re-reading devices…")
        run_in_background(
            detect_devices,
            runtime,
            on_result=self._on_detected,
            on_error=self._on_detection_failed,
            on_finished=self._on_detection_finished,
            name="device-detection",
        )

    def close_down(self) -> None:
        """The window is closing: stop the GPU timer, start no more background work, end a GPU re-read in flight.

        A detection in flight (TensorFlow import) is left to the window, which waits for every worker thread.
        """
        self._closed = True
        self._gpu_timer.stop()
        self.ceilings.close_down()
        stop_and_wait(None, self._gpu_thread, GPU_REFRESH_WAIT_S)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Closed on its own (not as part of the main window): wind down the same way."""
        self.close_down()
        super().closeEvent(event)

    def set_report(self, report: DeviceReport, warnings: Sequence[str] = ()) -> None:
        """Show a device report (also used by tests and by detection)."""
        self._report = report
        self._warnings = list(warnings)
        self._fill_table()
        self._show_notes()
        count = len(report.devices)
        usable = sum(1 for d in report.devices if d.available)
        self.status_label.setText(f"{count} device{'s' if count != 1 else ''} found, {usable} usable by TensorFlow.")
        if any(d.kind == "GPU" for d in report.devices) and not self._closed:
            self._gpu_timer.start()
        else:
            self._gpu_timer.stop()
        self.devices_changed.emit(report)

    def show_tpu_probe(self, probe: TpuProbe) -> None:
        """A TPU connected from the run form: list its cores (kept across Refresh); a failed probe drops them."""
        if probe.ok and probe.devices:
            self._tpu_rows = tuple(probe.devices)
            self.set_report(with_tpu_rows(self._report, self._tpu_rows), self._warnings)
        elif self._tpu_rows:
            devices = tuple(d for d in self._report.devices if d not in self._tpu_rows)
            self._tpu_rows = ()
            self.set_report(DeviceReport(devices, self._report.note_records), self._warnings)

    # --- building ------------------------------------------------------------

    def _build(self) -> None:
        top = self._build_header()
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self._build_table())
        splitter.addWidget(self._build_details())
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([180, 420])
        splitter.setChildrenCollapsible(False)
        self.notes_label = QLabel()
        self.notes_label.setObjectName("deviceNotes")
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_label.setVisible(False)
        self.ceilings = CeilingsBox()
        self.ceilings.peaks_changed.connect(lambda _report: self._fill_table())
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.ceilings)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.notes_label)

    def _build_header(self) -> QHBoxLayout:
        """The status line and the Refresh button."""
        self.status_label = QLabel(DETECTING)
        self.status_label.setObjectName("deviceStatus")
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setObjectName("refreshDevicesButton")
        self.refresh_button.setToolTip("Read every device again (memory, new TPU connections).")
        self.refresh_button.setEnabled(False)
        self.refresh_button.clicked.connect(lambda: self.detect(None))
        top = QHBoxLayout()
        top.addWidget(self.status_label, 1)
        top.addWidget(self.refresh_button)
        return top

    def _build_table(self) -> QTableWidget:
        """One row per device."""
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("deviceTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        for offset, tip in enumerate(CEILING_TIPS):
            if (heading := self.table.horizontalHeaderItem(COLUMNS.index(CEILING_COLUMNS[0]) + offset)) is not None:
                heading.setToolTip(tip)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.table.itemSelectionChanged.connect(self._show_details)
        return self.table

    def _build_details(self) -> QWidget:
        """The selected device's properties under a title."""
        self.details = QTableWidget(0, 2)
        self.details.setObjectName("deviceDetails")
        self.details.setHorizontalHeaderLabels(("Property", "Value"))
        self.details.verticalHeader().setVisible(False)
        self.details.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.details.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.details.horizontalHeader().setStretchLastSection(True)
        self.details.setWordWrap(True)
        details_box = QWidget()
        details_layout = QVBoxLayout(details_box)
        details_layout.setContentsMargins(0, 0, 0, 0)
        self.details_title = QLabel("<b>Details</b>: select a device")
        self.details_title.setObjectName("deviceDetailsTitle")
        details_layout.addWidget(self.details_title)
        details_layout.addWidget(self.details)
        return details_box

    # --- filling -------------------------------------------------------------

    def _fill_table(self) -> None:
        selected = self._selected_row()
        devices = self._report.devices
        self.table.setRowCount(len(devices))
        grey = QBrush(self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
        for row, device in enumerate(devices):
            status = "usable" if device.available else f"not usable: {device.reason}"
            values = (
                device.kind,
                device.name,
                device.tf_name or "—",
                *memory_cells(device),  # a logical CPU sharing the host RAM says so: memory counted once
                device.details.get("Utilisation", "—") if device.kind == "GPU" else "—",
                *ceiling_cells(self.ceilings.report, device),
                status,
            )
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                if column in NUMBER_COLUMNS:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if not device.available:
                    item.setForeground(grey)
                    item.setToolTip(device.reason)
                elif device.kind == "CPU" and column in (3, 4, 5):
                    item.setToolTip("Host RAM, shared by every CPU device.")
                self.table.setItem(row, column, item)
        if devices:
            self.table.selectRow(min(selected if selected >= 0 else 0, len(devices) - 1))
        self._show_details()

    def _show_notes(self) -> None:
        lines = list(self._report.notes) + self._warnings
        if not lines:
            self.notes_label.setVisible(False)
            return
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        self.notes_label.setText(f"<b>Notes</b><ul style='margin-left:-20px'>{items}</ul>")
        self.notes_label.setVisible(True)

    def _selected_row(self) -> int:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else -1

    def _show_details(self) -> None:
        row = self._selected_row()
        if row < 0 or row >= len(self._report.devices):
            self.details.setRowCount(0)
            self.details_title.setText("<b>Details</b>: select a device")
            return
        device = self._report.devices[row]
        entries = list(device.details.items()) + ceiling_details(self.ceilings.report, device)
        if not device.available:
            entries.insert(0, ("Not usable because", device.reason))
        self.details_title.setText(f"<b>Details</b>: {html.escape(device.tf_name or device.kind)} · {html.escape(device.name)}")
        self.details.setRowCount(len(entries))
        for index, (key, value) in enumerate(entries):
            self.details.setItem(index, 0, QTableWidgetItem(key))
            value_item = QTableWidgetItem(value)
            value_item.setToolTip(value)
            if key == "Not usable because":
                value_item.setForeground(QBrush(QColor(FAILED_COLOR)))
            self.details.setItem(index, 1, value_item)
        self.details.resizeRowsToContents()

    # --- workers -------------------------------------------------------------

    def _on_detected(self, outcome: tuple[DeviceReport, list[str]]) -> None:
        report, warnings = outcome
        if self._tpu_rows and not any(d.kind == "TPU" and d.available for d in report.devices):
            report = with_tpu_rows(report, self._tpu_rows)
        self.set_report(report, warnings)

    def _on_detection_failed(self, message: str) -> None:
        text = f"Device detection failed: {message}. Check that TensorFlow is installed in this Python, then press Refresh."
        self.status_label.setText(text)
        self.detection_failed.emit(text)

    def _on_detection_finished(self) -> None:
        self._detecting = False
        self.refresh_button.setEnabled(True)
        if not self.ceilings.is_measured() and not self.ceilings.is_busy():
            self.ceilings.load(self._report.devices)  # TensorFlow is up and the CPU known: the cache can be matched

    def _refresh_gpus(self) -> None:
        """Timer tick: re-read GPU usage in a worker thread, one re-read at a time."""
        if self._refreshing_gpus or self._detecting or self._closed or not self.isVisible():
            return
        self._refreshing_gpus = True
        self._gpu_thread = run_in_background(
            refresh_gpu_usage,
            self._report.devices,
            on_result=self._on_gpus_refreshed,
            on_finished=self._on_gpu_refresh_finished,
            name="gpu-refresh",
        )

    def _on_gpus_refreshed(self, devices: list[DeviceInfo]) -> None:
        if not self._detecting and not self._closed:
            self._report = with_refreshed_gpus(self._report, devices)
            self._fill_table()

    def _on_gpu_refresh_finished(self) -> None:
        self._refreshing_gpus = False
        self._gpu_thread = None

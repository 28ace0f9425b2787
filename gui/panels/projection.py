"""The Compare tab's "What would … give?": the run form's job projected on a GPU or TPU this machine does not have.

A projection is never a measurement: it sits in a tab of its own beside the measured charts, its
title and every row say so, and nothing is stored. The step's costs are counted in a child process
(`core.projection.project.projection_of`, seconds) off the GUI thread. Where the comparison in the
table ran the same training and its loss target decides, the run's batch also gets a projected time
to that target (`core.compare.table.Comparison.samples_to_target`); where the history holds a run of the
same job on this machine, it is set against that run's samples/s (`core.projection.measured_here`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from core.compare.table import SamplesToTarget
from core.config import RunConfig
from core.formatting import format_bytes, format_seconds
from core.projection.catalogue import device_names
from core.projection.project import projection_of
from gui.qt_threads import run_in_background


def _named(widget: Any, name: str) -> Any:
    widget.setObjectName(name)
    return widget


COLUMNS = ("Batch", "Samples/s (projected)", "Step ms (projected)", "Regime", "Memory", "Time to target (projected)", "× measured here")
TARGET_COLUMN = COLUMNS.index("Time to target (projected)")
MEASURED_COLUMN = COLUMNS.index("× measured here")


class ProjectionView(QWidget):
    """A device to project on, Project, and the projected rows with what they rest on."""

    def __init__(
        self,
        config_source: Callable[[], RunConfig | None],
        target_source: Callable[[RunConfig], SamplesToTarget | None] = lambda config: None,
        parent: QWidget | None = None,
    ):
        """`target_source` gives the samples a measured run of the job needed to reach its loss target (the comparison's), if any."""
        super().__init__(parent)
        self.setObjectName("projectionView")
        self._config_source = config_source
        self._target_source = target_source
        self._target: SamplesToTarget | None = None
        self._projecting = False
        self.document: dict[str, Any] | None = None
        self.device_combo = _named(QComboBox(), "projectionDeviceCombo")
        self.device_combo.addItems(device_names())
        self.device_combo.setToolTip("A GPU or TPU from the catalogue (datasheet peaks, memory and bandwidth, each with its source)")
        self.project_button = _named(QPushButton("Project"), "projectButton")
        self.project_button.setToolTip(
            "Count the step's costs here (XLA on this CPU: seconds, once per job) and project them on that device"
        )
        self.project_button.clicked.connect(self.start)
        self.caveats_button = _named(QPushButton("Caveats"), "projectionCaveatsButton")
        self.caveats_button.setToolTip("Where this projection leans on more than its measured points show")
        self.caveats_button.setEnabled(False)
        self.caveats_button.clicked.connect(self.show_caveats)
        self.caveats_box: QMessageBox | None = None
        self.label = _named(QLabel(), "projectionLabel")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.table = _named(QTableWidget(0, len(COLUMNS)), "projectionTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setColumnHidden(TARGET_COLUMN, True)  # shown once a comparison of the job gives its samples to a target
        self.table.setColumnHidden(MEASURED_COLUMN, True)  # shown where the history holds a run of the job
        self.table.horizontalHeaderItem(TARGET_COLUMN).setToolTip(
            "The samples the comparison's baseline needed to reach its loss target (smoothed), at the projected samples/s"
        )
        self.table.horizontalHeaderItem(MEASURED_COLUMN).setToolTip(
            "The projected samples/s over this machine's newest completed run of the same job on a quiet machine (History): "
            "below ×1 the device would train it no faster"
        )
        row = QHBoxLayout()
        row.addWidget(QLabel("What would"))
        row.addWidget(self.device_combo)
        row.addWidget(QLabel("give?"))
        row.addWidget(self.project_button)
        row.addStretch(1)
        row.addWidget(self.caveats_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.label)
        layout.addWidget(self.table, 1)
        header = self.table.horizontalHeader().sizeHint().height()
        self.table.setMinimumHeight(header + 3 * self.table.verticalHeader().defaultSectionSize() + 2 * self.table.frameWidth())
        self.label.setText("A projection from measured GPU points, never a measurement: pick a device and press Project.")

    def is_running(self) -> bool:
        return self._projecting

    def start(self) -> None:
        """Project the run form's job on the chosen device, off the GUI thread."""
        config = self._config_source()
        if config is None or self._projecting:
            self.label.setText("Fix the run form on the left first." if config is None else self.label.text())
            return
        device = self.device_combo.currentText()
        self.label.setText(f"Counting the step's costs and projecting on {html.escape(device)}…")
        self.project_button.setEnabled(False)
        self._projecting = True
        self._target = self._target_source(config)
        samples = self._target.samples if self._target else None
        run_in_background(projection_of, config.with_hooks(), device, samples, on_result=self._show, on_error=self._fail, name="projection")

    def _finished(self) -> None:
        self._projecting = False
        self.project_button.setEnabled(True)

    def _fail(self, message: str) -> None:
        self._finished()
        self.document = None
        self._set_caveats([])
        self.table.setRowCount(0)
        self.label.setText(f"No projection: {html.escape(message)}")

    def _show(self, document: dict[str, Any]) -> None:
        self._finished()
        self.document = document
        points = calibrated_on(document["calibration"]["points"])
        caveats = document["caveats"]
        said = f" {len(caveats)} caveat{'s' * (len(caveats) != 1)}: press Caveats." if caveats else ""
        target = ""
        if self._target is not None:
            reached = self._target
            target = f" Time to target: {reached.samples:,} samples ({html.escape(reached.label)}'s, to loss {reached.target_loss:.4g})."
        measured = _measured_sentence(document)
        self.label.setText(f"<b>{html.escape(document['label'])}</b> (not stored): {html.escape(points)}.{measured}{target}{said}")
        self._set_caveats(caveats)
        self.table.setRowCount(len(document["rows"]))
        italic = QFont(self.table.font())
        italic.setItalic(True)
        for index, row in enumerate(document["rows"]):
            fits = row["fits"]
            cells = (
                f"{row['batch']:,}",
                f"{row['samples_per_s']['low']:,.0f} – {row['samples_per_s']['high']:,.0f}",
                f"{row['step_s']['low'] * 1e3:.3g} – {row['step_s']['high'] * 1e3:.3g}",
                row["regime"],
                f"{'fits' if fits['fits'] else 'does not fit'}: {format_bytes(fits['need_bytes'])}",
                _seconds_range(row["time_to_target_s"]),
                _ratio_range(row["speedup_vs_measured"]),
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setFont(italic)  # projected, not measured: drawn apart from the measured table
                item.setToolTip(row["why"])
                self.table.setItem(index, column, item)
        self.table.setColumnHidden(TARGET_COLUMN, self._target is None)
        self.table.setColumnHidden(MEASURED_COLUMN, document["measured_here"] is None)

    def _set_caveats(self, caveats: list[str]) -> None:
        self.label.setToolTip("\n".join(f"• {text}" for text in caveats))
        self.caveats_button.setText(f"Caveats ({len(caveats)})…" if caveats else "Caveats")
        self.caveats_button.setEnabled(bool(caveats))

    def show_caveats(self) -> None:
        """The projection's caveats in a box of their own (not modal: the table stays in view)."""
        if self.document is None:
            return
        if self.caveats_box is not None:
            self.caveats_box.close()
        caveats = self.document["caveats"]
        box = QMessageBox(QMessageBox.Icon.Information, "Projection caveats", html.escape(self.document["label"]), parent=self)
        box.setObjectName("projectionCaveatsBox")
        box.setInformativeText("".join(f"<p>• {html.escape(text)}</p>" for text in caveats))
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.setWindowModality(Qt.WindowModality.NonModal)
        self.caveats_box = box
        box.show()


def calibrated_on(points: list[dict[str, Any]]) -> str:
    """ "14 runs on H100-SXM, H200 (mlp, cnn, resnet, transformer; batches 64-4,096)": what the points are, in one line."""
    devices = ", ".join(dict.fromkeys(point["device"] for point in points))
    models = ", ".join(dict.fromkeys(point["model"] for point in points))
    batches = sorted({point["batch"] for point in points})
    span = f"batch {batches[0]:,}" if len(batches) == 1 else f"batches {batches[0]:,}–{batches[-1]:,}"
    return f"runs on {devices} ({models}; {span})"


def _seconds_range(span: dict[str, float] | None) -> str:
    """ "0.21 s – 0.42 s" from a row's time_to_target_s ("" where the row has none: only the run's batch does)."""
    return f"{format_seconds(span['low'])} – {format_seconds(span['high'])}" if span else ""


def _ratio_range(ratio: dict[str, float] | None) -> str:
    """ "×0.35 – ×0.70" from a row's speedup_vs_measured ("" where the row has none: only the run's batch does)."""
    return f"×{ratio['low']:.2g} – ×{ratio['high']:.2g}" if ratio else ""


def _measured_sentence(document: dict[str, Any]) -> str:
    """ " At batch 64: ×0.35 – ×0.70 of run #12 here (CPU:0, 100,858 samples/s)." (HTML-escaped; "" without a run)."""
    measured = document["measured_here"]
    row = next((row for row in document["rows"] if row["speedup_vs_measured"]), None)
    if measured is None or row is None:
        return ""
    where = html.escape(measured["where"])
    ratio = _ratio_range(row["speedup_vs_measured"])
    return f" At batch {row['batch']:,}: {ratio} of run #{measured['run_id']} here ({where}, {measured['samples_per_s']:,.0f} samples/s)."

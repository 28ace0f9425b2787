"""The Devices tab's measured ceilings: matmul FLOP/s and bandwidth beside the datasheet/ISA estimate, and (re-)measuring them.

The ceilings are measured in a child process (`core.diagnosis.ceilings.machine_peaks`,
a minute or two on a small CPU) and cached beside the history; reading the cache
and measuring both run in worker threads. While a measurement runs, a timer
shows the stage the child reported last. Closing the window stops it (the child
is killed with its process group).
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QThread, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from core.diagnosis.ceilings import cached_or_estimated, machine_peaks
from core.formatting import format_si
from core.machine.peaks import TIMEOUT_S, DevicePeaks, PeaksReport
from core.machine.types import DeviceInfo
from gui.qt_threads import run_in_background, stop_and_wait
from gui.style import FAILED_COLOR

CEILING_COLUMNS = ("Measured f32", "Measured bf16", "Measured bandwidth", "Estimate f32")
CEILING_TIPS = (
    "Measured float32 matmul FLOP/s: a chain of large matrix products timed in a child process.",
    "Measured bfloat16 matmul FLOP/s (the device's mixed-precision ceiling).",
    "Measured memory bandwidth: an in-place streaming add over arrays far larger than any cache.",
    "The datasheet (GPUs) or cores x clock x vector width (CPUs) float32 estimate, beside the measurement, never instead of it.",
)
STAGE_POLL_MS = 300
CLOSE_WAIT_S = 5.0  # a stopped measurement's child is killed at the next poll (0.2 s)
NOT_MEASURED = "Ceilings not measured yet: Measure ceilings times a large matmul per precision and a streaming add (a minute or two)."


def device_peaks(report: PeaksReport | None, device: DeviceInfo) -> DevicePeaks | None:
    """The measured ceilings of a listed device: by TF name; logical CPUs share the one physical CPU measured as CPU:0."""
    if report is None or not device.tf_name:
        return None
    found = report.device(device.tf_name)
    if found is None and device.kind == "CPU":
        found = report.device("CPU:0")
    return found if found is not None and found.kind == device.kind else None


def ceiling_cells(report: PeaksReport | None, device: DeviceInfo) -> tuple[str, ...]:
    """The device table's ceiling columns (CEILING_COLUMNS): measured float32 and bfloat16 matmul, bandwidth, estimate."""
    peaks = device_peaks(report, device)
    if peaks is None:
        return ("—",) * len(CEILING_COLUMNS)
    return (
        format_si(peaks.matmul_flops.get("float32"), "FLOP/s", "—"),
        format_si(peaks.matmul_flops.get("bfloat16"), "FLOP/s", "—"),
        format_si(peaks.bandwidth_bytes_per_s, "B/s", "—"),
        format_si(peaks.estimate_flops.get("float32"), "FLOP/s", "—"),
    )


def ceiling_details(report: PeaksReport | None, device: DeviceInfo) -> list[tuple[str, str]]:
    """The details pane's rows on the device's ceilings: each measured figure, how, and the estimate with its method."""
    peaks = device_peaks(report, device)
    if peaks is None:
        return []
    estimates = [(f"Estimate {p}", format_si(value, "FLOP/s")) for p, value in peaks.estimate_flops.items()]
    estimates.append(("How estimated", peaks.estimate_method or "no estimate"))
    if report is None or not report.measured:
        return [("Measured ceilings", "not yet: press Measure ceilings"), *estimates]
    rows = [(f"Measured {p} matmul", format_si(value, "FLOP/s")) for p, value in peaks.matmul_flops.items()]
    rows += [(f"Measured {what}", why) for what, why in peaks.not_measured.items()]
    rows += [(f"Implausible {what}", why) for what, why in peaks.implausible.items()]
    rows.append(("Measured bandwidth", format_si(peaks.bandwidth_bytes_per_s, "B/s", "not measured")))
    rows.append(("How measured", f"{peaks.method} ({peaks.measured_at})"))
    return rows + estimates


class CeilingsBox(QWidget):
    """A line on the ceilings (measured when, or not yet) and the Measure ceilings / Re-measure button."""

    peaks_changed = Signal(object)  # PeaksReport

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("deviceCeilings")
        self._report: PeaksReport | None = None
        self._stop = threading.Event()
        self._thread: QThread | None = None
        self._stage = ""
        self._closed = False
        self.status_label = QLabel(NOT_MEASURED)
        self.status_label.setObjectName("ceilingsStatus")
        self.status_label.setWordWrap(True)
        self.measure_button = QPushButton("Measure ceilings")
        self.measure_button.setObjectName("measureCeilingsButton")
        self.measure_button.setToolTip("Time a large matmul per precision and a streaming add on each device, in a child process.")
        self.measure_button.clicked.connect(self.measure)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.status_label, 1)
        layout.addWidget(self.measure_button)
        self._stage_timer = QTimer(self)
        self._stage_timer.setInterval(STAGE_POLL_MS)
        self._stage_timer.timeout.connect(self._show_stage)

    @property
    def report(self) -> PeaksReport | None:
        return self._report

    def is_busy(self) -> bool:
        return self._thread is not None

    def is_measured(self) -> bool:
        return self._report is not None and self._report.measured

    def load(self, devices: Sequence[DeviceInfo]) -> None:
        """Read this machine's cached ceilings in a worker thread (never measures); none cached: the devices' estimates alone."""
        listed = [(device.tf_name, device.kind, device.name) for device in devices]
        self._start("ceilings-load", cached_or_estimated, listed)

    def measure(self) -> None:
        """Measure the ceilings again in a worker thread (its child process, a minute or two), then cache them."""
        self._stage = "starting the measuring process"
        self.status_label.setText("Measuring the ceilings in a child process (a minute or two)…")
        if self._start("ceilings", machine_peaks, True, None, TIMEOUT_S, self._stop, self._note_stage):
            self._stage_timer.start()

    def close_down(self) -> None:
        """The window is closing: stop a measurement in flight (its child is killed) and wait for the thread."""
        self._closed = True
        self._stop.set()
        self._stage_timer.stop()
        stop_and_wait(None, self._thread, CLOSE_WAIT_S)

    def _start(self, name: str, function: Callable[..., PeaksReport], *args: Any) -> bool:
        if self._thread is not None or self._closed:
            return False
        self.measure_button.setEnabled(False)
        self._thread = run_in_background(
            function, *args, on_result=self._on_done, on_error=self._on_failed, on_finished=self._on_finished, name=name
        )
        return True

    def _note_stage(self, stage: str) -> None:
        self._stage = stage  # from the worker thread; the timer shows it

    def _show_stage(self) -> None:
        self.status_label.setText(f"Measuring the ceilings in a child process: {html.escape(self._stage)}…")

    def _on_done(self, report: PeaksReport) -> None:
        if report.devices and report.measured:
            self._report = report
            self._show(report)
            self.peaks_changed.emit(report)
        elif report.devices:  # nothing cached for this machine: the estimates alone
            self._report = report
            self.status_label.setText(NOT_MEASURED)
            self.peaks_changed.emit(report)
        else:
            kept = " The ceilings measured before are kept." if self.is_measured() else ""
            self.status_label.setText(
                f"<span style='color:{FAILED_COLOR}'>{html.escape(report.error or 'Nothing was measured.')}</span>{kept}"
            )

    def _on_failed(self, message: str) -> None:
        self.status_label.setText(f"The ceilings could not be read or measured: {html.escape(message)}")

    def _on_finished(self) -> None:
        self._thread = None
        self._stage_timer.stop()
        self.measure_button.setEnabled(not self._closed)
        self.measure_button.setText("Re-measure" if self.is_measured() else "Measure ceilings")

    def _show(self, report: PeaksReport) -> None:
        source = "cached" if report.cached else f"measured now in {report.elapsed_s:.0f} s"
        text = (
            f"Ceilings {source} ({report.measured_at}): a chain of large matmuls per precision and an in-place streaming add, "
            "timed in a child process; the estimate beside them is the datasheet (GPUs) or cores x clock x vector width (CPUs)."
        )
        if report.error:
            text += f" <span style='color:{FAILED_COLOR}'>{html.escape(report.error)}</span>"
        if report.contended or report.implausible:
            why = f"measured while {report.conditions.get('reason')}" if report.contended else "a figure is implausible (see the details)"
            advice = "no verdict divides by it. Re-measure on a quiet machine."
            text += f" <span style='color:{FAILED_COLOR}'>Not kept: {html.escape(why)}; {advice}</span>"
        self.status_label.setText(text)

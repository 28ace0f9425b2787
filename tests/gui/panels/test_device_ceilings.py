"""The Devices tab's measured ceilings beside the datasheet/ISA estimate, read from the cache and re-measured off the GUI thread."""

from __future__ import annotations

import psutil
from PySide6.QtCore import Qt

from core.diagnosis.ceilings import cached_peaks, peaks_path
from core.machine.types import DeviceInfo, DeviceReport
from gui.panels.devices import COLUMNS, DevicePanel
from tests.ceilings_cache import write_ceilings_cache

WAIT_MS = 30_000


def _measuring_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "core.machine.peaks_child" in " ".join(p.cmdline())]


def test_measured_ceilings_stand_beside_the_estimate_and_remeasuring_runs_off_the_gui_thread(qtbot):
    write_ceilings_cache(peaks_path(), float32=60e9, bfloat16=120e9)  # shown as written, plausible or not
    panel = DevicePanel()
    qtbot.addWidget(panel)
    cpu = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {"Model": "Test CPU"})
    panel.set_report(DeviceReport((cpu, DeviceInfo("CPU", "Test CPU", "CPU:1", None, None, None, {})), ()))
    with qtbot.waitSignal(panel.ceilings.peaks_changed, timeout=WAIT_MS):
        panel.ceilings.load(panel.devices())
    qtbot.waitUntil(lambda: not panel.ceilings.is_busy(), timeout=WAIT_MS)

    table = panel.table
    measured, bfloat16, estimate = (COLUMNS.index(c) for c in ("Measured f32", "Measured bf16", "Estimate f32"))
    assert [table.item(row, measured).text() for row in (0, 1)] == ["60.00 GFLOP/s"] * 2  # CPU:1 is the same physical CPU
    assert table.item(0, bfloat16).text() == "120.00 GFLOP/s"
    assert table.item(0, estimate).text().endswith("GFLOP/s"), "the datasheet/ISA estimate stands beside the measurement"
    table.selectRow(0)
    details = {panel.details.item(r, 0).text(): panel.details.item(r, 1).text() for r in range(panel.details.rowCount())}
    assert "written by the test" in details["How measured"] and "cores x" in details["How estimated"]
    assert details["Measured bandwidth"] == "20.00 GB/s" and details["Measured bfloat16 matmul"] == "120.00 GFLOP/s"
    assert "chain of large matmuls" in panel.ceilings.status_label.text()
    assert panel.ceilings.measure_button.text() == "Re-measure"

    qtbot.mouseClick(panel.ceilings.measure_button, Qt.MouseButton.LeftButton)
    assert panel.ceilings.is_busy() and not panel.ceilings.measure_button.isEnabled()  # the click returned: the GUI thread is free
    qtbot.waitUntil(lambda: "Measuring the ceilings in a child process:" in panel.ceilings.status_label.text(), timeout=WAIT_MS)
    panel.close_down()  # closing the window stops the measurement: its child is killed
    qtbot.waitUntil(lambda: not panel.ceilings.is_busy(), timeout=WAIT_MS)
    assert not _measuring_children()
    assert "stopped" in panel.ceilings.status_label.text() and "kept" in panel.ceilings.status_label.text()
    assert table.item(0, measured).text() == "60.00 GFLOP/s"
    peaks_path().unlink()
    assert cached_peaks() is None  # this process knows no ceilings again


def test_before_any_measurement_the_estimate_is_shown_and_nothing_counts_as_measured(qtbot):
    assert cached_peaks() is None
    panel = DevicePanel()
    qtbot.addWidget(panel)
    cpu = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {"Model": "Test CPU"})
    panel.set_report(DeviceReport((cpu,), ()))
    with qtbot.waitSignal(panel.ceilings.peaks_changed, timeout=WAIT_MS):
        panel.ceilings.load(panel.devices())
    qtbot.waitUntil(lambda: not panel.ceilings.is_busy(), timeout=WAIT_MS)
    measured, estimate = (COLUMNS.index(c) for c in ("Measured f32", "Estimate f32"))
    assert panel.table.item(0, measured).text() == "—"
    assert panel.table.item(0, estimate).text().endswith("GFLOP/s"), "the estimate needs no measurement"
    panel.table.selectRow(0)
    details = {panel.details.item(r, 0).text(): panel.details.item(r, 1).text() for r in range(panel.details.rowCount())}
    assert details["Measured ceilings"] == "not yet: press Measure ceilings" and "cores x" in details["How estimated"]
    assert "not measured yet" in panel.ceilings.status_label.text() and panel.ceilings.measure_button.text() == "Measure ceilings"
    assert not panel.ceilings.is_measured() and cached_peaks() is None, "an estimate is never cached or used as a ceiling"

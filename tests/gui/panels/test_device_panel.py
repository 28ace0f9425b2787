"""The device table: real devices from TensorFlow, details, notes, and greyed unusable devices."""

from __future__ import annotations

import threading
from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette

from core.machine.types import DeviceInfo, DeviceReport
from gui.panels.devices import COLUMNS, DevicePanel

MEMORY_COLUMNS = [COLUMNS.index(name) for name in ("Memory total", "Used", "Free")]


def test_device_table_lists_the_logical_cpus_with_memory(ready_window):
    panel = ready_window.device_panel
    table = panel.table
    rows = {table.item(row, COLUMNS.index("TF name")).text(): row for row in range(table.rowCount())}
    assert {"CPU:0", "CPU:1"} <= set(rows), rows
    cpu_row = rows["CPU:0"]
    assert table.item(cpu_row, COLUMNS.index("Kind")).text() == "CPU"
    for column in MEMORY_COLUMNS:
        text = table.item(cpu_row, column).text()
        assert text.endswith(("MiB", "GiB", "TiB")), text
    table.selectRow(cpu_row)
    details = {panel.details.item(r, 0).text(): panel.details.item(r, 1).text() for r in range(panel.details.rowCount())}
    assert "Model" in details and "RAM total" in details
    assert details["Logical device"].startswith("1 of 2")


def test_missing_gpu_is_explained_in_the_notes(ready_window):
    panel = ready_window.device_panel
    if not any(d.kind == "GPU" for d in panel.devices()):
        assert panel.notes_label.isVisibleTo(ready_window)
        assert "No GPU visible to TensorFlow" in panel.notes_label.text()


def test_unusable_device_is_greyed_with_its_reason(qtbot):
    panel = DevicePanel()
    qtbot.addWidget(panel)
    reason = "The driver sees this GPU but TensorFlow was built without CUDA."
    cpu = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {"Model": "Test CPU"})
    hidden_gpu = DeviceInfo("GPU", "Test GPU", "", 16 << 30, 1 << 30, 15 << 30, {"Utilisation": "3 %"}, False, reason)
    panel.set_report(DeviceReport((cpu, hidden_gpu), ("No GPU visible to TensorFlow: test note.",)))
    status = panel.table.item(1, COLUMNS.index("Status"))
    assert reason in status.text() and status.toolTip() == reason
    grey = panel.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
    assert panel.table.item(1, 0).foreground().color() == grey
    assert panel.table.item(1, COLUMNS.index("Memory total")).text() == "16.0 GiB"
    assert panel.table.item(1, COLUMNS.index("Utilisation")).text() == "3 %"
    panel.table.selectRow(1)
    assert panel.details.item(0, 0).text() == "Not usable because"
    assert panel.details.item(0, 1).text() == reason
    assert "test note" in panel.notes_label.text()


def test_gpu_usage_is_refreshed_off_the_gui_thread_only_when_there_are_gpus(qtbot, monkeypatch):
    calls = []

    def fake_nvml_refresh(devices):
        """Stands in for NVML (no GPU here): every GPU now reports 3 GiB used."""
        calls.append(threading.current_thread() is threading.main_thread())
        return [replace(d, memory_used=3 << 30) if d.kind == "GPU" else d for d in devices]

    monkeypatch.setattr("gui.panels.devices.refresh_gpu_usage", fake_nvml_refresh)
    panel = DevicePanel()
    qtbot.addWidget(panel)
    panel.show()
    cpu = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})
    panel.set_report(DeviceReport((cpu,), ()))
    assert not panel._gpu_timer.isActive()
    gpu = DeviceInfo("GPU", "Test GPU", "GPU:0", 16 << 30, 1 << 30, 15 << 30, {})
    panel.set_report(DeviceReport((cpu, gpu), ()))
    assert panel._gpu_timer.isActive() and panel._gpu_timer.interval() == 2000
    panel._gpu_timer.setInterval(20)
    used = COLUMNS.index("Used")
    qtbot.waitUntil(lambda: panel.table.item(1, used).text() == "3.0 GiB", timeout=10_000)
    assert calls and not any(calls), "the refresh must run in a worker thread"
    panel.close_down()


def test_refresh_button_reads_the_devices_again(ready_window, qtbot):
    panel = ready_window.device_panel
    with qtbot.waitSignal(panel.devices_changed, timeout=60_000):
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
        assert panel.status_label.text() == "Re-reading devices…"
    assert panel.table.rowCount() >= 2 and panel.refresh_button.isEnabled()

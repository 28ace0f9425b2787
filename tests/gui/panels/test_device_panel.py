"""The device table: real devices from TensorFlow, details, notes, and greyed unusable devices."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette

from core.machine.types import DeviceInfo, DeviceReport, Note, NoteTopic
from gui.panels.devices import COLUMNS, DevicePanel, with_refreshed_gpus, with_tpu_rows
from gui.qt_threads import running_threads

MEMORY_COLUMNS = [COLUMNS.index(name) for name in ("Memory total", "Used", "Free")]


@pytest.mark.slow
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


@pytest.mark.slow
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
    panel.set_report(DeviceReport((cpu, hidden_gpu), (Note(NoteTopic.NO_GPU, "No GPU visible to TensorFlow: test note."),)))
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


@pytest.mark.slow
def test_refresh_button_reads_the_devices_again(ready_window, qtbot):
    panel = ready_window.device_panel
    with qtbot.waitSignal(panel.devices_changed, timeout=60_000):
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
        assert panel.status_label.text() == "Re-reading devices…"
    assert panel.table.rowCount() >= 2 and panel.refresh_button.isEnabled()


CPU = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})


def test_connected_tpu_drops_the_missing_tpu_notes_by_topic_not_wording() -> None:
    notes = (
        Note(NoteTopic.NO_GPU, "about GPUs"),
        Note(NoteTopic.NO_TPU, "any wording at all"),
        Note(NoteTopic.TPU_UNUSED, "also any wording"),
        Note(NoteTopic.CHECK_FAILED, "TPU check failed (OSError: x); the other devices are listed."),
    )
    core = DeviceInfo("TPU", "TPU v3-8", "TPU:0", 16 << 30, None, None, {})
    report = with_tpu_rows(DeviceReport((CPU,), notes), [core])
    assert report.devices == (CPU, core)
    assert [n.topic for n in report.note_records] == [NoteTopic.NO_GPU, NoteTopic.CHECK_FAILED]
    assert report.notes == ("about GPUs", "TPU check failed (OSError: x); the other devices are listed.")


def test_refreshed_gpu_rows_are_matched_by_tf_name_and_bus_id_not_position() -> None:
    gpu0 = DeviceInfo("GPU", "Same label", "GPU:0", 80 << 30, 1 << 30, 79 << 30, {}, bus_id="0000:01:00.0")
    gpu1 = DeviceInfo("GPU", "Same label", "GPU:1", 80 << 30, 2 << 30, 78 << 30, {}, bus_id="0000:41:00.0")
    idle = DeviceInfo("GPU", "Same label", "", 80 << 30, 0, 80 << 30, {}, False, "hidden", bus_id="0000:81:00.0")
    report = DeviceReport((CPU, gpu0, gpu1, idle), ())
    refreshed = [replace(gpu1, memory_used=9 << 30), replace(idle, memory_used=7 << 30), replace(gpu0, memory_used=5 << 30)]
    used = [d.memory_used for d in with_refreshed_gpus(report, refreshed).devices]
    assert used == [2 << 30, 5 << 30, 9 << 30, 7 << 30]
    assert with_refreshed_gpus(report, [replace(gpu0, memory_used=5 << 30)]).devices[2] == gpu1  # missing: unchanged


def test_gpu_refreshes_never_overlap_and_none_outlives_close_down(qtbot, monkeypatch):
    active, most, done = [], [0], [0]

    def slow_nvml_refresh(devices):
        """Stands in for NVML (no GPU here): a slow re-read that notes how many run at once."""
        active.append(1)
        most[0] = max(most[0], len(active))
        done[0] += 1
        time.sleep(0.05)
        active.pop()
        return list(devices)

    monkeypatch.setattr("gui.panels.devices.refresh_gpu_usage", slow_nvml_refresh)
    panel = DevicePanel()
    qtbot.addWidget(panel)
    panel.show()
    gpu = DeviceInfo("GPU", "Test GPU", "GPU:0", 16 << 30, 1 << 30, 15 << 30, {}, bus_id="0000:01:00.0")
    panel.set_report(DeviceReport((CPU, gpu), ()))
    panel._gpu_timer.setInterval(5)  # ten times faster than a re-read takes: every tick finds one in flight
    qtbot.waitUntil(lambda: done[0] >= 5, timeout=10_000)
    assert most[0] == 1
    qtbot.waitUntil(lambda: panel._refreshing_gpus, timeout=5_000)
    panel.close_down()
    assert not running_threads(), "close_down must end the GPU re-read in flight"
    assert not panel._gpu_timer.isActive()

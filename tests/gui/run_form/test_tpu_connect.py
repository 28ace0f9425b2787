"""TPU Connect: Cancel ends a probe at once, and keyboard focus stays on the button the user pressed."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from core.machine.types import DeviceInfo, DeviceReport
from gui.run_form.panel import RunPanel

CPU0 = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})


def test_cancel_ends_the_probe_and_focus_moves_between_connect_and_cancel(qtbot, silent_tpu_address):
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_devices(DeviceReport((CPU0,), ()))
    panel.show()
    qtbot.waitExposed(panel)
    panel.activateWindow()
    qtbot.waitUntil(panel.isActiveWindow, timeout=5000)
    connect, cancel = panel.tpu_connect_button, panel.tpu.cancel_button
    panel.tpu_timeout_s = 120  # a silent address: only Cancel ends this probe soon
    panel.tpu_address_edit.setText(silent_tpu_address)
    connect.setFocus()

    qtbot.keyClick(connect, Qt.Key.Key_Space)
    assert cancel.isVisible() and connect.isHidden()
    assert QApplication.focusWidget() is cancel, f"focus went to {QApplication.focusWidget().objectName()}"
    assert "Cancel stops it" in panel.tpu_status.text()

    start = time.monotonic()
    with qtbot.waitSignal(panel.tpu_probed, timeout=10_000) as probed:
        qtbot.keyClick(cancel, Qt.Key.Key_Space)
    assert time.monotonic() - start < 5, "Cancel kills the probe's child process at once"
    assert not probed.args[0].ok and "was stopped" in probed.args[0].message
    qtbot.waitUntil(connect.isVisible, timeout=5000)
    assert cancel.isHidden() and connect.isEnabled() and QApplication.focusWidget() is connect
    assert panel.tpu_status.text().startswith("Not connected")

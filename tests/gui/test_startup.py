"""Start-up: the window is up before TensorFlow, then devices fill in; widgets carry their object names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QWidget

from tests.gui.conftest import DETECTION_TIMEOUT_MS

ROOT = Path(__file__).resolve().parents[2]

STARTUP_SCRIPT = r"""
import json, sys, time
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication([])
from gui.main_window import MainWindow
from gui.settings import effective_runtime_settings, open_settings
settings = open_settings()
runtime, note = effective_runtime_settings(settings)
window = MainWindow(settings, runtime, note, charts_later=True)
window.show()
app.processEvents()
shown = {
    "visible": window.isVisible(),
    "tf_loaded_when_shown": "tensorflow" in sys.modules,
    "pyqtgraph_loaded_when_shown": "pyqtgraph" in sys.modules,
    "tabs_when_shown": [window.tabs.tabText(i) for i in range(window.tabs.count())],
}
window.start()
app.processEvents()
shown["status"] = window.device_panel.status_label.text()
shown["start_enabled"] = window.run_panel.start_button.isEnabled()
deadline = time.monotonic() + 150
while window.device_panel.table.rowCount() == 0 and time.monotonic() < deadline:
    app.processEvents()
    time.sleep(0.02)
shown["rows"] = window.device_panel.table.rowCount()
shown["tf_loaded_after"] = "tensorflow" in sys.modules
for _ in range(50):
    app.processEvents()
shown["loss_plot_after"] = window.findChild(QWidget, "lossPlot") is not None
shown["tabs_after"] = [window.tabs.tabText(i) for i in range(window.tabs.count())]
window.close()
print("RESULT " + json.dumps(shown))
"""


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_window_is_shown_before_tensorflow_and_the_charts_load_then_devices_fill_in(tmp_path):
    env = {**os.environ, "DEVICE_LAB_SETTINGS_DIR": str(tmp_path / "settings"), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", STARTUP_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=190)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "QThread: Destroyed while thread is still running" not in out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    shown = json.loads(line[len("RESULT ") :])
    assert shown["visible"]
    assert not shown["tf_loaded_when_shown"], "TensorFlow was imported before the window was shown"
    assert shown["status"].startswith("Detecting devices…")
    assert not shown["start_enabled"]
    assert shown["rows"] >= 1 and shown["tf_loaded_after"]
    assert not shown["pyqtgraph_loaded_when_shown"], "the chart panels were built before the window was shown"
    assert shown["tabs_when_shown"] == shown["tabs_after"] == ["Devices", "Training", "Result", "Compare", "History", "Sweep"]
    assert shown["loss_plot_after"], "the chart panels were not built once the devices were listed"


@pytest.mark.slow
def test_opening_a_chart_tab_before_the_devices_builds_the_charts_at_once(qtbot):
    from gui.main_window import MainWindow
    from gui.settings import effective_runtime_settings, open_settings

    settings = open_settings()
    runtime, note = effective_runtime_settings(settings)
    window = MainWindow(settings, runtime, note, charts_later=True)
    qtbot.addWidget(window)
    window.show()
    assert window.findChild(QWidget, "lossPlot") is None
    window.tabs.setCurrentIndex(3)
    assert window.tabs.tabText(3) == "Compare" and window.tabs.currentWidget() is window.compare_panel
    assert window.findChild(QWidget, "lossPlot") is not None and window.findChild(QWidget, "compareTable") is not None
    window.close()


@pytest.mark.slow
def test_widgets_have_object_names(window):
    names = [
        "deviceTable", "deviceDetails", "deviceNotes", "refreshDevicesButton", "modelCombo", "datasetCombo",
        "strategyCombo", "deviceCombo", "deviceList", "workersSpin", "tpuAddressEdit", "tpuConnectButton",
        "batchSizeEdit", "stepsEdit", "learningRateEdit", "optimizerCombo", "precisionCombo", "xlaCheck",
        "stepsPerCallEdit", "formHint", "startButton", "stopButton", "progressBar", "resultLabel",
        "lossPlot", "stepTimePlot", "throughputLabel", "smoothingSlider", "runList", "clearPlotsButton",
        "savePlotsButton", "mainTabs",
    ]  # fmt: skip
    missing = [name for name in names if window.findChild(QWidget, name) is None]
    assert not missing


@pytest.mark.slow
def test_start_waits_for_devices_and_says_so(window, qtbot):
    assert "Detecting devices" in window.statusBar().currentMessage() or window.device_panel.report.devices
    qtbot.waitUntil(window.run_panel.start_button.isEnabled, timeout=DETECTION_TIMEOUT_MS)
    assert window.start_action.isEnabled()
    assert window.run_panel.hint_label.isHidden()


RUN_APP_SCRIPT = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from gui.app import run_app
from gui.main_window import MainWindow

def close_when_ready():
    windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
    if windows and windows[0].run_panel.start_button.isEnabled():
        windows[0].close()
    else:
        QTimer.singleShot(100, close_when_ready)

app = QApplication([sys.argv[0]])
QTimer.singleShot(100, close_when_ready)
sys.exit(run_app([sys.argv[0]]))
"""


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_run_app_shows_the_window_and_exits_cleanly_when_it_closes(tmp_path):
    env = {**os.environ, "DEVICE_LAB_SETTINGS_DIR": str(tmp_path / "settings"), "DEVICE_LAB_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", RUN_APP_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=140)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "QThread: Destroyed" not in out.stderr
    saved = (tmp_path / "settings" / "settings.ini").read_text()
    assert "[window]" in saved and "geometry=" in saved, "the window's geometry is saved on close"

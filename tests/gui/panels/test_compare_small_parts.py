"""Compare tab parts: typed targets refused at the field with the allowed forms; bar labels that never overlap."""

from __future__ import annotations

from PySide6.QtGui import QFontMetrics

from core.compare.targets import TARGET_FORMS
from core.config import RunConfig
from core.machine.types import DeviceInfo, DeviceReport
from gui.panels.compare import ComparePanel
from gui.plotting.bar_chart import BarChart
from gui.plotting.plots import PlotsWidget
from tests.gui.helpers import tick_labels, wired_compare_controller

CPUS = tuple(DeviceInfo("CPU", "Test CPU", f"CPU:{i}", 8 << 30, 2 << 30, 6 << 30, {}) for i in range(2))
LABELS = ["CPU:0", "mirrored:CPU:0,CPU:1", "multi-worker:2"]


def test_typed_targets_that_are_not_targets_turn_the_field_red_and_say_what_is_allowed(qtbot):
    plots = PlotsWidget()
    panel = ComparePanel(plots, wired_compare_controller(plots), RunConfig)
    qtbot.addWidget(plots)
    qtbot.addWidget(panel)
    panel.set_devices(DeviceReport(CPUS, ()))
    box = panel.targets_box
    assert panel.compare_button.isEnabled() and box.error_label.isHidden()

    for text, bad in (("foo", "foo"), ("GPU:7; foo", "foo"), ("mirrored:CPU:0,XPU:1", "mirrored:CPU:0,XPU:1")):
        box.edit.setText(text)
        assert "c62828" in box.edit.styleSheet(), text
        message = box.error_label.text()
        assert not box.error_label.isHidden() and message.startswith(f"“{bad}” is not a target. Use "), message
        assert not panel.compare_button.isEnabled() and message in panel.compare_button.toolTip()
        if bad == "foo":
            assert TARGET_FORMS in message, "the allowed forms, as the run form's fields say them"

    box.edit.setText("GPU:1, multi-worker:2")  # commas between targets: the field says the ';' it meant
    assert box.error_label.text().startswith("“GPU:1, multi-worker:2” is not a target. Use 'GPU:1;multi-worker:2': targets are separated")
    box.edit.setText("GPU:1; multi-worker:2")
    assert box.edit.styleSheet() == "" and box.error_label.isHidden() and panel.compare_button.isEnabled()


def test_bar_labels_are_elided_to_their_bar_and_whole_when_there_is_room(qtbot):
    chart = BarChart("testChart", "Throughput", "samples/s")
    qtbot.addWidget(chart)
    chart.resize(280, 200)
    chart.show()
    qtbot.waitExposed(chart)
    chart.set_bars(LABELS, [1000.0, 1500.0, None], 0)
    metrics = QFontMetrics(chart.font())
    shown = tick_labels(chart)
    assert any("…" in label for label in shown), shown
    assert all(metrics.horizontalAdvance(label) <= chart.label_width() for label in shown), shown
    assert all(label in chart.toolTip() for label in LABELS), "the full labels are in the tooltip"

    chart.resize(1400, 300)
    qtbot.waitUntil(lambda: tick_labels(chart) == LABELS, timeout=5000)

"""The run form's Backend choice: installed backends can be picked and go into the run; others say how to install them."""

from __future__ import annotations

import importlib.util

from PySide6.QtCore import Qt

from core.machine.types import DeviceInfo, DeviceReport
from gui.run_form.panel import RunPanel, run_label

CPU0 = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})


def test_the_backend_choice_lists_every_backend_and_puts_the_chosen_one_in_the_run(qtbot):
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_devices(DeviceReport((CPU0,), ()))
    combo = panel.backend_combo
    assert combo.objectName() == "backendCombo"
    assert [combo.itemData(i) for i in range(combo.count())] == ["tensorflow", "jax", "torch"]
    assert panel.config().backend == "tensorflow"
    combo.setCurrentIndex(combo.findData("jax"))
    config = panel.config()
    assert config.backend == "jax" and panel.start_button.isEnabled() and "· JAX" in run_label(config)
    torch_index = combo.findData("torch")
    enabled = bool(combo.model().item(torch_index).flags() & Qt.ItemFlag.ItemIsEnabled)
    assert enabled == (importlib.util.find_spec("torch") is not None)
    if not enabled:
        assert "pip install" in combo.itemData(torch_index, Qt.ItemDataRole.ToolTipRole)

"""The run form: sensible defaults, input refused at the field with a reason, strategies explained."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel

from core.config import RunConfig
from core.machine.types import DeviceInfo, DeviceReport, TpuProbe
from core.workloads.models import MODELS
from gui.run_form.panel import RunPanel
from tests.gui.helpers import choose

CPU0 = DeviceInfo("CPU", "Test CPU", "CPU:0", 8 << 30, 2 << 30, 6 << 30, {})
CPU1 = DeviceInfo("CPU", "Test CPU", "CPU:1", 8 << 30, 2 << 30, 6 << 30, {})
OPTIONS = {"steps": "--steps", "batch_size": "--batch-size", "learning_rate": "--lr"}  # RunConfig field: the CLI option


def make_panel(qtbot, devices=(CPU0,)) -> RunPanel:
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.set_devices(DeviceReport(tuple(devices), ()))
    return panel


def test_defaults_train_the_mlp_on_digits_with_the_same_settings_as_the_cli(qtbot):
    """The form and `main.py run` take their defaults from one source, RunConfig: the window and `run --help` agree."""
    panel = make_panel(qtbot)
    config = panel.config()
    assert config is not None and panel.start_button.isEnabled()
    assert (config.model, config.dataset, config.strategy) == ("mlp", "digits", "default")
    help_text = subprocess.run([sys.executable, "main.py", "run", "--help"], capture_output=True, text=True, check=True).stdout
    shown = {
        name: float(re.search(rf"^ +{option} [A-Z_]+\s+[^\n]*?\(default ([0-9.e-]+)", help_text, re.M).group(1))
        for name, option in OPTIONS.items()
    }
    form = {"steps": config.steps, "batch_size": config.batch_size, "learning_rate": config.learning_rate}
    assert form == shown == {name: getattr(RunConfig, name) for name in OPTIONS}
    assert config.optimizer == RunConfig.optimizer


def test_start_is_disabled_until_devices_are_known(qtbot):
    panel = RunPanel()
    qtbot.addWidget(panel)
    assert not panel.start_button.isEnabled()
    assert "Detecting devices" in panel.warning_label.text()


def test_batch_size_zero_is_refused_with_a_reason(qtbot):
    panel = make_panel(qtbot)
    panel.batch_edit.setText("0")
    assert not panel.start_button.isEnabled()
    assert not panel.batch_edit.hasAcceptableInput()
    assert "Batch size: 0 is out of range; use a whole number from 1" in panel.hint_label.text()
    assert not panel.hint_label.isHidden()
    panel.batch_edit.setText("32")
    assert panel.start_button.isEnabled() and panel.hint_label.isHidden()


def test_learning_rate_that_is_not_a_number_is_refused(qtbot):
    panel = make_panel(qtbot)
    panel.lr_edit.clear()
    qtbot.keyClicks(panel.lr_edit, "abc")
    assert panel.lr_edit.text() == "abc", "the field should show what was typed, to explain it"
    assert "Learning rate: 'abc' is not a number; use e.g. 0.001" in panel.hint_label.text()
    assert not panel.start_button.isEnabled()
    assert panel.config() is None
    panel.request_start()  # refused quietly: nothing is emitted
    panel.lr_edit.setText("1e-2")
    assert panel.start_button.isEnabled() and panel.config().learning_rate == 0.01


def test_start_click_emits_a_validated_config(qtbot):
    panel = make_panel(qtbot)
    panel.steps_edit.setText("12")
    with qtbot.waitSignal(panel.start_requested, timeout=1000) as blocker:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    config, label = blocker.args
    assert config.steps == 12 and "MLP" in label


def test_epochs_and_steps_per_call_are_checked_at_the_field(qtbot):
    panel = make_panel(qtbot)
    panel.steps_unit.setCurrentText("epochs")
    panel.steps_edit.setText("2")
    assert panel.config().epochs == 2
    panel.spc_edit.setText("0")
    assert "Steps per call: 0 is out of range" in panel.hint_label.text()


def test_config_error_from_run_config_is_shown(qtbot):
    gpu = DeviceInfo("GPU", "Test GPU", "GPU:0", 16 << 30, 0, 16 << 30, {})
    gpu1 = DeviceInfo("GPU", "Test GPU", "GPU:1", 16 << 30, 0, 16 << 30, {})
    panel = make_panel(qtbot, devices=(CPU0, gpu, gpu1))
    choose(panel.strategy_combo, "mirrored")
    for row in range(panel.device_list.count()):
        panel.device_list.item(row).setCheckState(Qt.CheckState.Checked)
    assert panel.config() is None and not panel.start_button.isEnabled()
    assert panel.hint_label.text().startswith("Settings rejected: devices:")
    assert "devices of one kind for mirrored" in panel.hint_label.text()


def test_unavailable_strategies_are_disabled_with_their_reason(qtbot):
    panel = make_panel(qtbot, devices=(CPU0,))
    model = panel.strategy_combo.model()
    assert isinstance(model, QStandardItemModel)
    index = panel.strategy_combo.findData("mirrored")
    assert not model.item(index).isEnabled()
    tooltip = panel.strategy_combo.itemData(index, Qt.ItemDataRole.ToolTipRole)
    assert "Logical CPUs" in tooltip
    tpu = panel.strategy_combo.findData("tpu")
    assert not model.item(tpu).isEnabled()
    assert "Connect" in panel.strategy_combo.itemData(tpu, Qt.ItemDataRole.ToolTipRole)


def test_mirrored_offers_a_checkable_device_list(qtbot):
    panel = make_panel(qtbot, devices=(CPU0, CPU1))
    choose(panel.strategy_combo, "mirrored")
    assert panel.device_list.isVisibleTo(panel) and not panel.device_combo.isVisibleTo(panel)
    assert panel.config().devices == ("CPU:0", "CPU:1")
    panel.device_list.item(1).setCheckState(Qt.CheckState.Unchecked)
    assert not panel.start_button.isEnabled()
    assert "two or more devices" in panel.hint_label.text()


def test_multi_worker_shows_the_workers_spin_box(qtbot):
    panel = make_panel(qtbot)
    assert not panel.workers_spin.isVisibleTo(panel)
    choose(panel.strategy_combo, "multi-worker")
    assert panel.workers_spin.isVisibleTo(panel)
    panel.workers_spin.setValue(3)
    assert panel.config().workers == 3


def test_data_sets_follow_the_model(qtbot):
    panel = make_panel(qtbot)
    choose(panel.model_combo, "transformer")
    names = [panel.dataset_combo.itemData(i) for i in range(panel.dataset_combo.count())]
    assert "imdb" in names and "digits" not in names
    assert panel.config().dataset == MODELS["transformer"].default_dataset


@pytest.mark.slow
def test_tpu_connect_probes_in_the_background_and_reports_failure(qtbot, silent_tpu_address):
    panel = make_panel(qtbot)
    panel.tpu_timeout_s = 3.0
    panel.tpu_address_edit.setText(silent_tpu_address)
    with qtbot.waitSignal(panel.tpu_probed, timeout=60_000) as blocker:
        qtbot.mouseClick(panel.tpu_connect_button, Qt.MouseButton.LeftButton)
        assert panel.tpu_connect_button.isHidden() and panel.tpu.cancel_button.isVisibleTo(panel)
        assert f"Connecting to {silent_tpu_address!r}" in panel.tpu_status.text()
    assert not blocker.args[0].ok
    assert panel.tpu_status.text().startswith("Not connected")
    assert "within 3 s" in panel.tpu_status.text(), "the probe gives up at its time limit and says so"
    assert not next(c for c in panel.state.strategies if c.name == "tpu").available
    qtbot.waitUntil(panel.tpu_connect_button.isEnabled, timeout=5000)


def test_a_connected_tpu_makes_the_tpu_strategy_available(qtbot, monkeypatch):
    def fake_tpu_probe(address, timeout_s, stop_event=None):
        """Stands in for a real TPU, which this machine does not have."""
        return TpuProbe(True, "TPU v3-8: 8 cores (fake)", (), 0.1)

    monkeypatch.setattr("gui.run_form.tpu_connect.probe_tpu", fake_tpu_probe)
    panel = make_panel(qtbot)
    with qtbot.waitSignal(panel.tpu_probed, timeout=10_000):
        qtbot.mouseClick(panel.tpu_connect_button, Qt.MouseButton.LeftButton)
    assert panel.tpu_status.text().startswith("Connected")
    assert next(c for c in panel.state.strategies if c.name == "tpu").available
    choose(panel.strategy_combo, "tpu")
    assert panel.config().tpu_address == "local"


def test_the_parameter_count_is_that_of_the_model_built_for_the_chosen_data(qtbot):
    from core.machine.runtime import RuntimeSettings, configure_runtime
    from core.workloads.workload import SampleWorkload
    from tests.conftest import LOGICAL_CPUS

    configure_runtime(RuntimeSettings(logical_cpus=LOGICAL_CPUS))  # TF starts here, as the window would start it
    panel = make_panel(qtbot)
    choose(panel.model_combo, "cnn")
    choose(panel.dataset_combo, "digits")
    panel.load_param_counts()  # TensorFlow has loaded: the form may build models to count them
    trained = SampleWorkload(MODELS["cnn"], "digits").build_model().count_params()  # what a run on Digits 8x8 trains
    qtbot.waitUntil(lambda: f"{trained:,} parameters" in panel.model_info.text(), timeout=60_000)
    assert "421,642" not in panel.model_info.text() and "Digits" in panel.model_info.text()
    choose(panel.dataset_combo, "synthetic")
    qtbot.waitUntil(lambda: "421,642 parameters" in panel.model_info.text(), timeout=60_000)  # 28x28x1, the model's own input


def test_before_the_devices_are_listed_nothing_is_red_and_after_they_are_a_real_problem_is(qtbot):
    """Start-up: "No device is usable" is no mistake while TensorFlow is still listing the devices (a restored form)."""
    panel = RunPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.strategy_combo.setCurrentIndex(panel.strategy_combo.findData("one-device"))  # as the saved form restores it
    assert panel.strategy_combo.currentData() == "one-device"
    assert panel.hint_label.isHidden(), f"red before detection ended: {panel.hint_label.text()}"
    warning = panel.controls.warning_label.text()
    assert warning.startswith("Detecting devices…") and "No device is usable" in warning and not panel.start_button.isEnabled()
    panel.set_devices(DeviceReport((CPU0,), ()))
    assert panel.hint_label.isHidden() and panel.start_button.isEnabled()
    panel.batch_edit.setText("x")
    assert panel.hint_label.isVisible() and "Batch" in panel.hint_label.text(), "once listed, a real problem is red"

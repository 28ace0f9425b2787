"""Multi-worker and TPU from the window: local worker processes, a real cluster's commands, TPU connect."""

from __future__ import annotations

import json
import shlex

import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox

from core.cluster.isolation import SWITCH, isolation_problem
from core.cluster.topology import GRPC_WARNING, ClusterHook, usable_cores, worker_commands
from core.formatting import format_bytes
from core.machine.types import DeviceInfo, TpuProbe
from core.results import RunStatus
from gui.run_form.cluster_box import ALL_INTERFACES_NOTE, NO_ENVIRONMENT
from gui.run_form.worker_network import ISOLATED
from gui.state.run_form import ALLOW_NETWORK_WORKERS
from tests.gui.conftest import RUN_TIMEOUT_MS
from tests.gui.helpers import choose, set_one_device, start_and_wait

pytestmark = pytest.mark.slow

SLURM_STEP_VARIABLES = ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID")
TPU_CORES = 8
TPU_HBM_PER_CORE = 16 << 30


class WorkerRecorder(ClusterHook):
    """Notes the worker processes of a cluster run (called in the training thread)."""

    def __init__(self):
        self.started = []
        self.ended = []

    def on_workers_started(self, workers):
        self.started = list(workers)

    def on_workers_ended(self, workers):
        self.ended = list(workers)


def fake_tpu_probe(address: str, timeout_s: float, stop_event=None) -> TpuProbe:
    """A fake TPU probe: stands in for a TPU v3-8, which this machine does not have."""
    details = {"Type": "TPU v3-8", "Cores": str(TPU_CORES), "Memory per core": "16 GiB (spec)", "Address": address}
    rows = tuple(
        DeviceInfo("TPU", "TPU v3-8", f"TPU:{i}", TPU_HBM_PER_CORE, None, None, {**details, "TF device": f"/device:TPU:{i}"})
        for i in range(TPU_CORES)
    )
    return TpuProbe(True, f"TPU v3-8: {TPU_CORES} cores (fake)", rows, 0.1)


def failed_tpu_probe(address: str, timeout_s: float, stop_event=None) -> TpuProbe:
    """A fake TPU probe that finds nothing, as after the TPU went away."""
    return TpuProbe(False, f"No TPU answered at {address!r} (fake)", (), 0.1)


def set_multi_worker(window, steps: int, steps_per_call: int = 1) -> None:
    panel = window.run_panel
    choose(panel.strategy_combo, "multi-worker")
    panel.workers_spin.setValue(2)
    panel.batch_edit.setText("16")
    panel.steps_edit.setText(str(steps))
    panel.spc_edit.setText(str(steps_per_call))


def worker_processes_alive(pids) -> list[int]:
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.heavy  # a cluster from the window; Stop ending every worker stays in the default run
def test_two_local_workers_train_and_plot_like_one_process(ready_window, qtbot):
    window = ready_window
    box = window.run_panel.cluster_box
    set_multi_worker(window, steps=20, steps_per_call=2)
    assert window.run_panel.config().cluster_hosts == (), "local workers pick free 127.0.0.1 ports themselves"
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.run_panel.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: box.status_label.text().startswith("Waiting for workers: "), timeout=RUN_TIMEOUT_MS)
        assert box.status_label.text().endswith(" of 300 s"), "the countdown reaches the GUI thread from the training thread"
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=RUN_TIMEOUT_MS)
    result = finished.args[0].result
    assert result.status == RunStatus.COMPLETED, result.message
    assert (result.steps_done, result.replicas) == (20, 2)
    series = window.plots.series(window.run_controller.current_key)
    assert series.size == 20
    assert len(series.items["loss"].xData) == 20
    assert "2 replicas" in window.run_panel.result_label.text()
    assert result.environment["workers_isolated"] is (isolation_problem() == "")
    assert box.local_notes.isolation_label.text() == ISOLATED or not result.environment["workers_isolated"]
    assert box.status_label.text().startswith("The worker processes started here have ended: worker 0 (chief) exit code")


def test_stop_ends_every_worker_process(ready_window, qtbot):
    window = ready_window
    recorder = WorkerRecorder()
    window.add_run_hook_provider(lambda config: [recorder])
    set_multi_worker(window, steps=100_000)
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.run_panel.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.plots.series(window.run_controller.current_key).size >= 3, timeout=RUN_TIMEOUT_MS)
        assert len(worker_processes_alive(w.pid for w in recorder.started)) == 2
        qtbot.mouseClick(window.run_panel.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=RUN_TIMEOUT_MS)
    result = finished.args[0].result
    assert result.status == RunStatus.STOPPED, result.message
    assert 3 <= result.steps_done < 100_000
    assert {w.pid for w in recorder.ended} == {w.pid for w in recorder.started}
    assert worker_processes_alive(w.pid for w in recorder.started) == []
    children = psutil.Process().children(recursive=True)
    assert not [p for p in children if "core.cluster.worker" in " ".join(p.cmdline())]


def test_cluster_box_shows_the_command_for_each_other_host(ready_window, qtbot):
    panel = ready_window.run_panel
    box = panel.cluster_box
    assert not box.isVisibleTo(panel)
    choose(panel.strategy_combo, "multi-worker")
    assert box.isVisibleTo(panel)
    assert GRPC_WARNING in box.warning_label.text() and ALL_INTERFACES_NOTE in box.warning_label.text()
    assert not box.warning_label.isVisibleTo(panel), "local workers: the isolation note instead"
    assert not box.commands_view.isVisibleTo(panel), "local workers need no commands"
    qtbot.waitUntil(lambda: box.hosts_radio.height() > 0, timeout=5000)
    qtbot.mouseClick(box.hosts_radio, Qt.MouseButton.LeftButton)
    assert box.warning_label.isVisibleTo(panel), "a real cluster keeps the warning about its open ports"
    assert not box.local_notes.isVisibleTo(panel)
    assert not panel.start_button.isEnabled()
    assert "list one host:port per worker" in panel.hint_label.text()
    box.hosts_edit.setPlainText("127.0.0.1:2222\nnode-2")
    assert "'node-2' is not host:port" in panel.hint_label.text()
    box.hosts_edit.setPlainText("127.0.0.1:2222\nnode-2:2223")
    box.timeout_spin.setValue(60)
    config = panel.config()
    assert (config.cluster_hosts, config.workers, config.cluster_timeout_s) == (("127.0.0.1:2222", "node-2:2223"), 2, 60)
    assert panel.start_button.isEnabled()
    assert not box.workers_spin.isVisibleTo(panel) and box.commands_view.isVisibleTo(panel)
    [command] = worker_commands(config)
    assert box.commands_view.isReadOnly()
    assert command in box.commands_view.toPlainText().splitlines()
    argv = shlex.split(command)
    assert argv[:3] == ["python", "main.py", "worker"]
    assert argv[argv.index("--cluster") + 1] == "127.0.0.1:2222,node-2:2223"
    assert argv[argv.index("--task-index") + 1] == "1"
    assert json.loads(argv[argv.index("--config-json") + 1])["batch_size"] == config.batch_size
    panel.batch_edit.setText("32")
    assert worker_commands(panel.config())[0] in box.commands_view.toPlainText(), "commands follow the form"
    qtbot.waitUntil(lambda: box.copy_button.height() > 0, timeout=5000)  # laid out, so a click lands on it
    qtbot.mouseClick(box.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == box.commands_view.toPlainText()


def test_local_workers_that_cannot_be_isolated_need_a_confirmation(ready_window, qtbot, monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    panel = ready_window.run_panel
    notes = panel.cluster_box.local_notes
    set_multi_worker(ready_window, steps=20)
    assert f"cannot be isolated from the network here: isolation is switched off ({SWITCH}=off)" in notes.isolation_label.text()
    assert notes.isolation_label.isVisibleTo(panel) and notes.allow_check.isVisibleTo(panel)
    assert not panel.start_button.isEnabled()
    assert ALLOW_NETWORK_WORKERS in panel.hint_label.text()
    qtbot.waitUntil(lambda: notes.allow_check.height() > 0, timeout=5000)

    for answer, allowed in ((QMessageBox.StandardButton.No, False), (QMessageBox.StandardButton.Yes, True)):
        qtbot.mouseClick(notes.allow_check, Qt.MouseButton.LeftButton)
        dialog = notes.confirm_dialog
        assert dialog is not None and dialog.isVisible() and not notes.allow_check.isChecked(), "asks before ticking"
        assert "reachable from the network" in dialog.text() and f"{SWITCH}=off" in dialog.text()
        qtbot.mouseClick(dialog.button(answer), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: notes.confirm_dialog is None, timeout=5000)
        assert notes.allow_check.isChecked() is allowed
        assert panel.cluster_box.allow_network_workers() is allowed
        assert panel.start_button.isEnabled() is allowed
        if allowed:
            assert panel.config().allow_network_workers is True

    qtbot.mouseClick(notes.allow_check, Qt.MouseButton.LeftButton)
    assert notes.confirm_dialog is None and not panel.cluster_box.allow_network_workers(), "unticking needs no question"
    assert not panel.start_button.isEnabled()


def test_local_workers_show_whether_they_are_isolated_and_crowded(ready_window, qtbot, monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    panel = ready_window.run_panel
    notes = panel.cluster_box.local_notes
    set_multi_worker(ready_window, steps=20)
    problem = isolation_problem()
    qtbot.waitUntil(lambda: notes.isolation_label.text() != "" and "Checking" not in notes.isolation_label.text(), timeout=30_000)
    if problem:
        assert problem in notes.isolation_label.text() and not panel.start_button.isEnabled()
    else:
        assert notes.isolation_label.text() == ISOLATED and not notes.allow_check.isVisibleTo(panel)
        assert panel.start_button.isEnabled()
    assert not notes.crowding_label.isVisibleTo(panel)
    cores = usable_cores()
    panel.workers_spin.setValue(64)
    assert notes.crowding_label.isVisibleTo(panel)
    assert f"64 local workers share {cores} CPU core" in notes.crowding_label.text()
    panel.workers_spin.setValue(min(2, cores))
    assert not notes.crowding_label.isVisibleTo(panel)


def test_read_from_environment_fills_the_cluster_from_tf_config(ready_window, qtbot, monkeypatch):
    box = ready_window.run_panel.cluster_box
    choose(ready_window.run_panel.strategy_combo, "multi-worker")
    box.hosts_radio.setChecked(True)
    qtbot.waitUntil(lambda: box.read_env_button.height() > 0, timeout=5000)
    for name in ("TF_CONFIG", *SLURM_STEP_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    with qtbot.waitSignal(box.environment_read, timeout=60_000) as nothing:
        qtbot.mouseClick(box.read_env_button, Qt.MouseButton.LeftButton)
    assert nothing.args[0] is None and box.env_label.text() == NO_ENVIRONMENT
    assert ready_window.run_panel.state.host_list() == () and not ready_window.run_panel.start_button.isEnabled()
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}}))
    with qtbot.waitSignal(box.environment_read, timeout=60_000):
        qtbot.mouseClick(box.read_env_button, Qt.MouseButton.LeftButton)
    assert box.is_cluster()
    config = ready_window.run_panel.config()
    assert config.cluster_hosts == ("10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222")
    assert config.workers == 3
    assert worker_commands(config)[1] in box.commands_view.toPlainText()
    qtbot.waitUntil(box.read_env_button.isEnabled, timeout=5000)


def test_bogus_tpu_address_fails_in_time_and_the_app_stays_usable(ready_window, qtbot, silent_tpu_address):
    window = ready_window
    panel = window.run_panel
    panel.tpu_timeout_spin.setValue(6)
    panel.tpu_address_edit.setText(silent_tpu_address)
    with qtbot.waitSignal(panel.tpu_probed, timeout=60_000) as probed:
        qtbot.mouseClick(panel.tpu_connect_button, Qt.MouseButton.LeftButton)
        assert "gives up after 6 s" in panel.tpu_status.text()
        choose(panel.strategy_combo, "multi-worker")  # the form stays live while the probe runs
        choose(panel.strategy_combo, "default")
    probe = probed.args[0]
    assert not probe.ok
    assert panel.tpu_status.text().startswith("Not connected")
    assert "within 6 s" in panel.tpu_status.text()
    assert not next(c for c in panel.state.strategies if c.name == "tpu").available
    assert not [d for d in window.device_panel.devices() if d.kind == "TPU" and d.available]
    qtbot.waitUntil(panel.tpu_connect_button.isEnabled, timeout=5000)
    set_one_device(window, steps=10)
    result = start_and_wait(qtbot, window).result
    assert result.status == RunStatus.COMPLETED and result.steps_done == 10


def test_connected_tpu_lists_its_cores_and_offers_tpu_strategy(ready_window, qtbot, monkeypatch):
    monkeypatch.setattr("gui.run_form.tpu_connect.probe_tpu", fake_tpu_probe)
    window = ready_window
    panel = window.run_panel
    with qtbot.waitSignal(window.device_panel.devices_changed, timeout=10_000):
        qtbot.mouseClick(panel.tpu_connect_button, Qt.MouseButton.LeftButton)
    assert panel.tpu_status.text().startswith("Connected") and "TPU v3-8: 8 cores" in panel.tpu_status.text()
    table = window.device_panel.table
    tpu_rows = [row for row in range(table.rowCount()) if table.item(row, 0).text() == "TPU"]
    assert len(tpu_rows) == TPU_CORES
    assert table.item(tpu_rows[0], 2).text() == "TPU:0"
    assert table.item(tpu_rows[0], 3).text() == format_bytes(TPU_HBM_PER_CORE)
    table.selectRow(tpu_rows[0])
    details = window.device_panel.details
    shown = {details.item(r, 0).text(): details.item(r, 1).text() for r in range(details.rowCount())}
    assert shown["Cores"] == "8" and shown["Memory per core"] == "16 GiB (spec)"
    assert next(c for c in panel.state.strategies if c.name == "tpu").available
    assert panel.spc_edit.text() == "1"
    choose(panel.strategy_combo, "tpu")
    assert panel.spc_edit.text() == "100", "TPU runs default to many steps per call"
    panel.batch_edit.setText("1024")
    assert "Global batch 1,024 = 128 per core on 8 cores; use a multiple of 8 × 128 = 1,024" in panel.device_hint.text()
    config = panel.config()
    assert (config.strategy, config.tpu_address, config.steps_per_call) == ("tpu", "local", 100)
    choose(panel.strategy_combo, "default")
    assert panel.spc_edit.text() == "1"
    panel.spc_edit.clear()
    qtbot.keyClicks(panel.spc_edit, "4")
    choose(panel.strategy_combo, "tpu")
    assert panel.spc_edit.text() == "4", "a value the user typed is kept"
    with qtbot.waitSignal(window.device_panel.devices_changed, timeout=60_000):
        window.device_panel.detect(None)
    assert sum(d.kind == "TPU" for d in window.device_panel.devices()) == TPU_CORES, "Refresh keeps the connected TPU"
    qtbot.waitUntil(window.device_panel.refresh_button.isEnabled, timeout=5000)
    monkeypatch.setattr("gui.run_form.tpu_connect.probe_tpu", failed_tpu_probe)
    with qtbot.waitSignal(window.device_panel.devices_changed, timeout=10_000):
        qtbot.mouseClick(panel.tpu_connect_button, Qt.MouseButton.LeftButton)
    assert not [d for d in window.device_panel.devices() if d.kind == "TPU"]
    assert not next(c for c in panel.state.strategies if c.name == "tpu").available and panel.config().strategy == "default"

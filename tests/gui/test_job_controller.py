"""The shared job lifecycle: start, poll, stop, shutdown; for a plain job and for real runs and comparisons."""

from __future__ import annotations

import threading

import pytest

from core.compare.targets import CompareTarget
from core.config import RunConfig
from core.history.store import RunStore
from core.live.step_buffer import StepBuffer
from core.results import RunStatus, StepRecord
from gui.charts import plot_curves_of
from gui.controllers.base import JobController
from gui.controllers.compare import CompareController
from gui.controllers.run import RunController
from gui.job_data import CompareJob
from gui.plotting.plots import PlotsWidget
from gui.qt_threads import Worker, run_in_background, running_threads
from tests.gui.conftest import RUN_TIMEOUT_MS

pytestmark = pytest.mark.timeout(300)
LONG_RUN = 1_000_000


class CountingWorker(Worker):
    """Appends one step record every millisecond until its stop event is set."""

    def __init__(self, buffer: StepBuffer, stop_event: threading.Event):
        super().__init__()
        self.buffer = buffer
        self.stop_event = stop_event
        self.appended = 0

    def work(self) -> None:
        while not self.stop_event.wait(0.001):
            self.appended += 1
            self.buffer.append([StepRecord(self.appended, 1.0, 0.001)])


class CountingController(JobController):
    """The smallest job controller: counts the steps its timer drains."""

    def __init__(self) -> None:
        super().__init__(10)
        self.buffer: StepBuffer | None = None
        self.worker: CountingWorker | None = None
        self.drained = 0
        self.polls_after_end = 0

    def start(self) -> None:
        self.buffer = StepBuffer()
        self.worker = CountingWorker(self.buffer, self._new_stop_event())
        self._launch(self.worker, "counting")

    def _poll(self) -> None:
        if self.buffer is None:
            self.polls_after_end += 1
            return
        self.drained += len(self.buffer.drain())

    def _job_ended(self) -> None:
        self._poll()
        self.buffer = None


@pytest.fixture
def two_cpus(qtbot):
    """TensorFlow with the CPU split in two logical devices, configured in a worker thread as the window does."""
    from core.machine.runtime import RuntimeSettings, configure_runtime

    run_in_background(configure_runtime, RuntimeSettings(logical_cpus=2), name="runtime")
    qtbot.waitUntil(lambda: not running_threads(), timeout=RUN_TIMEOUT_MS)


def test_a_job_is_polled_while_it_runs_and_fully_drained_when_stopped(qtbot):
    controller = CountingController()
    changes: list[bool] = []
    controller.running_changed.connect(changes.append)
    controller.start()
    assert controller.is_running() and changes == [True]
    qtbot.waitUntil(lambda: controller.drained >= 20, timeout=10_000)
    with qtbot.waitSignal(controller.running_changed, timeout=10_000):
        controller.stop()
    assert changes == [True, False] and not controller.is_running()
    assert controller.drained == controller.worker.appended, "the last steps are drained when the job ends"
    assert not controller._timer.isActive() and controller.polls_after_end == 0, "the timer stops with the job"
    qtbot.waitUntil(lambda: not running_threads(), timeout=5000)


def test_shutdown_waits_for_the_thread_and_stop_when_idle_does_nothing(qtbot):
    controller = CountingController()
    controller.stop()
    assert controller.shutdown(1) and not controller.is_running()
    controller.start()
    qtbot.waitUntil(lambda: controller.drained >= 5, timeout=10_000)
    assert controller.shutdown(10)
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    assert controller.drained == controller.worker.appended
    assert not running_threads()


@pytest.mark.slow
def test_a_run_controller_trains_reports_progress_and_refuses_a_second_start(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = RunController()
    plot_curves_of(controller, plots)
    controller.diagnose = False  # the verdict is tested in test_verdict_gui: no probe runs here
    changes: list[bool] = []
    progress: list = []
    controller.running_changed.connect(changes.append)
    controller.progress.connect(progress.append)
    config = RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=("CPU:0",), steps=8)
    with qtbot.waitSignal(controller.run_finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert controller.start(config, "eight steps")
        assert not controller.start(config, "again"), "one run at a time"
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    finished = blocker.args[0]
    assert finished.result.status == RunStatus.COMPLETED, finished.result.message
    assert changes == [True, False]
    assert (progress[-1].done, progress[-1].total) == (8, 8)
    assert plots.series(controller.current_key).size == 8


@pytest.mark.slow
def test_a_run_controller_shutdown_stops_the_run_mid_way(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = RunController()
    plot_curves_of(controller, plots)
    config = RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=("CPU:0",), steps=LONG_RUN)
    assert controller.start(config, "long")
    qtbot.waitUntil(lambda: plots.series(controller.current_key).size >= 3, timeout=RUN_TIMEOUT_MS)
    assert controller.shutdown(60)
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    with RunStore.open() as store:
        runs = store.list_runs()
    assert [run.status for run in runs] == [RunStatus.STOPPED]
    assert plots.series(controller.current_key).size == runs[0].steps


@pytest.mark.slow
def test_a_compare_controller_runs_every_target_with_its_own_curve(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = CompareController()
    plot_curves_of(controller, plots)
    changes: list[bool] = []
    saved: list = []
    controller.running_changed.connect(changes.append)
    controller.run_saved.connect(saved.append)
    base = RunConfig(model="mlp", dataset="digits", steps=6)
    targets = tuple(CompareTarget(name, "one-device", (name,)) for name in ("CPU:0", "CPU:1"))
    with qtbot.waitSignal(controller.comparison_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        assert controller.start(CompareJob(base, targets))
        assert not controller.start(CompareJob(base, targets)), "one comparison at a time"
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    comparison = blocker.args[0]
    assert [row.status for row in comparison.rows] == [RunStatus.COMPLETED] * 2
    assert changes == [True, False]
    assert [target.index for target in saved] == [0, 1] and all(t.finished.run_id for t in saved)
    assert [plots.series(controller.plot_key(index)).size for index in range(2)] == [6, 6]


@pytest.mark.slow
def test_stopping_a_comparison_ends_the_target_in_flight_and_skips_the_rest(qtbot, two_cpus):
    """Stopped while a target trains in its turn (which target goes first in a round is random): none completes, and
    every target that ran is in the history with the steps its curve shows."""
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = CompareController()
    plot_curves_of(controller, plots)
    base = RunConfig(model="mlp", dataset="digits", steps=LONG_RUN)
    targets = tuple(CompareTarget(name, "one-device", (name,)) for name in ("CPU:0", "CPU:1"))
    assert controller.start(CompareJob(base, targets))
    keys = [controller.plot_key(index) for index in range(len(targets))]

    def plotted(key: str) -> int:
        return plots.series(key).size if key in plots.run_keys() else 0

    qtbot.waitUntil(lambda: any(plotted(key) >= 3 for key in keys), timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(controller.comparison_ready, timeout=60_000) as blocker:
        controller.stop()
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    statuses = [row.status for row in blocker.args[0].rows]
    assert RunStatus.STOPPED in statuses and RunStatus.COMPLETED not in statuses
    with RunStore.open() as store:
        stored = store.list_runs(order_by="id", descending=False)
    assert [run.status for run in stored] == [s for s in statuses if s != RunStatus.SKIPPED], "every target that ran is in the history"
    assert [run.steps for run in stored] == [plotted(key) for key, s in zip(keys, statuses, strict=True) if s != RunStatus.SKIPPED]


@pytest.mark.slow
def test_a_run_is_in_the_history_while_it_trains_then_finished_with_its_result(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = RunController()
    plot_curves_of(controller, plots)
    config = RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=("CPU:0",), steps=LONG_RUN)
    assert controller.start(config, "recorded as it trains")

    def stored_runs():
        with RunStore.open() as store:
            return store.list_runs()

    qtbot.waitUntil(lambda: any(run.steps > 0 for run in stored_runs()), timeout=RUN_TIMEOUT_MS)
    running = stored_runs()[0]
    assert running.status == RunStatus.RUNNING and running.label == "recorded as it trains"
    with qtbot.waitSignal(controller.run_finished, timeout=60_000) as blocker:
        controller.stop()
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    finished = blocker.args[0]
    [stored] = stored_runs()
    assert stored.id == running.id == finished.run_id and finished.history_error == ""
    assert stored.status == RunStatus.STOPPED and stored.steps == finished.result.steps_done >= running.steps


@pytest.mark.slow
def test_a_run_whose_history_cannot_be_written_still_ends_with_its_result_and_one_reason(qtbot, two_cpus, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the history folder should be")
    monkeypatch.setenv("DEVICE_LAB_DATA_DIR", str(blocker / "data"))
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = RunController()
    plot_curves_of(controller, plots)
    controller.diagnose = False  # the verdict is tested in test_verdict_gui: no probe runs here
    config = RunConfig(model="mlp", dataset="digits", strategy="one-device", devices=("CPU:0",), steps=5)
    with qtbot.waitSignal(controller.run_finished, timeout=RUN_TIMEOUT_MS) as blocked:
        assert controller.start(config, "no history")
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    finished = blocked.args[0]
    assert finished.result.status == RunStatus.COMPLETED and finished.result.steps_done == 5
    assert finished.run_id is None
    assert finished.history_error.startswith("The run was not saved to the history:") and str(blocker) in finished.history_error
    assert blocker.read_text() == "a file where the history folder should be"


@pytest.mark.slow
def test_a_comparison_records_each_target_as_the_history_tab_labels_it(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = CompareController()
    plot_curves_of(controller, plots)
    saved: list = []
    controller.run_saved.connect(saved.append)
    base = RunConfig(model="mlp", dataset="digits", steps=4)
    targets = (CompareTarget("CPU:0", "one-device", ("CPU:0",)), CompareTarget("CPU:7", "one-device", ("CPU:7",)))
    with qtbot.waitSignal(controller.comparison_ready, timeout=RUN_TIMEOUT_MS) as blocker:
        assert controller.start(CompareJob(base, targets))
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    assert [row.status for row in blocker.args[0].rows] == [RunStatus.COMPLETED, RunStatus.FAILED]
    with RunStore.open() as store:
        runs = {run.id: run for run in store.list_runs()}
    assert sorted(runs) == sorted(target.finished.run_id for target in saved)
    by_target = {target.label: runs[target.finished.run_id] for target in saved}
    assert by_target["CPU:0"].label == "MLP · digits · CPU:0 · batch 64 · compare"
    assert by_target["CPU:0"].status == RunStatus.COMPLETED and by_target["CPU:0"].steps == 4
    assert by_target["CPU:7"].label == "MLP · digits · CPU:7 · batch 64 · compare"
    assert by_target["CPU:7"].status == RunStatus.FAILED and "CPU:7" in by_target["CPU:7"].message


@pytest.mark.slow
def test_a_scaling_sweep_records_each_count_under_its_sweep_label(qtbot, two_cpus):
    plots = PlotsWidget()
    qtbot.addWidget(plots)
    controller = CompareController()
    plot_curves_of(controller, plots)
    saved: list = []
    controller.run_saved.connect(saved.append)
    with qtbot.waitSignal(controller.comparison_ready, timeout=RUN_TIMEOUT_MS):
        assert controller.start(CompareJob(RunConfig(model="mlp", dataset="digits", steps=3), sweep_kind="CPU"))
    qtbot.waitUntil(lambda: not controller.is_running(), timeout=10_000)
    with RunStore.open() as store:
        runs = store.list_runs(order_by="id", descending=False)
    assert [run.label for run in runs] == [
        "MLP · digits · CPU:0 · batch 64 · compare",
        "MLP · digits · mirrored x2: CPU:0,CPU:1 · batch 64 · compare",
    ]
    assert [run.status for run in runs] == [RunStatus.COMPLETED] * 2 and [run.steps for run in runs] == [3, 3]
    assert [target.finished.run_id for target in saved] == [run.id for run in runs]

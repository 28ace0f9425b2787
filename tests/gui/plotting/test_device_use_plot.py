"""GPU use under the step-time plot, fed by the device-use hook a run's hooks carry (`RunHooks`), sampling `FakeNvml` (no GPU here)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel

from core.config import RunConfig
from core.hooks import device_use
from core.jobs import RunHooks
from core.results import RunResult, RunStatus, StepRecord
from core.training.hooks import RunContext
from gui.plotting.device_use_plot import DeviceUsePlot
from gui.plotting.plots import PlotsWidget
from tests.fakes.fake_nvml import FakeGpu, FakeNvml
from tests.gui.helpers import set_one_device, start_and_wait

STEPS = 10


@pytest.fixture
def charts(qtbot) -> tuple[PlotsWidget, DeviceUsePlot]:
    """The Training page as the window builds it (gui.charts): GPU use under the two plots, on their step axis."""
    plots = PlotsWidget()
    use = DeviceUsePlot()
    plots.add_below(use, use.plot)
    qtbot.addWidget(plots)
    plots.resize(1000, 700)
    plots.show()
    return plots, use


def drawn_points(use: DeviceUsePlot) -> int:
    curves = use.plot.getPlotItem().listDataItems()
    x = curves[0].getData()[0] if curves else None
    return 0 if x is None else len(x)


def one_gpu(nvml, names):
    return [("GPU:0", nvml.gpus[0])] if "GPU:0" in names else []


def test_no_plot_and_no_hook_without_an_nvidia_driver(charts):
    _, use = charts
    hooks = RunHooks(RunConfig(), threading.Event())
    assert hooks.device_use is None, "this machine has no NVML"
    use.watch(hooks.device_use)
    assert not use.isVisible()


def test_a_gpu_run_is_sampled_and_drawn_under_step_time_with_memory_in_words(charts, qtbot, monkeypatch):
    plots, use = charts
    nvml = FakeNvml(FakeGpu(utilization=lambda reading: 75.0))
    monkeypatch.setattr(device_use, "load_nvml", lambda: (nvml, ""))
    monkeypatch.setattr(device_use, "run_gpu_handles", one_gpu)
    hook = RunHooks(RunConfig(), threading.Event()).device_use
    assert hook is not None
    use.watch(hook)
    plots.add_run("run", "MLP on GPU:0", np.linspace(2.3, 0.5, STEPS), np.full(STEPS, 0.02), warmup_steps=1, batch_size=64)
    hook.on_run_start(RunContext(RunConfig(), STEPS, 1, ("GPU:0",), None))
    for step in range(1, STEPS + 1):  # what the engine does after each call
        time.sleep(0.05)  # ~0.5 s in all: about 5 samples at 10 a second
        hook.on_step_records([StepRecord(step, 1.0, 0.05, warmup=step == 1)])
    qtbot.waitUntil(lambda: use.isVisible() and drawn_points(use) > 3, timeout=5000)
    result = hook.amend_result(RunResult(RunStatus.COMPLETED, RunConfig().to_dict()))
    hook.on_run_end(result)
    assert result.mean_utilization == 75.0
    qtbot.waitUntil(lambda: "Mean GPU use since warm-up: 75 %" in use.memory_label.text(), timeout=5000)
    use_curve, memory_curve = use.plot.getPlotItem().listDataItems()
    steps, values = use_curve.getData()
    assert np.all(values == 75.0) and 0 <= steps[0] and steps[-1] <= STEPS
    assert np.allclose(memory_curve.getData()[1], 100 * 68 / 80), "memory held by this process, as a share of the GPU"
    assert use_curve.name() == "GPU:0 use" and memory_curve.name() == "GPU:0 memory held"
    text = use.findChild(QLabel, "deviceMemoryLabel").text()
    assert "68.0 GiB reserved by this process" in text and "as TensorFlow sees it" in text
    plots.step_time_plot.getPlotItem().setXRange(2, 6, padding=0)
    assert use.plot.getPlotItem().getViewBox().viewRange()[0] == pytest.approx([2, 6]), "one step axis for all three plots"
    assert plots.findChild(type(plots.loss_plot), "lossPlot") is plots.loss_plot
    assert plots.findChild(type(plots.loss_plot), "stepTimePlot") is plots.step_time_plot


def test_the_plot_stops_following_a_run_that_failed_before_its_first_step(charts, qtbot, monkeypatch):
    _, use = charts
    nvml = FakeNvml(FakeGpu())
    monkeypatch.setattr(device_use, "load_nvml", lambda: (nvml, ""))
    hooks = RunHooks(RunConfig(), threading.Event())
    use.watch(hooks.device_use)
    hooks.close(RunResult(RunStatus.FAILED, RunConfig().to_dict(), message="devices: CPU:9 is not here"))
    assert hooks.device_use is not None and hooks.device_use.finished
    qtbot.waitUntil(lambda: not use.following, timeout=5000)
    assert not use.isVisible(), "nothing was sampled"


@pytest.mark.slow
def test_a_window_run_hands_the_plot_the_gpu_use_hook_the_job_service_gave_it(ready_window, qtbot, monkeypatch):
    nvml = FakeNvml(FakeGpu(utilization=lambda reading: 60.0))
    monkeypatch.setattr(device_use, "load_nvml", lambda: (nvml, ""))
    monkeypatch.setattr(device_use, "run_gpu_handles", lambda driver, names: [("GPU:0", driver.gpus[0])])  # the CPU run stands in
    set_one_device(ready_window, "CPU:0", steps=12)
    finished = start_and_wait(qtbot, ready_window)
    assert finished.result.status == RunStatus.COMPLETED, finished.result.message
    use = ready_window.charts().device_use
    qtbot.waitUntil(lambda: use.isVisible() and not use.following, timeout=5000)
    assert [curve.name() for curve in use.plot.getPlotItem().listDataItems()] == ["GPU:0 use", "GPU:0 memory held"]

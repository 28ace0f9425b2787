"""Composition of the window's chart-drawing half: Training plots (GPU use under them), Compare and History, with their controllers.

These panels stand on pyqtgraph, whose import and plot widgets take ~0.3 s on
a 2-core machine (its Qt shim touches every Qt class). The main window shows
without them and builds them when first needed: a tab opened, a run started,
or (at the latest) just after the devices are listed, once TensorFlow has
loaded. Importing this module imports pyqtgraph.

Here the controllers are made and their curves wired to the plots: the
controllers know no widget, the panels no controller's module.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from gui.controllers.compare import CompareController
from gui.controllers.run import RunController
from gui.panels.compare import ComparePanel
from gui.panels.history import HistoryPanel
from gui.plotting.device_use_plot import DeviceUsePlot
from gui.plotting.plots import PlotsWidget


@dataclass(frozen=True)
class ChartPanels:
    plots: PlotsWidget
    run_controller: RunController
    compare_panel: ComparePanel
    history_panel: HistoryPanel
    device_use: DeviceUsePlot

    def widgets(self) -> tuple[QWidget, QWidget, QWidget]:
        """The tab pages, in tab order: Training, Compare, History."""
        return self.plots, self.compare_panel, self.history_panel


def plot_curves_of(controller: RunController | CompareController, plots: PlotsWidget) -> None:
    """Draw a controller's runs in `plots`: a curve per run it adds, its steps as they arrive."""
    controller.curve_added.connect(lambda key, label, batch: plots.add_run(key, label, batch_size=batch))
    controller.steps_arrived.connect(plots.add_steps)
    if isinstance(controller, RunController):
        controller.steps_complete.connect(plots.flush)


def build_chart_panels(window: QObject, run_config, run_errors) -> ChartPanels:
    """Make the panels and their controllers, not yet in the window; `run_config` and `run_errors` come from the run form."""
    plots = PlotsWidget()
    device_use = DeviceUsePlot()
    plots.add_below(device_use, device_use.plot)
    run_controller = RunController(window)
    run_controller.run_hooks.connect(lambda hooks: device_use.watch(hooks.device_use))  # GPU use under step time
    compare_controller = CompareController(window)
    for controller in (run_controller, compare_controller):
        plot_curves_of(controller, plots)
    compare_panel = ComparePanel(plots, compare_controller, run_config, run_errors)
    history_panel = HistoryPanel(plots)
    return ChartPanels(plots, run_controller, compare_panel, history_panel, device_use)

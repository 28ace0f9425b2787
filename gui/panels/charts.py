"""The window's chart-drawing half: Training plots, Compare and History, built once the window is up.

These panels stand on pyqtgraph, whose import and plot widgets take ~0.3 s on
a 2-core machine (its Qt shim touches every Qt class). The main window shows
without them and builds them when first needed: a tab opened, a run started,
or (at the latest) just after the devices are listed, once TensorFlow has
loaded. Importing this module imports pyqtgraph.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import QWidget

from gui.controllers.run import RunController
from gui.panels.compare import ComparePanel
from gui.panels.history import HistoryPanel
from gui.plotting.plots import PlotsWidget


@dataclass(frozen=True)
class ChartPanels:
    plots: PlotsWidget
    run_controller: RunController
    compare_panel: ComparePanel
    history_panel: HistoryPanel

    def widgets(self) -> tuple[QWidget, QWidget, QWidget]:
        """The tab pages, in tab order: Training, Compare, History."""
        return self.plots, self.compare_panel, self.history_panel


def build_chart_panels(window: QWidget, run_config, run_errors) -> ChartPanels:
    """Make the panels, not yet in the window nor wired; `run_config` and `run_errors` come from the run form."""
    plots = PlotsWidget()
    run_controller = RunController(plots, window)
    compare_panel = ComparePanel(plots, run_config, run_errors)
    history_panel = HistoryPanel(plots)
    return ChartPanels(plots, run_controller, compare_panel, history_panel)

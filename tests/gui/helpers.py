"""Small helpers for driving the real widgets in tests."""

from __future__ import annotations

import re

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from tests.gui.conftest import RUN_TIMEOUT_MS


def choose(combo: QComboBox, data: str) -> None:
    """Select the entry whose data is `data` (fails when there is none)."""
    index = combo.findData(data)
    assert index >= 0, f"{combo.objectName()} has no entry {data!r}"
    combo.setCurrentIndex(index)


def set_one_device(window, device: str = "CPU:0", steps: int = 30) -> None:
    panel = window.run_panel
    choose(panel.strategy_combo, "one-device")
    choose(panel.device_combo, device)
    panel.steps_edit.setText(str(steps))


def start_and_wait(qtbot, window, timeout: int = RUN_TIMEOUT_MS):
    """Click Start and wait until the run is over; returns its FinishedRun."""
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=timeout) as blocker:
        qtbot.mouseClick(window.run_panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.run_controller.is_running(), timeout=timeout)
    return blocker.args[0]


def wired_compare_controller(plots):
    """A CompareController whose curves go to `plots`, as the window wires it (gui.charts)."""
    from gui.charts import plot_curves_of
    from gui.controllers.compare import CompareController

    controller = CompareController()
    plot_curves_of(controller, plots)
    return controller


def star_on(plot: pg.PlotWidget) -> tuple[float, float] | None:
    """(x, y) of the star drawn on `plot`, or None where none is."""
    stars = [item for item in plot.getPlotItem().items if isinstance(item, pg.ScatterPlotItem) and item.opts["symbol"] == "star"]
    assert len(stars) <= 1, "more than one star drawn"
    if not stars:
        return None
    xs, ys = stars[0].getData()
    return float(xs[0]), float(ys[0])


def bar_heights(chart) -> list[float]:
    """The heights of the bars a BarChart draws, in order (a run without a value draws height 0)."""
    return [float(height) for item in chart.getPlotItem().items if isinstance(item, pg.BarGraphItem) for height in item.opts["height"]]


def tick_labels(chart) -> list[str]:
    """The labels a BarChart draws under its bars (elided to fit): its bottom axis's fixed ticks."""
    levels = chart.getPlotItem().getAxis("bottom")._tickLevels  # pyqtgraph keeps setTicks' ticks here, with no getter
    return [label for _, label in levels[0]] if levels else []


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def names_a_flag(text: str) -> bool:
    """Whether `text` names a command-line flag (`--something`): the window says its controls' names instead."""
    return FLAG.search(text) is not None

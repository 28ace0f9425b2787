"""A diverging run does not flatten the others' loss; the log-scale switch shows every run."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtWidgets import QCheckBox, QLabel

from gui.plotting.plot_controls import off_scale
from gui.plotting.plots import PlotsWidget

N = 200


def loss_y_range(plots: PlotsWidget) -> tuple[float, float]:
    plots.redraw_now()
    view = plots.loss_plot.getPlotItem().getViewBox()
    view.autoRange()
    return tuple(view.viewRange()[1])


def test_off_scale_is_measured_against_the_typical_run():
    assert off_scale({"a": 2.3, "b": 2e7}) == {"b"}
    assert off_scale({"a": 2.3, "b": 4.6, "c": 1.1}) == set(), "runs of different data sets are not outliers"
    assert off_scale({"a": 2.3, "b": 2.5, "c": 2e7, "d": 3e5}) == {"c", "d"}
    assert off_scale({"a": 2.3, "b": 3e4, "c": 2e7}) == {"c"}, "two diverging runs of three: the middle one is typical"
    assert off_scale({"only": 2e7}) == set() and off_scale({"a": -1.0, "b": 5.0}) == set()


def test_a_diverging_run_is_kept_out_of_the_range_and_log_scale_shows_every_run(plots, qtbot):
    steps = np.arange(N)
    times = np.full(N, 0.002)
    plots.add_run("good", "lr 0.01", 2.3 * np.exp(-steps / 50) + 0.05, times, warmup_steps=1, batch_size=64)
    plots.add_run("bad", "lr 10", 2.3 * 10 ** (7 * steps / (N - 1)), times, warmup_steps=1, batch_size=64)
    note = plots.findChild(QLabel, "offScaleNote")
    low, high = loss_y_range(plots)
    assert high < 5, f"the diverging run must not set the range ({low}..{high})"
    assert note.isVisible() and "lr 10" in note.text() and "2.3e+07" in note.text() and "Log scale" in note.text()

    log_check = plots.findChild(QCheckBox, "lossLogCheck")
    log_check.click()
    assert log_check.isChecked() and plots.loss_plot.getPlotItem().ctrl.logYCheck.isChecked()
    low, high = loss_y_range(plots)
    assert low <= math.log10(0.06) and high >= math.log10(2.3e7), "log10 axis covering both runs"
    assert not note.isVisible()

    log_check.click()
    assert loss_y_range(plots)[1] < 5 and note.isVisible()
    plots.set_run_visible("good", False)
    assert loss_y_range(plots)[1] >= 2.3e7, "alone, the diverging run has the plot to itself"
    assert not note.isVisible()

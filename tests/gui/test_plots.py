"""Live plots: overlaid runs, warm-up marked and out of the y range, hiding, clearing, export, big runs."""

from __future__ import annotations

import xml.dom.minidom

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from gui.plot_export import close_paths_as_lines
from gui.plots import PlotsWidget

WARMUP_TIME_S = 2.0


@pytest.fixture
def plots(qtbot) -> PlotsWidget:
    widget = PlotsWidget()
    qtbot.addWidget(widget)
    widget.resize(1000, 600)
    widget.show()
    return widget


def a_run(n: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    losses = 2.3 * np.exp(-np.arange(n) / 50) + 0.05 * rng.random(n)
    times = 0.002 + 0.0002 * rng.random(n)
    times[0] = WARMUP_TIME_S
    return losses, times


def test_warmup_is_marked_and_left_out_of_the_y_range(plots, qtbot):
    losses, times = a_run()
    series = plots.add_run("a", "run a", losses, times, warmup_steps=1, batch_size=64)
    plots.step_time_plot.getPlotItem().vb.autoRange()
    warm_x, warm_y = series.items["time_warmup"].getOriginalDataset()
    assert warm_x.tolist() == [1.0] and warm_y.tolist() == [WARMUP_TIME_S * 1e3]
    _, (y_low, y_high) = plots.step_time_plot.getPlotItem().vb.viewRange()
    assert y_high < 100, "a 2 s warm-up step must not squash a 2 ms axis"
    assert series.items["time"].getOriginalDataset()[0].size == 200, "the curve still holds every step"
    assert "warm-up 2.00 s (1 step)" in plots.info_label.text()
    expected_rate = 64 * 199 / times[1:].sum()
    assert series.samples_per_s == pytest.approx(expected_rate)


def test_runs_overlay_with_one_colour_and_legend_entry_each(plots):
    for index in range(3):
        plots.add_run(f"r{index}", f"run {index}", *a_run(seed=index), warmup_steps=1, batch_size=32)
    colours = {plots.series(key).color for key in plots.run_keys()}
    assert len(colours) == 3
    legend = plots.loss_plot.getPlotItem().legend
    assert [label.text for _, label in legend.items] == ["run 0", "run 1", "run 2"]
    assert plots.run_list.count() == 3


def test_a_run_can_be_hidden_from_the_list_and_cleared(plots):
    plots.add_run("a", "run a", *a_run(), warmup_steps=1)
    plots.add_run("b", "run b", *a_run(seed=1), warmup_steps=1)
    plots.run_list.item(0).setCheckState(Qt.CheckState.Unchecked)
    assert not any(item.isVisible() for item in plots.series("a").items.values())
    assert plots.series("b").items["loss"].isVisible()
    plots.run_list.item(0).setCheckState(Qt.CheckState.Checked)
    assert plots.series("a").items["loss"].isVisible()
    plots.clear()
    assert plots.run_keys() == [] and plots.run_list.count() == 0
    assert plots.loss_plot.getPlotItem().listDataItems() == []


def test_live_steps_arrive_in_batches_and_curves_use_peak_downsampling(plots, qtbot):
    plots.add_run("live", "live run", batch_size=16)
    steps = np.arange(1, 101, dtype=float)
    plots.append_steps("live", steps[:40], np.ones(40), np.full(40, 0.01), steps[:40] <= 1)
    plots.append_steps("live", steps[40:], np.ones(60), np.full(60, 0.01), np.zeros(60, bool))
    qtbot.waitUntil(lambda: plots.series("live").items["loss"].getOriginalDataset()[0] is not None, timeout=2000)
    qtbot.waitUntil(lambda: len(plots.series("live").items["loss"].getOriginalDataset()[0]) == 100, timeout=2000)
    item = plots.series("live").items["loss"]
    assert item.opts["autoDownsample"] and item.opts["downsampleMethod"] == "peak" and item.opts["clipToView"]


def test_a_million_steps_are_drawn_downsampled(plots, qtbot):
    n = 1_000_000
    steps = np.arange(1, n + 1, dtype=float)
    plots.add_run("big", "a million steps", batch_size=8)
    plots.append_steps("big", steps, np.random.default_rng(0).random(n), np.full(n, 0.001), steps <= 1)
    plots.flush()
    qtbot.wait(100)
    item = plots.series("big").items["loss"]
    assert len(item.getOriginalDataset()[0]) == n
    shown_x, _ = item.getData()
    assert len(shown_x) < n / 50, "the view draws a peak-downsampled copy, not every point"


def test_smoothing_slider_smooths_and_zero_shows_raw_values(plots, qtbot):
    losses, times = a_run()
    series = plots.add_run("a", "run a", losses, times, warmup_steps=1)
    plots.set_smoothing(0.0)
    plots.flush()
    np.testing.assert_allclose(series.items["loss"].getOriginalDataset()[1], losses)
    assert not series.items["loss_raw"].isVisible()
    plots.set_smoothing(0.9)
    plots.flush()
    smoothed = series.items["loss"].getOriginalDataset()[1]
    assert np.std(np.diff(smoothed)) < np.std(np.diff(losses))
    assert series.items["loss_raw"].isVisible()


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plots_save_as_png_and_svg(plots, tmp_path, suffix):
    plots.add_run("a", "run a", *a_run(), warmup_steps=1)
    path = plots.save_image(tmp_path / f"plots{suffix}")
    assert path.exists() and path.stat().st_size > 1000
    if suffix == ".png":
        image = QImage(str(path))
        assert not image.isNull() and image.height() > image.width() / 2
    else:
        document = xml.dom.minidom.parse(str(path))
        assert document.documentElement.tagName == "svg"
        ids = [node.getAttribute("id") for node in document.getElementsByTagName("*") if node.hasAttribute("id")]
        assert len(ids) == len(set(ids)), "ids of the two stacked plots must not clash"


def test_closed_svg_paths_become_lines_back_to_their_start():
    assert close_paths_as_lines("M0,0 L5,0 L5,5 Z M1,1 L2,2 Z") == "M0,0 L5,0 L5,5 L0,0 M1,1 L2,2 L1,1"

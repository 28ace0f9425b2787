"""Live plots: overlaid runs, warm-up marked and out of the y range, hiding, clearing, export, big runs, cheap frames."""

from __future__ import annotations

import xml.dom.minidom

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QTabWidget, QWidget

from gui.plotting.export import close_paths_as_lines
from gui.plotting.plot_view import sticky_range
from gui.plotting.plots import PlotsWidget
from gui.plotting.theme import DARK, style_plot

WARMUP_TIME_S = 2.0


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


def test_live_steps_arrive_in_batches_and_a_short_run_is_drawn_step_by_step(plots, qtbot):
    plots.add_run("live", "live run", batch_size=16)
    steps = np.arange(1, 101, dtype=float)
    plots.append_steps("live", steps[:40], np.ones(40), np.full(40, 0.01), steps[:40] <= 1)
    plots.append_steps("live", steps[40:], np.ones(60), np.full(60, 0.01), np.zeros(60, bool))
    item = plots.series("live").items["loss"]
    qtbot.waitUntil(lambda: item.getOriginalDataset()[0] is not None and len(item.getOriginalDataset()[0]) == 100, timeout=3000)
    np.testing.assert_array_equal(item.getOriginalDataset()[0], steps)


def a_million_steps(plots, key: str = "big") -> tuple[np.ndarray, np.ndarray]:
    n = 1_000_000
    steps = np.arange(1, n + 1, dtype=float)
    losses = np.random.default_rng(0).random(n)
    losses[123_456], losses[654_321] = 7.0, -3.0
    times_s = np.full(n, 0.001)
    times_s[0] = WARMUP_TIME_S
    plots.add_run(key, "a million steps", batch_size=8)
    plots.append_steps(key, steps, losses, times_s, steps <= 1)
    plots.redraw_now()
    return steps, losses


@pytest.mark.slow
def test_a_million_steps_are_drawn_as_a_min_max_envelope_that_keeps_every_peak(plots):
    steps, losses = a_million_steps(plots)
    series = plots.series("big")
    assert series.size == len(steps) and series.losses.values[123_456] == 7.0, "every step is kept"
    pixels = plots.loss_plot.getPlotItem().getViewBox().width()
    for name in ("loss_raw", "time_raw"):
        x, y = series.items[name].getOriginalDataset()
        assert len(x) <= 3 * pixels, "two or three points per pixel, not a million"
        assert x[0] <= 2 and x[-1] == steps[-1]
    x, y = series.items["loss_raw"].getOriginalDataset()
    assert y.max() == 7.0 and y.min() == -3.0, "a one-step spike still shows"
    plots.step_time_plot.getPlotItem().vb.autoRange()
    _, (_, y_high) = plots.step_time_plot.getPlotItem().vb.viewRange()
    assert y_high < 100, "the warm-up step stays out of the y range"


@pytest.mark.slow
def test_zooming_in_redraws_the_shown_steps_in_full_and_zooming_out_decimates_again(plots):
    steps, losses = a_million_steps(plots)
    item = plots.series("big").items["loss_raw"]
    plots.loss_plot.getPlotItem().getViewBox().setXRange(123_000, 123_900, padding=0)
    plots.redraw_now()
    x, y = item.getOriginalDataset()
    shown = (x >= 123_000) & (x <= 123_900)
    np.testing.assert_array_equal(x[shown], steps[122_999:123_900])
    np.testing.assert_array_equal(y[shown], losses[122_999:123_900])
    assert len(x) < 5_000, "only the view and a margin for panning"
    plots.loss_plot.getPlotItem().getViewBox().setXRange(1, 1_000_000, padding=0)
    plots.redraw_now()
    x, y = item.getOriginalDataset()
    assert len(x) < 5_000 and x[0] <= 2 and y.max() == 7.0


@pytest.mark.slow
def test_a_log_x_axis_gets_its_own_decimation_with_every_early_step(plots):
    steps, losses = a_million_steps(plots)
    plots.loss_plot.getPlotItem().setLogMode(x=True, y=False)
    plots.redraw_now()
    x, y = plots.series("big").items["loss_raw"].getOriginalDataset()
    assert len(x) < 5_000 and y.max() == 7.0 and y.min() == -3.0
    np.testing.assert_array_equal(np.unique(x[x <= 10]), steps[:10])
    x_low, x_high = plots.loss_plot.getPlotItem().vb.viewRange()[0]
    assert x_low < 0.5 and 5.5 < x_high < 6.5, "the x range is in decades"


@pytest.mark.slow
def test_hidden_plots_are_not_redrawn_until_shown_again(qtbot):
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    plots = PlotsWidget()
    tabs.addTab(plots, "Training")
    tabs.addTab(QWidget(), "Other")
    tabs.resize(1000, 600)
    tabs.show()
    plots.add_run("live", "live run", *a_run(50), warmup_steps=1)
    item = plots.series("live").items["loss"]
    tabs.setCurrentIndex(1)
    steps = np.arange(51, 101, dtype=float)
    plots.append_steps("live", steps, np.ones(50), np.full(50, 0.01), np.zeros(50, bool))
    assert not plots._timer.isActive(), "no redraw scheduled while the plots are hidden"
    plots._on_timer()  # a tick that came anyway (one scheduled before the tab changed) draws nothing either
    assert len(item.getOriginalDataset()[0]) == 50, "no redraw while the plots are hidden"
    tabs.setCurrentIndex(0)
    assert len(item.getOriginalDataset()[0]) == 100, "shown again, the curves catch up before they are painted"


def test_faint_lines_and_grid_are_opaque_mixes_that_follow_the_background(plots):
    plots.add_run("a", "run a", *a_run(), warmup_steps=1)
    raw = plots.series("a").items["loss_raw"]
    light = raw.opts["pen"].color()
    assert light.alpha() == 255 and light.lightness() > QColor(plots.series("a").color).lightness()
    style_plot(plots.loss_plot, DARK)
    dark = raw.opts["pen"].color()
    assert dark.alpha() == 255 and dark.lightness() < QColor(plots.series("a").color).lightness()
    axis = plots.loss_plot.getPlotItem().getAxis("left")
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    _, ticks, _ = axis.generateDrawSpecs(painter)
    painter.end()
    grid = {pen.color().name() for pen, _, _ in ticks}
    assert ticks and all(pen.color().alpha() == 255 for pen, _, _ in ticks)
    assert axis.zValue() < plots.loss_plot.getPlotItem().getViewBox().zValue(), "the grid runs under the curves"
    assert all(QColor(c).lightness() < QColor(DARK.foreground).lightness() for c in grid), "faint on a dark background"


def test_a_live_frame_paints_step_by_step_and_leaves_both_plots_painting(plots, qtbot):
    plots.add_run("live", "live run", *a_run(50), warmup_steps=1)
    steps = np.arange(51, 3001, dtype=float)
    plots.append_steps("live", steps, np.ones(len(steps)), np.full(len(steps), 0.01), np.zeros(len(steps), bool))
    item = plots.series("live").items["loss_raw"]
    qtbot.waitUntil(lambda: item.getOriginalDataset()[0][-1] == 3000, timeout=5000)
    qtbot.waitUntil(lambda: plots.loss_plot.updatesEnabled() and plots.step_time_plot.updatesEnabled(), timeout=5000)


def test_the_auto_range_holds_still_while_a_run_grows_a_little_and_follows_it_further():
    assert sticky_range(1, 1001) == (0, 1200)
    assert sticky_range(1, 1100) == (0, 1200), "a few more steps: the same range"
    assert sticky_range(0.012, 2.31) == (0.0, 2.5)
    assert sticky_range(5.0, 5.0) == (5.0, 5.0)


def test_the_x_range_follows_a_growing_run_in_round_steps(plots):
    plots.add_run("live", "live run", *a_run(1010), warmup_steps=1)
    view = plots.loss_plot.getPlotItem().getViewBox()
    before = view.viewRange()[0]
    plots.append_steps("live", np.arange(1011, 1061, dtype=float), np.ones(50), np.full(50, 0.002), np.zeros(50, bool))
    plots.redraw_now()
    assert view.viewRange()[0] == before, "50 more steps: the axes hold still"
    plots.append_steps("live", np.arange(1061, 2001, dtype=float), np.ones(940), np.full(940, 0.002), np.zeros(940, bool))
    plots.redraw_now()
    low, high = view.viewRange()[0]
    assert low <= 1 and 2000 <= high <= 2600


def test_run_hidden_then_shown_catches_up_with_steps_it_missed(plots):
    plots.add_run("a", "run a", *a_run(50), warmup_steps=1)
    plots.set_run_visible("a", False)
    steps = np.arange(51, 101, dtype=float)
    plots.append_steps("a", steps, np.ones(50), np.full(50, 0.01), np.zeros(50, bool))
    plots.redraw_now()
    plots.set_run_visible("a", True)
    plots.redraw_now()
    assert len(plots.series("a").items["loss_raw"].getOriginalDataset()[0]) == 100


def test_smoothing_slider_smooths_and_zero_shows_raw_values(plots, qtbot):
    losses, times = a_run()
    series = plots.add_run("a", "run a", losses, times, warmup_steps=1)
    plots.smoothing_slider.setValue(0)
    plots.flush()
    np.testing.assert_allclose(series.items["loss"].getOriginalDataset()[1], losses)
    assert not series.items["loss_raw"].isVisible()
    plots.smoothing_slider.setValue(90)
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


def test_ten_runs_at_1024x700_leave_the_data_area_to_the_curves(plots, qtbot):
    """The run list names every run in its colour; the plot's own legend covers curves, so it shows only when asked for."""
    plots.resize(640, 560)  # the Training tab of a 1024x700 window, beside the run form
    for index in range(10):
        plots.add_run(f"r{index}", f"a long run label number {index} · digits · one-device CPU:0 · batch 64", *a_run(seed=index), 1, 64)
    legend = plots.loss_plot.getPlotItem().legend
    assert len(legend.items) == 10 and not legend.isVisible()
    assert plots.run_list.count() == 10
    colours = [plots.run_list.item(i).icon().pixmap(8, 8).toImage().pixelColor(4, 4).name() for i in range(10)]
    assert colours == [plots.series(f"r{i}").color for i in range(10)], "each run's colour is beside its name in the list"
    plots.legend_check.setChecked(True)
    assert legend.isVisible()
    plots.legend_check.setChecked(False)
    assert not legend.isVisible()


def test_step_time_has_a_log_scale_that_keeps_fast_and_slow_models_readable(plots, qtbot):
    n = 50
    fast, slow = np.full(n, 0.001), np.full(n, 1.0)  # 1 ms (an MLP) and 1 s (a ResNet) a step
    plots.add_run("fast", "mlp", np.linspace(2, 1, n), fast, 0, 64)
    plots.add_run("slow", "resnet", np.linspace(2, 1, n), slow, 0, 64)
    view = plots.step_time_plot.getPlotItem().vb
    plots.time_log_check.setChecked(True)
    plots.redraw_now()
    view.autoRange()
    _, (low, high) = view.viewRange()
    assert plots.step_time_plot.getPlotItem().ctrl.logYCheck.isChecked()
    assert low <= 0.0 and high >= 3.0, "log10 of 1 ms and 1000 ms both in view, three decades apart"
    assert (high - low) < 10, "a readable span, not the whole float range"
    plots.time_log_check.setChecked(False)
    plots.redraw_now()
    view.autoRange()
    assert view.viewRange()[1][1] >= 1000


def test_the_x_axis_switches_between_steps_samples_seen_and_seconds_of_training(plots):
    """A batch-64 run and a batch-8 run: in samples the first spans 8 times as far; in seconds, its step times summed."""
    big_losses, big_times = a_run(seed=1)
    small_losses, small_times = a_run(seed=2)
    big = plots.add_run("big", "batch 64", big_losses, big_times, warmup_steps=1, batch_size=64)
    small = plots.add_run("small", "batch 8", small_losses, small_times, warmup_steps=1, batch_size=8)
    combo = plots.controls.x_axis_combo
    assert combo.objectName() == "xAxisCombo" and combo.currentText() == "Steps"
    assert big.items["loss"].getOriginalDataset()[0].tolist() == list(range(1, 201))

    combo.setCurrentIndex(combo.findText("Samples seen"))
    assert plots.x_axis == "samples" and plots.loss_plot.getPlotItem().getAxis("bottom").labelText == "samples seen"
    assert big.items["loss"].getOriginalDataset()[0].tolist() == [64.0 * step for step in range(1, 201)]
    assert small.items["loss_raw"].getOriginalDataset()[0][-1] == 8.0 * 200
    assert big.items["loss_warmup"].getOriginalDataset()[0].tolist() == [64.0]
    assert plots.loss_plot.getPlotItem().vb.viewRange()[0][1] >= 64 * 200, "auto-range follows to the last sample"

    combo.setCurrentIndex(combo.findText("Seconds of training"))
    x, y = big.items["loss"].getOriginalDataset()
    assert x == pytest.approx(np.cumsum(big_times)) and y.size == 200
    assert small.items["time"].getOriginalDataset()[0][-1] == pytest.approx(small_times.sum())
    assert plots.step_time_plot.getPlotItem().getAxis("bottom").labelText == "training time"

    plots.append_steps("small", np.array([201.0]), np.array([0.1]), np.array([0.5]), np.array([False]))
    plots.redraw_now()
    assert small.items["loss_raw"].getOriginalDataset()[0][-1] == pytest.approx(small_times.sum() + 0.5), "live steps go on from the sum"
    combo.setCurrentIndex(combo.findText("Steps"))
    assert small.items["loss_raw"].getOriginalDataset()[0][-1] == 201.0

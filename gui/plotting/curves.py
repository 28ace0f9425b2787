"""A run's curves on the live plots: creating and styling them, and choosing the points each one gets.

Each curve gets one or two points per pixel from a min/max pyramid
(core.live.decimation), so a million-step run keeps every peak without being
scanned each frame; zoomed in, only the view and a margin for panning are
prepared, and `outgrown` tells when the view has moved past what a curve holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from core.live.decimation import envelope, pixel_envelope
from gui.plotting.plot_view import PlotView, SteadyCurve, mix
from gui.plotting.run_series import CURVES, Drawn, RunSeries, distinct_labels

FULL_DETAIL_PER_PIXEL = 2  # a series with at most this many steps per pixel is drawn as it is
ZOOM_MARGIN = 0.5  # zoomed in, a curve is prepared this many view widths beyond each side, for panning
WARMUP_COLOR = "#ff8c00"
RAW_WEIGHT = 0.2  # the faint raw line: this much of the run's colour over the background

PlotOf = Callable[[str], PlotView]  # the plot a curve (or marker) name is drawn on


class WarmupMarkers(pg.PlotDataItem):
    """Warm-up points: shown, but never part of the y auto-range."""

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        if ax == 1:
            return (None, None)
        return super().dataBounds(ax, frac, orthoRange)


def create_curves(series: RunSeries, plot_of: PlotOf) -> None:
    """Give `series` its curves and warm-up markers on both plots, smoothed lines above every raw one."""
    marker = dict(pen=None, symbol="d", symbolSize=9, symbolBrush=WARMUP_COLOR, symbolPen=pg.mkPen(series.color, width=1.5))
    series.items = {
        "loss_raw": SteadyCurve(),
        "loss": SteadyCurve(name=series.label),
        "loss_warmup": WarmupMarkers(**marker),
        "time_raw": SteadyCurve(),
        "time": SteadyCurve(),
        "time_warmup": WarmupMarkers(**marker),
    }
    for name, item in series.items.items():
        item.setZValue(-1 if name.endswith("_raw") else 1)  # every run's smoothed line above all raw ones
        plot_of(name).addItem(item)
    set_pens(series, plot_of)


def show_labels(runs: Sequence[RunSeries], legend: pg.LegendItem | None) -> list[RunSeries]:
    """Label every run apart from the others (`distinct_labels`), in the legend too; returns the runs whose label changed."""
    changed = []
    for run, (label, short) in zip(runs, distinct_labels(runs).values(), strict=True):
        if (run.shown_label, run.legend_label) == (label, short):
            continue
        run.shown_label, run.legend_label = label, short
        curve = run.items.get("loss")
        if curve is not None:
            curve.opts["name"] = short
            if legend is not None and legend.getLabel(curve) is not None:
                legend.getLabel(curve).setText(short)
        changed.append(run)
    return changed


def set_pens(series: RunSeries, plot_of: PlotOf) -> None:
    """1-px cosmetic, opaque pens: Qt's raster engine strokes wider lines and blends translucent ones pixel by pixel."""
    color = QColor(series.color)
    for name in CURVES:
        faint = mix(color, plot_of(name).background(), RAW_WEIGHT) if name.endswith("_raw") else color
        series.items[name].setPen(pg.mkPen(faint, width=1))


def curve_points(
    series: RunSeries, name: str, plot: PlotView, follow: tuple[float, float] | None, axis: str = "steps"
) -> tuple[np.ndarray, np.ndarray, Drawn | None]:
    """Two or three points per pixel of curve `name`, over the part of the series the view shows or will show.

    Following the data (`follow`: the x range auto-range goes to), that is the whole
    series; zoomed in (`follow` None), the view and ZOOM_MARGIN of it on each side.
    The `Drawn` is None when every step is drawn.
    """
    x, y = series.x_values(axis), series.curve_values(name)
    pixels = plot.pixels()
    if len(x) <= FULL_DETAIL_PER_PIXEL * pixels:
        return x, y, None
    log_x = bool(series.items[name].opts["logMode"][0])
    if follow is not None:
        low, high = follow
        first, last = float(x[0]), float(x[-1])
    else:
        low, high = plot.getPlotItem().getViewBox().viewRange()[0]
        if log_x:
            low, high = 10.0 ** max(-300.0, min(300.0, low)), 10.0 ** max(-300.0, min(300.0, high))
        margin = ZOOM_MARGIN * (high - low)
        first, last = low - margin, high + margin
    if log_x:
        edges = np.geomspace(max(low, float(x[0])), max(high, float(x[0])), int(pixels) + 1)
        xs, ys = pixel_envelope(x, y, edges)
        return xs, ys, Drawn(float(edges[0]), float(edges[-1]), 0.0, False, True)
    start = max(0, int(np.searchsorted(x, first)) - 1)
    stop = min(len(x), int(np.searchsorted(x, last, side="right")) + 1)
    step_per_pixel = (high - low) / pixels
    pyramid = series.pyramids[name]
    pyramid.update(y)  # takes in the steps that arrived since the last frame
    xs, ys = envelope(x, y, pyramid, start, stop, density(x, low, high) * step_per_pixel)
    exact = len(xs) == stop - start
    step_per_bin = (x[stop - 1] - x[start]) / max(1, len(xs) - 1 if exact else len(xs) // 2)
    return xs, ys, Drawn(float(x[start]), float(x[stop - 1]), float(step_per_bin), exact, False)


def density(x: np.ndarray, low: float, high: float) -> float:
    """Values per step of `x` between `low` and `high` (over the whole series when fewer than two lie there)."""
    first, last = int(np.searchsorted(x, low)), int(np.searchsorted(x, high, side="right")) - 1
    if last - first < 1:
        first, last = 0, len(x) - 1
    span = float(x[last] - x[first])
    return (last - first) / span if span > 0 else float(last - first + 1)


def outgrown(series: RunSeries, plot_of: PlotOf, axis: str = "steps") -> bool:
    """Whether the view now shows a part of `series`, or a detail, its drawn curves lack (or far more points than pixels)."""
    for name in CURVES:
        item, drawn = series.items[name], series.drawn.get(name)
        if drawn is None or not item.isVisible():
            continue
        if drawn.log_x or item.opts["logMode"][0]:
            return True
        plot = plot_of(name)
        low, high = plot.getPlotItem().getViewBox().viewRange()[0]
        x = series.x_values(axis)
        first, last = float(x[0]), float(x[-1])
        if max(low, first) < drawn.low or min(high, last) > drawn.high:
            return True
        step_per_pixel = (high - low) / plot.pixels()
        if drawn.step_per_bin < step_per_pixel / 2 or (not drawn.exact and drawn.step_per_bin > 3 * step_per_pixel):
            return True
    return False

"""A pyqtgraph plot tuned for cheap live frames: opaque grid under the data, O(1) sticky auto-range, timed paints.

Qt's raster engine draws 1-px opaque lines on a fast path; translucent lines
are blended pixel by pixel (a 25%-alpha grid cost more than the curves), so the
grid is drawn in the colour it would have blended to. A moved auto-range
redraws the axes' ticks and every curve, so curves report bounds rounded out to
round steps: the range moves only when the data crosses one.
"""

from __future__ import annotations

import math
import time

import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QPainter, QPen, QPicture

GRID_Z = -200  # below the view box (-100 in pyqtgraph), so the grid runs under the curves
MIN_PIXELS = 100
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
RANGE_DIVISIONS = 8  # auto-range rounds out to steps of about this fraction of the data's span


def mix(color: QColor, background: QColor, weight: float) -> QColor:
    """`color` laid over `background` at opacity `weight`, as one opaque colour."""
    top, bottom = (color.redF(), color.greenF(), color.blueF()), (background.redF(), background.greenF(), background.blueF())
    return QColor.fromRgbF(*(weight * c + (1.0 - weight) * b for c, b in zip(top, bottom, strict=True)))


def sticky_range(low: float, high: float) -> tuple[float, float]:
    """`low`..`high` rounded out to multiples of a round step near 1/RANGE_DIVISIONS of the span.

    Auto-range then moves only when the data crosses such a step, not with every
    new step: a moved range redraws the axes and every curve, most of a frame's cost.
    """
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return low, high
    rough = span / RANGE_DIVISIONS
    magnitude = 10.0 ** math.floor(math.log10(rough))
    step = next(m * magnitude for m in NICE_STEPS if m * magnitude >= rough)
    return math.floor(low / step) * step, math.ceil(high / step) * step


class SteadyCurve(pg.PlotDataItem):
    """A curve whose auto-range comes from `x_bounds` and `y_bounds`, set by its owner, not from its points.

    Its points may be a decimated part of a series and the bounds the whole
    series' (or only its steady state), kept up to date as points arrive, so
    auto-range costs O(1). They are reported rounded out (`sticky_range`), so
    the range holds still while a run grows.
    """

    def __init__(self, *args, **kwargs):
        # No dynamic range limit: it rebuilds every curve on every y-range change, and 1-px cosmetic lines
        # (the only kind drawn here) stay fast and exact however far off-screen their points lie.
        super().__init__(*args, dynamicRangeLimit=None, **kwargs)
        self.x_bounds: tuple[float, float] | tuple[None, None] = (None, None)
        self.y_bounds: tuple[float, float] | tuple[None, None] = (None, None)

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        low, high = self.x_bounds if ax == 0 else self.y_bounds
        if low is None:
            return (None, None)
        if self.opts["logMode"][ax]:
            if high <= 0:  # log axis (from the plot's context menu): only positive values show
                return (None, None)
            low, high = (math.log10(low) if low > 0 else math.log10(high) - 1), math.log10(high)
        return sticky_range(low, high)


class GridAxis(pg.AxisItem):
    """An axis whose grid lines are opaque: the faintness pyqtgraph gives them, mixed into the background."""

    def generateDrawSpecs(self, p):
        specs = super().generateDrawSpecs(p)
        if specs is None or self.grid is False:
            return specs
        axis_spec, tick_specs, text_specs = specs
        views = self.scene().views() if self.scene() is not None else []
        background = views[0].backgroundBrush().color() if views else QColor("white")
        pens: dict[int, QPen] = {}
        for pen, _, _ in tick_specs:
            if id(pen) not in pens:
                solid = QPen(pen)
                solid.setColor(mix(pen.color(), background, pen.color().alphaF()))
                pens[id(pen)] = solid
        return axis_spec, [(pens[id(pen)], p1, p2) for pen, p1, p2 in tick_specs], text_specs

    def restyle(self) -> None:
        """Draw again with the view's current background."""
        self.picture: QPicture | None = None
        self.update()

    def prepare(self) -> bool:
        """Lay out ticks, labels and grid now if the range or size changed (as `paint` would); True if it did.

        Lets a caller spend this, the costly part of painting an axis, in a turn of
        the event loop of its own.
        """
        if self.picture is not None:
            return False
        picture = QPicture()
        painter = QPainter(picture)
        try:
            if self.style["tickFont"]:
                painter.setFont(self.style["tickFont"])
            specs = self.generateDrawSpecs(painter)
            if specs is not None:
                self.drawPicture(painter, *specs)
        finally:
            painter.end()
        self.picture = picture
        return True


class PlotView(pg.PlotWidget):
    """A plot with its grid opaque and under the data, that adds up the time its paints take (`paint_s`)."""

    background_changed = Signal()  # after `setBackground` (the theme changed): colours mixed into it are stale

    def __init__(self):
        self.axes = (GridAxis("left"), GridAxis("bottom"))
        super().__init__(background="w", axisItems={axis.orientation: axis for axis in self.axes})
        for axis in self.axes:
            axis.setZValue(GRID_Z)
            # Two tick levels, not three (the finest grid lines were barely visible; laying them out cost half
            # the axis), and a width that does not shrink back each time a label gets shorter (a re-layout).
            axis.setStyle(maxTickLevel=1, maxTextLevel=1, autoReduceTextSpace=False)
        self.paint_s = 0.0

    def prepare_axes(self) -> bool:
        """Lay out whichever axis needs it now (see `GridAxis.prepare`; counted in `paint_s`); True if one did."""
        started = time.perf_counter()
        prepared = any([axis.prepare() for axis in self.axes])
        self.paint_s += time.perf_counter() - started
        return prepared

    def paintEvent(self, event):
        started = time.perf_counter()
        super().paintEvent(event)
        self.paint_s += time.perf_counter() - started

    def setBackground(self, background):
        super().setBackground(background)
        self.background_changed.emit()

    def background(self) -> QColor:
        return self.backgroundBrush().color()

    def pixels(self) -> float:
        """Width of the plotting area in pixels."""
        return max(MIN_PIXELS, self.getPlotItem().getViewBox().width())

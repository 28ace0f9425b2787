"""Min/max decimation of long curves, so a frame draws about two points per pixel whatever a run's length.

Handing pyqtgraph a million-point curve costs every frame: it scans the whole
array to clip and downsample it, and draws several points per pixel.
`MinMaxPyramid` keeps the minimum and maximum of every 16, 64, 256, ...
consecutive values, updated as values are appended; `envelope` then picks the
level closest to one bin per pixel and returns each bin as two points, its
minimum and its maximum, so every peak stays visible. Non-finite values are
skipped (a bin of only NaN stays NaN and breaks the line, as the raw data would).
"""

from __future__ import annotations

import numpy as np

BASE = 16  # values per bin on the first level
RATIO = 4  # each level's bins hold this many bins of the level below


class GrowingArray:
    """A float64 array that appends in amortised O(1) by doubling its capacity."""

    def __init__(self, capacity: int = 1024):
        self._data = np.empty(capacity, dtype=np.float64)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        needed = self.size + len(values)
        if needed > len(self._data):
            grown = np.empty(max(needed, 2 * len(self._data)), dtype=np.float64)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : needed] = values
        self.size = needed

    def overwrite(self, start: int, values: np.ndarray) -> None:
        self._data[start : start + len(values)] = values

    def clear(self) -> None:
        self.size = 0

    @property
    def values(self) -> np.ndarray:
        return self._data[: self.size]


class MinMaxPyramid:
    """Per-bin minima and maxima of a growing series: level k has bins of BASE * RATIO**(k-1) values."""

    def __init__(self) -> None:
        self._levels: list[tuple[GrowingArray, GrowingArray]] = []

    @property
    def levels(self) -> int:
        """Levels above the series itself (a level exists once it has two bins)."""
        return len(self._levels)

    def bin_size(self, level: int) -> int:
        """Values per bin on `level` (level 0 is the series itself)."""
        return 1 if level == 0 else BASE * RATIO ** (level - 1)

    def level_for(self, values_per_bin: float) -> int:
        """The coarsest level whose bins hold at most `values_per_bin` values."""
        level = 0
        while level < self.levels and self.bin_size(level + 1) <= values_per_bin:
            level += 1
        return level

    def bins(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Minima and maxima of the complete bins on `level` (1 or more)."""
        low, high = self._levels[level - 1]
        return low.values, high.values

    def update(self, series: np.ndarray) -> None:
        """Take in the complete bins of `series` (the whole series so far; only its new values are read)."""
        low, high, group = series, series, BASE
        level = 0
        while level < len(self._levels) or len(low) >= 2 * group:
            if level == len(self._levels):
                self._levels.append((GrowingArray(), GrowingArray()))
            level_low, level_high = self._levels[level]
            done, complete = level_low.size, len(low) // group
            if complete > done:
                new = slice(done * group, complete * group)
                level_low.extend(np.fmin.reduce(low[new].reshape(-1, group), axis=1))
                level_high.extend(np.fmax.reduce(high[new].reshape(-1, group), axis=1))
            low, high, group = level_low.values, level_high.values, RATIO
            level += 1

    def clear(self) -> None:
        """Forget every bin (the series was rewritten: take it in again with `update`)."""
        self._levels.clear()


def envelope(
    x: np.ndarray, y: np.ndarray, pyramid: MinMaxPyramid, start: int, stop: int, values_per_bin: float
) -> tuple[np.ndarray, np.ndarray]:
    """Points to draw for `y[start:stop]`, two per bin (its min and max), bins of `values_per_bin` values or a little fewer.

    At one pixel's worth of values per bin every pixel column gets its own
    min-to-max stroke, so a dense band is drawn solid. Bins are aligned to
    multiples of their size from the series' start, so a pan or a growing series
    does not make them jump. Asked for two values per bin or fewer, the values
    themselves come back: they are no more points. A series that ends inside the
    range ends on its last value.
    """
    if values_per_bin <= 2:
        return x[start:stop], y[start:stop]
    level = pyramid.level_for(values_per_bin / RATIO)  # a finer level, grouped: bins within 1/RATIO of the size asked
    size = pyramid.bin_size(level)
    group = max(1, int(values_per_bin // size))
    span = size * group
    first = start // span * span
    last = min(len(y), -(-stop // span) * span)
    lows, highs = [], []
    binned = first
    if level:
        level_low, level_high = pyramid.bins(level)
        complete = (len(level_low) * size - first) // span * span + first
        binned = max(first, min(last, complete))
        if binned > first:
            bins = slice(first // size, binned // size)
            lows.append(np.fmin.reduce(level_low[bins].reshape(-1, group), axis=1))
            highs.append(np.fmax.reduce(level_high[bins].reshape(-1, group), axis=1))
    if last > binned:
        tail = y[binned:last]
        starts = np.arange(0, len(tail), span)
        lows.append(np.fmin.reduceat(tail, starts))
        highs.append(np.fmax.reduceat(tail, starts))
    low, high = np.concatenate(lows), np.concatenate(highs)
    xs = np.repeat(x[first:last:span], 2)
    ys = _zigzag(low, high)
    if last == len(y) and (last - 1) % span:
        xs, ys = np.append(xs, x[last - 1]), np.append(ys, y[last - 1])
    return xs, ys


def pixel_envelope(x: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points to draw with one bin per interval between `edges` (x values, increasing): (min, max) per bin.

    For a log x axis, whose pixels are not evenly spaced in steps; O(values in range).
    """
    cuts = np.searchsorted(x, edges)
    first, last = max(int(cuts[0]) - 1, 0), min(int(cuts[-1]) + 1, len(x))
    if last - first < 2:
        return x[first:last], y[first:last]
    starts = np.unique(np.concatenate(([first], cuts[(cuts > first) & (cuts < last)])))
    part = y[first:last]
    xs = np.repeat(x[starts], 2)
    ys = _zigzag(np.fmin.reduceat(part, starts - first), np.fmax.reduceat(part, starts - first))
    return np.append(xs, x[last - 1]), np.append(ys, y[last - 1])


def _zigzag(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Each bin's two values, min-max then max-min by turns: the line between bins runs along the band's edge.

    Always min then max would cross the whole band between every two bins,
    drawing each pixel column twice.
    """
    pairs = np.stack([low, high], axis=1)
    pairs[1::2] = pairs[1::2, ::-1]
    return pairs.ravel()

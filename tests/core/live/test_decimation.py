"""Min/max decimation: the pyramid grows with the series, every peak survives, bins stay put, NaN breaks the line."""

from __future__ import annotations

import numpy as np
import pytest

from core.live.decimation import BASE, GrowingArray, MinMaxPyramid, envelope, pixel_envelope


def a_series(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    y = np.random.default_rng(seed).normal(size=n)
    y[n // 3], y[n // 2] = 40.0, -40.0
    return np.arange(1, n + 1, dtype=np.float64), y


def built_in_pieces(y: np.ndarray, pieces: int) -> MinMaxPyramid:
    pyramid, grown = MinMaxPyramid(), GrowingArray()
    for part in np.array_split(y, pieces):
        grown.extend(part)
        pyramid.update(grown.values)
    return pyramid


def test_a_pyramid_grown_piece_by_piece_equals_one_built_at_once():
    _, y = a_series(100_003)
    at_once = MinMaxPyramid()
    at_once.update(y)
    grown = built_in_pieces(y, 37)
    assert grown.levels == at_once.levels > 4
    for level in range(1, at_once.levels + 1):
        expected = at_once.bins(level)
        np.testing.assert_array_equal(grown.bins(level)[0], expected[0])
        np.testing.assert_array_equal(grown.bins(level)[1], expected[1])
        size = at_once.bin_size(level)
        assert len(expected[0]) == len(y) // size
        np.testing.assert_array_equal(expected[1][:5], y[: 5 * size].reshape(5, size).max(axis=1))


@pytest.mark.parametrize("values_per_bin", [3, 17, 100, 1000, 20_000])
@pytest.mark.parametrize("start, stop", [(0, 100_003), (12_345, 67_890), (33_000, 33_500)])
def test_envelope_keeps_the_min_and_max_of_every_range_in_bins_of_about_the_size_asked(values_per_bin, start, stop):
    x, y = a_series(100_003)
    pyramid = built_in_pieces(y, 5)
    xs, ys = envelope(x, y, pyramid, start, stop, values_per_bin)
    part = y[start:stop]
    assert ys.max() >= part.max() and ys.min() <= part.min()
    assert set(ys) <= set(y), "points are values of the series, not averages"
    assert np.all(np.diff(xs) >= 0) and xs[0] <= x[start] and xs[-1] >= x[stop - 1] - 2 * values_per_bin
    bins = (len(xs) - 1) // 2
    assert (stop - start) / values_per_bin - 1 <= bins <= (stop - start) / (0.75 * values_per_bin) + 2


def test_envelope_with_two_values_per_bin_or_fewer_returns_the_values():
    x, y = a_series(1000)
    xs, ys = envelope(x, y, built_in_pieces(y, 1), 100, 300, 1.5)
    np.testing.assert_array_equal(xs, x[100:300])
    np.testing.assert_array_equal(ys, y[100:300])


def test_bins_stay_aligned_when_the_range_pans_or_the_series_grows():
    x, y = a_series(50_000)
    pyramid = built_in_pieces(y, 3)
    xs1, ys1 = envelope(x, y, pyramid, 0, 30_000, 100)
    xs2, ys2 = envelope(x, y, pyramid, 5_000, 40_000, 100)
    common = np.intersect1d(xs1[:-4], xs2[:-4])
    assert len(common) > 100
    for value in common[:50]:
        np.testing.assert_array_equal(ys1[xs1 == value], ys2[xs2 == value])


def test_a_series_ending_inside_the_range_ends_on_its_last_value():
    x, y = a_series(10_000 + 7)
    xs, ys = envelope(x, y, built_in_pieces(y, 2), 0, len(y), 64)
    assert (xs[-1], ys[-1]) == (x[-1], y[-1])


def test_bins_alternate_min_max_and_max_min_so_the_line_runs_along_the_band_edges():
    x = np.arange(1, 4097, dtype=np.float64)
    y = np.tile([0.0, 1.0], 2048)
    xs, ys = envelope(x, y, built_in_pieces(y, 1), 0, len(y), 64)
    assert ys[:8].tolist() == [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert np.all(np.diff(xs[:-1:2]) == 64)


def test_nan_values_are_skipped_and_an_all_nan_bin_breaks_the_line():
    x, y = a_series(4 * BASE * 64)
    y[5] = np.nan
    y[BASE * 64 : 2 * BASE * 64] = np.nan
    xs, ys = envelope(x, y, built_in_pieces(y, 1), 0, len(y), BASE * 4)
    assert np.isfinite(ys[xs < BASE * 64]).all(), "one NaN does not hide its bin's other values"
    gap = ys[(xs > BASE * 64) & (xs <= 2 * BASE * 64)]
    assert len(gap) and np.isnan(gap).all()


def test_pixel_envelope_for_a_log_axis_keeps_the_peaks_and_resolves_early_steps():
    x, y = a_series(1_000_000)
    edges = np.geomspace(1, 1_000_000, 601)
    xs, ys = pixel_envelope(x, y, edges)
    assert ys.max() == y.max() and ys.min() == y.min()
    assert len(xs) <= 2 * 600 + 2
    np.testing.assert_array_equal(np.unique(xs[xs <= 10]), x[:10])  # each early step keeps its own pixel

"""Level-of-detail structures against brute force over random signals and intervals."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pcitrace.analyse.occupancy import BusyTime
from pcitrace.gui.lod import ChangeBuilder, ChangeLOD, IntervalLOD, busy_fraction


def _line(seed, n=5000, p=0.05):
    rng = np.random.default_rng(seed)
    flips = rng.random(n) < p
    return (np.cumsum(flips) % 2).astype(np.uint8)


def _lod_of(values, chunk, period=1000):
    b = ChangeBuilder(np.uint8)
    for s in range(0, len(values), chunk):
        b.feed_indices(s, values[s:s + chunk], lambda i: i.astype(np.int64) * period)
    return b.build(len(values) * period)


@given(seed=st.integers(0, 2**31), chunk=st.integers(1, 3000), p=st.sampled_from([0.001, 0.05, 0.5]))
@settings(max_examples=40, deadline=None)
def test_change_list_is_the_signal(seed, chunk, p):
    v = _line(seed, 3000, p)
    lod = _lod_of(v, chunk)
    # every sample's value is recovered from the change list, whatever the chunking
    k = np.searchsorted(lod.times, np.arange(len(v)) * 1000, side="right") - 1
    assert np.array_equal(lod.values[k], v)
    assert lod.changes == int(np.count_nonzero(np.diff(v)))


@given(seed=st.integers(0, 2**31), a=st.integers(0, 2999), span=st.integers(1, 3000),
       width=st.integers(10, 800))
@settings(max_examples=60, deadline=None)
def test_view_columns_match_brute_force(seed, a, span, width):
    v = _line(seed, 3000, 0.2)
    lod = _lod_of(v, 777)
    t0, t1 = a * 1000.0, (a + span) * 1000.0
    view = lod.view(t0, t1, width)
    if view.exact:
        assert len(view.times) <= width * 0.34 + 2
        # each listed value holds from its time to the next one
        for i, t in enumerate(view.times):
            assert lod.value_at(t) == view.values[i]
    else:
        edges = view.times
        change_t = (np.flatnonzero(np.diff(v.astype(int)) != 0) + 1) * 1000.0
        for px in range(width):
            lo, hi = edges[px], edges[px + 1]
            if lo >= 3000 * 1000:
                assert not view.busy[px]
                continue
            # a column is busy when a change falls in (lo, hi]
            assert bool(view.busy[px]) == bool(np.any((change_t > lo) & (change_t <= hi)))
            assert view.values[px] == lod.value_at(lo)


def test_view_cost_follows_pixels_not_changes():
    v = _line(1, 2_000_000, 0.3)
    lod = _lod_of(v, 1 << 18)
    view = lod.view(0, 2e9, 1000)
    assert not view.exact and len(view.values) == 1000 and view.busy.all()


@given(n=st.integers(0, 3000), seed=st.integers(0, 2**31), width=st.integers(1, 500),
       a=st.floats(0, 1), b=st.floats(0, 1))
@settings(max_examples=60, deadline=None)
def test_interval_pyramid_covers_view_within_budget(n, seed, width, a, b):
    rng = np.random.default_rng(seed)
    gaps = rng.integers(1, 50, n)
    starts = np.cumsum(gaps) * 10
    ends = starts + rng.integers(0, 5, n) * 10
    cls = rng.integers(0, 8, n)
    lod = IntervalLOD(starts, ends, cls)
    total = (starts[-1] + 100) if n else 100
    t0, t1 = sorted((a * total, b * total))
    t1 = max(t1, t0 + 1)
    level, s, e, c, idx = lod.view(t0, t1, width)
    touching = np.flatnonzero((starts < t1) & (ends >= t0))
    assert len(s) <= max(2 * width, 1) + 2 or level == len(lod.levels) - 1
    if level == 0:
        # everything in view, plus at most intervals hidden under an earlier longer one
        assert set(touching.tolist()) <= set(idx.tolist())
        assert np.all(starts[idx] < t1)
    else:
        # merged blocks cover every interval in view and keep the most severe class
        for i in touching:
            j = np.flatnonzero((s <= starts[i]) & (e >= ends[i]))
            assert len(j) and c[j].max() >= cls[i]


def test_interval_at_picks_the_interval_under_the_mouse():
    lod = IntervalLOD(np.array([300, 100, 500]), np.array([400, 200, 600]))
    assert lod.at(150) == 1 and lod.at(350) == 0 and lod.at(550) == 2
    assert lod.at(260) is None and lod.at(260, tolerance=70) == 0 and lod.at(235, tolerance=70) == 1


def test_busy_fraction_against_direct_overlap():
    rec = np.zeros(3, [("start_ps", np.int64), ("clocks", np.int64)])
    rec["start_ps"] = [0, 3000, 9000]
    rec["clocks"] = [2, 1, 1]
    bt = BusyTime.of(rec, 1000.0)
    f = busy_fraction(bt, 0, 10000, 10)
    assert f == pytest.approx([1, 1, 0, 1, 0, 0, 0, 0, 0, 1])


def test_grid_columns_equal_exact_columns_at_the_snapped_edges():
    v = _line(3, 400_000, 0.2)
    lod = _lod_of(v, 1 << 16)
    lod.build_grid(points=1 << 14)
    assert lod.grid is not None
    plain = ChangeLOD(lod.times, lod.values, lod.end_ps)      # no grid: exact search
    for t0, t1, w in ((0, 4e8, 1000), (1e7, 3.9e8, 777), (-5e6, 4.1e8, 1600)):
        g = lod.view(t0, t1, w)
        assert not g.exact
        # the grid path reports the edges it used; searching at those edges agrees
        k = np.searchsorted(plain.times, np.floor(g.times).astype(np.int64), side="right") - 1
        assert np.array_equal(g.values[k[:-1] >= 0], plain.values[k[:-1][k[:-1] >= 0]])
        busy = (k[1:] - k[:-1]) > 0
        inside = (g.times[:-1] < lod.end_ps) & (g.times[1:] > lod.times[0])
        assert np.array_equal(g.busy, busy & inside & (k[:-1] >= 0))
        # and the snapped edges inside the capture are within 1/8 pixel of the requested ones
        want = np.linspace(t0, t1, w + 1)
        ok = (want >= lod.times[0]) & (want <= lod.end_ps)
        assert np.abs(g.times - want)[ok].max() <= (t1 - t0) / w / 8

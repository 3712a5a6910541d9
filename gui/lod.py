"""Level-of-detail data for the timeline, built once per capture.

A repaint asks each row for what falls in [t0, t1) at ``width`` pixels and gets at most a few
entries per pixel back, whatever the number of samples or transactions underneath:

- ``ChangeLOD``: a signal as its change list (time of every value change + the new value).
  A view is cut into pixel columns with one ``searchsorted``; columns holding changes are
  drawn as activity, quiet ones as the level, so the cost is O(pixels x log changes).
- ``IntervalLOD``: time intervals (transactions, bursts, groups, frames) with a class index,
  plus a pyramid of merged neighbours (level k merges 2^k intervals, keeping the most severe
  class). A view picks the level that leaves <= 2 intervals per pixel.
- ``busy_fraction``: per-pixel bus occupancy from the analyser's cumulative busy time.

Nothing here imports Qt, so it is tested and benchmarked without a display.
"""

from __future__ import annotations

import dataclasses

import numpy as np


def count_below(a: np.ndarray, x, *, inclusive: bool = False):
    """How many of the sorted int64 ``a`` are < x (or <= x when ``inclusive``), for float x.

    A float query would make numpy convert the whole int64 array to float64 (O(n) per call);
    rounding the query instead keeps every lookup O(log n)."""
    x = np.asarray(x, np.float64)
    if a.dtype.kind in "iu":
        lim = np.iinfo(np.int64)
        x = np.clip(np.floor(x) if inclusive else np.ceil(x), lim.min // 2, lim.max // 2).astype(np.int64)
    r = np.searchsorted(a, x, side="right" if inclusive else "left")
    return int(r) if np.ndim(r) == 0 else r


def pixel_edges(t0: float, t1: float, width: int) -> np.ndarray:
    return np.linspace(float(t0), float(t1), int(width) + 1)


class ChangeBuilder:
    """Accumulates a change list from consecutive chunks of samples."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self._times: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._last = None
        self.end_ps = 0           # end of the samples fed so far (for snapshots)

    def feed(self, times_ps: np.ndarray, values: np.ndarray) -> None:
        """``times_ps[i]`` is when ``values[i]`` starts to hold (int64, increasing)."""
        if len(values) == 0:
            return
        values = np.asarray(values)
        if self._last is None:
            mask = np.empty(len(values), bool)
            mask[0] = True
            np.not_equal(values[1:], values[:-1], out=mask[1:])
        else:
            mask = np.empty(len(values), bool)
            mask[0] = values[0] != self._last
            np.not_equal(values[1:], values[:-1], out=mask[1:])
        idx = np.flatnonzero(mask)
        if len(idx):
            self._times.append(np.asarray(times_ps)[idx].astype(np.int64, copy=False))
            self._values.append(values[idx].astype(self.dtype, copy=False))
        self._last = values[-1]

    def feed_indices(self, start: int, values: np.ndarray, times_at) -> None:
        """Like feed for a chunk starting at sample ``start``; only changed samples get a time
        (``times_at(indices)``), so a quiet 50 M-sample line costs one comparison per sample."""
        if len(values) == 0:
            return
        mask = np.empty(len(values), bool)
        mask[0] = True if self._last is None else values[0] != self._last
        np.not_equal(values[1:], values[:-1], out=mask[1:])
        idx = np.flatnonzero(mask)
        if len(idx):
            self._times.append(times_at(idx + start))
            self._values.append(values[idx].astype(self.dtype, copy=False))
        self._last = values[-1]
        self.end_ps = int(times_at(np.array([start + len(values) - 1]))[0])

    def snapshot(self) -> "ChangeLOD":
        """What has been fed so far, as a drawable change list (rows fill in while loading)."""
        if len(self._times) > 1:
            self._times = [np.concatenate(self._times)]
            self._values = [np.concatenate(self._values)]
        t = self._times[0] if self._times else np.zeros(0, np.int64)
        v = self._values[0] if self._values else np.zeros(0, self.dtype)
        return ChangeLOD(t, v, self.end_ps)

    def build(self, end_ps: int) -> "ChangeLOD":
        t = np.concatenate(self._times) if self._times else np.zeros(0, np.int64)
        v = np.concatenate(self._values) if self._values else np.zeros(0, self.dtype)
        lod = ChangeLOD(t, v, int(end_ps))
        lod.build_grid()
        return lod


GRID_POINTS = 1 << 18      # change counts at this many evenly spaced times per signal
GRID_MIN_STEPS = 8         # use the grid when a pixel spans at least this many grid steps


@dataclasses.dataclass
class ColumnView:
    """What a change-list signal looks like at one zoom."""

    exact: bool
    times: np.ndarray     # exact: change times in view (first clipped to t0); columns: pixel edges
    values: np.ndarray    # exact: value from each time on; columns: value at each column's start
    busy: np.ndarray | None = None   # columns: True where the column holds changes
    end: float = 0.0      # right end of the data in view (exact mode)


@dataclasses.dataclass
class ChangeLOD:
    times: np.ndarray     # int64 ps, when each value starts (times[0] = first sample)
    values: np.ndarray
    end_ps: int           # end of the capture
    # zoomed-out views: changes up to each of GRID_POINTS evenly spaced times, so a view of
    # most of a 50 M-sample capture reads W grid cells instead of searching W times through
    # millions of changes (cache misses, not arithmetic, were the cost)
    grid: np.ndarray | None = dataclasses.field(default=None, repr=False)
    grid_t0: float = 0.0
    grid_step: float = 0.0

    def build_grid(self, points: int = GRID_POINTS) -> None:
        if len(self.times) < 4 * points // GRID_MIN_STEPS or self.end_ps <= self.times[0]:
            return     # small enough that searching is cheap
        self.grid_t0 = float(self.times[0])
        self.grid_step = (self.end_ps - self.grid_t0) / points
        pts = self.grid_t0 + self.grid_step * np.arange(points + 1)
        counts = count_below(self.times, pts, inclusive=True)
        self.grid = counts.astype(np.int32 if len(self.times) < 2**31 else np.int64)

    @property
    def changes(self) -> int:
        return max(len(self.times) - 1, 0)

    def value_at(self, t: float):
        k = count_below(self.times, t, inclusive=True) - 1
        return None if k < 0 else self.values[k]

    def view(self, t0: float, t1: float, width: int, max_per_pixel: float = 0.34) -> ColumnView:
        """Changes in [t0, t1) exactly when there are at most ``max_per_pixel`` per pixel,
        else pixel columns (value at each column start + whether the column changes)."""
        width = max(int(width), 1)
        if len(self.times) == 0 or t1 <= self.times[0] or t0 >= self.end_ps:
            return ColumnView(True, np.zeros(0, np.int64), self.values[:0], end=t0)
        lo = max(t0, float(self.times[0]))
        hi = min(t1, float(self.end_ps))
        i0 = count_below(self.times, lo, inclusive=True) - 1
        i1 = count_below(self.times, hi)
        if i1 - i0 <= width * max_per_pixel + 1:
            t = self.times[i0:i1].astype(np.float64)
            t[0] = lo
            return ColumnView(True, t, self.values[i0:i1], end=hi)
        edges = pixel_edges(t0, t1, width)
        if self.grid is not None and (t1 - t0) / width >= GRID_MIN_STEPS * self.grid_step:
            # pixel edges snapped to the grid: columns move by at most 1/16 pixel
            g = np.clip(np.rint((edges - self.grid_t0) / self.grid_step), 0, len(self.grid) - 1)
            edges = self.grid_t0 + g * self.grid_step
            k = self.grid[g.astype(np.int64)].astype(np.int64) - 1
        else:
            # search only the slice of changes in view: it stays in cache
            a = count_below(self.times, edges[0], inclusive=True)
            b = count_below(self.times, edges[-1], inclusive=True)
            k = a + count_below(self.times[a:b], edges, inclusive=True) - 1
        valid = k[:-1] >= 0
        vals = self.values[np.maximum(k[:-1], 0)]
        busy = (k[1:] - k[:-1]) > 0
        inside = (edges[:-1] < self.end_ps) & (edges[1:] > self.times[0])
        return ColumnView(False, edges, vals, busy & inside, end=hi) if valid.all() else \
            ColumnView(False, edges, vals, busy & inside & valid, end=hi)


class IntervalLOD:
    """Intervals [start, end] with a class per interval (higher class = drawn on top when
    merged) and a pyramid of merged pairs for zoomed-out views."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, classes: np.ndarray | None = None):
        starts = np.asarray(starts, np.int64)
        ends = np.asarray(ends, np.int64)
        order = np.argsort(starts, kind="stable")
        self.order = order                      # level-0 position -> caller's index
        s, e = starts[order], np.maximum(ends[order], starts[order])
        c = (np.zeros(len(s), np.int16) if classes is None
             else np.asarray(classes, np.int16)[order])
        self.levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        while True:
            # running max of the ends: searchable even where intervals overlap
            emax = np.maximum.accumulate(e) if len(e) else e
            self.levels.append((s, e, emax, c))
            if len(s) <= 2:
                break
            n2 = len(s) // 2 * 2
            s2 = s[0:n2:2]
            e2 = np.maximum(e[0:n2:2], e[1:n2:2])
            c2 = np.maximum(c[0:n2:2], c[1:n2:2])
            if n2 < len(s):
                s2 = np.append(s2, s[-1])
                e2 = np.append(e2, e[-1])
                c2 = np.append(c2, c[-1])
            s, e, c = s2, e2, c2

    def __len__(self) -> int:
        return len(self.levels[0][0])

    def view(self, t0: float, t1: float, width: int, per_pixel: float = 2.0):
        """(level, starts, ends, classes, indices) of what touches [t0, t1); ``indices`` are
        the caller's indices at level 0, None above it (merged blocks have no one index)."""
        s, e, emax, c = self.levels[0]
        i0 = count_below(emax, t0)
        i1 = count_below(s, t1)
        n = i1 - i0
        if n <= 0:
            z = s[:0]
            return 0, z, z, c[:0], self.order[:0]
        level = 0
        budget = max(int(width * per_pixel), 1)
        while n > budget and level + 1 < len(self.levels):
            level += 1
            n //= 2
        if level == 0:
            return 0, s[i0:i1], e[i0:i1], c[i0:i1], self.order[i0:i1]
        s, e, emax, c = self.levels[level]
        j0 = count_below(emax, t0)
        j1 = count_below(s, t1)
        return level, s[j0:j1], e[j0:j1], c[j0:j1], None

    def at(self, t: float, tolerance: float = 0.0) -> int | None:
        """The caller's index of the interval under time t (nearest within tolerance)."""
        s, e, emax, _ = self.levels[0]
        if len(s) == 0:
            return None
        i1 = count_below(s, t + tolerance, inclusive=True)
        i0 = count_below(emax, t - tolerance)
        best, dist = None, None
        for i in range(max(i0, i1 - 64, 0), min(i1, len(s))):
            d = 0.0 if s[i] <= t <= e[i] else min(abs(t - s[i]), abs(t - e[i]))
            if d <= tolerance and (dist is None or d < dist):
                best, dist = i, d
        return None if best is None else int(self.order[best])


def busy_fraction(busy, t0: float, t1: float, width: int) -> np.ndarray:
    """Per-pixel busy fraction from a ``pcitrace.analyse.occupancy.BusyTime``."""
    edges = pixel_edges(t0, t1, width)
    acc = busy.at(edges)
    dt = (t1 - t0) / max(int(width), 1)
    return np.clip(np.diff(acc) / dt, 0.0, 1.0) if dt > 0 else np.zeros(int(width))

"""Distributions and histograms of per-packet / per-burst figures.

Every figure the analyser reports per packet or per burst is summarised the same way, so the
report writers can print any of them without knowing what they are: count, min, median, p90,
p99, max over the finite values (NaN marks "not applicable for this packet", e.g. a received
frame has no CSR setup group before it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Distribution:
    count: int
    min: float | None
    median: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values, scale: float = 1.0) -> "Distribution":
        """Summary of the finite entries of ``values`` (each multiplied by ``scale``)."""
        v = np.asarray(values, dtype=np.float64).ravel()
        v = v[np.isfinite(v)] * scale
        if v.size == 0:
            return cls(0, None, None, None, None, None)
        p50, p90, p99 = np.percentile(v, [50, 90, 99])
        return cls(int(v.size), float(v.min()), float(p50), float(p90), float(p99), float(v.max()))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def rounded(self, digits: int = 4) -> dict:
        return {k: (round(v, digits) if isinstance(v, float) else v) for k, v in self.to_dict().items()}


@dataclasses.dataclass(frozen=True)
class Histogram:
    counts: np.ndarray   # int64, len(edges) - 1
    edges: np.ndarray    # float64

    @classmethod
    def of(cls, values, bins: int = 20, scale: float = 1.0) -> "Histogram":
        v = np.asarray(values, dtype=np.float64).ravel()
        v = v[np.isfinite(v)] * scale
        if v.size == 0:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.float64))
        lo, hi = float(v.min()), float(v.max())
        if lo == hi:
            # One value: one bin centred on it, so a plot still shows where it is.
            half = max(abs(lo) * 0.01, 1e-9)
            lo, hi = lo - half, hi + half
            bins = 1
        counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
        return cls(counts.astype(np.int64), edges)

    def to_dict(self) -> dict:
        return {"counts": [int(c) for c in self.counts], "edges": [float(e) for e in self.edges]}


def finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None

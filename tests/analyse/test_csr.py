"""pcitrace/analyse/csr.py parts tested on their own."""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.csr import MAX_WINDOW, _search_windows


def test_search_windows_count_accepted_accesses_only():
    # 5 accesses each retried 8 times: 45 records, one routine, one window
    n = 45
    idx = np.arange(n)
    starts = idx * 100.0
    ends = starts + 50
    accepted = np.zeros(n, bool)
    accepted[8::9] = True
    assert [w.tolist() for w in _search_windows([idx], starts, ends, accepted)] == [idx.tolist()]


def test_search_windows_cut_a_long_one_at_its_longest_gap():
    n = MAX_WINDOW + 8
    idx = np.arange(n)
    starts = idx * 100.0
    starts[20:] += 5000
    ends = starts + 50
    windows = _search_windows([idx], starts, ends, np.ones(n, bool))
    assert [(int(w[0]), int(w[-1])) for w in windows] == [(0, 19), (20, n - 1)]

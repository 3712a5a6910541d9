"""Distributions, histograms and the busy-time function."""

import numpy as np
import pytest

from pcitrace.analyse.classify import CSR, DMA, OTHER
from pcitrace.analyse.occupancy import BusyTime, rolling, split_clocks
from pcitrace.analyse.stats import Distribution, Histogram
from pcitrace.decode.records import records_from_dicts

from .builders import T_PS, txn


def test_distribution_ignores_nan_and_scales():
    d = Distribution.of([1e6, np.nan, 3e6, 2e6], scale=1e-6)
    assert (d.count, d.min, d.median, d.max) == (3, 1.0, 2.0, 3.0)
    assert d.p90 == pytest.approx(2.8)
    assert Distribution.of([np.nan]).to_dict() == {"count": 0, "min": None, "median": None, "p90": None,
                                                   "p99": None, "max": None}


def test_histogram_counts_everything_once():
    h = Histogram.of(np.arange(100), bins=10)
    assert h.counts.tolist() == [10] * 10
    one = Histogram.of([5.0, 5.0])
    assert one.counts.tolist() == [2] and one.edges[0] < 5.0 < one.edges[1]
    assert Histogram.of([]).counts.size == 0


def test_busy_time_is_exact_at_any_point():
    r = records_from_dicts([txn(10, 5, command="mem_read"), txn(20, 3, command="mem_write")])
    b = BusyTime.of(r, T_PS)
    t = np.array([0, 10, 12, 15, 19, 21, 23, 100]) * T_PS
    np.testing.assert_array_equal(b.at(t) / T_PS, [0, 0, 2, 5, 5, 6, 8, 8])
    assert b.between(11 * T_PS, 22 * T_PS) / T_PS == 4 + 2


def test_rolling_windows():
    r = records_from_dicts([txn(0, 10, command="mem_read"), txn(20, 10, command="mem_write")])
    b = BusyTime.of(r, T_PS)
    t, occ = rolling(b, 0, 40 * T_PS, 10 * T_PS)
    np.testing.assert_allclose(occ, [1, 0, 1, 0])
    np.testing.assert_allclose(t / T_PS, [5, 15, 25, 35])
    r2 = records_from_dicts([txn(0, 10, command="mem_read"), txn(20, 5, command="mem_write")])
    t, occ = rolling(BusyTime.of(r2, T_PS), 0, 40 * T_PS, 20 * T_PS, 5 * T_PS)
    np.testing.assert_allclose(occ, [0.5, 0.5, 0.25, 0.25, 0.25])
    # Shorter than a window: one window over the whole capture.
    t, occ = rolling(b, 0, 40 * T_PS, 100 * T_PS)
    np.testing.assert_allclose(occ, [0.5])


def test_split_clocks_pcix_and_dac_headers():
    rows = [txn(0, 8, command="mem_read_block", data_phases=4, target_waits=1),
            dict(txn(20, 6, command="mem_write", data_phases=2, target_waits=1), dac=True)]
    r = records_from_dicts(rows)
    s = split_clocks(r, np.array([DMA, CSR]), 100, mode="pcix")
    # header: 2 (address + attribute) and 3 (two DAC phases + attribute)
    assert (s.address, s.data, s.retry) == (5, 6, 0)
    assert s.wait == 14 - 5 - 6
    assert s.by_initiator == {"nic": 8, "host": 6, "other": 0}
    assert split_clocks(r, np.array([OTHER, OTHER]), 100).by_initiator["other"] == 14

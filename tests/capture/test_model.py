"""The capture model's time base: lazily computed sample times."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture.model import SampleTimes, TimeBase


@settings(max_examples=60, deadline=None)
@given(rate=st.sampled_from([33_333_333.0, 66_666_667.0, 133e6, 100e6, 1e9 / 7]),
       start_ps=st.integers(0, 10**12), start=st.integers(0, 10**9), n=st.integers(0, 3000),
       data=st.data())
def test_sample_times_equal_the_time_base_array(rate, start_ps, start, n, data):
    tb = TimeBase.state(clock_hz=rate, start_ps=start_ps)
    lazy = tb.lazy_times(start, start + n)
    full = tb.times_ps(start, start + n)
    assert isinstance(lazy, SampleTimes) and len(lazy) == n
    assert np.array_equal(np.asarray(lazy), full)
    idx = np.array(data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=50) if n else st.just([])),
                   np.int64)
    assert np.array_equal(lazy.take(idx), full[idx]) and np.array_equal(lazy[idx], full[idx])
    a, b = sorted(data.draw(st.lists(st.integers(-n - 2, n + 2), min_size=2, max_size=2)))
    part = lazy[a:b]
    assert isinstance(part, SampleTimes) and np.array_equal(np.asarray(part), full[a:b])
    if n:
        i = data.draw(st.integers(-n, n - 1))
        assert lazy[i] == full[i]
        # the join of two neighbouring ranges is the range over both
        k = data.draw(st.integers(0, n))
        left, right = lazy[:k], lazy[k:]
        assert right.follows(left) and np.array_equal(np.asarray(left.joined(right)), full)


def test_sample_times_refuse_what_an_array_would_wrap_or_miss():
    lazy = TimeBase.state(clock_hz=66e6).lazy_times(100, 110)
    with pytest.raises(IndexError):
        lazy.take(np.array([3, 10]))
    with pytest.raises(IndexError):
        lazy.take(np.array([-1]))         # an array would give the last time; a decoder never means it
    with pytest.raises(IndexError):
        lazy[10]
    assert lazy[-1] == TimeBase.state(clock_hz=66e6).time_ps(109)
    assert not lazy[5:].follows(lazy[:4]) and lazy[4:].follows(lazy[:4])


def test_timestamped_time_bases_give_their_timestamps():
    ts = np.array([0, 7, 20, 33], np.int64)
    got = TimeBase.state(timestamps_ps=ts).lazy_times(1, 3)
    assert isinstance(got, np.ndarray) and got.tolist() == [7, 20]


def test_sample_times_into_a_record_field():
    tb = TimeBase.state(clock_hz=66_666_667.0, start_ps=12_345)
    lazy = tb.lazy_times(1_000_000, 1_100_000)
    idx = np.array([0, 5, 77, 99_999])
    rec = np.zeros(4, [("a", np.uint8), ("t", np.int64), ("b", np.uint8)])     # strided, unaligned
    lazy.take(idx, out=rec["t"], ascending=True)
    assert rec["t"].tolist() == tb.times_ps(1_000_000, 1_100_000)[idx].tolist()
    assert rec["a"].tolist() == rec["b"].tolist() == [0] * 4
    with pytest.raises(IndexError):
        lazy.take(np.array([3, 100_000]), ascending=True)


def test_sample_times_take_a_mask_as_an_array_does():
    # found by review: a boolean mask was read as the indices 0 and 1
    tb = TimeBase.state(clock_hz=1e6)
    lazy, full = tb.lazy_times(0, 4), tb.times_ps(0, 4)
    mask = np.array([False, False, True, True])
    assert lazy[mask].tolist() == full[mask].tolist() == [2_000_000, 3_000_000]
    with pytest.raises(IndexError):
        lazy[np.array([True, False])]


def test_in_memory_vectors_keep_their_narrow_type_and_read_as_uint64():
    from pcitrace.capture.model import Capture

    be = np.array([0x0F, 0xF0, 0xFF, 0x00], np.uint8)
    ad = np.array([1, 2, 3, 1 << 40], np.uint64)
    wide = np.array([1, 2, 3, 4], np.int32)                  # signed: converted
    cap = Capture.from_arrays({"BE": be, "AD": ad, "W": wide}, TimeBase.state(clock_hz=1e6),
                              widths={"BE": 8, "AD": 64, "W": 16})
    chunks = list(cap.iter_chunks(["BE", "AD", "W"], chunk_samples=3))
    assert all(c["BE"].dtype == c["AD"].dtype == c["W"].dtype == np.uint64 for c in chunks)
    assert np.concatenate([c["BE"] for c in chunks]).tolist() == be.tolist()
    assert np.concatenate([c["AD"] for c in chunks]).tolist() == ad.tolist()
    assert cap.read(["W"])["W"].tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        Capture.from_arrays({"BE": be, "AD": ad[:2]}, TimeBase.state(clock_hz=1e6), widths={"BE": 8, "AD": 64})

"""align() on plain arrays: offsets, drift, losses on either side, windows, reordering, numbers."""

from __future__ import annotations

import numpy as np
import pytest

from pcitrace.correlate.align import align
from pcitrace.correlate.runlog import read_runlog
from pcitrace.errors import PcitraceError
from tests.conftest import UDP_TOOLS

US = 1_000_000


@pytest.fixture(scope="module")
def g_log():
    return read_runlog(UDP_TOOLS / "udpmon_bw_1472_w12_G.txt").packets


def _all_send_times(p):
    """Sender times for every packet: the log has none for lost ones, so interpolate them."""
    t = p.send_time_ps.copy()
    ok = ~p.lost
    idx = np.arange(len(t))
    t[~ok] = np.interp(idx[~ok], idx[ok], t[ok]).astype(np.int64)
    return t


def test_real_capture_of_the_run_sender_side(g_log):
    """The sender's bus shows every packet at the log's send times (+ offset, + 50 ppm clock)."""
    p = g_log
    ok = ~p.lost
    cap = (_all_send_times(p) * (1 + 50e-6)).astype(np.int64) + 5_000 * US
    a = align(cap, p.send_time_ps[ok], run_seq=p.number[ok])
    assert a.matched == 1706 and a.mismatched == 0
    assert np.array_equal(a.capture_number, p.number)
    assert np.array_equal(np.sort(a.capture_number[a.capture_unmatched]), p.lost_numbers)
    assert a.drift_ppm == pytest.approx(50, abs=0.5)
    assert np.max(np.abs(a.residual_ps)) < 0.1 * US


def test_regular_simulated_stream_against_a_run_with_stalls(g_log):
    """A simulator sends exactly every 12 us; the real sender stalled up to 72.7 us. Numbers
    still come out right, and the lost packets are named."""
    p = g_log
    ok = ~p.lost
    rng = np.random.default_rng(7)
    cap = 2 * US + np.arange(2000) * 12 * US + rng.integers(0, 200_000, 2000)
    a = align(cap, p.send_time_ps[ok], run_seq=p.number[ok])
    assert np.array_equal(a.capture_number, p.number)
    assert a.matched == 1706
    named = np.sort(a.capture_number[a.capture_unmatched])
    assert np.array_equal(named, np.r_[57:302, 1878:1927])
    # receive side: the lost packets never reach the bus
    capr = cap[ok] + 9 * US
    b = align(capr, p.send_time_ps[ok], run_seq=p.number[ok])
    assert b.matched == 1706 and len(b.capture_unmatched) == 0
    assert np.array_equal(b.capture_number, p.number[ok])


def test_capture_window_inside_the_run(g_log):
    p = g_log
    ok = ~p.lost
    send = _all_send_times(p)
    cap = send[300:1500] + 123 * US
    a = align(cap, p.send_time_ps[ok], run_seq=p.number[ok])
    # packet 301 is lost in the run; the capture starts on it
    assert a.matched == 1199
    assert np.array_equal(a.capture_number, p.number[300:1500])
    assert len(a.run_outside) == 1706 - 1199


@pytest.mark.parametrize("seed", range(4))
def test_random_losses_on_both_sides(seed):
    """Real-capture conditions: an irregular sender (jitter, occasional stalls of up to three
    spacings, seen by both the capture and the run), the receiver losing bursts of packets as
    UDPmon runs do, the analyser missing a few packets, an arbitrary offset."""
    rng = np.random.default_rng(seed)
    n = 1000
    spacing = rng.uniform(8, 30) * US
    gaps = spacing + rng.normal(0, 0.03 * spacing, n) + (rng.random(n) < 0.03) * rng.uniform(0, 3, n) * spacing
    send = np.cumsum(gaps).astype(np.int64)
    run_keep = np.ones(n, bool)
    for start in rng.integers(0, n, 4):
        run_keep[start:start + rng.integers(1, 120)] = False
    cap_keep = rng.random(n) > 0.005
    offset = int(rng.integers(-10**9, 10**9)) * 1000
    cap = send[cap_keep] + offset + rng.integers(0, 300_000, cap_keep.sum())
    numbers = np.arange(1, n + 1)
    a = align(cap, send[run_keep], run_seq=numbers[run_keep])
    cap_num = numbers[cap_keep]
    right = cap_num[a.capture_index] == numbers[run_keep][a.run_index]
    # A packet the analyser missed inside a loss gap can leave one neighbour misnamed until
    # the next packet the run has; nothing else may be wrong.
    assert right.all()
    assert a.matched >= 0.99 * (cap_keep & run_keep).sum()
    assert abs(a.offset_ps - offset) < 0.1 * spacing
    named = a.capture_number >= 0
    assert np.mean(a.capture_number[named] == cap_num[named]) >= 0.99


def test_sequence_numbers_reordering_and_shift():
    """Capture payload numbers are frame numbers (0-based), the run counts from 1; two
    packets arrive swapped."""
    n = 200
    t = np.arange(n, dtype=np.int64) * 12 * US
    seq = np.arange(n)
    seq[[50, 51]] = seq[[51, 50]]
    run_num = np.arange(1, n + 1)
    a = align(t + 777 * US, t, capture_seq=seq, run_seq=run_num)
    assert a.method == "sequence" and a.seq_shift == 1
    assert a.matched == n
    assert a.reordered.tolist() == [51]
    assert a.capture_number.tolist() == (seq + 1).tolist()
    # the two swapped packets pair by number, against their times: counted as mismatched
    assert a.mismatched == 2


def test_fragments_take_no_number():
    """A frame whose DMA the analyser saw as two transfers 2.5 us apart: the fragment is left
    unpaired and does not shift the numbering of the following packets."""
    t = np.arange(100, dtype=np.int64) * 12 * US
    cap = np.sort(np.r_[t, t[[10, 40]] + 2_500_000]) + 3 * US
    a = align(cap, t, run_seq=np.arange(1, 101))
    assert a.matched == 100 and len(a.capture_unmatched) == 2
    assert sorted(a.capture_number.tolist()).count(-1) == 2


def test_nothing_to_align():
    with pytest.raises(PcitraceError, match="nothing to align"):
        align(np.zeros(0), np.arange(5))
    with pytest.raises(PcitraceError, match="differ in length"):
        align(np.arange(5), np.arange(5), capture_seq=np.arange(4))


# --- the tracking walk's parts ------------------------------------------------------------------

def test_track_pairs_a_regular_stream_and_leaves_lost_numbers_unpaired():
    from pcitrace.correlate.align import _track
    run = np.array([0, 10, 20, 40, 50], np.int64) * US            # number 3 lost in the run
    rnum = np.array([0, 1, 2, 4, 5])
    cap = np.arange(6, dtype=np.int64) * 10 * US + 7 * US
    ci, rj = _track(cap, run, rnum, 1 * US, 0, 0)
    assert ci.tolist() == [0, 1, 2, 4, 5] and rj.tolist() == [0, 1, 2, 3, 4]


def test_run_numbers_usual_spacing():
    from pcitrace.correlate.align import _RunNumbers
    rn = _RunNumbers(np.array([0, 10, 20, 50.0]), np.array([7, 8, 9, 12]))
    assert (rn.lo, rn.hi, rn.per_number) == (7, 12, 10.0) and rn.index[12] == 3


def test_candidates_and_picks():
    from pcitrace.correlate.align import (_Anchor, _pick_beside_successor, _pick_without_successor,
                                          _RunNumbers, _track_candidates)
    rn = _RunNumbers(np.array([0, 10, 20, 40, 50.0]), np.array([0, 1, 2, 4, 5]))
    st = _Anchor(a_i=2, a_n=2, last_j=2, r_i=2, r_n=2, r_t=20.0)
    # the next capture packet 10 after the last pair: successor 3 is lost, 4 is 20 after
    obs, virt = _track_candidates(rn, st, 3, 10.0, 10.0, 4)
    assert [o[1] for o in obs] == [4, 5] and [v[1] for v in virt] == [3]
    assert _pick_without_successor(st, obs, virt, 3, 10.0, 1.0) == (3, -1, 0.0)
    # 20 after: the lost successor does not fit, number 4 does
    obs, virt = _track_candidates(rn, st, 3, 20.0, 20.0, 4)
    assert _pick_without_successor(st, obs, virt, 3, 20.0, 1.0) == (4, 3, 40.0)
    # a successor the run has wins unless another fits clearly better
    st = _Anchor(a_i=0, a_n=0, last_j=0, r_i=0, r_n=0, r_t=0.0)
    obs, _ = _track_candidates(rn, st, 1, 10.5, 10.5, 4)
    succ = next(o for o in obs if o[1] == 1)
    assert _pick_beside_successor(rn, st, obs, succ, 1, 10.5, 1.0, 4) == (1, 1, 10.0)
    obs, _ = _track_candidates(rn, st, 1, 20.0, 20.0, 4)
    succ = next(o for o in obs if o[1] == 1)
    assert _pick_beside_successor(rn, st, obs, succ, 1, 20.0, 1.0, 4) == (2, 2, 20.0)

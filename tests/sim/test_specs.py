"""specs: the column builder (render_txns) draws exactly what render(to_specs(...)) draws."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.sim.bus import render
from pcitrace.sim.model import Txn, run_model
from pcitrace.sim.scenario import load_scenario
from pcitrace.sim.specs import MASTERS, phases, render_txns, spec_clocks, to_specs

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _model_buses(name, us=60.0):
    sc = load_scenario(SAMPLES / f"{name}.scenario.toml")
    sc.duration_us = min(sc.duration_us, us)
    return list(run_model(sc, spec_clocks).buses.values())


def _assert_same(a, b):
    assert a.signals.keys() == b.signals.keys()
    for k in a.signals:
        np.testing.assert_array_equal(a.signals[k], b.signals[k], err_msg=k)
    for f in ("records", "words", "findings", "start_clock", "end_clock", "codes", "header_clocks",
              "devsel_clock"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.bad_parity == b.bad_parity


@pytest.mark.parametrize("name,with_ad", [("pro1000_66mhz", True), ("pro1000_33mhz", False),
                                          ("pcix133_mmrbc512", True), ("violations", True),
                                          ("control_only", True)])
def test_columns_equal_the_txnspec_path(name, with_ad):
    for b in _model_buses(name):
        txns = b.txns
        assert txns
        cand = [i for i, t in enumerate(txns) if phases(t)]
        parity = {cand[0]: 0, cand[len(cand) // 2]: phases(txns[cand[len(cand) // 2]]) - 1}
        kw = dict(mode=b.cfg.kind, width=b.cfg.width, clock_hz=1e12 / b.period, bus=b.cfg.name,
                  gnt_master=0, with_ad=with_ad, tail=1, total_clocks=None)
        specs = to_specs(txns)
        for i, pe in parity.items():
            specs[i].parity_error = pe
        _assert_same(render_txns(txns, parity, **kw), render(specs, masters=MASTERS, **kw))


def test_irregular_transactions_fall_back_to_txnspecs():
    # data shorter than the transaction says: the column builder leaves it to the TxnSpec path
    b = _model_buses("control_only")[0]
    txns = [dataclasses.replace(t) for t in b.txns]
    k = next(i for i, t in enumerate(txns) if t.nbytes == 4 and t.data)
    txns[k].data = txns[k].data[:2]
    kw = dict(mode=b.cfg.kind, width=b.cfg.width, clock_hz=1e12 / b.period, bus=b.cfg.name,
              gnt_master=None, with_ad=True, tail=1, total_clocks=None)
    _assert_same(render_txns(txns, None, **kw), render(to_specs(txns), masters=MASTERS, **kw))


def test_bad_parity_phase_is_refused():
    from pcitrace.errors import PcitraceError

    b = _model_buses("pro1000_66mhz", 20.0)[0]
    i = next(i for i, t in enumerate(b.txns) if phases(b.txns[i]))
    with pytest.raises(PcitraceError, match="parity error in data phase"):
        render_txns(b.txns, {i: phases(b.txns[i])}, mode=b.cfg.kind, width=b.cfg.width, clock_hz=66e6,
                    bus="x", gnt_master=0, with_ad=True, tail=1, total_clocks=None)


@pytest.mark.parametrize("gnt_master", [0, None])
def test_lean_render_leaves_out_only_words_and_other_masters_lines(gnt_master):
    # (and keeps its records as columns: the same records)
    b = _model_buses("pro1000_66mhz_coalesce")[0]
    kw = dict(mode=b.cfg.kind, width=b.cfg.width, clock_hz=1e12 / b.period, bus=b.cfg.name,
              gnt_master=gnt_master, with_ad=True, tail=1, total_clocks=None)
    full, lean = render_txns(b.txns, None, **kw), render_txns(b.txns, None, lean=True, **kw)
    assert len(full.words) and len(lean.words) == 0
    assert set(lean.signals) == {k for k in full.signals if ":" not in k}
    for k in lean.signals:
        np.testing.assert_array_equal(lean.signals[k], full.signals[k], err_msg=k)
    np.testing.assert_array_equal(lean.records.to_array(), full.records)
    for f in ("findings", "start_clock", "end_clock"):
        np.testing.assert_array_equal(getattr(lean, f), getattr(full, f), err_msg=f)
    # no per-clock state codes (only crop() reads them; a capture is never cropped)
    assert lean.codes is None and len(full.codes) == len(full.signals["frame_n"])


@st.composite
def _data_txns(draw):
    """Scheduled transactions moving parts of a few shared buffers (bursts aligned or not,
    ending inside a word or with the buffer, single-phase words at any offset, no buffer)."""
    width = draw(st.sampled_from([32, 64]))
    wb = width // 8
    bufs = [draw(st.binary(min_size=1, max_size=80)) for _ in range(draw(st.integers(1, 3)))]
    txns, clock = [], 2
    for _ in range(draw(st.integers(1, 14))):
        buf = draw(st.sampled_from(bufs + [b""]))
        if buf:
            off = draw(st.integers(0, len(buf) - 1))
            if draw(st.booleans()):
                off -= off % wb                         # (mostly aligned, as the model's bursts)
            n = draw(st.integers(1, len(buf) - off))
        else:
            off, n = 0, draw(st.integers(1, 3 * wb))
        word = draw(st.integers(0, 1 << 16)) * wb
        addr = word + (draw(st.integers(0, wb - 1)) if draw(st.booleans()) else 0)
        read = draw(st.booleans())
        t = Txn("nic", "data_read" if read else "data_write", "mem_read" if read else "mem_write",
                addr, n, width=width, read=read, data=buf, data_off=off,
                wait_every=draw(st.sampled_from([0, 0, 2])))
        t.clocks = spec_clocks(t)
        t.start = t.req_clock = clock + draw(st.integers(1, 3))
        clock = t.start + t.clocks
        txns.append(t)
    return width, txns


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(_data_txns())
def test_data_words_equal_the_txnspec_path(case):
    # the column builder's one gather of the data words (pool of buffers, single words, the
    # irregular bursts' own words) against each transaction's words worked out on its own
    width, txns = case
    kw = dict(mode="pci", width=width, clock_hz=66e6, bus="pci", gnt_master=0, with_ad=True, tail=1,
              total_clocks=None)
    _assert_same(render_txns(txns, None, **kw), render(to_specs(txns), masters=MASTERS, **kw))


def test_burst_ending_inside_the_buffers_partial_last_word():
    # (found by the property test above) bytes 8..12 of a 14-byte buffer: the last word is the
    # buffer's partial one, and the burst ends before the buffer does; to_spec takes the word
    # as the buffer has it (byte 13 under a disabled lane), and so must the column builder
    t = Txn("nic", "data_write", "mem_write", 0, 5, width=32, data=bytes(13) + b"\x01", data_off=8)
    t.clocks = spec_clocks(t)
    t.start = t.req_clock = 3
    kw = dict(mode="pci", width=32, clock_hz=66e6, bus="pci", gnt_master=0, with_ad=True, tail=1,
              total_clocks=None)
    fast, ref = render_txns([t], None, **kw), render(to_specs([t]), masters=MASTERS, **kw)
    assert fast.signals["ad"][t.start + 2:t.start + 4].tolist() == [0, 0x100]
    _assert_same(fast, ref)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-3, 40), max_size=120), st.sampled_from([1, 3, 64]))
def test_first_occurrence_groups_equal_the_sorting_reference(keys, few):
    # the comparison passes (few kinds) and the sorted rest (many) against np.unique
    from pcitrace.sim.specs import first_occurrence_groups

    a = np.array(keys, np.int64)
    group, first = first_occurrence_groups(a, few)
    if not len(a):
        assert len(group) == 0 and len(first) == 0
        return
    _, ref_first, inv = np.unique(a, return_index=True, return_inverse=True)
    order = np.argsort(ref_first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    np.testing.assert_array_equal(group, rank[inv.reshape(-1)])
    np.testing.assert_array_equal(first, ref_first[order])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 9), st.integers(0, 8)), min_size=1, max_size=8))
def test_clocks_lay_out_the_schedule_as_render_does(txns):
    # render's loop: each transaction's address clock is the clock after the previous one's end
    # plus its idle clocks (at least 2 before the first), the idle clocks those the schedule
    # leaves between the transactions
    from pcitrace.sim.model import TxnRows
    from pcitrace.sim.specs import _clocks

    starts, c = [], 0
    for gap, clocks, _ in txns:
        starts.append(c + gap)
        c = starts[-1] + clocks
    rows = TxnRows()
    rows.starts.extend(starts)
    t_clocks = np.array([k for _, k, _ in txns], np.int64)
    shend = np.array([s for _, _, s in txns], np.int64)
    got_starts, ends, idle, t_start, clock = _clocks(rows, t_clocks, shend)
    assert got_starts.tolist() == starts and ends.tolist() == (np.array(starts) + t_clocks - 1).tolist()
    clock_ref, prev_end = 0, -1
    for i, (s, e) in enumerate(zip(starts, ends)):
        gap = max(s - prev_end - 1, 0)
        if i == 0:
            gap = max(gap, 2)
        assert idle[i] == gap and t_start[i] == clock_ref + gap
        clock_ref = clock_ref + gap + int(shend[i]) + 1
        prev_end = int(e)
    assert clock == clock_ref

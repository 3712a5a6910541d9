"""decode_capture: several buses in one capture, streaming in chunks, bus summaries, words."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture import write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.capture.profile import BusProfile, Profile
from pcitrace.decode import decode_capture, merge_buses
from pcitrace.decode.engine import decode_clocks
from pcitrace.decode.records import diff_records
from pcitrace.errors import PcitraceError

from .helpers import random_bus

CLOCK = 33_333_333.0


def two_bus_capture(n=3000, seed=3):
    """Buses `send` (64-bit, with AD) and `recv` (control only) in one state-mode capture."""
    rng = np.random.default_rng(seed)
    a, _ = random_bus(rng, n, ad=True, cbe=True, par=True, w64=True, gnt=True, busy=0.5)
    b, _ = random_bus(rng, n, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.4)
    arrays = {f"S_{k}": v for k, v in a.items()} | {f"R_{k}": v for k, v in b.items()}
    cap = Capture.from_arrays(arrays, TimeBase.state(clock_hz=CLOCK), widths={"S_ad": 64, "S_cbe_n": 8})
    prof = Profile([BusProfile("send", "pci", signals={k: f"S_{k}" for k in a}, width=64),
                    BusProfile("recv", "pci", signals={k: f"R_{k}" for k in b}, width=32)], source="memory")
    return cap, prof, a, b


def test_two_buses_merged_by_time_and_equal_to_each_bus_alone():
    cap, prof, a, b = two_bus_capture()
    res = decode_capture(cap, prof, chunk_clocks=500)
    t = cap.times_ps()
    ra, wa, _, _ = decode_clocks(a, t, width=64, bus="send")
    rb, wb, _, _ = decode_clocks(b, t, width=32, bus="recv")
    assert np.all(np.diff(res.records["start_ps"]) >= 0)
    assert set(res.records["bus"].tolist()) == {"send", "recv"}
    assert diff_records(res.bus_records("send"), ra, ignore=["data_index"]) == []
    assert diff_records(res.bus_records("recv"), rb, ignore=["data_index"]) == []
    # words follow their records through the merge, and data_index points at the first one
    # (the control-only bus's words carry their times only)
    w = res.words
    assert len(w) == len(wa) + len(wb)
    assert not w["value"][res.records["bus"][w["record"]] == "recv"].any()
    recs = res.records
    idx = np.flatnonzero(recs["data_phases"] > 0)
    for i in np.concatenate([idx[recs["bus"][idx] == "send"][:50], idx[recs["bus"][idx] == "recv"][:50]]):
        first = recs["data_index"][i]
        assert w["record"][first] == i
        assert w["time_ps"][first] >= recs["start_ps"][i]
        assert np.all(w["record"][first:first + recs["data_phases"][i]] == i)
    assert set(res.buses) == {"send", "recv"}
    s = res.buses["send"]
    assert (s.clocks, s.start_ps, s.end_ps, s.width, s.mode) == (3000, 0, int(t[-1]), 64, "pci")
    assert s.clock_hz == pytest.approx(CLOCK, rel=1e-6)


def test_bus_selection_and_unknown_bus():
    cap, prof, _, _ = two_bus_capture()
    res = decode_capture(cap, prof, buses="recv")
    assert set(res.records["bus"].tolist()) == {"recv"} and set(res.buses) == {"recv"}
    with pytest.raises(PcitraceError, match="no bus named 'nope'"):
        decode_capture(cap, prof, buses=["nope"])


def test_chunk_size_does_not_change_the_result():
    cap, prof, _, _ = two_bus_capture(n=2000, seed=9)
    whole = decode_capture(cap, prof, chunk_clocks=1 << 20)
    for chunk in (1, 7, 333):
        part = decode_capture(cap, prof, chunk_clocks=chunk)
        assert diff_records(whole.records, part.records) == []
        assert np.array_equal(whole.words, part.words)
        assert np.array_equal(np.sort(whole.findings, order=["time_ps", "kind"]),
                              np.sort(part.findings, order=["time_ps", "kind"]))


def test_sr_file_and_sidecar_profile(tmp_path):
    cap, prof, _, _ = two_bus_capture(n=1500)
    from pcitrace.capture.profile import save_profile
    path = tmp_path / "two.sr"
    write_sr(cap, path)
    # a vector channel is stored as bits in .sr: the profile lists them
    bits = {k: ([f"{v}{i}" for i in range(cap.channel(v).width)] if cap.channel(v).width > 1 else v)
            for k, v in prof.bus("send").signals.items()}
    prof_sr = Profile([BusProfile("send", "pci", signals=bits, width=64), prof.bus("recv")])
    save_profile(prof_sr, tmp_path / "two.profile.toml")
    from_file = decode_capture(str(path))          # NAME.profile.toml beside it
    in_memory = decode_capture(cap, prof)
    assert diff_records(in_memory.records, from_file.records) == []
    assert np.array_equal(in_memory.words, from_file.words)


def test_unknown_engine_is_a_user_error():
    cap, prof, _, _ = two_bus_capture(n=100)
    with pytest.raises(PcitraceError, match="engine"):
        decode_capture(cap, prof, engine="turbo")


def test_merge_of_nothing():
    r, w, f = merge_buses([])
    assert len(r) == len(w) == len(f) == 0


def test_glitches_in_timing_capture_whatever_the_chunking():
    from pcitrace.decode.engine import glitches

    spc = 8                                        # samples per clock, CLK high in the second half
    n_clk = 12
    clk = np.tile(np.r_[np.zeros(spc // 2), np.ones(spc // 2)].astype(np.uint8), n_clk)
    frame = np.ones(len(clk), np.uint8)
    frame[21:23] = 0                               # a 2-sample pulse inside one clock period
    irdy = np.ones(len(clk), np.uint8)
    irdy[40:60] = 0                                # a clean assertion: one edge per period
    stop = np.ones(len(clk), np.uint8)
    stop[2:3] = 0                                  # before the first clock: counts towards it
    stop[93:94] = 0                                # after the last clock (sample 92): never reported
    arrays = {"CLK": clk, "FRAME#": frame, "IRDY#": irdy, "TRDY#": np.ones_like(clk),
              "STOP#": stop, "DEVSEL#": np.ones_like(clk)}
    cap = Capture.from_arrays(arrays, TimeBase.timing(100e6))
    bus = BusProfile("pci", "pci", signals={"clk": "CLK", "frame_n": "FRAME#", "irdy_n": "IRDY#",
                                            "trdy_n": "TRDY#", "stop_n": "STOP#", "devsel_n": "DEVSEL#"})
    want = None
    for chunk in (1, 3, 7, 22, 1000):
        g = glitches(cap, bus, chunk_samples=chunk)
        got = sorted(zip(g["time_ps"].tolist(), g["message"].tolist()))
        want = want or got
        assert got == want, chunk
    times = [t for t, _ in want]
    assert times == [20_000, 210_000]              # STOP# pulse at sample 2, FRAME# at sample 21
    assert want[0][1].startswith("STOP#") and want[1][1].startswith("FRAME#")


def test_iter_bus_streams_the_same_records():
    from pcitrace.decode import iter_bus

    cap, prof, _, _ = two_bus_capture(n=3000, seed=4)
    whole = decode_capture(cap, prof, buses="send")
    summary = {}
    parts = list(iter_bus(cap, prof.bus("send"), chunk_clocks=256, summary=summary))
    assert len(parts) > 10                          # one piece per chunk, plus the flush
    recs = np.concatenate([p[0] for p in parts])
    assert diff_records(whole.records, recs) == []
    assert np.array_equal(whole.words, np.concatenate([p[1] for p in parts]))
    assert summary["bus"] == whole.buses["send"]


@pytest.mark.parametrize("chunk", [97, 500, 1 << 20])
def test_iter_records_streams_decode_captures_records(chunk):
    from pcitrace.decode import iter_records

    cap, prof, _, _ = two_bus_capture(n=3000, seed=11)
    whole = decode_capture(cap, prof)
    parts = list(iter_records(cap, prof, chunk_clocks=chunk))
    if chunk < 3000:
        assert len(parts) > 2                   # really streamed, not collected
    got = np.concatenate(parts)
    # every field, data_index included (it indexes the merged words)
    assert got.dtype == whole.records.dtype
    assert np.array_equal(got, whole.records)
    only = np.concatenate(list(iter_records(cap, prof, buses="recv", chunk_clocks=chunk)))
    assert np.array_equal(only, decode_capture(cap, prof, buses="recv").records)


def test_iter_records_breaks_start_time_ties_like_merge_buses():
    from pcitrace.decode import iter_records

    # the same bus twice: every record has a twin starting at the same time
    rng = np.random.default_rng(2)
    a, _ = random_bus(rng, 1200, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.5)
    cap = Capture.from_arrays({f"X_{k}": v for k, v in a.items()}, TimeBase.state(clock_hz=CLOCK))
    prof = Profile([BusProfile("one", "pci", signals={k: f"X_{k}" for k in a}),
                    BusProfile("two", "pci", signals={k: f"X_{k}" for k in a})], source="memory")
    whole = decode_capture(cap, prof, chunk_clocks=100)
    got = np.concatenate(list(iter_records(cap, prof, chunk_clocks=100)))
    assert len(got) > 20 and got["bus"][0] == "one" and got["bus"][1] == "two"
    assert np.array_equal(got, whole.records)


@pytest.mark.parametrize("before", [False, True])
@pytest.mark.parametrize("reserve", [None, 3, 40, 10_000])
def test_collector_gives_the_parts_in_order_whatever_the_estimate(reserve, before):
    from pcitrace.decode import _Grow
    from pcitrace.decode.records import WORD_DTYPE

    rng = np.random.default_rng(5)
    parts = []
    g = _Grow(WORD_DTYPE)
    if before and reserve is not None:
        g.reserve(reserve)                    # sized before the first part (decode_bus)
        assert g.n == 0
    for i, m in enumerate([7, 0, 13, 1, 25, 2]):
        p = np.zeros(m, WORD_DTYPE)
        p["time_ps"] = rng.integers(0, 1 << 40, m)
        p["record"] = i
        parts.append(p)
        if i % 2:
            g.add(p)
        else:
            g.claim(m)[:] = p                 # the engine writes in place
        if i == 0 and reserve is not None and not before:
            g.reserve(reserve)
    got = g.array
    assert np.array_equal(got, np.concatenate(parts))
    assert len(got) == 48 and (got.base is None or len(got.base) == 48)    # spare capacity given back


def test_collector_of_one_part_is_that_part():
    from pcitrace.decode import _Grow
    from pcitrace.decode.records import WORD_DTYPE

    p = np.zeros(5, WORD_DTYPE)
    g = _Grow(WORD_DTYPE)
    g.add(p)
    assert g.array is p
    assert len(_Grow(WORD_DTYPE).array) == 0


@pytest.mark.parametrize("gap_ps", [10**13, 10**15])
def test_a_clock_that_stops_for_long_does_not_blow_up_the_collector(gap_ps):
    # The first chunk covers a tiny share of the capture's time when the bus clock stops for
    # a while (CLKRUN#, a gated clock): sizing the record array from that share asked for
    # terabytes. The collected records must simply be the capture's.
    from .test_differential import CHANNEL, capture_of

    rng = np.random.default_rng(1)
    n = (1 << 12) + 200
    sig, _ = random_bus(rng, n, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.6)
    t = np.arange(n, dtype=np.int64) * 15000
    t[-100:] += gap_ps
    _, prof = capture_of(sig, mode="pci", width=32, clock_hz=66e6)
    cap = Capture.from_arrays({CHANNEL[k]: v for k, v in sig.items()}, TimeBase.state(timestamps_ps=t))
    chunked = decode_capture(cap, prof, chunk_clocks=1 << 10)
    whole = decode_capture(cap, prof, chunk_clocks=n + 1)
    assert diff_records(whole.records, chunked.records) == []
    assert np.array_equal(whole.words, chunked.words)


@pytest.mark.parametrize("inverted", [set(), {"frame_n", "stop_n", "devsel_n"}])
@pytest.mark.parametrize("full", [False, True])
def test_state_sr_decodes_through_the_control_code_as_through_the_lines(tmp_path, inverted, full):
    # A state .sr gives the engine the control lines as one code per clock, made from the
    # packed sample bytes (with the probe's inversions); an in-memory capture gives the lines.
    from .test_differential import CHANNEL, capture_of

    rng = np.random.default_rng(11)
    n = 30_000
    sig, _ = random_bus(rng, n, ad=full, cbe=full, par=full, w64=full, gnt=True, busy=0.7)
    cap, prof = capture_of(sig, mode="pci", width=64 if full else 32, clock_hz=66e6)
    whole = decode_capture(cap, prof, chunk_clocks=4096)
    stored = {CHANNEL[k]: (v ^ np.uint8(1) if k in inverted else v) for k, v in sig.items()}
    widths = {k: w for k, w in {"AD": 64, "C/BE#": 8}.items() if k in stored}
    write_sr(Capture.from_arrays(stored, TimeBase.state(clock_hz=66e6), widths=widths), tmp_path / "c.sr")
    bus = prof.buses[0]
    signals = {k: ([f"{v}{i}" for i in range(widths[v])] if v in widths else v) for k, v in bus.signals.items()}
    prof2 = Profile([BusProfile("pci", "pci", signals=signals, width=bus.width, inverted=set(inverted))], source="t")
    got = decode_capture(tmp_path / "c.sr", prof2, chunk_clocks=4096)
    assert len(whole.records) > 500
    assert diff_records(whole.records, got.records) == []
    assert np.array_equal(whole.words, got.words)
    assert np.array_equal(whole.findings, got.findings)
    assert got.buses["pci"].busy_clocks == whole.buses["pci"].busy_clocks > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 600), read=st.integers(1, 97), spc=st.integers(2, 6))
def test_glitches_found_while_reading_packed_clocks_equal_their_own_pass(tmp_path, seed, n, read, spc):
    # A timing .sr gives the glitch scan the control lines' changes in the read that gives the
    # bus's clocks; the result must be that of the scan's own pass over the lines, whatever
    # the read size (pulses across reads, before the first clock, after the last).
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.decode.engine import GlitchScan, glitch_lines, glitches
    from pcitrace.capture.sr import read_sr

    rng = np.random.default_rng(seed)
    clk = np.tile(np.r_[np.zeros(spc // 2), np.ones(spc - spc // 2)].astype(np.uint8), n // spc + 1)[:n]
    names = {"frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#", "devsel_n": "DEVSEL#"}
    arrays = {"CLK": clk}
    for nm in names.values():
        a = np.ones(n, np.uint8)
        for _ in range(int(rng.integers(0, 8))):            # pulses of 1-3 samples, some glitches
            at = int(rng.integers(0, n))
            a[at:at + int(rng.integers(1, 4))] ^= 1
        arrays[nm] = a
    write_sr(Capture.from_arrays(arrays, TimeBase.timing(400e6)), tmp_path / "g.sr", chunk_bytes=int(rng.integers(1, 50)))
    cap = read_sr(tmp_path / "g.sr")
    bus = BusProfile("pci", "pci", signals={"clk": "CLK", **names})
    want = glitches(cap, bus, chunk_samples=1 << 20)
    scan, fed = GlitchScan(bus.name, glitch_lines(bus), cap.timebase), []

    def on_changes(edges, at, flips):
        fed.append(1)
        scan.feed(edges, {s: at[(flips & np.uint8(1 << i)) != 0] for i, s in enumerate(glitch_lines(bus))})
    for _ in bus_clocks(cap, bus, chunk_clocks=read, read_samples=read, watch=glitch_lines(bus), on_changes=on_changes):
        pass
    assert fed
    got = scan.array()
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, want.tolist()))
    whole = decode_capture(cap, Profile([bus], source="t"))
    assert sorted(map(tuple, whole.findings[whole.findings["kind"] == "glitch"].tolist())) == sorted(map(tuple, want.tolist()))


def _sequential(cap, prof):
    from pcitrace.decode import decode_bus

    parts = [decode_bus(cap, b) for b in prof.buses if b.is_pci]
    return merge_buses([p[:3] for p in parts])


@pytest.fixture
def members_opened(monkeypatch) -> list[str]:
    """The .sr sample members opened (inflated) from now on, in order."""
    import pcitrace.capture._zipread as zr

    opened: list[str] = []
    real_init = zr.Member.__init__

    def counting(self, zf, info):
        opened.append(info.filename)
        real_init(self, zf, info)
    monkeypatch.setattr(zr.Member, "__init__", counting)
    return opened


def test_buses_of_one_sr_are_read_once_for_all(members_opened):
    # decode_capture drives the buses side by side and the .sr inflates each block once for
    # both; the records are those of decoding the buses one after the other
    from pathlib import Path

    from pcitrace.capture import open_capture
    from pcitrace.capture.profile import resolve_profile

    opened = members_opened
    path = Path(__file__).resolve().parents[2] / "samples" / "pro1000_66mhz.sr"
    cap = open_capture(path)
    prof = resolve_profile(cap, None)
    assert sum(b.is_pci for b in prof.buses) == 2
    got = decode_capture(cap, prof, buses=[b.name for b in prof.buses if b.is_pci], chunk_clocks=4096)
    shared = len(opened)
    opened.clear()
    want = _sequential(cap, prof)
    assert diff_records(want[0], got.records) == []
    assert np.array_equal(want[1], got.words) and np.array_equal(want[2], got.findings)
    assert 0 < shared < len(opened)                 # each member inflated once, not once per bus
    # the streamed records (pcitrace decode -o) read it once for all buses too
    from pcitrace.decode import iter_records

    opened.clear()
    streamed = np.concatenate(list(iter_records(cap, prof, buses=[b.name for b in prof.buses if b.is_pci],
                                                chunk_clocks=4096)))
    assert diff_records(got.records, streamed) == [] and len(opened) == shared


@pytest.mark.parametrize("shared_bytes", [1, 1 << 30])
def test_buses_at_different_speeds_and_a_stopped_clock_decode_as_one_by_one(tmp_path, monkeypatch, shared_bytes):
    # One bus's clock stops for most of the capture: driven side by side, the other bus would
    # hold every block the stalled one has not read. A tiny limit cuts the laggard loose to a
    # reader of its own; either way the records are those of decoding the buses one by one.
    import pcitrace.capture.sr as sr

    monkeypatch.setattr(sr, "SHARED_BYTES", shared_bytes)
    rng = np.random.default_rng(4)
    n = 60_000
    arrays = {}
    for name, period, stop_at in (("A", 4, n), ("B", 6, n // 5)):
        clk = (np.arange(n) // (period // 2) % 2).astype(np.uint8)
        clk[stop_at:] = 0
        nclk = int(np.count_nonzero((clk[1:] == 1) & (clk[:-1] == 0)))
        sig, _ = random_bus(rng, nclk + 2, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.6)
        edge = np.flatnonzero((clk[1:] == 1) & (clk[:-1] == 0)) + 1
        for k, v in sig.items():                    # hold each clock's values until its next edge
            line = np.ones(n, np.uint8)
            line[edge[0]:] = np.repeat(v[:len(edge)], np.diff(np.r_[edge, n]))
            arrays[f"{name}.{k}"] = line
        arrays[f"{name}.CLK"] = clk
    write_sr(Capture.from_arrays(arrays, TimeBase.timing(200e6)), tmp_path / "two.sr", chunk_bytes=20_000)
    buses = [BusProfile(nm, "pci", signals={"clk": f"{nm}.CLK", **{k: f"{nm}.{k}" for k in
                                            ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n")}})
             for nm in ("A", "B")]
    prof = Profile(buses, source="t")
    from pcitrace.capture import open_capture

    cap = open_capture(tmp_path / "two.sr")
    got = decode_capture(cap, prof, chunk_clocks=1024)
    want = _sequential(cap, prof)
    assert len(got.records) > 100 and set(got.records["bus"]) == {"A", "B"}
    assert diff_records(want[0], got.records) == []
    assert np.array_equal(want[1], got.words) and np.array_equal(want[2], got.findings)


def test_streamed_buses_advance_together_when_one_has_no_transactions(tmp_path, monkeypatch, members_opened):
    # Found by review: iter_records stepped the bus furthest behind in records, so a bus with
    # no transactions ran to the end first and the other read the capture a second time.
    import pcitrace.capture.sr as sr
    from pcitrace.capture import open_capture
    from pcitrace.decode import iter_records

    monkeypatch.setattr(sr, "SHARED_BYTES", 64 * 1024)        # a few blocks may be held
    rng = np.random.default_rng(9)
    n = 40_000
    sig, _ = random_bus(rng, n, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.6)
    arrays = {f"A.{k}": v for k, v in sig.items()}
    arrays.update({f"B.{k}": np.ones(n, np.uint8) for k in sig})          # idle all along
    write_sr(Capture.from_arrays(arrays, TimeBase.state(clock_hz=66e6)), tmp_path / "s.sr", chunk_bytes=8192)
    buses = [BusProfile(nm, "pci", signals={k: f"{nm}.{k}" for k in sig}) for nm in ("A", "B")]
    prof = Profile(buses, source="t")
    opened = members_opened
    cap = open_capture(tmp_path / "s.sr")
    streamed = list(iter_records(cap, prof, chunk_clocks=1024))
    assert len(opened) == len(set(opened))                  # every member inflated once
    assert len(streamed) > 10                                # released as they came
    assert diff_records(decode_capture(cap, prof).records, np.concatenate(streamed)) == []


@pytest.mark.parametrize("engine", ["fast", "stream"])
def test_profile_mapping_frame_but_not_irdy_names_what_is_missing(engine):
    """A PCI bus needs its five control lines; a profile mapping FRAME# alone was a KeyError
    'irdy_n' deep in the decoder (issue 18). The error names the bus and the missing lines."""
    from pcitrace.decode import iter_records
    n = 64
    cap = Capture.from_arrays({"CLK": np.arange(n) % 2, "FRAME#": np.ones(n), "TRDY#": np.ones(n)},
                              TimeBase.timing(100e6))
    prof = Profile([BusProfile("send", signals={"clk": "CLK", "frame_n": "FRAME#", "trdy_n": "TRDY#"})])
    with pytest.raises(PcitraceError) as e:
        if engine == "fast":
            decode_capture(cap, prof)
        else:
            list(iter_records(cap, prof))
    msg = str(e.value)
    assert "'send'" in msg and "irdy_n, stop_n, devsel_n" in msg and "\n" not in msg


def test_the_first_estimate_of_the_output_is_bounded_by_the_capture():
    """The rest of a capture is guessed as busy as its first chunk with output; a tiny share
    read off a damaged time base asked for 1 GiB at once (issue 18). A record or a data word
    takes a clock at least, so the guess never exceeds the capture's samples."""
    from types import SimpleNamespace

    from pcitrace.decode import _BusDecode, _Grow
    from pcitrace.decode.records import RECORD_DTYPE

    d = _BusDecode.__new__(_BusDecode)
    d.capture = SimpleNamespace(num_samples=5000)
    d.recs, d.words, d._estimated = _Grow(RECORD_DTYPE), _Grow(RECORD_DTYPE), set()
    d.out = {"span": SimpleNamespace(share_of=lambda capture: 1e-9)}
    assert len(d._alloc(RECORD_DTYPE, 10)) == 10
    assert len(d.recs.buf) <= 5000

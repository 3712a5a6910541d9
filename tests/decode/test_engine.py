"""The fast engine against hand-worked bus sequences (docs/records.md applied by hand) and,
on random bus-like activity, against the literal per-clock oracle, whole and in chunks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.decode.engine import decode_clocks
from pcitrace.decode.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE, diff_records
from pcitrace.errors import PcitraceError

from .helpers import clocks, even_par, random_bus
from .oracle import oracle_decode

P = 30000  # ps per clock in the hand-written sequences


def dec(spec, ad=None, cbe=None, extra="", **kw):
    sig, t = clocks(spec, ad, cbe, extra=extra, period_ps=P)
    for k in ("par", "par64"):
        if k in kw:
            sig[k] = np.asarray(kw.pop(k), np.uint8)
    rec, words, findings, _ = decode_clocks(sig, t, **kw)
    return rec, words, findings


def kinds(findings):
    return sorted(findings["kind"].tolist())


def test_single_read_medium_wait():
    rec, words, f = dec(["", "F", "ID", "ITD", ""], cbe=[0xF, 0xA, 0x0, 0x0, 0xF], ad=[0, 0x10, 0, 0x1234, 0])
    assert len(rec) == 1
    r = rec[0]
    assert (r["start_ps"], r["end_ps"], r["clocks"]) == (P, 3 * P, 3)
    assert r["command"] == "config_read" and r["address"] == 0x10 and not r["dac"]
    assert (r["data_phases"], r["bytes"], r["target_waits"], r["initiator_waits"]) == (1, 4, 1, 0)
    assert r["devsel"] == "fast" and r["termination"] == "normal"
    assert r["width"] == 32 and r["gnt"] == -1 and r["tag"] == -1 and r["byte_count"] == -1
    assert words.tolist() == [(0, 3 * P, 0x1234, 0)]
    assert len(f) == 0


def test_burst_with_initiator_wait_and_byte_enables():
    rec, words, _ = dec(["", "F", "FITD", "FTD", "FITD", "ITD", ""], cbe=[0, 7, 0x0, 0x3, 0x3, 0xE, 0])
    r = rec[0]
    assert (r["data_phases"], r["initiator_waits"], r["target_waits"]) == (3, 1, 0)
    assert r["bytes"] == 4 + 2 + 1
    assert r["command"] == "mem_write"
    assert words["byte_enables"].tolist() == [0x0, 0x3, 0xE]
    assert words["time_ps"].tolist() == [2 * P, 4 * P, 5 * P]


@pytest.mark.parametrize("spec,term,devsel", [
    (["", "F", "FID", "FIDS", "IDS", ""], "retry", "fast"),
    (["", "F", "FITD", "FITDS", "IDS", ""], "disconnect_with_data", "fast"),
    (["", "F", "FITD", "FIDS", "IDS", ""], "disconnect_without_data", "fast"),
    (["", "F", "FI", "FID", "FIS", "IS", ""], "target_abort", "medium"),
    (["", "F", "FI", "FI", "FI", "FI", "I", ""], "master_abort", "none"),
    (["", "F", "FI", "FI", "FID", "FITD", "ITD", ""], "normal", "slow"),
    (["", "F", "FI", "FI", "FI", "FID", "ITD", ""], "normal", "subtractive"),
    (["", "F", "FITD"], "truncated", "fast"),
])
def test_terminations_and_devsel(spec, term, devsel):
    rec, _, f = dec(spec)
    assert len(rec) == 1
    assert rec[0]["termination"] == term
    assert rec[0]["devsel"] == devsel
    assert rec[0]["command"] == "unknown" and rec[0]["address"] == 0
    if term == "truncated":
        assert rec[0]["end_ps"] == (len(spec) - 1) * P
    # a well-behaved bus raises no findings
    assert len(f) == 0


def test_retry_counts_wait_and_termination_clocks():
    r = dec(["", "F", "FID", "FIDS", "IDS", ""])[0][0]
    assert (r["data_phases"], r["target_waits"], r["initiator_waits"], r["clocks"]) == (0, 1, 0, 4)


def test_dual_address_cycle():
    rec, _, _ = dec(["", "F", "F", "FITD", "ITD", ""], ad=[0, 0x89ABCDEF, 0x1, 5, 6, 0],
                    cbe=[0, 0xD, 0x7, 0, 0, 0])
    r = rec[0]
    assert r["dac"] and r["command"] == "mem_write" and r["address"] == 0x1_89ABCDEF
    assert r["devsel"] == "fast" and r["data_phases"] == 2


def test_pcix_burst_attributes():
    attr = (1 << 30) | (5 << 24) | (3 << 16) | (2 << 11) | (1 << 8) | 0x80
    rec, _, _ = dec(["", "F", "F", "FID", "FITD", "ITD", ""], ad=[0, 0x1000, attr, 0, 1, 2, 0],
                    cbe=[0, 0xE, 0x0, 0, 0, 0, 0], mode="pcix", width=64)
    r = rec[0]
    assert r["command"] == "mem_read_block" and r["devsel"] == "fast"
    assert (r["tag"], r["requester"], r["byte_count"]) == (5, (3 << 8) | (2 << 3) | 1, 0x80)
    assert r["relaxed_ordering"] and not r["no_snoop"]
    assert r["target_waits"] == 1 and r["data_phases"] == 2 and r["width"] == 64 and r["bytes"] == 16


def test_pcix_byte_count_zero_means_4096_and_dword_counts_enables():
    rec, _, _ = dec(["", "F", "F", "FITD", "ITD", ""], ad=[0, 0, 0, 0, 0, 0], cbe=[0, 0xF, 0x0, 0, 0, 0],
                    mode="pcix")
    assert rec[0]["byte_count"] == 4096
    rec, _, _ = dec(["", "F", "F", "ITD", ""], ad=[0, 0, 0, 0, 0], cbe=[0, 0x6, 0x3, 0, 0], mode="pcix")
    assert rec[0]["command"] == "mem_read_dword" and rec[0]["byte_count"] == 2


def test_pcix_split_response():
    rec, _, _ = dec(["", "F", "F", "FID", "IST", ""], mode="pcix")
    assert rec[0]["termination"] == "split_response"


def test_64_bit_transfer():
    ad = [0, 0x100, 0xAAAABBBB_CCCCDDDD, 0x11112222_33334444, 0]
    rec, words, _ = dec(["", "FR", "FIRTDA", "IRTDA", ""], ad=ad, cbe=[0, 0x7, 0, 0, 0], extra="RA")
    assert rec[0]["width"] == 64 and rec[0]["bytes"] == 16
    assert words["value"].tolist() == [0xAAAABBBB_CCCCDDDD, 0x11112222_33334444]
    # without ACK64# the same transfer is 32-bit
    rec, words, _ = dec(["", "FR", "FIRTD", "IRTD", ""], ad=ad, cbe=[0, 0x7, 0, 0, 0], extra="RA")
    assert rec[0]["width"] == 32 and rec[0]["bytes"] == 8
    assert words["value"].tolist() == [0xCCCCDDDD, 0x33334444]


def test_width_from_profile_without_req64_ack64():
    rec, _, _ = dec(["", "F", "ITD", ""], width=64)
    assert rec[0]["width"] == 64 and rec[0]["bytes"] == 8


def test_parity_error_on_a_data_phase():
    ad = [0, 0x100, 0xF0F0F0F1, 0x3, 0]
    cbe = [0xF, 0x7, 0x0, 0x0, 0xF]
    par = even_par(ad, cbe)
    rec, _, f = dec(["", "F", "FITD", "ITD", ""], ad=ad, cbe=cbe, par=par)
    assert not rec[0]["parity_error"] and len(f) == 0
    par = par.copy()
    par[3] ^= 1          # PAR for the data phase on clock 2
    rec, _, f = dec(["", "F", "FITD", "ITD", ""], ad=ad, cbe=cbe, par=par)
    assert rec[0]["parity_error"]
    assert kinds(f) == ["parity_error"] and f[0]["time_ps"] == 2 * P and "data phase 1" in f[0]["message"]
    par2 = even_par(ad, cbe)
    par2[2] ^= 1         # PAR for the address phase
    rec, _, f = dec(["", "F", "FITD", "ITD", ""], ad=ad, cbe=cbe, par=par2)
    assert rec[0]["parity_error"] and "address phase" in f[0]["message"]


def test_par64_checked_only_on_64_bit_phases():
    ad = [0, 0x100, 0xAAAABBBB_CCCCDDDD, 0x11112222_33334444, 0]
    cbe = [0xFF, 0x7, 0x0, 0x0, 0xFF]
    par = even_par(ad, cbe)
    par64 = even_par(ad, cbe, hi=True) ^ np.array([0, 0, 0, 1, 0], np.uint8)
    spec64 = ["", "FR", "FIRTDA", "IRTDA", ""]
    rec, _, f = dec(spec64, ad=ad, cbe=cbe, extra="RA", par=par, par64=par64)
    assert rec[0]["parity_error"] and "PAR64" in f[0]["message"]
    rec, _, f = dec(["", "F", "FITD", "ITD", ""], ad=ad, cbe=cbe, extra="RA", par=par, par64=par64)
    assert not rec[0]["parity_error"] and len(f) == 0


def test_fast_back_to_back_and_first_clock_address():
    rec, _, _ = dec(["F", "ITD", "F", "ITD", ""])
    assert rec["start_ps"].tolist() == [0, 2 * P]
    assert rec["termination"].tolist() == ["normal", "normal"]


def test_capture_starting_mid_transaction_ignores_it():
    rec, _, f = dec(["FITD", "ITD", "", "F", "ITD", ""])
    assert rec["start_ps"].tolist() == [3 * P]
    assert len(f) == 0
    # clock 0 with FRAME# and IRDY# both asserted is not an address phase
    rec, _, _ = dec(["FI", "ITD", ""])
    assert len(rec) == 0


def test_irdy_without_transaction_once_per_run():
    rec, _, f = dec(["", "I", "I", "", "I", "", "F", "ITD", ""])
    assert kinds(f) == ["irdy_without_transaction"] * 2
    assert f["time_ps"].tolist() == [P, 4 * P]
    assert len(rec) == 1 and rec[0]["start_ps"] == 6 * P


def test_frame_reasserted_while_final_phase_pending():
    rec, _, f = dec(["", "F", "FID", "ID", "F", "ITD", ""])
    assert len(rec) == 2
    assert kinds(f) == ["frame_reasserted"] and f[0]["time_ps"] == 4 * P


def test_gnt_on_clock_before_address():
    rec, _, _ = dec(["G", "FG", "ITD", "", "F", "ITD", ""], extra="G")
    assert rec["gnt"].tolist() == [1, 0]
    rec, _, _ = dec(["FG", "ITD", ""], extra="G")
    assert rec["gnt"].tolist() == [0]


def test_initial_latency_finding():
    spec = ["", "F"] + ["FID"] * 16 + ["FITD", "ITD", ""]
    rec, _, f = dec(spec)
    assert kinds(f) == ["initial_latency"]
    rec, _, f = dec(["", "F"] + ["FID"] * 15 + ["FITD", "ITD", ""])
    assert len(f) == 0


def test_devsel_and_stop_findings():
    _, _, f = dec(["", "F", "FIT", "FITD", "ITD", ""])
    assert kinds(f) == ["trdy_without_devsel"]
    _, _, f = dec(["", "F", "FIS", "IS", ""])
    assert kinds(f) == ["stop_without_devsel"]
    # a target abort's STOP# without DEVSEL# is the abort, not a finding
    _, _, f = dec(["", "F", "FID", "FIS", "IS", ""])
    assert len(f) == 0


@pytest.mark.parametrize("waits,n", [(3, 4), (4, 5), (5, 6)])
def test_devsel_after_the_subtractive_slot_is_a_finding(waits, n):
    # address on clock 1 (H = 1), IRDY# waits without DEVSEL#, DEVSEL# first on clock 1 + n,
    # data on the clock after it
    spec = ["", "F"] + ["FI"] * waits + ["FID", "ITD", ""]
    cbe = [0xF, 0x6] + [0x0] * (waits + 2) + [0xF]
    rec, _, f = dec(spec, cbe=cbe)
    r = rec[0]
    # the record is that of a subtractive decode whatever n is (docs/records.md)
    assert (r["devsel"], r["termination"], r["data_phases"], r["target_waits"]) == \
        ("subtractive", "normal", 1, waits + 1)
    if n == 4:
        assert len(f) == 0
    else:
        assert kinds(f) == ["devsel_late"]
        assert f[0]["time_ps"] == (1 + n) * P            # the clock DEVSEL# came, once
        assert f"{n} clocks after the address phase" in f[0]["message"]


def test_devsel_late_counts_from_the_last_header_clock():
    # DAC: H is the second address phase, so DEVSEL# 5 clocks after the first phase is n = 4
    spec = ["", "F", "F", "FI", "FI", "FI", "FID", "ITD", ""]
    rec, _, f = dec(spec, cbe=[0xF, 0xD, 0x7, 0, 0, 0, 0, 0, 0xF])
    assert rec[0]["dac"] and rec[0]["devsel"] == "subtractive" and len(f) == 0
    spec = ["", "F", "F", "FI", "FI", "FI", "FI", "FID", "ITD", ""]
    _, _, f = dec(spec, cbe=[0xF, 0xD, 0x7, 0, 0, 0, 0, 0, 0, 0xF])
    assert kinds(f) == ["devsel_late"] and f[0]["time_ps"] == 7 * P
    assert "5 clocks after the second address phase" in f[0]["message"]
    # PCI-X: counted from the attribute phase
    spec = ["", "F", "F", "FI", "FI", "FI", "FI", "FID", "ITD", ""]
    rec, _, f = dec(spec, ad=[0] * 10, cbe=[0xF, 0x6, 0x0, 0, 0, 0, 0, 0, 0, 0xF], mode="pcix")
    assert rec[0]["devsel"] == "subtractive"
    assert kinds(f) == ["devsel_late"] and "5 clocks after the attribute phase" in f[0]["message"]


def test_devsel_late_without_cbe_allows_an_unseen_dac():
    # Without C/BE# a DAC's second address phase looks like a wait: DEVSEL# 5 clocks after the
    # address phase may be a DAC's subtractive decode, 6 cannot be.
    _, _, f = dec(["", "F", "F", "FI", "FI", "FI", "FID", "ITD", ""])
    assert len(f) == 0
    _, _, f = dec(["", "F", "F", "FI", "FI", "FI", "FI", "FID", "ITD", ""])
    assert kinds(f) == ["devsel_late"] and f[0]["time_ps"] == 7 * P


def test_byte_enables_changed_during_target_wait():
    _, _, f = dec(["", "F", "FID", "FID", "FITD", "ITD", ""], cbe=[0, 6, 0x0, 0x3, 0x3, 0x0, 0])
    assert kinds(f) == ["byte_enables_changed_in_wait"] and f[0]["time_ps"] == 3 * P


def test_control_only_bytes_from_width():
    rec, words, _ = dec(["", "F", "FITD", "FITD", "ITD", "", "F", "ITD", ""], width=32)
    assert rec[0]["bytes"] == 12 and rec[0]["command"] == "unknown"
    # no AD, no C/BE#: a word per data phase carrying its time only
    assert rec["data_index"].tolist() == [0, 3]
    assert words["time_ps"].tolist() == [2 * P, 3 * P, 4 * P, 7 * P]
    assert not words["value"].any() and not words["byte_enables"].any()


def test_missing_control_signal_is_a_user_error():
    sig, t = clocks(["", "F", "ITD", ""])
    del sig["devsel_n"]
    with pytest.raises(PcitraceError, match="devsel_n"):
        decode_clocks(sig, t)


def test_empty_input():
    sig, t = clocks([])
    rec, words, f, carry = decode_clocks(sig, t)
    assert rec.dtype == RECORD_DTYPE and words.dtype == WORD_DTYPE and f.dtype == FINDING_DTYPE
    assert len(rec) == len(words) == len(f) == 0


# --- random activity: engine == oracle, and chunking changes nothing --------------------------

bus_options = st.fixed_dictionaries({
    "ad": st.booleans(), "cbe": st.booleans(), "par": st.booleans(), "w64": st.booleans(),
    "gnt": st.booleans(),
})


def chunked(sig, t, cuts, **kw):
    carry, parts = None, []
    prev = 0
    for cut in list(cuts) + [len(t)]:
        r, w, f, carry = decode_clocks({k: v[prev:cut] for k, v in sig.items()}, t[prev:cut],
                                       carry=carry, final=False, **kw)
        parts.append((r, w, f))
        prev = cut
    r, w, f, carry = decode_clocks({k: v[:0] for k, v in sig.items()}, t[:0], carry=carry, final=True, **kw)
    parts.append((r, w, f))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 160), opts=bus_options,
       mode=st.sampled_from(["pci", "pcix"]), busy=st.floats(0.2, 0.9),
       cuts=st.lists(st.integers(0, 160), max_size=4))
def test_engine_matches_oracle_whole_and_chunked(seed, n, opts, mode, busy, cuts):
    rng = np.random.default_rng(seed)
    sig, t = random_bus(rng, n, busy=busy, **opts)
    width = 64 if opts["w64"] else 32
    ref, ref_words, ref_parity = oracle_decode(sig, t.tolist(), mode=mode, width=width)
    rec, words, f, _ = decode_clocks(sig, t, mode=mode, width=width)
    assert diff_records(ref, rec) == []
    assert [tuple(int(x) for x in w) for w in words] == ref_words
    assert sorted(f["time_ps"][f["kind"] == "parity_error"].tolist()) == ref_parity
    r2, w2, f2 = chunked(sig, t, sorted(c for c in cuts if c <= n), mode=mode, width=width)
    assert diff_records(rec, r2) == []
    assert np.array_equal(words, w2)
    assert sorted(map(tuple, f.tolist())) == sorted(map(tuple, f2.tolist()))


def test_chunking_at_every_boundary():
    """Every cut position of one busy sequence (the carry's corner cases: a cut right after an
    address phase, inside a DAC, on an idle clock, on the capture's first clock)."""
    rng = np.random.default_rng(7)
    sig, t = random_bus(rng, 60, ad=True, cbe=True, par=True, w64=True, gnt=True, busy=0.7)
    rec, words, f, _ = decode_clocks(sig, t, mode="pcix")
    for a in range(0, 61):
        for b in (a, a + 1, a + 2):
            r2, w2, f2 = chunked(sig, t, [a, min(b, 60)], mode="pcix")
            assert diff_records(rec, r2) == [], (a, b)
            assert np.array_equal(words, w2)
            assert sorted(map(tuple, f.tolist())) == sorted(map(tuple, f2.tolist())), (a, b)


def long_transaction(n: int) -> dict[str, np.ndarray]:
    """One transaction over almost all of n clocks (FRAME# held: a stuck line, a probe off the
    bus), a data phase every other clock."""
    spec_sig, _ = clocks(["", "F", "FI", ""])
    sig = {k: np.ones(n, np.uint8) for k in spec_sig}
    sig["frame_n"][1:n - 5] = 0
    sig["irdy_n"][2:n - 5] = 0
    sig["devsel_n"][3:n - 5] = 0
    sig["trdy_n"][3:n - 5:2] = 0
    return sig


def test_transaction_open_for_many_chunks():
    """FRAME# held for a long time: the open transaction waits in the carry chunk after
    chunk, and the result is that of decoding it whole."""
    n = 300_000
    sig = long_transaction(n)
    t = np.arange(n, dtype=np.int64) * P
    whole = decode_clocks(sig, t)[0]
    r2, _, _ = chunked(sig, t, list(range(1000, n, 1000)))
    assert diff_records(whole, r2) == []
    assert len(whole) == 1 and whole[0]["clocks"] == n - 6 and whole[0]["termination"] == "normal"
    # without an end it is cut by the end of the capture
    sig["frame_n"][:] = 0
    sig["frame_n"][0] = 1
    r3, _, _ = chunked(sig, t, list(range(1000, n, 1000)))
    assert len(r3) == 1 and r3[0]["termination"] == "truncated" and r3[0]["clocks"] == n - 1


def test_chunk_too_long_for_packed_counts_decodes_the_same():
    # Counts of three classes share one int64 (21 bits each) only while a chunk holds fewer
    # than 2**21 clocks; a longer one takes the per-class path and must agree.
    rng = np.random.default_rng(21)
    base, _ = random_bus(rng, 20_000, ad=False, cbe=False, par=False, w64=False, gnt=False, busy=0.6)
    n = (1 << 21) + 777
    sig = {k: np.tile(v, -(-n // len(v)))[:n] for k, v in base.items()}
    t = np.arange(n, dtype=np.int64) * P
    whole, w_whole, f_whole, _ = decode_clocks(sig, t)
    parts, words, finds, carry = [], [], [], None
    for a in range(0, n, 1 << 18):
        r, w, f, carry = decode_clocks({k: v[a:a + (1 << 18)] for k, v in sig.items()}, t[a:a + (1 << 18)],
                                       carry=carry, final=False)
        parts.append(r), words.append(w), finds.append(f)
    r, w, f, _ = decode_clocks({k: v[:0] for k, v in sig.items()}, t[:0], carry=carry)
    parts.append(r), words.append(w), finds.append(f)
    assert len(whole) > 100_000
    assert diff_records(whole, np.concatenate(parts)) == []
    assert np.array_equal(w_whole, np.concatenate(words))
    assert np.array_equal(np.sort(f_whole, order="time_ps"), np.sort(np.concatenate(finds), order="time_ps"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 160), opts=bus_options,
       mode=st.sampled_from(["pci", "pcix"]), cuts=st.lists(st.integers(0, 160), max_size=5),
       start_ps=st.integers(0, 10**12))
def test_times_computed_where_read_decode_the_same(seed, n, opts, mode, cuts, start_ps):
    # State captures of a uniform clock hand the engine SampleTimes (times computed only where
    # read), chunk by chunk; the result must be that of the times as arrays.
    from pcitrace.capture.model import TimeBase

    rng = np.random.default_rng(seed)
    sig, _ = random_bus(rng, n, busy=0.7, **opts)
    tb = TimeBase.state(clock_hz=66_666_667.0, start_ps=start_ps)
    t = tb.times_ps(0, n)
    width = 64 if opts["w64"] else 32
    rec, words, f, _ = decode_clocks(sig, t, mode=mode, width=width)
    carry, parts, prev = None, [], 0
    for cut in sorted(c for c in cuts if c <= n) + [n]:
        r, w, fi, carry = decode_clocks({k: v[prev:cut] for k, v in sig.items()}, tb.lazy_times(prev, cut),
                                        carry=carry, final=False, mode=mode, width=width)
        parts.append((r, w, fi))
        prev = cut
    parts.append(decode_clocks({k: v[:0] for k, v in sig.items()}, tb.lazy_times(n, n), carry=carry,
                               mode=mode, width=width)[:3])
    r2, w2, f2 = (np.concatenate([p[i] for p in parts]) for i in range(3))
    assert diff_records(rec, r2) == []
    assert np.array_equal(words, w2)
    assert sorted(map(tuple, f.tolist())) == sorted(map(tuple, f2.tolist()))


def test_times_computed_where_read_through_a_transaction_open_for_many_chunks():
    from pcitrace.capture.model import TimeBase

    n = 20_000
    sig = long_transaction(n)
    tb = TimeBase.state(clock_hz=33_333_333.0)
    whole, w_whole, _, _ = decode_clocks(sig, tb.times_ps(0, n))
    carry, recs, words, waited = None, [], [], 0
    for a in range(0, n, 500):
        r, w, _, carry = decode_clocks({k: v[a:a + 500] for k, v in sig.items()}, tb.lazy_times(a, min(a + 500, n)),
                                       carry=carry, final=False)
        recs.append(r), words.append(w)
        waited = max(waited, len(carry.pending))
    assert waited > 10                      # the open transaction waited, unjoined
    r, w, _, _ = decode_clocks({k: v[:0] for k, v in sig.items()}, tb.lazy_times(n, n), carry=carry)
    recs.append(r), words.append(w)
    assert diff_records(whole, np.concatenate(recs)) == [] and len(whole) == 1
    assert np.array_equal(w_whole, np.concatenate(words))


def test_data_phase_clocks_beyond_the_kept_running_count(monkeypatch):
    # a chunk with more data phases than the running count kept between calls (a transaction
    # open over many chunks) takes a count of its own and decodes the same
    import pcitrace.decode.engine as engine

    rng = np.random.default_rng(8)
    sig, t = random_bus(rng, 5000, ad=True, cbe=True, par=False, w64=False, gnt=False, busy=0.8)
    want = decode_clocks(sig, t)
    monkeypatch.setattr(engine, "_ARANGE_KEEP", 16)
    monkeypatch.setattr(engine, "_ARANGE", np.arange(0, dtype=np.int64))
    got = decode_clocks(sig, t)
    assert len(want[1]) > 1000 and len(engine._ARANGE) <= 16
    assert diff_records(want[0], got[0]) == [] and np.array_equal(want[1], got[1])


# --- the engine's stages, each on its own ------------------------------------------------------

def stages(spec, ad=None, cbe=None, *, final=True, pcix=False, extra=""):
    """A chunk of hand-written clocks run through the first stages (no carry)."""
    from pcitrace.decode import engine as E
    sig, t = clocks(spec, ad, cbe, extra=extra, period_ps=P)
    code = E._control_code(sig)
    ck = E._Chunk(sig, t, len(t), 0, code, E._Runs(code, 0), pcix, sig.get("ad"), sig.get("cbe_n"))
    tx = E._transactions(ck, final, False)
    hd = E._header(ck, tx)
    dv = E._devsel(ck, tx, hd, 32)
    return E, ck, tx, hd, dv


def test_control_code_packs_the_asserted_lines():
    from pcitrace.decode import engine as E
    sig, _ = clocks(["", "F", "FI", "ITDS"])
    assert E._control_code(sig).tolist() == [0, E._F, E._F | E._I, E._I | E._T | E._D | E._S]
    made = {"code": np.array([3, 1], np.uint8)}
    assert E._control_code(made) is made["code"]


def test_transactions_bounds_and_what_waits_for_the_next_chunk():
    spec = ["", "F", "FITD", "ITD", "", "F", "FID", "FITD"]
    E, ck, tx, *_ = stages(spec, final=True)
    assert tx.s.tolist() == [1, 5] and tx.e.tolist() == [3, 7]
    assert tx.j.tolist() == [4, 8] and tx.truncated.tolist() == [False, True]
    assert tx.bounds.tolist() == [0, 1, 4, 5] and tx.limit == len(spec)
    # not final: the transaction without an end waits; clocks from its address phase on are kept
    E, ck, tx, *_ = stages(spec, final=False)
    assert tx.s.tolist() == [1] and tx.limit == 5
    assert tx.in_txn[tx.r_limit:].sum() == 0 and tx.busy_run[tx.r_limit:].any()


def test_header_finds_dac_command_and_the_first_data_clock():
    # DAC (C/BE# 0xD) then a memory read (0x6): the second address phase is a header clock
    spec = ["", "F", "F", "FID", "ITD", ""]
    E, ck, tx, hd, dv = stages(spec, ad=[0, 0x10, 0x2, 0, 0, 0], cbe=[0xF, 0xD, 0x6, 0, 0, 0xF])
    assert hd.dac.tolist() == [True] and hd.dac2.tolist() == [True]
    assert hd.cmd_code.tolist() == [6] and hd.H.tolist() == [2] and hd.lo.tolist() == [3]
    # without C/BE#: no DAC, command unknown (-1)
    E, ck, tx, hd, dv = stages(spec)
    assert hd.dac.tolist() == [False] and hd.cmd_code.tolist() == [-1] and hd.lo.tolist() == [2]


@pytest.mark.parametrize("spec,fd,speed", [
    (["", "F", "FID", "ITD", ""], 2, 0),            # fast: DEVSEL# on the clock after the address
    (["", "F", "FI", "FID", "ITD", ""], 3, 1),      # medium
    (["", "F", "FI", "FI", "FI", "FI", "I", ""], -1, 4),   # none: master abort
])
def test_devsel_speed_and_first_clock(spec, fd, speed):
    E, ck, tx, hd, dv = stages(spec)
    assert dv.fd.tolist() == [fd] and dv.code.tolist() == [speed] and dv.has_d.tolist() == [fd >= 0]


def test_counts_data_phases_and_waits():
    spec = ["", "F", "FID", "FITD", "FTD", "FITD", "ITD", ""]
    E, ck, tx, hd, dv = stages(spec)
    cn = E._counts(ck, tx, hd, dv)
    assert (cn.data_phases.tolist(), cn.initiator_waits.tolist(), cn.target_waits.tolist(),
            cn.stop_clocks.tolist()) == ([3], [1], [1], [0])


@pytest.mark.parametrize("spec,term", [
    (["", "F", "FID", "FIDS", "IDS", ""], "retry"),
    (["", "F", "FITD", "FITDS", "IDS", ""], "disconnect_with_data"),
    (["", "F", "FITD", "FIDS", "IDS", ""], "disconnect_without_data"),
    (["", "F", "FID", "FIS", "IS", ""], "target_abort"),
    (["", "F", "FI", "FI", "FI", "FI", "I", ""], "master_abort"),
    (["", "F", "FID", "FITD"], "truncated"),
])
def test_termination_stage(spec, term):
    from pcitrace.decode import facts
    E, ck, tx, hd, dv = stages(spec)
    assert facts.TERMINATIONS[E._termination(ck, tx, hd, dv)[0]] == term


def test_data_words_skip_header_clocks_and_give_per_word_values():
    # IRDY#, TRDY# and DEVSEL# on the address phase itself: not a data phase
    spec = ["", "FITD", "FITD", "ITD", "", "F", "FITD", "ITD", ""]
    ad = list(range(100, 109))
    E, ck, tx, hd, dv = stages(spec, ad=ad, cbe=[0] * 9)
    cn = E._counts(ck, tx, hd, dv)
    wd = E._data_words(ck, tx, hd, dv, cn.data_phases)
    assert wd.idx.tolist() == [2, 3, 6, 7] and wd.txn.tolist() == [0, 0, 1, 1]
    assert wd.excl.tolist() == [0, 2] and wd.ad.tolist() == [102, 103, 106, 107]
    assert E._per_txn_sum(wd, np.array([1, 2, 3, 4])).tolist() == [3, 7]
    assert E._byte_counts(ck, dv, cn, wd, 8).tolist() == [8, 8]


def test_bad_parity_checks_par_on_the_next_clock():
    from pcitrace.decode import engine as E
    ad, cbe = [0, 1, 3, 0], [0, 0, 0, 0]
    par = even_par(ad, cbe)
    par[3] ^= 1                                       # clock 2's PAR is wrong
    sig, t = clocks(["", "F", "FITD", ""], ad, cbe)
    sig["par"] = par
    code = E._control_code(sig)
    ck = E._Chunk(sig, t, 4, 0, code, E._Runs(code, 0), False, sig["ad"], sig["cbe_n"])
    assert E._bad_parity(ck, np.arange(4)).tolist() == [False, False, True, False]


def test_next_carry_keeps_the_open_transaction_and_the_clock_before_it():
    spec = ["", "F", "FITD", "ITD", "", "F", "FID", "FITD"]
    E, ck, tx, hd, dv = stages(spec, final=False)
    prior = E.Carry({}, np.zeros(0, np.int64), 10, False)
    new = E._next_carry(ck, tx, prior, final=False, leading=False, r_from=0, words=2)
    assert new.open and new.context and new.clock0 == 10 + 4
    assert new.sig["frame_n"].tolist() == [1, 0, 0, 0] and new.records == 1 and new.words == 2
    new = E._next_carry(ck, tx, prior, final=True, leading=False, r_from=0, words=2)
    assert not new.open and len(new.times_ps) == 0 and new.clock0 == 10 + len(spec)

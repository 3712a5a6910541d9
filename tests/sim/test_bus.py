"""The bus renderer: exact waveforms for each kind of transaction, the PCI rules over random
activity, and its truth against an independent clock-by-clock reading of docs/records.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture.clocked import bus_clocks
from pcitrace.capture.profile import detect_profile
from pcitrace.decode.records import WORD_DTYPE, diff_records
from pcitrace.errors import PcitraceError
from pcitrace.sim.bus import TxnSpec, crop, is_read, render, to_capture
from pcitrace.sim.strategies import cropped, rendered_buses

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _load_oracle():
    path = Path(__file__).resolve().parents[1] / "decode" / "oracle.py"
    spec = importlib.util.spec_from_file_location("_records_oracle", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.oracle_decode


oracle_decode = _load_oracle()


def wave(rb, name):
    return "".join(str(int(v)) for v in rb.signals[name])


def bus_view(rb, with_ad=None):
    """The signals a capture of ``rb`` shows, keyed by canonical name."""
    with_ad = rb.with_ad if with_ad is None else with_ad
    sig = {k: v for k, v in rb.signals.items() if ":" not in k}
    if not with_ad:
        for k in ("ad", "cbe_n", "par", "par64"):
            sig.pop(k, None)
    return sig


def oracle(rb, sig=None, times=None):
    sig = bus_view(rb) if sig is None else sig
    times = list(rb.times_ps()) if times is None else list(times)
    recs, words, parity = oracle_decode(sig, times, mode=rb.mode, width=rb.width, bus=rb.bus)
    w = np.array(words, dtype=WORD_DTYPE) if words else np.zeros(0, WORD_DTYPE)
    return recs, w, parity


def assert_truth_matches_oracle(rb):
    recs, words, parity = oracle(rb)
    diff = diff_records(recs, rb.records)
    assert not diff, diff[:10]
    assert np.array_equal(words, rb.words)
    pf = rb.findings[rb.findings["kind"] == "parity_error"]
    assert sorted(parity) == sorted(int(t) for t in pf["time_ps"])


# -- exact waveforms ------------------------------------------------------------------------------

def test_burst_write_waveform_and_record():
    rb = render([TxnSpec(0x7, 0x1000, [1, 2, 3])], clock_hz=33e6)
    # clock:            01234567
    assert wave(rb, "frame_n") == "11000111"
    assert wave(rb, "irdy_n") == "11100011"
    assert wave(rb, "trdy_n") == "11100011"
    assert wave(rb, "devsel_n") == "11100011"
    assert wave(rb, "stop_n") == "11111111"
    assert list(rb.signals["ad"][2:6]) == [0x1000, 1, 2, 3]
    assert list(rb.signals["cbe_n"][2:6]) == [0x7, 0, 0, 0]
    r = rb.records[0]
    assert (r["command"], r["clocks"], r["data_phases"], r["bytes"], r["devsel"], r["termination"]) == \
        ("mem_write", 4, 3, 12, "fast", "normal")
    assert r["start_ps"] == round(2 * 1e12 / 33e6) and r["end_ps"] == round(5 * 1e12 / 33e6)
    assert list(rb.words["value"]) == [1, 2, 3]
    assert_truth_matches_oracle(rb)


def test_read_has_turnaround_and_devsel_waits():
    rb = render([TxnSpec(0x6, 0x2000, [0xAB], devsel="medium", target_waits={0: 0})], clock_hz=66e6)
    # address at 2, IRDY# and FRAME# release at 3, DEVSEL# at 4 (medium), TRDY# at 4
    assert wave(rb, "frame_n") == "1101111"
    assert wave(rb, "irdy_n") == "1110011"
    assert wave(rb, "devsel_n") == "1111011"
    assert wave(rb, "trdy_n") == "1111011"
    r = rb.records[0]
    assert (r["devsel"], r["target_waits"], r["initiator_waits"]) == ("medium", 1, 0)
    fast = render([TxnSpec(0x6, 0x2000, [0xAB], devsel="fast")], clock_hz=66e6)
    assert wave(fast, "trdy_n") == "1111011"       # turnaround clock even with fast DEVSEL#
    assert wave(fast, "devsel_n") == "1110011"
    assert_truth_matches_oracle(rb)
    assert_truth_matches_oracle(fast)


def test_initiator_then_target_waits():
    rb = render([TxnSpec(0x7, 0x0, [5, 6], initiator_waits={1: 2}, target_waits={0: 1, 1: 1})])
    # A=2, data0 at 4 (one target wait at 3), then IRDY# off 2 clocks, target wait, data1 at 8
    assert wave(rb, "irdy_n") == "11100110011"
    assert wave(rb, "frame_n") == "11000001111"   # released when IRDY# returns for the last phase
    assert wave(rb, "trdy_n") == "11110111011"
    r = rb.records[0]
    assert (r["initiator_waits"], r["target_waits"], r["clocks"]) == (2, 2, 7)
    assert_truth_matches_oracle(rb)


def test_master_abort_timing():
    rb = render([TxnSpec(0x6, 0x10, devsel="none")])
    # A=2: FRAME# until H+4, released on H+5 = 7 with IRDY#, IRDY# released on 8
    assert wave(rb, "frame_n") == "1100000111"
    assert wave(rb, "irdy_n") == "1110000011"
    assert wave(rb, "devsel_n") == "1111111111"
    r = rb.records[0]
    assert (r["termination"], r["devsel"], r["target_waits"], r["clocks"]) == ("master_abort", "none", 5, 6)
    done = render([TxnSpec(0x6, 0x10, devsel="none", master_done=True)])
    assert wave(done, "frame_n") == "1101111111"
    assert_truth_matches_oracle(rb)
    assert_truth_matches_oracle(done)


def test_retry_holds_stop_until_frame_released():
    rb = render([TxnSpec(0x6, 0x10, termination="retry", devsel="fast")])
    # STOP# (not AD) may come on the turnaround clock; FRAME# is released on the next clock
    assert wave(rb, "frame_n") == "1100111"
    assert wave(rb, "stop_n") == "1110011"
    assert wave(rb, "irdy_n") == "1110011"
    assert wave(rb, "trdy_n") == "1111111"
    assert wave(rb, "devsel_n") == "1110011"
    assert rb.records["termination"][0] == "retry"
    assert_truth_matches_oracle(rb)


def test_disconnects():
    with_data = render([TxnSpec(0x7, 0x0, [1, 2], termination="disconnect_with_data")])
    assert wave(with_data, "stop_n") == "11110011"
    assert wave(with_data, "trdy_n") == "11100111"
    without = render([TxnSpec(0x7, 0x0, [1, 2], termination="disconnect_without_data", master_done=True)])
    assert wave(without, "stop_n") == "11111011"
    assert wave(without, "trdy_n") == "11100111"
    assert list(with_data.records["termination"]) == ["disconnect_with_data"]
    assert list(without.records["termination"]) == ["disconnect_without_data"]
    assert_truth_matches_oracle(with_data)
    assert_truth_matches_oracle(without)


def test_stop_while_the_initiator_waits():
    rb = render([TxnSpec(0x7, 0x0, [1, 2], termination="disconnect_with_data", initiator_waits={1: 3},
                         stop_early=2)])
    # data 0 at 3; IRDY# off 4..6, TRDY#+STOP# from 5; the last data moves at 7 with FRAME# released
    assert wave(rb, "irdy_n") == "1110111011"
    assert wave(rb, "trdy_n") == "1110100011"
    assert wave(rb, "stop_n") == "1111100011"
    assert wave(rb, "frame_n") == "1100000111"
    r = rb.records[0]
    assert (r["termination"], r["initiator_waits"], r["data_phases"]) == ("disconnect_with_data", 1, 2)
    retry = render([TxnSpec(0x6, 0x0, [], termination="retry", initiator_waits={0: 3}, stop_early=5)])
    # STOP# from the first clock DEVSEL# allows (all three initiator waits), then IRDY# + FRAME# off
    assert wave(retry, "stop_n") == "111000011"
    assert wave(retry, "frame_n") == "110000111"
    assert retry.records["initiator_waits"][0] == 0 and retry.records["termination"][0] == "retry"
    assert_truth_matches_oracle(rb)
    assert_truth_matches_oracle(retry)


def test_target_abort_releases_devsel_with_stop():
    rb = render([TxnSpec(0x7, 0x0, [], termination="target_abort", devsel="medium")])
    # DEVSEL# at H+2 = 4, abort at 5 (DEVSEL# released, STOP# asserted), FRAME# released at 6
    assert wave(rb, "devsel_n") == "111101111"
    assert wave(rb, "stop_n") == "111110011"
    assert wave(rb, "frame_n") == "110000111"
    assert rb.records["termination"][0] == "target_abort"
    assert_truth_matches_oracle(rb)


def test_dac_and_64bit():
    addr = 0x1_2345_6780
    rb = render([TxnSpec(0x7, addr, [0x1111_2222_3333_4444], req64=True)], width=64, clock_hz=66e6)
    assert list(rb.signals["cbe_n"][2:4] & 0xF) == [0xD, 0x7]
    assert rb.signals["ad"][3] == 0x1
    assert wave(rb, "req64_n") == wave(rb, "frame_n")
    assert wave(rb, "ack64_n") == wave(rb, "devsel_n")
    r = rb.records[0]
    assert (r["dac"], r["address"], r["width"], r["bytes"], r["command"]) == (True, addr, 64, 8, "mem_write")
    assert rb.words["value"][0] == 0x1111_2222_3333_4444
    # a 64-bit request the target does not acknowledge moves 32 bits
    narrow = render([TxnSpec(0x7, 0x100, [0x1111_2222_3333_4444], req64=True, ack64=False)], width=64)
    assert narrow.records["width"][0] == 32 and narrow.words["value"][0] == 0x3333_4444
    assert wave(narrow, "ack64_n") == "1" * narrow.clocks
    assert_truth_matches_oracle(rb)
    assert_truth_matches_oracle(narrow)


def test_dac_without_ad_counts_second_address_phase_as_wait():
    rb = render([TxnSpec(0x6, 0x2_0000_0000, [1], devsel="medium")], with_ad=False)
    r = rb.records[0]
    assert (r["dac"], r["command"], r["initiator_waits"], r["devsel"]) == (False, "unknown", 1, "slow")
    assert_truth_matches_oracle(rb)


def test_pcix_attributes_split_response_and_completion():
    req = TxnSpec(0xE, 0x8000, [], termination="split_response", devsel="medium", requester=0x1234,
                  tag=7, byte_count=512, relaxed_ordering=True, no_snoop=True)
    comp = TxnSpec(0xC, 0x5, [9, 8], requester=0x1234, tag=7, byte_count=512, idle_before=3)
    rb = render([req, comp], mode="pcix", clock_hz=133e6)
    attr = int(rb.signals["ad"][3])
    assert attr & 0xFF == 0 and rb.signals["cbe_n"][3] & 0xF == 2          # 512 = 0x200
    assert (attr >> 8) & 0xFFFF == 0x1234 and (attr >> 24) & 0x1F == 7
    assert attr >> 29 & 1 and attr >> 30 & 1
    # split response: TRDY# with DEVSEL# released, STOP# not asserted, one clock
    A, E = rb.start_clock[0], rb.end_clock[0]
    seg = slice(A, E + 1)
    t, d, s = rb.signals["trdy_n"][seg], rb.signals["devsel_n"][seg], rb.signals["stop_n"][seg]
    assert list(t).count(0) == 1 and d[list(t).index(0)] == 1 and set(s) == {1}
    r0, r1 = rb.records
    assert (r0["termination"], r0["tag"], r0["requester"], r0["byte_count"]) == ("split_response", 7, 0x1234, 512)
    assert (r0["relaxed_ordering"], r0["no_snoop"]) == (True, True)
    assert (r1["command"], r1["tag"], r1["requester"], r1["no_snoop"]) == ("split_completion", 7, 0x1234, False)
    assert r1["address"] == 0x5 | 0x1234 << 8 | 7 << 24
    assert_truth_matches_oracle(rb)


def test_pcix_dword_byte_count_and_adb_disconnect():
    dw = render([TxnSpec(0x6, 0x40, [0xDEAD], byte_enables=[0b1100])], mode="pcix")
    assert dw.records["byte_count"][0] == 2 and dw.records["bytes"][0] == 2
    adb = render([TxnSpec(0xF, 128 - 16, [1, 2, 3, 4], termination="disconnect_adb", stop_phases=2)],
                 mode="pcix")
    assert wave(adb, "stop_n").count("0") == 2
    assert adb.records["termination"][0] == "disconnect_with_data"
    assert_truth_matches_oracle(dw)
    assert_truth_matches_oracle(adb)


def test_parity_default_and_injected():
    ok = render([TxnSpec(0x7, 0x1, [0xFF, 0x7])], width=64)
    assert not ok.records["parity_error"][0] and len(ok.findings) == 0
    bad = render([TxnSpec(0x7, 0x1, [0xFF, 0x7], parity_error=1), TxnSpec(0x6, 0x3, [1], parity_error=-1)])
    assert list(bad.records["parity_error"]) == [True, True]
    assert list(bad.findings["kind"]) == ["parity_error", "parity_error"]
    assert bad.findings["time_ps"][0] == bad.words["time_ps"][1]
    assert bad.findings["time_ps"][1] == bad.records["start_ps"][1]
    assert_truth_matches_oracle(ok)
    assert_truth_matches_oracle(bad)


def test_abandoned_final_phase_is_a_frame_reasserted_fault():
    rb = render([TxnSpec(0x7, 0, [1, 2], termination="abandoned", target_waits={2: 2}),
                 TxnSpec(0x6, 4, [3], idle_before=3)])
    assert wave(rb, "frame_n")[:9] == "110001101"
    assert wave(rb, "irdy_n")[:9] == "111000010"
    r0, r1 = rb.records
    assert (r0["termination"], r0["data_phases"], r0["target_waits"], r0["clocks"]) == ("normal", 2, 2, 5)
    assert rb.start_clock[1] == rb.end_clock[0] + 1
    (f,) = rb.findings
    assert f["kind"] == "frame_reasserted" and f["time_ps"] == r1["start_ps"]
    assert_truth_matches_oracle(rb)


def test_par64_error_on_a_64bit_data_phase():
    rb = render([TxnSpec(0x7, 0x0, [1 << 40, 3], req64=True, parity_error=0, parity_lane="par64")], width=64)
    assert rb.records["parity_error"][0]
    assert _parity_ok(rb.signals["ad"], rb.signals["cbe_n"], rb.signals["par"]).all()
    assert not _parity_ok(rb.signals["ad"], rb.signals["cbe_n"], rb.signals["par64"], hi=True).all()
    assert "PAR64" in rb.findings["message"][0]
    assert_truth_matches_oracle(rb)
    with pytest.raises(PcitraceError, match="parity lane"):
        render([TxnSpec(0x7, 0x0, [1], parity_error=0, parity_lane="par64")], width=64)


def test_initial_latency_finding_at_first_data_phase():
    rb = render([TxnSpec(0x6, 0x0, [1], target_waits={0: 20})])
    (f,) = rb.findings
    assert f["kind"] == "initial_latency" and f["time_ps"] == rb.words["time_ps"][0]


def test_fast_back_to_back_and_arbitration():
    specs = [TxnSpec(0x7, 0x0, [1], master=0), TxnSpec(0x7, 0x4, [2], idle_before=0, master=0),
             TxnSpec(0x6, 0x8, [3], idle_before=2, master=1), TxnSpec(0x7, 0xC, [4], idle_before=1, master=0)]
    rb = render(specs, masters=("nic", "host"), gnt_master=0)
    assert rb.start_clock[1] == rb.end_clock[0] + 1
    assert list(rb.records["gnt"]) == [1, 1, 0, 1]
    g = np.stack([rb.signals["gnt_n:nic"], rb.signals["gnt_n:host"]])
    assert np.all((g == 0).sum(axis=0) == 1)          # exactly one master granted on every clock
    for t, s in enumerate(specs):
        A = rb.start_clock[t]
        name = ("nic", "host")[s.master]
        assert rb.signals[f"gnt_n:{name}"][A - 1] == 0 and rb.signals[f"req_n:{name}"][A - 1] == 0
    assert np.array_equal(rb.signals["gnt_n"], rb.signals["gnt_n:nic"])
    none = render(specs, masters=("nic", "host"), gnt_master=None)
    assert list(none.records["gnt"]) == [-1] * 4
    assert_truth_matches_oracle(rb)


@pytest.mark.parametrize("spec, kw, what", [
    (TxnSpec(0xD, 0), {}, "not a bus command"),
    (TxnSpec(0x6, 0, [], termination="retry", devsel="none"), {}, "devsel"),
    (TxnSpec(0x7, 0, [1], req64=True), {}, "32-bit bus"),
    (TxnSpec(0x6, 0, [], termination="split_response"), {}, "PCI-X"),
    (TxnSpec(0x6, 0, [1], termination="retry"), {}, "moves no data"),
    (TxnSpec(0x7, 0, []), {}, "at least one"),
    (TxnSpec(0x7, 0, [1], target_waits={3: 1}), {}, "does not exist"),
    (TxnSpec(0x7, 0, [1], initiator_waits={0: 1}), {"mode": "pcix"}, "PCI-X initiators"),
    (TxnSpec(0x7, 0, [1], devsel="quick"), {}, "DEVSEL"),
    (TxnSpec(0x7, 0, [1], parity_error=4), {}, "parity"),
    (TxnSpec(0x7, 0, [1], master=2), {}, "master"),
])
def test_bad_specs_raise_pcitrace_error(spec, kw, what):
    with pytest.raises(PcitraceError, match=what):
        render([spec], **kw)


# -- cropping: captures that start or stop mid-activity ---------------------------------------

def test_crop_truncates_and_drops_partial_transactions():
    specs = [TxnSpec(0x7, 0x0, [1, 2, 3], target_waits={1: 2}), TxnSpec(0x6, 0x2_0000_0010, [4], idle_before=2),
             TxnSpec(0x7, 0x20, [5, 6], idle_before=2, parity_error=1)]
    rb = render(specs)
    A, E = rb.start_clock, rb.end_clock
    # start inside the first transaction (a data clock), stop inside the third's last phase
    cb = crop(rb, int(A[0]) + 2, int(E[2]))
    assert len(cb.records) == 2
    r1, r2 = cb.records
    assert r1["termination"] == "normal" and r1["start_ps"] == round((A[1] - A[0] - 2) * 1e12 / 33e6)
    assert r2["termination"] == "truncated" and r2["data_phases"] == 1 and r2["bytes"] == 4
    assert not r2["parity_error"] and len(cb.findings) == 0   # phase 1 never completed
    assert list(cb.records["data_index"]) == [0, 1] and list(cb.words["record"]) == [0, 1]
    # stopping on the last clock of a transaction still leaves it busy (no idle clock seen)
    last = crop(rb, 0, int(E[2]) + 1)
    assert last.records["termination"][2] == "truncated" and last.records["data_phases"][2] == 2
    assert not last.records["parity_error"][2]                 # PAR of the last phase is not in it
    whole = crop(rb, 0, int(E[2]) + 2)
    assert whole.records["parity_error"][2] and whole.records["termination"][2] == "normal"
    # a capture ending on the first DAC address phase
    dac = crop(rb, 0, int(A[1]) + 1)
    assert (dac.records["command"][1], dac.records["dac"][1], dac.records["address"][1]) == ("dac", True, 0x10)
    for c in (cb, last, whole, dac):
        assert_truth_matches_oracle(c)
    with pytest.raises(PcitraceError, match="looks like an address phase"):
        crop(rb, int(A[1]) + 1)                               # the second DAC phase


@SETTINGS
@given(rendered_buses(max_txns=6).flatmap(cropped))
def test_cropped_truth_equals_independent_reading(cb):
    assert_truth_matches_oracle(cb)


# -- the PCI rules over random activity ----------------------------------------------------------

def _parity_ok(ad, cbe, par, hi=False):
    if hi:
        a, c = (ad >> np.uint64(32)), (cbe >> 4) & 0xF
    else:
        a, c = ad & np.uint64(0xFFFFFFFF), cbe & 0xF
    return ((np.bitwise_count(a[:-1]) + np.bitwise_count(c[:-1]) + par[1:]) & 1) == 0


def check_pci_rules(rb, specs=None):
    s = rb.signals
    F, I, T, S, D = (s[k] == 0 for k in ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n"))
    n = rb.clocks
    inside = np.zeros(n, bool)
    pcix = rb.mode == "pcix"
    for t in range(len(rb.records)):
        A, E = int(rb.start_clock[t]), int(rb.end_clock[t])
        rec = rb.records[t]
        nh = (2 if rec["dac"] else 1) + pcix if rb.with_ad else 1 + pcix
        H = A + nh - 1
        inside[A:E + 1] = True
        assert F[A] and not F[A - 1] and not I[A], f"txn {t}: address phase"
        assert I[E] and not F[E], f"txn {t}: last clock has IRDY# and no FRAME#"
        assert (not F[E + 1] and not I[E + 1]) or (F[E + 1] and not I[E + 1]), f"txn {t}: after the end"
        assert not D[A:H + 1].any() and not T[A:H + 1].any() and not S[A:H + 1].any()
        released = False
        for c in range(A + 1, E + 1):
            if F[c - 1] and not F[c]:
                assert I[c], f"txn {t} clock {c}: FRAME# released without IRDY#"
                released = True
            assert not (released and F[c]), f"txn {t} clock {c}: FRAME# reasserted"
            done = (T[c - 1] and D[c - 1]) or S[c - 1] or (pcix and T[c - 1] and not D[c - 1])
            if c - 1 > H and I[c - 1] and not done:
                assert I[c], f"txn {t} clock {c}: IRDY# withdrawn before the phase completed"
                assert s["cbe_n"][c] == s["cbe_n"][c - 1], f"txn {t} clock {c}: C/BE# changed in a wait"
            if S[c - 1] and F[c - 1] and c <= E:
                assert S[c], f"txn {t} clock {c}: STOP# released while FRAME# asserted"
            if T[c] and not D[c]:
                assert pcix and not S[c], f"txn {t} clock {c}: TRDY# without DEVSEL#"
        cmd = {v[0]: k for k, v in __import__("pcitrace.decode.facts", fromlist=["x"]).PCI_COMMANDS.items()} \
            if not pcix else {v[0]: k for k, v in __import__("pcitrace.decode.facts", fromlist=["x"]).PCIX_COMMANDS.items()}
        if rb.with_ad and is_read(cmd[str(rec["command"])], rb.mode):
            assert not T[H + 1], f"txn {t}: TRDY# on the turnaround clock"
        if not D[A:E + 1].any():
            assert E - H >= 5, f"txn {t}: master abort before the DEVSEL# timeout"
    assert not D[~inside].any() and not T[~inside].any() and not S[~inside].any()
    assert not I[~inside].any()
    assert _parity_ok(s["ad"], s["cbe_n"], s["par"]).all()
    if rb.width == 64:
        assert _parity_ok(s["ad"], s["cbe_n"], s["par64"], hi=True).all()
        assert np.all(s["req64_n"] >= s["frame_n"]) and np.all(s["ack64_n"] >= s["devsel_n"])
    grants = np.stack([s[f"gnt_n:{m}"] for m in rb.masters])
    assert np.all((grants == 0).sum(axis=0) == 1)


@SETTINGS
@given(rendered_buses())
def test_random_activity_obeys_pci_rules(rb):
    check_pci_rules(rb)


@SETTINGS
@given(rendered_buses())
def test_per_clock_lines_are_their_reference(rb):
    # the renderer builds the lines from runs (packed state bits, parity per value); the
    # reference is clock by clock: each clock's state code through the state table, and the
    # parity of the previous clock's AD and C/BE# (legal activity: no parity error injected)
    from pcitrace.sim.bus import _F, _I, _S, _T

    s = rb.signals
    for name, table in (("frame_n", _F), ("irdy_n", _I), ("trdy_n", _T), ("stop_n", _S)):
        np.testing.assert_array_equal(s[name], table[rb.codes], err_msg=name)
    ad, cbe = s["ad"], s["cbe_n"]
    for name, a, c in (("par", ad & np.uint64(0xFFFFFFFF), cbe & 0xF),
                       ("par64", ad >> np.uint64(32), cbe >> 4)):
        if name in s:
            expect = np.zeros(rb.clocks, np.uint8)
            expect[1:] = (np.bitwise_count(a[:-1]) + np.bitwise_count(c[:-1])) & 1
            np.testing.assert_array_equal(s[name], expect, err_msg=name)


@SETTINGS
@given(st.data())
def test_blocks_and_held_quiet_spells_draw_what_one_block_draws(data):
    # the renderer draws a bus block by block and holds long quiet spells (a long idle run
    # before a transaction, a long tail) as one value: with blocks of a few clocks every cut
    # and hold is exercised, against the bus drawn as one block
    import pcitrace.sim.bus as B
    from pcitrace.sim.strategies import bus_activity

    mode = data.draw(st.sampled_from(["pci", "pcix"]))
    width = data.draw(st.sampled_from([32, 64]))
    specs = data.draw(bus_activity(mode=mode, width=width, masters=2, max_txns=6))
    for s in specs:
        if data.draw(st.booleans()):
            s.idle_before = data.draw(st.integers(1, 40))
    kw = dict(mode=mode, width=width, clock_hz=66e6, masters=("nic", "host"), tail=data.draw(st.integers(1, 30)))
    block = B.CLOCK_BLOCK
    try:
        B.CLOCK_BLOCK = data.draw(st.integers(1, 8))
        small = render(specs, **kw)
    finally:
        B.CLOCK_BLOCK = block
    whole = render(specs, **kw)
    assert small.signals.keys() == whole.signals.keys()
    for k in whole.signals:
        np.testing.assert_array_equal(small.signals[k], whole.signals[k], err_msg=k)
    np.testing.assert_array_equal(small.codes, whole.codes)
    for f in ("records", "words", "findings"):
        np.testing.assert_array_equal(getattr(small, f), getattr(whole, f), err_msg=f)


@SETTINGS
@given(rendered_buses())
def test_truth_equals_independent_reading_of_the_signals(rb):
    assert_truth_matches_oracle(rb)


@SETTINGS
@given(rendered_buses(max_txns=5))
def test_truth_is_self_consistent(rb):
    r = rb.records
    period = 1e12 / rb.clock_hz
    assert np.all(np.diff(r["start_ps"]) > 0)
    assert np.all(r["end_ps"][:-1] < r["start_ps"][1:])
    assert np.array_equal(r["clocks"], rb.end_clock - rb.start_clock + 1)
    assert np.allclose(r["end_ps"] - r["start_ps"], (r["clocks"] - 1) * period, atol=1)
    # one word per completed data phase, also without AD / C/BE# (then only its time)
    assert np.array_equal(np.bincount(rb.words["record"], minlength=len(r)), r["data_phases"])
    if not rb.with_ad:
        assert not rb.words["value"].any() and not rb.words["byte_enables"].any()
    assert np.array_equal(r["data_index"], np.concatenate(([0], np.cumsum(r["data_phases"])[:-1])))
    assert np.all(r["bytes"] <= r["data_phases"] * r["width"] // 8)
    assert np.all((r["termination"] != "master_abort") | (r["data_phases"] == 0))
    assert np.all((r["devsel"] == "none") == (r["termination"] == "master_abort"))
    lo = r["start_ps"][rb.words["record"]]
    hi = r["end_ps"][rb.words["record"]]
    assert np.all((lo < rb.words["time_ps"]) & (rb.words["time_ps"] <= hi))


# -- captures ----------------------------------------------------------------------------------

def _from_capture(ct, bus):
    chunks = list(bus_clocks(ct.capture, ct.profile.bus(bus), chunk_clocks=7))
    sig = {k: np.concatenate([c.sig[k] for c in chunks]) for k in chunks[0].sig}
    times = np.concatenate([c.times_ps for c in chunks])
    return sig, times


@SETTINGS
@given(rendered_buses(max_txns=5))
def test_timing_and_state_captures_show_the_same_clocks(rb):
    state = to_capture(rb)
    timing = to_capture(rb, samples_per_clock=5)
    s_sig, s_t = _from_capture(state, rb.bus)
    t_sig, t_t = _from_capture(timing, rb.bus)
    # every clock is a rising edge in both; the timing capture starts half a period earlier
    lead = t_t[0] - s_t[0]
    assert len(t_t) == len(s_t) and 0 < lead <= 1e12 / rb.clock_hz
    assert np.all(np.abs(t_t - lead - s_t) <= 1e12 / (5 * rb.clock_hz))
    for k in s_sig:
        assert np.array_equal(t_sig[k], s_sig[k]), k
    assert not diff_records(state.records, timing.records, ignore=("start_ps", "end_ps"))
    assert np.array_equal(timing.records["start_ps"], t_t[rb.start_clock])
    for name in ("frame_n", "ad", "gnt_n"):
        if name in rb.signals and name in s_sig:
            assert np.array_equal(s_sig[name], rb.signals[name])


def test_capture_channel_names_profile_and_detection():
    rb = render([TxnSpec(0x7, 0x1000, [1, 2], req64=True)], width=64, masters=("nic", "host"))
    ct = to_capture(rb, bits=True)
    names = ct.capture.channel_names
    assert {"FRAME#", "IRDY#", "AD0", "AD63", "C/BE#7", "PAR64", "REQ64#", "GNT#", "REQ#", "host_GNT#"} <= set(names)
    bus = ct.profile.bus("pci")
    assert bus.signals["ad"] == [f"AD{i}" for i in range(64)] and bus.width == 64
    assert bus.nic.gnt == "gnt_n"
    found = detect_profile(ct.capture).bus("pci")
    assert {k: v for k, v in found.signals.items()} == bus.signals
    sig, _ = _from_capture(ct, "pci")
    assert np.array_equal(sig["ad"], rb.signals["ad"]) and np.array_equal(sig["cbe_n"], rb.signals["cbe_n"])
    ctl = to_capture(rb, with_ad=False)
    assert "AD" not in ctl.capture.channel_names and "PAR" not in ctl.capture.channel_names
    assert set(ctl.records["command"]) == {"unknown"} and ctl.records["address"][0] == 0
    assert ctl.records["bytes"][0] == 16
    # the words keep their times (first-word timing of a control-only capture) but no values
    assert np.array_equal(ctl.words["time_ps"], ct.words["time_ps"])
    assert not ctl.words["value"].any() and not ctl.words["byte_enables"].any()


def test_two_buses_in_one_timing_capture():
    a = render([TxnSpec(0x7, 0x0, [1, 2]), TxnSpec(0x6, 0x4, [3], idle_before=5)], clock_hz=66_666_667.0,
               bus="send", width=64)
    b = render([TxnSpec(0x6, 0x8, [4], idle_before=3)], clock_hz=133_333_333.0, bus="recv", mode="pcix")
    ct = to_capture([a, b], samplerate_hz=1e9)
    assert "send.FRAME#" in ct.capture.channel_names and "recv.CLK" in ct.capture.channel_names
    assert np.all(np.diff(ct.records["start_ps"]) >= 0)
    assert np.array_equal(ct.records["data_index"], np.searchsorted(ct.words["record"], np.arange(3)))
    for rb in (a, b):
        sig, times = _from_capture(ct, rb.bus)
        m = min(len(sig["frame_n"]), rb.clocks)
        assert np.array_equal(sig["frame_n"][:m], rb.signals["frame_n"][:m])
        recs, words, _ = oracle(rb, {k: v[:m] for k, v in sig.items()}, times[:m])
        mine = ct.records[ct.records["bus"] == rb.bus]
        assert not diff_records(recs, mine, ignore=("data_index",))
    with pytest.raises(PcitraceError, match="one clock"):
        to_capture([a, b])


def test_merged_data_index_per_records_md():
    a = render([TxnSpec(0x7, 0x0, [1, 2]), TxnSpec(0x7, 0x8, [3], idle_before=20)], bus="a")
    b = render([TxnSpec(0x7, 0x0, [4, 5, 6], idle_before=8), TxnSpec(0x7, 0x0, [7], idle_before=9)],
               bus="b", with_ad=False)
    ct = to_capture([a, b])
    # start order: a0 (clock 2), b0 (8), b1, a1; bus b's words carry their times only
    assert list(ct.records["bus"]) == ["a", "b", "b", "a"]
    assert list(ct.records["data_index"]) == [0, 2, 5, 6]
    assert list(ct.words["record"]) == [0, 0, 1, 1, 1, 2, 3]
    assert list(ct.words["value"]) == [1, 2, 0, 0, 0, 0, 3]
    assert np.all(np.diff(ct.words["time_ps"][2:5]) > 0)


def test_glitch_changes_no_sampled_value():
    rb = render([TxnSpec(0x7, 0x0, [1, 2, 3])])
    plain = to_capture(rb, samples_per_clock=8)
    gl = to_capture(rb, samples_per_clock=8, glitches=[("pci", "irdy_n", 3)])
    assert list(gl.findings["kind"]) == ["glitch"]
    a, b = plain.capture.read(["IRDY#"])["IRDY#"], gl.capture.read(["IRDY#"])["IRDY#"]
    (i,) = np.flatnonzero(a != b)
    clk = gl.capture.read(["CLK"])["CLK"]
    assert not (clk[i] == 1 and clk[i - 1] == 0)          # not at a sampling edge
    assert gl.findings["time_ps"][0] == round(i * 1e12 / (8 * 33e6))
    assert np.array_equal(_from_capture(plain, "pci")[0]["irdy_n"], _from_capture(gl, "pci")[0]["irdy_n"])


@pytest.mark.parametrize("n", [4, 5, 7, 8])
def test_timing_waveform_matches_the_quarter_period_rule(n):
    """Sample s shows the clock whose quarter-period change point precedes it; CLK is low for the
    first half period, then high in the first half of every clock."""
    rb = render([TxnSpec(0x7, 0x0, [1, 2, 3]), TxnSpec(0x6, 0x10, [4], devsel="slow", idle_before=3)], width=64)
    d = to_capture(rb, samples_per_clock=n).capture.read()
    lead = -(-n // 2)
    x = (np.arange(len(d["CLK"]), dtype=np.float64) - lead) / n
    assert len(x) == lead + rb.clocks * n
    clk_of = np.clip(np.floor(x - 0.25).astype(np.int64) + 1, 0, rb.clocks - 1)
    assert np.array_equal(d["CLK"], (((x - np.floor(x)) < 0.5) & (x >= 0)).astype(np.uint8))
    for canon, ch in (("frame_n", "FRAME#"), ("ad", "AD"), ("cbe_n", "C/BE#"), ("par64", "PAR64")):
        assert np.array_equal(d[ch], rb.signals[canon][clk_of]), ch


@pytest.mark.parametrize("width", [32, 64])
def test_record_bytes_are_the_enabled_lanes_of_its_words(width):
    # (the renderer sums only the words that disable a lane: random byte enables, counted here
    # word by word from the words table)
    rng = np.random.default_rng(width)
    specs = []
    for _ in range(60):
        P = int(rng.integers(1, 6))
        be = [None, int(rng.integers(0, 256)), rng.integers(0, 256, P).tolist()][int(rng.integers(0, 3))]
        specs.append(TxnSpec(command=int(rng.choice([6, 7])), address=int(rng.integers(0, 1 << 20)) * 8,
                             data=rng.integers(0, 1 << 62, P).tolist(), byte_enables=be,
                             req64=bool(width == 64 and rng.random() < 0.5)))
    rb = render(specs, mode="pci", width=width, clock_hz=33e6)
    w, r = rb.words, rb.records
    lanes = np.where(r["width"][w["record"]] == 64, 8, 4)
    enabled = lanes - np.array([bin(int(b) & ((1 << n) - 1)).count("1") for b, n in zip(w["byte_enables"], lanes)])
    expect = np.bincount(w["record"], weights=enabled, minlength=len(r)).astype(np.int64)
    assert (r["bytes"] < r["data_phases"] * r["width"] // 8).any()
    np.testing.assert_array_equal(r["bytes"], expect)


# -- the renderer's parts, each against a plain reference ------------------------------------------

@SETTINGS
@given(st.data())
def test_shape_runs_add_up_to_its_clocks_waits_and_phases(data):
    # a shape's runs (the master abort's, or the claimed slots' with their end codes) cover its
    # clocks exactly; the wait clocks it counts are those of its wait runs, and its data clocks
    # are its completed phases
    import pcitrace.sim.bus as B
    from pcitrace.sim.strategies import txn_specs

    mode = data.draw(st.sampled_from(["pci", "pcix"]))
    s = data.draw(txn_specs(mode=mode, width=64))
    pcix = mode == "pcix"
    n, term = B._spec_devsel(0, s)
    nhdr = (2 if s.is_dac else 1) + pcix
    shp = B._make_shape(0, pcix, is_read(s.command, mode), term, n, len(s.data), nhdr, s, True)
    assert int(shp.length.sum()) == shp.end + 1
    clocks = np.repeat(shp.code, shp.length)
    assert int(B._IS_DATA[clocks].sum()) == len(s.data)
    assert int((clocks[nhdr:] == B.HEAD).sum()) == shp.iwaits
    assert int(np.isin(clocks, [B.TWAIT, B.TWAIT_L]).sum()) == shp.twaits
    if n is None:
        assert shp.devsel is None and shp.end >= nhdr - 1 + B.MASTER_ABORT_CLOCKS
    else:
        assert shp.devsel == nhdr - 1 + n


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=8), st.integers(1, 5))
def test_interval_line_is_low_exactly_in_its_intervals(gaps, tail):
    from pcitrace.sim.bus import _interval_line

    lo, hi, c = [], [], 0
    for i, g in enumerate(gaps):          # disjoint sorted intervals: gap, then i % 3 + 1 clocks
        lo.append(c + g)
        hi.append(c + g + i % 3)
        c = hi[-1] + 1
    total = c + tail
    expect = np.ones(total, np.uint8)
    for a, b in zip(lo, hi):
        expect[a:b + 1] = 0
    np.testing.assert_array_equal(_interval_line(np.array(lo, np.int64), np.array(hi, np.int64), total), expect)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2)), max_size=6), st.integers(1, 4), st.booleans())
def test_arbitration_lines_against_a_per_clock_owner(txns, tail, lean):
    # GNT# of master m is asserted from the clock after the previous address phase up to its own
    # (the owner of clock c: the master of the next address phase at or after c; after the last
    # one the bus stays parked on its master); REQ# leads GNT# by a clock up to the last address
    # phase and is deasserted after it
    from pcitrace.sim.bus import _arbitration

    starts = np.cumsum([g for g, _ in txns]).astype(np.int64)
    who = np.array([m for _, m in txns], np.int64)
    total = int(starts[-1]) + tail if len(txns) else tail
    masters, gnt_master = ("nic", "host", "other"), 1
    sig = {}
    _arbitration(sig, starts, who, masters, gnt_master, lean, total)
    for m, name in enumerate(masters):
        if len(txns):
            owner = [who[min(int(np.searchsorted(starts, c)), len(who) - 1)] for c in range(total)]
            g = np.array([o != m for o in owner], np.uint8)
            rq = np.array([g[c + 1] if c < starts[-1] else 1 for c in range(total)], np.uint8)
        else:
            g, rq = np.full(total, m != 0, np.uint8), np.ones(total, np.uint8)
        if m == gnt_master:
            np.testing.assert_array_equal(sig["gnt_n"], g)
            np.testing.assert_array_equal(sig["req_n"], rq)
        assert (f"gnt_n:{name}" in sig) == (not lean)
        if not lean:
            np.testing.assert_array_equal(sig[f"gnt_n:{name}"], g)
            np.testing.assert_array_equal(sig[f"req_n:{name}"], rq)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 0xFF), max_size=4)), max_size=6))
def test_record_bytes_against_a_loop_over_the_words(recs):
    from pcitrace.sim.bus import _record_bytes

    wide_t = np.array([w for w, _ in recs], bool)
    P = np.array([len(be) for _, be in recs], np.int64)
    all_be = np.array([b for _, be in recs for b in be], np.uint8)
    wide_w = np.repeat(wide_t, P)
    got = _record_bytes(all_be, all_be & 0xF, wide_w, wide_t, P, np.cumsum(P) - P)
    expect = [sum((8 if w else 4) - bin(b & (0xFF if w else 0xF)).count("1") for b in be) for w, be in recs]
    assert got.tolist() == expect


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 9), st.integers(1, 12), st.integers(0, 5))
def test_timing_samples_and_clk_whole_samples_per_clock_match_the_general_rule(N, clocks, extra):
    # whole samples per clock are built by repetition; the general rule (any ratio) reads clock
    # floor(x - 1/4) + 1 at sample time x (in clocks) and CLK high in the first half period
    from pcitrace.sim.bus import RenderedBus, _timing_clk, _timing_samples

    hz = 10e6
    rb = RenderedBus({"frame_n": np.arange(clocks, dtype=np.uint8)}, None, None, None, hz)
    lead = -(-N // 2)
    n_samples = lead + clocks * N + extra
    arr, edge = _timing_samples(rb, {"F": rb.signals["frame_n"]}, lead, n_samples, hz * N)
    x = (np.arange(n_samples, dtype=np.float64) - lead) / N
    clk_of = np.clip(np.floor(x - 0.25).astype(np.int64) + 1, 0, clocks - 1)
    np.testing.assert_array_equal(arr["F"], rb.signals["frame_n"][clk_of])
    np.testing.assert_array_equal(edge, lead + np.arange(clocks) * N)
    clk = _timing_clk(rb, lead, n_samples, hz * N)
    expect = (((x - np.floor(x)) < 0.5) & (x >= 0)).astype(np.uint8)
    expect[lead + clocks * N:] = 0          # (no clock after the bus's last one)
    np.testing.assert_array_equal(clk, expect)

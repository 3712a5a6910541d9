"""The hypothesis strategies: they generate legal activity covering every feature, their captures
decode (independently) to their truth, and injected faults leave the records alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture.clocked import bus_clocks
from pcitrace.decode.records import WORD_DTYPE, diff_records
from pcitrace.sim.strategies import (FAULT_KINDS, bus_activity, captures_with_truth, faulty_activity,
                                     nic_family_scenarios)

from .test_bus import check_pci_rules, oracle_decode

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def decode_capture_with_oracle(ct):
    """Read every bus of a capture through its profile and decode it clock by clock."""
    recs, words = [], []
    for bus in ct.profile.pci_buses:
        chunks = list(bus_clocks(ct.capture, bus, chunk_clocks=1 << 12))
        sig = {k: np.concatenate([c.sig[k] for c in chunks]) for k in chunks[0].sig}
        times = np.concatenate([c.times_ps for c in chunks])
        sig.pop("clk", None)
        r, w, parity = oracle_decode(sig, list(times), mode=bus.mode, width=bus.width, bus=bus.name)
        recs.append((r, w, parity))
    return recs


def assert_capture_decodes_to_truth(ct):
    ((recs, words, parity),) = decode_capture_with_oracle(ct)
    diff = diff_records(recs, ct.records)
    assert not diff, diff[:10]
    w = np.array(words, dtype=WORD_DTYPE) if words else np.zeros(0, WORD_DTYPE)
    assert np.array_equal(w, ct.words)
    pf = ct.findings[ct.findings["kind"] == "parity_error"]
    assert sorted(parity) == sorted(int(t) for t in pf["time_ps"])


@SETTINGS
@given(captures_with_truth())
def test_captures_decode_to_their_truth(ct):
    capture, profile, records, words = ct
    assert capture.num_samples > 0 and len(profile) == 1
    assert_capture_decodes_to_truth(ct)


@SETTINGS
@given(captures_with_truth(window=True))
def test_windowed_captures_decode_to_their_truth(ct):
    assert_capture_decodes_to_truth(ct)


@SETTINGS
@given(captures_with_truth(mode="pcix", width=64, with_ad=True, timing=True, masters=2))
def test_pcix_timing_captures_decode_to_their_truth(ct):
    assert "CLK" in ct.capture.channel_names
    assert_capture_decodes_to_truth(ct)


# -- coverage: every feature is reachable -------------------------------------------------------

def _features(specs, mode):
    out = set()
    for s, nxt in zip(specs, list(specs[1:]) + [None]):
        out.add(("term", s.termination))
        out.add(("cmd", s.command))
        out.add(("devsel", s.devsel))
        out.add(("master", s.master))
        if s.req64 and s.ack64 is not False and len(s.data) > 1:
            out.add("64-bit burst")
        if s.req64 and s.ack64 is False:
            out.add("64-bit refused")
        if s.address >= 1 << 32:
            out.add("dac")
        if s.dac and s.address < 1 << 32:
            out.add("forced dac")
        if any(dict(s.initiator_waits).values()):
            out.add("initiator waits")
        if any(v for k, v in dict(s.target_waits).items() if k > 0):
            out.add("later target waits")
        if s.idle_before == 0:
            out.add("fast back-to-back")
        if s.byte_enables is not None:
            out.add("byte enables")
        if s.stop_early:
            out.add(("stop early", s.termination))
        if s.termination == "split_response" and nxt is not None and nxt.command == 0xC and nxt.tag == s.tag:
            out.add("split completion")
    return out


def _collect(mode, width, n=400):
    seen = set()

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(bus_activity(mode=mode, width=width, masters=3))
    def collect(specs):
        seen.update(_features(specs, mode))

    collect()
    return seen


def test_pci_activity_covers_every_feature():
    seen = _collect("pci", 64)
    want = {("term", t) for t in ("normal", "retry", "disconnect_with_data", "disconnect_without_data",
                                  "target_abort", "master_abort")}
    want |= {("cmd", c) for c in range(16) if c != 0xD}
    want |= {("devsel", d) for d in ("fast", "medium", "slow", "subtractive", "none")}
    want |= {("master", m) for m in range(3)}
    want |= {"64-bit burst", "64-bit refused", "dac", "forced dac", "initiator waits", "later target waits",
             "fast back-to-back", "byte enables"}
    want |= {("stop early", t) for t in ("retry", "disconnect_with_data", "disconnect_without_data")}
    assert want <= seen, sorted(map(str, want - seen))


def test_pcix_activity_covers_every_feature():
    seen = _collect("pcix", 64)
    want = {("term", t) for t in ("normal", "retry", "disconnect_with_data", "disconnect_without_data",
                                  "target_abort", "master_abort", "split_response", "disconnect_adb",
                                  "single_phase_disconnect")}
    want |= {("cmd", c) for c in range(16) if c != 0xD}
    want |= {"64-bit burst", "dac", "split completion"}
    assert want <= seen, sorted(map(str, want - seen))
    assert "initiator waits" not in seen and "fast back-to-back" not in seen


@SETTINGS
@given(st.data())
def test_generated_activity_is_legal(data):
    from pcitrace.sim.bus import render
    mode = data.draw(st.sampled_from(["pci", "pcix"]))
    width = data.draw(st.sampled_from([32, 64]))
    specs = data.draw(bus_activity(mode=mode, width=width, masters=2))
    rb = render(specs, mode=mode, width=width, masters=("a", "b"))
    check_pci_rules(rb)
    assert len(rb.findings) == 0          # legal activity causes no finding


# -- faults --------------------------------------------------------------------------------------

@SETTINGS
@given(faulty_activity(timing=False))
def test_faults_leave_records_as_the_truth_says(fc):
    ct = fc.truth
    assert fc.faults
    assert_capture_decodes_to_truth(ct)
    sig = ct.capture.read()
    times = ct.capture.times_ps()
    asserted = {k: sig[k] == 0 for k in ("FRAME#", "IRDY#", "TRDY#", "STOP#", "DEVSEL#")}
    for kind, t in fc.faults:
        assert kind in FAULT_KINDS
        c = int(np.searchsorted(times, t))
        if kind == "trdy_without_devsel":
            assert asserted["TRDY#"][c] and not asserted["DEVSEL#"][c]
        elif kind == "stop_without_devsel":
            assert asserted["STOP#"][c] and not asserted["DEVSEL#"][c] and not asserted["DEVSEL#"][:c][-3:].all()
        elif kind == "irdy_without_transaction":
            assert asserted["IRDY#"][c] and not asserted["FRAME#"][c - 1:c + 2].any()
            assert not asserted["IRDY#"][c - 1] and not asserted["IRDY#"][c + 1]
        elif kind == "frame_reasserted":
            assert asserted["FRAME#"][c] and not asserted["FRAME#"][c - 1]
            assert asserted["IRDY#"][c - 1] and asserted["DEVSEL#"][c - 1]
            assert not asserted["TRDY#"][c - 1] and not asserted["STOP#"][c - 1]
        elif kind == "devsel_late":
            # first DEVSEL# of its transaction, after at least 4 clocks without it
            assert asserted["DEVSEL#"][c] and not asserted["DEVSEL#"][c - 4:c].any()
            assert asserted["FRAME#"][c - 5:c].any()
        elif kind == "byte_enables_changed_in_wait":
            assert sig["C/BE#"][c] != sig["C/BE#"][c - 1] and asserted["IRDY#"][c - 1:c + 1].all()
            assert not (asserted["TRDY#"][c - 1] and asserted["DEVSEL#"][c - 1])


@SETTINGS
@given(faulty_activity(timing=True, kinds=("glitch", "parity_error")))
def test_glitches_are_between_edges(fc):
    ct = fc.truth
    assert_capture_decodes_to_truth(ct)
    kinds = [k for k, _ in fc.faults]
    assert "glitch" in kinds and "parity_error" in kinds
    sr = ct.capture.timebase.samplerate_hz
    clk = ct.capture.read(["CLK"])["CLK"]
    lines = ct.capture.read(["FRAME#", "IRDY#", "TRDY#", "STOP#", "DEVSEL#"])
    for kind, t in fc.faults:
        if kind != "glitch":
            continue
        i = int(round(t * sr / 1e12))
        # some control line pulses for exactly one sample, and that sample is not a rising edge
        assert any(v[i] != v[i - 1] and v[i] != v[i + 1] for v in lines.values())
        assert not (clk[i] == 1 and clk[i - 1] == 0)


@SETTINGS
@given(faulty_activity(mode="pcix", width=64, timing=False, kinds=("parity_error", "trdy_without_devsel")))
def test_pcix_64bit_faults_decode_to_their_truth(fc):
    assert_capture_decodes_to_truth(fc.truth)
    assert {k for k, _ in fc.faults} == {"parity_error", "trdy_without_devsel"}


# -- the NIC family -------------------------------------------------------------------------

FAMILY_DECODED = 30


@pytest.mark.parametrize("n", range(FAMILY_DECODED))
def test_family_scenarios_decode_to_their_truth(n):
    from pcitrace.decode import decode_capture
    from pcitrace.decode.records import records_from_dicts
    from pcitrace.sim.scenario import simulate
    from pcitrace.sim.strategies import family_scenario

    r = simulate(family_scenario(n))
    res = decode_capture(r.capture, r.profile)
    assert len(r.truth["records"]) > 20
    assert diff_records(records_from_dicts(r.truth["records"]), res.records, ignore=("data_index",)) == []


def test_family_scenario_is_a_fixed_set():
    from pcitrace.sim.strategies import family_scenario

    assert family_scenario(3).to_dict() == family_scenario(3).to_dict() != family_scenario(4).to_dict()
    drawn = [family_scenario(n) for n in range(60)]
    # the set covers the family's corners
    assert {(s.buses[0].kind, s.buses[0].width, s.buses[0].clock_mhz) for s in drawn} == {
        ("pci", 32, 33), ("pci", 64, 33), ("pci", 32, 66), ("pci", 64, 66), ("pcix", 64, 133)}
    for key in ("ad", "inta", "gnt"):
        assert {getattr(s, key) for s in drawn} == {True, False}
    assert {s.link.probe for s in drawn} == {True, False}


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(sc=nic_family_scenarios())
def test_nic_family_scenarios_keep_each_packet_whole(sc):
    from pcitrace.sim.scenario import simulate

    t = simulate(sc).truth
    recs = t["records"]
    assert sc.duration_us <= 300
    for p in t["packets"]:
        if p["wire_start_ps"] < 0:
            continue
        bursts = [recs[i] for i in p["tx_dma_records"] if recs[i]["purpose"] in ("data_read", "data_completion")
                  and recs[i]["bytes"]]
        assert len(bursts) == p["tx_data_bursts"] and p["tx_bytes"] == p["frame_bytes"] - 4
        if not sc.ad:                       # (a record without C/BE# counts whole data phases)
            continue
        assert sum(r["bytes"] for r in bursts) == p["tx_bytes"]       # one packet, all its bursts
        mb = sc.buses[0].nic.max_burst_bytes
        if mb and sc.buses[0].kind == "pci":
            assert all(r["bytes"] <= mb for r in bursts)
    if sc.inta:
        assert all(i["inta_ps"] <= i["raised_ps"] + t["buses"][i["bus"]]["period_ps"] for i in t["interrupts"])

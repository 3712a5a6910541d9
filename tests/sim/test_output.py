"""simulate(): the capture, profile and truth agree with each other and with the model's intent."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture import open_capture
from pcitrace.capture.profile import load_profile
from pcitrace.decode import decode_capture
from pcitrace.decode.records import diff_records, records_from_dicts
from pcitrace.errors import PcitraceError
from pcitrace.sim.output import load_truth, output_paths, sample_period_ps, truth_json
from pcitrace.sim.scenario import scenario_from_dict, simulate, write_outputs

TWO_BUSES = [{"name": "send", "pc": "a"}, {"name": "recv", "pc": "b"}]


def sim(**kw):
    doc = {"duration_us": 120, "bus": TWO_BUSES}
    doc.update(kw)
    return simulate(scenario_from_dict(doc))


def truth_records(truth):
    return records_from_dicts(truth["records"])


@pytest.mark.parametrize("mode, ad", [("timing", True), ("state", True), ("state", False), ("timing", False)])
def test_fast_engine_decodes_exactly_the_truth(mode, ad):
    r = sim(mode=mode, ad=ad, link={"reverse_probe": True})
    res = decode_capture(r.capture, r.profile)
    assert len(r.truth["records"]) > 100
    assert diff_records(truth_records(r.truth), res.records, ignore=("data_index",)) == []


def test_pcix_with_other_traffic_and_retries_decodes_exactly():
    buses = [dict(b, kind="pcix", clock_mhz=133, mmrbc=1024, nic={"csr_retries": 1},
                  other=[{"rate_per_us": 0.2, "bytes": 256, "command": "mem_read_multiple"}]) for b in TWO_BUSES]
    r = sim(bus=buses, traffic={"frame_bytes": 4000, "spacing_us": 8}, link={"rate_gbps": 10})
    res = decode_capture(r.capture, r.profile)
    recs = truth_records(r.truth)
    assert set(recs["termination"]) >= {"split_response", "retry", "normal"}
    assert "split_completion" in set(recs["command"])
    assert diff_records(recs, res.records, ignore=("data_index",)) == []


def test_deterministic_and_seeded():
    a, b = sim(seed=7), sim(seed=7)
    assert truth_json(a.truth) == truth_json(b.truth)
    for name in a.capture.channel_names:
        assert np.array_equal(a.capture.read([name])[name], b.capture.read([name])[name])
    c = sim(seed=8)
    assert truth_json(c.truth) != truth_json(a.truth)


def test_timing_capture_clock_edges_are_the_record_times():
    r = sim(mode="timing", duration_us=30)
    cap = r.capture
    p = r.truth["sample_period_ps"]
    assert 1e12 % p == 0 and r.truth["buses"]["send"]["period_ps"] // p >= 4
    clk = cap.read(["send.CLK"])["send.CLK"]
    rising = np.flatnonzero((clk[1:] == 1) & (clk[:-1] == 0)) + 1
    edge_ps = rising * p
    first = r.truth["buses"]["send"]["first_clock_ps"]
    period = r.truth["buses"]["send"]["period_ps"]
    assert edge_ps[0] == first and np.all(np.diff(edge_ps) == period)
    recs = truth_records(r.truth)
    assert np.isin(recs["start_ps"], edge_ps).all() and np.isin(recs["end_ps"], edge_ps).all()


def test_occupancy_matches_the_signals():
    r = sim(mode="state")
    sig = r.capture.read(["send.FRAME#", "send.IRDY#"])
    busy = int(((sig["send.FRAME#"] == 0) | (sig["send.IRDY#"] == 0)).sum())
    occ = r.truth["occupancy"]["send"]
    assert occ["busy"] == busy and occ["clocks"] == r.capture.num_samples
    assert occ["data"] + occ["wait"] + occ["address"] + occ["retry"] == busy
    assert sum(occ["by_initiator"].values()) == busy
    recs = truth_records(r.truth)
    send = recs[recs["bus"] == "send"]
    assert occ["data"] == int(send["data_phases"].sum())


def test_probe_frames_and_wire_time():
    r = sim(mode="timing", link={"sof": True})
    fp = r.capture.read(["a_to_b.FRAME_PRESENT"])["a_to_b.FRAME_PRESENT"].astype(np.int8)
    starts = np.flatnonzero(np.diff(fp) == 1)
    frames = [f for f in r.truth["frames"] if f["link"] == "a_to_b"]
    assert len(starts) == len(frames) > 5
    for f in frames:
        # preamble + 1446-byte frame at 8 ns per byte
        assert f["wire_end_ps"] - f["wire_start_ps"] == (8 + 1446) * 8000
        if f["truncated"]:
            assert f["end_ps"] == r.truth["duration_ps"] // r.truth["sample_period_ps"] * r.truth["sample_period_ps"] - r.truth["sample_period_ps"]
            continue
        assert abs(f["wire_time_ps"] - (8 + 1446) * 8000) <= r.truth["sample_period_ps"]
        assert f["start_ps"] <= f["sof_ps"] < f["end_ps"]
    gaps = np.diff([f["wire_start_ps"] for f in frames])
    assert gaps.min() >= (8 + 1446 + 12) * 8000     # the inter-frame gap is kept


def test_packet_bookkeeping_follows_the_frame_through():
    r = sim(duration_us=200)
    recs = r.truth["records"]
    done = [p for p in r.truth["packets"] if p["rx_first_word_ps"] > 0]
    assert len(done) > 10
    for p in done:
        assert p["csr_start_ps"] < p["first_dma_ps"] <= p["tx_first_word_ps"] < p["wire_start_ps"]
        assert p["wire_end_ps"] < p["rx_first_word_ps"] and p["send_to_recv_ps"] > p["wire_time_ps"]
        assert p["tx_bytes"] == p["rx_bytes"] == p["frame_bytes"] - 4     # the NIC adds / strips the CRC
        assert all(recs[i]["packet"] == p["seq"] and recs[i]["bus"] == "send" for i in p["tx_dma_records"])
        assert all(recs[i]["bus"] == "recv" for i in p["rx_dma_records"])
        assert all(recs[i]["purpose"].startswith("csr") for i in p["csr_records"])


def test_lost_frames_never_reach_the_receiver():
    r = sim(duration_us=150, link={"lost": [2, 5]})
    pk = {p["seq"]: p for p in r.truth["packets"]}
    for s in (2, 5):
        assert pk[s]["lost"] and pk[s]["rx_dma_records"] == [] and pk[s]["wire_start_ps"] > 0
    assert not pk[3]["lost"] and pk[3]["rx_dma_records"]
    assert [f["seq"] for f in r.truth["frames"] if f["lost"]] == [2, 5]


def test_interrupt_coalescence_groups_packets():
    nic = {"coalesce_packets": 64, "coalesce_us": 40.0}
    r = sim(duration_us=300, bus=[dict(b, nic=nic, host={"irq_latency_us": 5.0}) for b in TWO_BUSES])
    pk = [p for p in r.truth["packets"] if p["rx_irq_csr_start_ps"] > 0]
    groups = {}
    for p in pk:
        groups.setdefault(p["rx_irq_csr_start_ps"], []).append(p)
    assert max(len(g) for g in groups.values()) >= 3
    first_delays = [min(g, key=lambda p: p["seq"])["rx_interrupt_delay_ps"] for g in groups.values()]
    # 40 us timer + 5 us interrupt latency (+ the CSR reads waiting for the bus)
    assert all(45e6 <= d <= 47e6 for d in first_delays), first_delays


def test_pause_frames_stop_the_sender():
    r = sim(duration_us=400, link={"pause_interval_us": 150, "pause_us": 40, "reverse_probe": True})
    pauses = r.truth["pauses"]
    assert len(pauses) == 2
    fr = [f for f in r.truth["frames"] if f["link"] == "a_to_b"]
    for p in pauses:
        assert not any(p["start_ps"] <= f["wire_start_ps"] < p["end_ps"] for f in fr)
    assert sum(f["kind"] == "pause" for f in r.truth["frames"] if f["link"] == "b_to_a") == 2
    assert "b_to_a.FRAME_PRESENT" in r.capture.channel_names


def test_mmrbc_caps_the_read_requests():
    def run(mmrbc):
        b = [dict(TWO_BUSES[0], kind="pcix", clock_mhz=133, mmrbc=mmrbc)]
        return sim(duration_us=60, bus=b, traffic={"frame_bytes": 8972, "spacing_us": 20}, link={"rate_gbps": 10})
    out = {}
    for m in (512, 4096):
        t = run(m).truth
        recs = t["records"]
        p = next(p for p in t["packets"] if p["tx_dma_end_ps"] > 0)
        reqs = [recs[i] for i in p["tx_dma_records"] if recs[i]["purpose"] == "data_read"]
        assert all(r["byte_count"] <= m and r["termination"] == "split_response" for r in reqs)
        assert len(reqs) == -(-9014 // m)
        out[m] = p["tx_dma_end_ps"] - p["tx_data_start_ps"]
    assert out[4096] < 0.75 * out[512]


def test_faults_cause_their_findings_and_leave_records_decodable():
    faults = {"parity_errors": 3, "latency_every": 5, "glitches": 2, "stray_irdy": 2, "trdy_without_devsel": 2}
    r = sim(duration_us=150, bus=[dict(TWO_BUSES[0], nic={"devsel": "slow"})], faults=faults)
    kinds = [f["kind"] for f in r.truth["findings"]]
    for k, n in (("parity_error", 3), ("glitch", 2), ("irdy_without_transaction", 2), ("trdy_without_devsel", 2)):
        assert kinds.count(k) == n, (k, kinds)
    assert kinds.count("initial_latency") >= 2
    recs = truth_records(r.truth)
    assert recs["parity_error"].sum() == 3
    res = decode_capture(r.capture, r.profile)
    assert diff_records(recs, res.records, ignore=("data_index",)) == []
    got = {(int(f["time_ps"]), str(f["kind"])) for f in res.findings}
    for f in r.truth["findings"]:
        if f["kind"] in ("parity_error", "irdy_without_transaction", "trdy_without_devsel", "initial_latency"):
            assert (f["time_ps"], f["kind"]) in got


def test_csr_retries_precede_each_access():
    r = sim(duration_us=60, bus=[dict(TWO_BUSES[0], nic={"csr_retries": 2})])
    p = r.truth["packets"][0]
    terms = [r.truth["records"][i]["termination"] for i in p["csr_records"]]
    assert terms[:3] == ["retry", "retry", "normal"] and p["csr_retries"] == 2 * terms.count("normal")


def test_other_devices_traffic_is_not_the_nics():
    b = dict(TWO_BUSES[0], other=[{"rate_per_us": 0.3, "bytes": 512, "address": 0x30000000}])
    r = sim(duration_us=100, bus=[b])
    other = [x for x in r.truth["records"] if x["master"] == "other"]
    nic = [x for x in r.truth["records"] if x["master"] == "nic"]
    assert len(other) > 10 and all(x["gnt"] == 0 and x["address"] == 0x30000000 for x in other)
    assert nic and all(x["gnt"] == 1 for x in nic)


def test_write_outputs_round_trip(tmp_path):
    r = sim(duration_us=40, mode="state", ad=False)
    cap_p, prof_p, truth_p = write_outputs(r, tmp_path / "x.sr")
    assert (cap_p.name, prof_p.name, truth_p.name) == ("x.sr", "x.profile.toml", "x.truth.json")
    res = decode_capture(open_capture(cap_p), load_profile(prof_p))
    assert diff_records(truth_records(load_truth(truth_p)), res.records, ignore=("data_index",)) == []
    assert json.loads(truth_p.read_text())["ad"] is False
    assert not any(n.startswith("send.AD") for n in open_capture(cap_p).channel_names)


def test_vcd_output(tmp_path):
    r = sim(duration_us=20, mode="timing")
    cap_p, prof_p, _ = write_outputs(r, tmp_path / "x.vcd")
    res = decode_capture(open_capture(cap_p), load_profile(prof_p))
    assert diff_records(truth_records(r.truth), res.records, ignore=("data_index",)) == []


def test_bad_output_names(tmp_path):
    with pytest.raises(PcitraceError, match=r"\.sr or \.vcd"):
        output_paths(tmp_path / "x.csv")
    r = sim(duration_us=10)
    with pytest.raises(PcitraceError):
        write_outputs(r, tmp_path / "missing" / "x.sr")


def test_sample_period_divides_a_second_and_every_half_clock():
    assert sample_period_ps([15000]) == 2500
    assert sample_period_ps([30000]) == 5000
    assert sample_period_ps([7500]) == 1250
    assert sample_period_ps([30000, 15000]) == 2500


@pytest.mark.parametrize("mode", ["timing", "state"])
def test_probe_twin_engine_reads_the_truth_frames(mode):
    from pcitrace.decode.probe import decode_probe_chunks

    r = sim(mode=mode, duration_us=150)
    cap = r.capture
    sig = cap.read(["a_to_b.FRAME_PRESENT", "a_to_b.SOF"])
    frames = decode_probe_chunks([(0, cap.times_ps(), {"frame_present": sig["a_to_b.FRAME_PRESENT"],
                                                       "sof": sig["a_to_b.SOF"]})], link="a_to_b")
    want = [f for f in r.truth["frames"] if f["link"] == "a_to_b"]
    assert len(frames) == len(want) > 5
    for got, f in zip(frames, want):
        assert (int(got["start_ps"]), int(got["end_ps"]), int(got["sof_ps"])) == (f["start_ps"], f["end_ps"], f["sof_ps"])
        assert bool(got["truncated"]) == f["truncated"]
        if not f["truncated"]:
            # estimated from the sampled wire time: within one sample period's worth of bytes
            tol = 1 + r.truth["sample_period_ps"] // 8000
            assert abs(int(got["frame_bytes"]) - f["frame_bytes"]) <= tol


@pytest.mark.parametrize("bus", [
    {"width": 32, "clock_mhz": 33, "nic": {"read_command": "mem_read_line", "write_command": "mem_write_invalidate"}},
    {"width": 32, "clock_mhz": 66, "cache_line": 32, "nic": {"read_command": "mem_read", "devsel": "fast"}},
    {"kind": "pcix", "width": 32, "clock_mhz": 100, "mmrbc": 2048, "host": {"completion_adb": 1}},
    {"kind": "pcix", "width": 64, "clock_mhz": 66, "host": {"completion_adb": 0, "write_disconnect_bytes": 128}},
])
def test_bus_variants_decode_exactly(bus):
    b = [dict(TWO_BUSES[0], **bus), dict(TWO_BUSES[1], **bus)]
    r = sim(duration_us=80, bus=b, mode="timing")
    recs = truth_records(r.truth)
    res = decode_capture(r.capture, r.profile)
    assert diff_records(recs, res.records, ignore=("data_index",)) == []
    nic = recs[recs["gnt"] == 1]
    assert set(nic["width"]) <= {bus["width"]} | {32}
    if bus.get("nic", {}).get("read_command") == "mem_read_line":
        reads = nic[nic["command"] == "mem_read_line"]
        assert len(reads) and reads["bytes"].max() <= 64          # a line at most
        assert "mem_write_invalidate" in set(nic["command"])
    if bus.get("kind") == "pcix" and bus["host"].get("completion_adb") == 1:
        comp = recs[recs["command"] == "split_completion"]
        assert (comp["bytes"] <= 128).all() and "disconnect_with_data" in set(comp["termination"])


def test_too_long_a_capture_is_refused_before_the_work():
    sc = scenario_from_dict({"duration_us": 900_000, "bus": TWO_BUSES})
    with pytest.raises(PcitraceError, match="samples") as ei:
        simulate(sc)
    assert ei.value.where == "duration_us" and "state" in ei.value.fix


@pytest.mark.parametrize("kind, mhz", [("pci", 66), ("pcix", 133)])
def test_buffers_above_4gib_use_dual_address_cycles(kind, mhz):
    b = [dict(TWO_BUSES[0], kind=kind, clock_mhz=mhz, host={"memory_base": 0x2_0000_0000}), TWO_BUSES[1]]
    r = sim(duration_us=60, bus=b)
    recs = truth_records(r.truth)
    dma = recs[(recs["bus"] == "send") & (recs["gnt"] == 1)]
    assert len(dma) and dma["dac"].all() and (dma["address"] >= 1 << 32).all()
    res = decode_capture(r.capture, r.profile)
    assert diff_records(recs, res.records, ignore=("data_index",)) == []


def test_gmii_bytes_carry_the_frames():
    from pcitrace.decode.probe import decode_probe_chunks

    r = sim(duration_us=120, link={"gmii": True, "reverse_probe": True, "pause_interval_us": 50})
    cap = r.capture
    for d in ("a_to_b", "b_to_a"):
        names = {k: f"{d}.{v}" for k, v in (("frame_present", "FRAME_PRESENT"), ("sof", "SOF"),
                                            ("rxd", "RXD"), ("rx_dv", "RX_DV"), ("rx_clk", "RX_CLK"))}
        sig = cap.read(list(names.values()))
        frames = decode_probe_chunks([(0, cap.times_ps(), {k: sig[v] for k, v in names.items()})], link=d)
        want = [f for f in r.truth["frames"] if f["link"] == d and not f["truncated"]]
        got = [g for g in frames if not g["truncated"]]
        assert len(got) == len(want) >= 2
        for g, f in zip(got, want):
            assert g["gmii"] and int(g["frame_bytes"]) == f["frame_bytes"]
            assert int(g["udpmon_seq"]) == f["udpmon_seq"]
            if f["kind"] == "data":
                assert int(g["ethertype"]) == 0x0800 and int(g["udp_dport"]) == 5001
            else:
                assert int(g["ethertype"]) == 0x8808 and int(g["eth_dst"]) == 0x0180C2000001


def test_gmii_needs_fine_timing_sampling():
    with pytest.raises(PcitraceError, match="gmii"):
        scenario_from_dict({"mode": "state", "link": {"gmii": True}, "bus": TWO_BUSES})
    with pytest.raises(PcitraceError, match="4 ns") as ei:
        sim(duration_us=10, link={"gmii": True}, bus=[dict(b, clock_mhz=33) for b in TWO_BUSES])
    assert ei.value.where == "link.gmii"


# Stretched scenarios with everything on (coalescence, pauses, lost frames, other devices, CSR
# retries, jitter, faults): digests of the truth file and of every capture channel, recorded
# with the simulator of commit 84730bb, before its fast paths (column renderer, block random
# draws, column truth). A change that means to alter the simulation updates them; any other
# change must leave them as they are.
STRETCHED = {
    ("state", "pci"): (990, "bc90cdcbeb75dfa8487922ed4a5261befb20a89c4fb6e3689e34fef22746b925"),
    ("timing", "pci"): (357, "5feea300739012d896b8f88ef9e6513d75b3715144e839a5eaa41000f23c31d5"),
    ("state", "pcix"): (1040, "7bfe3ac10aaabedf45d54e1ed0cf54057a666f63ffa6196be4f3e71cf299683c"),
}


def _stretched(mode, kind):
    buses = [{"name": name, "pc": pc, "kind": kind, "width": 64, "clock_mhz": 66 if kind == "pci" else 133,
              "host": {"read_disconnect_bytes": 256, "write_disconnect_bytes": 256,
                       "read_waits_every": 3 if kind == "pci" else 0},
              "nic": {"csr_retries": 1 if pc == "a" else 0, "coalesce_packets": 3, "coalesce_us": 15.0},
              "other": [{"rate_per_us": 0.3, "bytes": 192, "command": "mem_write"},
                        {"rate_per_us": 0.1, "bytes": 64, "command": "mem_read_multiple", "address": 0xd1000004}]}
             for name, pc in (("send", "a"), ("recv", "b"))]
    return {"seed": 11, "duration_us": 300 if mode == "state" else 120, "mode": mode, "bus": buses,
            "traffic": {"frame_bytes": 1400, "spacing_us": 11.0, "jitter_us": 0.3},
            "link": {"pause_interval_us": 37.0, "pause_us": 9.0, "loss": 0.07, "lost": [2, 5], "reverse_probe": True},
            "faults": {"parity_errors": 3, "latency_every": 5, "glitches": 2 if mode == "timing" else 0,
                       "stray_irdy": 2, "trdy_without_devsel": 1}}


@pytest.mark.parametrize("mode, kind", sorted(STRETCHED))
def test_stretched_scenarios_simulate_exactly_as_before_the_fast_paths(mode, kind):
    import hashlib

    r = simulate(scenario_from_dict(_stretched(mode, kind)))
    h = hashlib.sha256(truth_json(r.truth).encode())
    data = r.capture.read()
    for name in r.capture.channel_names:
        h.update(name.encode())
        h.update(str(data[name].dtype).encode())
        h.update(data[name].tobytes())
    assert (len(r.truth["records"]), h.hexdigest()) == STRETCHED[(mode, kind)]


def test_a_capture_without_transactions_writes_its_truth(tmp_path):
    # too short for the first send: no transaction on the bus, an empty records list
    r = simulate(scenario_from_dict({"duration_us": 1.5, "mode": "state", "bus": [{"name": "send", "pc": "a"}]}))
    assert len(r.truth["records"]) == 0
    _, _, truth_path = write_outputs(r, tmp_path / "empty.sr")
    assert load_truth(truth_path)["records"] == []


def test_a_run_leaves_no_cyclic_garbage_and_no_young_objects_to_walk():
    # simulate() hands what it made to the oldest generation unwalked: safe only while a run
    # leaves no cycles behind (they would wait for a full collection)
    import gc

    gc.collect()
    gc.disable()
    try:
        r = sim(bus=[dict(b, nic={"csr_retries": 1, "coalesce_packets": 4, "coalesce_us": 20.0}) for b in TWO_BUSES])
        del r
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            assert gc.collect() == 0, sorted({type(o).__name__ for o in gc.garbage})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        gc.enable()
    # with the collector on, the run leaves the youngest generation as short as it found it
    before = gc.get_count()[0]
    r = sim()
    assert len(r.truth["records"]) > 100
    assert gc.get_count()[0] <= before + 50, gc.get_count()


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 300), iv=st.lists(st.tuples(st.integers(-20, 320), st.integers(-20, 320)), max_size=25))
def test_probe_line_is_the_union_of_its_intervals(n, iv):
    # the fast path (merged intervals, one repeat) against slicing each interval in
    from pcitrace.sim.output import _union_line

    ref = np.zeros(n, np.int8)
    for a, z in iv:
        ref[max(a, 0):max(z, 0)] += 1
    lo = np.array([a for a, _ in iv], np.int64)
    hi = np.array([z for _, z in iv], np.int64)
    got = _union_line(lo, hi, n)
    assert got.dtype == np.uint8 and np.array_equal(got, (ref > 0).astype(np.uint8))


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(0, 12))
def test_packet_rows_read_and_encode_as_the_dicts_they_hold(data, n):
    # the truth's packets are columns made into dicts when read: against the dicts themselves
    from pcitrace.sim.output import _COMPACT, DictRows, Ragged

    lens = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    flat = data.draw(st.lists(st.integers(-1, 10 ** 12), min_size=sum(lens), max_size=sum(lens)))
    ints = data.draw(st.lists(st.integers(-(2 ** 62), 2 ** 62), min_size=n, max_size=n))
    objs = data.draw(st.lists(st.one_of(st.booleans(), st.none(), st.integers(0, 2), st.text(max_size=3)),
                              min_size=n, max_size=n))
    offs = np.concatenate(([0], np.cumsum(lens, dtype=np.int64)))
    rows = DictRows({"a": np.array(ints, np.int64), "lists": Ragged(offs, np.array(flat, np.int64)),
                     "o": tuple(objs)})
    want = [{"a": ints[i], "lists": flat[offs[i]:offs[i + 1]], "o": objs[i]} for i in range(n)]
    assert len(rows) == n and list(rows) == want and rows == want
    assert rows.json_lines() == [_COMPACT.encode(d) for d in want]
    # written in pieces: any piece size gives the same lines
    size = data.draw(st.integers(1, 5))
    assert ",\n".join(rows.json_chunks(size)) == ",\n".join(rows.json_lines())
    a, z = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
    assert rows.json_lines(a, z) == rows.json_lines()[a:z]
    if n:
        k = data.draw(st.integers(-n, n - 1))
        assert rows[k] == want[k] and rows[1:n:2] == want[1:n:2]
        assert all(type(x) is type(y) for d, e in zip(rows, want) for x, y in zip(d.values(), e.values()))


def test_the_truth_is_written_in_pieces_as_one_text(tmp_path, monkeypatch):
    # write_outputs streams the truth piece by piece; small pieces must join to truth_json's text
    from pcitrace.sim import output
    from pcitrace.sim.output import DictRows, RecordList, write_outputs

    r = simulate(scenario_from_dict(_stretched("state", "pci")))
    whole = truth_json(r.truth)
    recs = r.truth["records"]
    assert ",\n".join(recs.json_chunks(7)) == ",\n".join(recs.json_lines())
    assert recs.json_lines(5, 40) == recs.json_lines()[5:40]
    for cls in (RecordList, DictRows):
        chunks = cls.json_chunks
        monkeypatch.setattr(cls, "json_chunks", lambda self, rows=1 << 16, c=chunks: c(self, 13))
    pieces = list(output.iter_truth_json(r.truth))
    assert len(pieces) > 50 and "".join(pieces) == whole
    _, _, truth_path = write_outputs(r, tmp_path / "x.sr")
    assert truth_path.read_text(encoding="utf-8") == whole


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(0, 700), dtype=st.sampled_from([np.int64, np.uint64, np.int32, np.uint8]))
def test_int_column_texts_are_str_of_each_value(data, n, dtype):
    from pcitrace.sim.output import _int_texts

    info = np.iinfo(dtype)
    lo = data.draw(st.integers(int(info.min), int(info.max)))
    span = data.draw(st.sampled_from([0, 1, 3, 4095, 4096, 10 ** 6, int(info.max) - int(info.min)]))
    hi = min(int(info.max), lo + span)
    v = np.array(data.draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n)), dtype)
    assert _int_texts(v) == list(map(str, v.tolist()))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(4, 9), st.integers(0, 12), st.integers(0, 40))
def test_spreader_shows_each_sample_its_clock(K, n, h, more):
    # a bus's per-clock values as timing samples: sample s shows clock clip((s - h) // n + 1, 0, K-1)
    from pcitrace.sim.output import _spreader

    nsamples = max(h, 1) + more
    h = min(h, nsamples)
    v = np.arange(K, dtype=np.uint8) + 1
    s = np.arange(nsamples)
    np.testing.assert_array_equal(_spreader(K, n, h, nsamples)(v), v[np.clip((s - h) // n + 1, 0, K - 1)])


def _clock(truth, bus, t_ps):
    b = truth["buses"][bus]
    return (t_ps - b["first_clock_ps"]) // b["period_ps"]


@pytest.mark.parametrize("order, icr", [("reads_first", "first"), ("writes_first", "last")])
def test_inta_falls_before_the_routine_and_rises_after_its_icr_read(order, icr):
    nic = {"csr_retries": 2, "irq_order": order, "icr_read": icr, "irq_csr_reads": 2}
    r = sim(mode="state", inta=True, duration_us=200,
            bus=[{"name": "send", "pc": "a", "nic": nic}, {"name": "recv", "pc": "b", "nic": nic}])
    t = r.truth
    assert r.profile.bus("send").signals["inta_n"] == "send.INTA#"
    lines = r.capture.read()
    recs = t["records"]
    irqs = [i for i in t["interrupts"] if i["inta_release_ps"] > 0]
    assert len(irqs) >= 10 and {i["bus"] for i in irqs} == {"send", "recv"}
    for k, irq in enumerate(irqs):
        inta = lines[f"{irq['bus']}.INTA#"]
        fall, first = _clock(t, irq["bus"], irq["inta_ps"]), _clock(t, irq["bus"], irq["first_access_ps"])
        release = _clock(t, irq["bus"], irq["inta_release_ps"])
        assert fall <= _clock(t, irq["bus"], irq["raised_ps"]) < first < release
        assert fall == 0 or inta[fall - 1] == 1
        assert not inta[fall:release].any()               # asserted (low) from the fall to the release
        icr = [recs[i] for i in irq["csr_records"] if recs[i]["termination"] != "retry"
               and recs[i]["address"] == t["buses"][irq["bus"]]["bar"][0] + 0xC0]
        assert _clock(t, irq["bus"], icr[0]["end_ps"]) + 1 == release
        later = [j for j in t["interrupts"] if j["bus"] == irq["bus"] and irq["raised_ps"] < j["raised_ps"]]
        if not later or _clock(t, irq["bus"], later[0]["raised_ps"]) > release:
            assert inta[release] == 1                     # released: nothing else pending
        assert irq["csr_retries"] == 2 * sum(recs[i]["termination"] != "retry" for i in irq["csr_records"])
    # the packets know the INTA# fall of the interrupt that reports them
    falls = {(kind, seq): i["inta_ps"] for i in t["interrupts"] for kind, seq in i["packets"]}
    reported = [p for p in t["packets"] if p["tx_inta_ps"] >= 0]
    assert reported and all(p["tx_inta_ps"] == falls[("tx", p["seq"])] for p in reported)
    res = decode_capture(r.capture, r.profile)
    assert diff_records(truth_records(t), res.records, ignore=("data_index",)) == []


def test_without_inta_no_line_and_no_interrupts():
    t = sim(mode="state").truth
    assert "interrupts" not in t and "tx_inta_ps" not in t["packets"][0]


def test_retried_csr_accesses_show_stop_without_trdy_before_the_access():
    r = sim(mode="state", bus=[{"name": "send", "pc": "a", "nic": {"csr_retries": 3, "csr_retry_path": "send"}},
                               {"name": "recv", "pc": "b"}])
    t = r.truth
    lines = r.capture.read()
    send = [x for x in t["records"] if x["bus"] == "send"]
    retries = [k for k, x in enumerate(send) if x["termination"] == "retry"]
    assert retries and all(send[k]["purpose"] in ("csr_read", "csr_write") for k in retries)
    for k in retries:
        a, z = _clock(t, "send", send[k]["start_ps"]), _clock(t, "send", send[k]["end_ps"])
        assert not lines["send.STOP#"][a:z + 1].all() and lines["send.TRDY#"][a:z + 1].all()
        # the CPU's access completes after its retries, at the same address (the NIC's DMA may
        # take the bus in between)
        done = next(x for x in send[k + 1:] if x["termination"] != "retry" and x["master"] == "host")
        assert done["address"] == send[k]["address"] and done["data_phases"] == 1


def test_a_capture_without_the_probe():
    r = sim(mode="state", link={"probe": False})
    assert not r.profile.probe_buses and not any("FRAME_PRESENT" in c for c in r.capture.channel_names)
    assert r.truth["frames"] and not any(f["probed"] for f in r.truth["frames"])

"""model: the random draws equal numpy's Generator call for call."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.sim.model import Draws

CALLS = st.lists(st.one_of(
    st.tuples(st.just("uint32"), st.just(0)),
    st.tuples(st.just("bytes"), st.integers(0, 9000)),
    st.tuples(st.just("random"), st.just(0)),
    st.tuples(st.just("uniform"), st.floats(0.0, 50.0)),
), max_size=60)


def _numpy(rng, call, arg):
    if call == "uint32":
        return int(rng.integers(0, 1 << 32))
    if call == "bytes":
        return rng.bytes(arg)
    if call == "random":
        return rng.random()
    return float(rng.uniform(0, arg))


def _ours(d, call, arg):
    if call == "uint32":
        return d.uint32()
    if call == "bytes":
        return d.bytes(arg)
    if call == "random":
        return d.random()
    return d.uniform(0.0, arg)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 32), calls=CALLS, block=st.sampled_from([1, 3, 64, 4096]))
def test_draws_equal_the_generator(seed, calls, block):
    rng = np.random.default_rng(seed)
    d = Draws(seed)
    d.BLOCK = block          # small blocks: refills in the middle of a draw
    for call, arg in calls:
        want, got = _numpy(rng, call, arg), _ours(d, call, arg)
        assert type(got) is type(want) and got == want, (call, arg)


def test_draws_equal_the_generator_over_a_long_run():
    rng, d = np.random.default_rng(7), Draws(7)
    for i in range(3000):
        call = ("uint32", "bytes", "uniform", "uint32", "random")[i % 5]
        arg = 1 + (i * 37) % 1500 if call == "bytes" else 0.2
        assert _ours(d, call, arg) == _numpy(rng, call, arg), i


# -- whole simulations: the fast paths against their references ---------------------------------

SCENARIOS = st.fixed_dictionaries({
    "seed": st.integers(0, 1000),
    "kind": st.sampled_from(["pci", "pcix"]),
    "width": st.sampled_from([32, 64]),
    "mhz": st.sampled_from([33, 66, 133]),
    "coalesce": st.sampled_from([(1, 0.0), (3, 15.0), (8, 20.0)]),
    "pause": st.sampled_from([0.0, 37.0]),
    "loss": st.sampled_from([0.0, 0.1]),
    "retries": st.integers(0, 2),
    "other": st.sampled_from([0.0, 0.3]),
    "jitter": st.sampled_from([0.0, 0.3]),
    "above_4g": st.booleans(),
    "commands": st.sampled_from([("mem_read_multiple", "mem_write"), ("mem_read_line", "mem_write_invalidate")]),
    "pattern": st.sampled_from(["stream", "request_response"]),
    "mode": st.sampled_from(["state", "timing"]),
})


def _scenario(p):
    from pcitrace.sim.scenario import scenario_from_dict

    kind = p["kind"]
    mhz = {("pcix", 33): 133, ("pci", 133): 66}.get((kind, p["mhz"]), p["mhz"])
    buses = [{"name": name, "pc": pc, "kind": kind, "width": p["width"], "clock_mhz": mhz,
              "host": {"memory_base": 0x120000000 if p["above_4g"] else 0x1E800000,
                       "read_disconnect_bytes": 256, "write_disconnect_bytes": 256},
              "nic": {"csr_retries": p["retries"], "coalesce_packets": p["coalesce"][0],
                      "coalesce_us": p["coalesce"][1], "read_command": p["commands"][0],
                      "write_command": p["commands"][1]},
              "other": [{"rate_per_us": p["other"], "bytes": 192, "command": "mem_write"}] if p["other"] else []}
             for name, pc in (("send", "a"), ("recv", "b"))]
    if kind == "pcix":
        for b in buses:
            del b["nic"]["read_command"], b["nic"]["write_command"]
    return scenario_from_dict({
        "seed": p["seed"], "duration_us": 250 if p["mode"] == "state" else 90, "mode": p["mode"], "bus": buses,
        "traffic": {"frame_bytes": 1400, "spacing_us": 11.0, "jitter_us": p["jitter"], "pattern": p["pattern"]},
        "link": {"pause_interval_us": p["pause"], "pause_us": 9.0, "loss": p["loss"], "lost": [2, 5],
                 "reverse_probe": True},
        "faults": {"parity_errors": 2, "stray_irdy": 2, "trdy_without_devsel": 1},
    })


def _same_simulation(a, b):
    from pcitrace.sim.output import truth_json

    assert truth_json(a.truth) == truth_json(b.truth)
    assert a.capture.channel_names == b.capture.channel_names
    ra, rb = a.capture.read(), b.capture.read()
    for name in ra:
        assert ra[name].dtype == rb[name].dtype and np.array_equal(ra[name], rb[name]), name


@pytest.mark.parametrize("part, reference", [("draws", "NumpyDraws"), ("engine", "Engine")])
@settings(max_examples=7, deadline=None)
@given(p=SCENARIOS)
def test_the_models_fast_parts_simulate_what_their_references_do(part, reference, p):
    # Model.draws (block draws vs numpy's Generator) and Model.engine (the C scheduler vs
    # model.Engine): whole simulations through each fast part and through its reference
    from pcitrace.sim import model
    from pcitrace.sim.output import simulate

    fast_part = getattr(model.Model, part)
    assert fast_part is {"draws": model.Draws, "engine": model.FastEngine}[part] is not None
    sc = _scenario(p)
    fast = simulate(sc)
    setattr(model.Model, part, getattr(model, reference))
    try:
        ref = simulate(sc)
    finally:
        setattr(model.Model, part, fast_part)
    assert len(fast.truth["records"]) > 50
    _same_simulation(fast, ref)


@settings(max_examples=8, deadline=None)
@given(p=SCENARIOS)
def test_column_renderer_draws_what_the_txnspec_path_draws(p):
    from pcitrace.sim.bus import render
    from pcitrace.sim.model import run_model, shape_key
    from pcitrace.sim.specs import MASTERS, phases, render_txns, spec_clocks, to_specs

    sc = _scenario(p)
    for b in run_model(sc, spec_clocks).buses.values():
        txns = b.txns
        # the shape keys the model's call sites set are the transactions' own
        assert all(t.kind is None or t.kind == shape_key(t) for t in txns)
        assert any(t.kind is not None for t in txns)
        cand = [i for i, t in enumerate(txns) if phases(t)]
        parity = {cand[len(cand) // 3]: 0, cand[-1]: phases(txns[cand[-1]]) - 1}
        kw = dict(mode=b.cfg.kind, width=b.cfg.width, clock_hz=1e12 / b.period, bus=b.cfg.name,
                  gnt_master=0, with_ad=True, tail=1, total_clocks=None)
        specs = to_specs(txns)
        for i, pe in parity.items():
            specs[i].parity_error = pe
        fast, ref = render_txns(txns, parity, **kw), render(specs, masters=MASTERS, **kw)
        assert fast.txn_columns is not None          # the column builder, not its fallback
        for k in ref.signals:
            np.testing.assert_array_equal(fast.signals[k], ref.signals[k], err_msg=k)
        assert fast.signals.keys() == ref.signals.keys()
        for f in ("records", "words", "findings", "start_clock", "end_clock", "codes", "header_clocks",
                  "devsel_clock"):
            np.testing.assert_array_equal(getattr(fast, f), getattr(ref, f), err_msg=f)


@settings(max_examples=5, deadline=None)
@given(p=SCENARIOS)
def test_granted_rows_and_their_txn_objects_hold_the_same_transactions(p):
    # The model hands its buses rows (no Txn per transaction); Txn objects are built from them for
    # the reference renderer and the faults: both ways round must give the same transactions.
    import dataclasses

    from pcitrace.sim.model import NEVER, PROTO_FIELDS, ROW_FIELDS, BusModel, TxnRows, run_model, shape_key
    from pcitrace.sim.specs import spec_clocks

    sc = _scenario(p)
    duration_ps = int(round(sc.duration_us * 1e6))

    for b in run_model(sc, spec_clocks).buses.values():
        rows = b.txn_rows
        txns = rows.txns()
        assert len(txns) == len(rows) > 0
        for t, start, req, row in zip(txns, rows.starts, rows.reqs, rows.rows):
            assert t.kind == shape_key(t) and t.clocks == spec_clocks(t)
            assert (t.start, t.req_clock) == (start, req) and 0 <= req < start
            assert (tuple(getattr(t, f) for f in PROTO_FIELDS), *(getattr(t, f) for f in ROW_FIELDS[1:])) == row
        back = TxnRows.of([dataclasses.replace(t, kind=None) for t in txns])
        assert (back.starts, back.reqs, back.rows) == (rows.starts, rows.reqs, rows.rows)
        # the engine's inlined grant schedules as BusModel.grant does: the same requests granted
        # again one by one give the same start clocks
        again = BusModel(b.cfg, True, spec_clocks, duration_ps)
        for req, row in zip(rows.reqs, rows.rows):
            assert again.grant(row, again.time_of(req)) != NEVER
        assert again.txn_rows.starts == rows.starts and again.txn_rows.reqs == rows.reqs


# -- the NIC family's behaviours (scenario keys of issue 17) -----------------------------------

def _family(nic=None, host=None, traffic=None, **top):
    """A state-mode simulation of two 64-bit/66 MHz buses with the send bus's NIC and host set."""
    from pcitrace.sim.scenario import scenario_from_dict, simulate

    buses = [{"name": "send", "pc": "a", "nic": dict(nic or {}), "host": dict(host or {})},
             {"name": "recv", "pc": "b"}]
    d = {"duration_us": 200, "mode": "state", "bus": buses, "traffic": dict(traffic or {})}
    d.update(top)
    return simulate(scenario_from_dict(d)).truth


def _on(t, bus, *purposes):
    return [r for r in t["records"] if r["bus"] == bus and r["purpose"] in purposes]


@pytest.mark.parametrize("command", ["mem_read_multiple", "by_length"])
@pytest.mark.parametrize("max_burst", [256, 512])
def test_the_nic_ends_its_bursts_at_max_burst_bytes(max_burst, command):
    t = _family({"max_burst_bytes": max_burst, "read_command": command})
    data = _on(t, "send", "data_read")
    assert data and max(r["bytes"] for r in data) == max_burst
    assert all(r["address"] // max_burst == (r["address"] + r["bytes"] - 1) // max_burst for r in data)
    recs = t["records"]
    done = [p for p in t["packets"] if p["wire_start_ps"] >= 0]
    assert done
    for p in done:
        bursts = [recs[i] for i in p["tx_dma_records"] if recs[i]["purpose"] == "data_read"]
        # one packet, all its bursts: they add up to its frame (without CRC)
        assert len(bursts) == p["tx_data_bursts"] >= (p["frame_bytes"] - 4) // max_burst
        assert sum(r["bytes"] for r in bursts) == p["tx_bytes"] == p["frame_bytes"] - 4


def test_by_length_reads_whole_cache_lines_with_line_commands():
    t = _family({"read_command": "by_length", "desc_bytes": 0}, traffic={"frame_bytes": 1000})
    data = _on(t, "send", "data_read")
    cmds = {r["command"] for r in data}
    assert cmds <= {"mem_read", "mem_read_line", "mem_read_multiple"} and "mem_read_multiple" in cmds
    for r in data:
        if r["command"] == "mem_read_multiple":
            assert r["address"] % 64 == 0 and r["bytes"] % 64 == 0 and r["bytes"] >= 128
        elif r["command"] == "mem_read_line":
            assert r["address"] // 64 == (r["address"] + r["bytes"] - 1) // 64
        else:
            assert r["address"] % 64 == 0 and r["bytes"] < 64


@pytest.mark.parametrize("waits_every", [0, 3])
def test_the_latency_timer_ends_long_bursts(waits_every):
    t = _family({"latency_timer_clocks": 32}, {"read_waits_every": waits_every, "read_disconnect_bytes": 0})
    data = _on(t, "send", "data_read")
    assert max(r["clocks"] for r in data) == 32       # (a 1442-byte frame would take 190 clocks)
    assert len({r["bytes"] for r in data}) >= 2


@pytest.mark.parametrize("path", ["both", "send", "irq"])
def test_retried_csr_accesses_on_the_chosen_paths(path):
    t = _family({"csr_retries": 3, "csr_retry_path": path})
    recs = t["records"]
    for p in t["packets"]:
        for key, on in (("csr_records", path in ("both", "send")), ("tx_irq_csr_records", path in ("both", "irq"))):
            group = [recs[i] for i in p[key]]
            if not group or p["csr_end_ps"] < 0:
                continue
            done = [r for r in group if r["termination"] != "retry"]
            retried = [r for r in group if r["termination"] == "retry"]
            assert len(retried) == (3 * len(done) if on else 0)
            if on:      # each access's retries come first, on its address
                for k, r in enumerate(done):
                    assert [x["address"] for x in group[4 * k:4 * k + 4]] == [r["address"]] * 4


def test_csr_disconnect_ends_every_accepted_access_with_stop():
    t = _family({"csr_disconnect": True, "csr_retries": 1})
    csr = _on(t, "send", "csr_read", "csr_write")
    assert {r["termination"] for r in csr} == {"retry", "disconnect_with_data"}
    assert all(r["bytes"] == 4 for r in csr if r["termination"] == "disconnect_with_data")


def test_posted_writes_follow_closely():
    t = _family({"send_csr_reads": 1, "send_csr_writes": 3}, {"posted_write_gap_clocks": 2, "csr_gap_clocks": 18})
    recs = t["records"]
    period = t["buses"]["send"]["period_ps"]
    p = t["packets"][3]
    group = [recs[i] for i in p["csr_records"]]
    gaps = [(b["start_ps"] - a["end_ps"]) // period for a, b in zip(group, group[1:])]
    # read -> write: the CPU waited for the read; write -> next: posted (each plus the clocks from
    # the end of the access to the next address phase: idle, REQ#, GNT#)
    assert gaps == [18 + 3, 2 + 3, 2 + 3]


def test_the_interrupt_routine_has_the_shape_asked_for():
    from pcitrace.sim.model import IRQ_CSR_READS

    t = _family({"irq_csr_reads": 3, "irq_csr_writes": 2, "irq_order": "interleaved", "icr_read": "last"})
    recs = t["records"]
    bar = t["buses"]["send"]["bar"][0]
    groups = [[recs[i] for i in p["tx_irq_csr_records"]] for p in t["packets"] if p["tx_irq_csr_records"]]
    assert groups
    for g in groups:
        assert [r["purpose"] for r in g] == ["csr_read", "csr_write", "csr_read", "csr_write", "csr_read"]
        assert g[-1]["address"] == bar + IRQ_CSR_READS[0]          # ICR read last


def test_csr_sequence_orders():
    from pcitrace.sim.model import IRQ_CSR_READS as R, IRQ_CSR_WRITES as W, csr_sequence
    from pcitrace.sim.scenario import NicConfig

    nic = NicConfig(irq_csr_reads=2, irq_csr_writes=3, irq_order="writes_first", icr_read="first")
    assert csr_sequence(nic, "irq") == [(True, W[0]), (True, W[1]), (True, W[2]), (False, R[0]), (False, R[1])]
    nic.irq_order, nic.icr_read = "interleaved", "last"
    assert csr_sequence(nic, "irq") == [(False, R[1]), (True, W[0]), (False, R[0]), (True, W[1]), (True, W[2])]
    nic.irq_order = "reads_first"
    assert csr_sequence(nic, "send")[:2] == [(False, 0x0008), (False, 0x3810)]     # a send: always reads first


def test_a_full_transmit_ring_delays_sends():
    fast = {"spacing_us": 4.0, "jitter_us": 0.0}          # a send every 4 us, 12 us on the wire each
    free = _family({}, traffic=fast)
    ring = _family({"tx_ring": 4}, traffic=fast)
    recs = ring["records"]

    def in_flight(t, p):
        return p["csr_start_ps"] >= 0 and p["csr_start_ps"] <= t and (
            not p["tx_dma_records"] or recs[p["tx_dma_records"][-1]]["purpose"] != "status_write"
            or recs[p["tx_dma_records"][-1]]["end_ps"] > t)

    sent = [p for p in ring["packets"] if p["csr_start_ps"] >= 0]
    # at most four sends between their CSR group and their status write-back
    assert max(sum(in_flight(p["csr_start_ps"], q) for q in sent) for p in sent) == 4

    def late(t):
        """How far behind its schedule (a send every 4 us from 2 us) the application fell."""
        return max(p["app_send_ps"] - (2 + 4 * p["seq"]) * 1e6 for p in t["packets"])
    # the application waits for free slots: it falls behind by the wire's pace; without a ring
    # it never does (the frames pile up in the NIC's queue instead)
    assert late(ring) > 50e6 and len(ring["packets"]) < 0.5 * len(free["packets"])
    assert late(free) < 1e6


def test_transmit_descriptors_are_fetched_in_batches():
    t = _family({"tx_ring": 8, "tx_desc_every": 4}, traffic={"spacing_us": 2.0, "jitter_us": 0.0})
    fetches = _on(t, "send", "desc_fetch")
    assert max(r["bytes"] for r in fetches) > 16 and all(r["bytes"] % 16 == 0 and r["bytes"] <= 64 for r in fetches)
    # every packet that went out was in one fetch
    assert sum(r["bytes"] // 16 for r in fetches) >= sum(1 for p in t["packets"] if p["wire_start_ps"] >= 0)

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

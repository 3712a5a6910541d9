"""specs: the column builder (render_txns) draws exactly what render(to_specs(...)) draws."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pcitrace.sim.bus import render
from pcitrace.sim.model import run_model
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

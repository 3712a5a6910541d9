"""The analyser on every bundled simulator sample against its truth file (samples/NAME.truth.json).

Counts and bytes must be exact, times within one bus clock (tests/analyse/truth.py). Where the
bus alone cannot show what the simulator knows, the test is an xfail naming why, so the gap
stays visible rather than hidden behind a loose tolerance.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from pcitrace.analyse import analyse
from pcitrace.decode import decode_capture
from tests.conftest import SAMPLES

from .truth import compare, expected_packets

SAMPLE_NAMES = sorted(p.name[: -len(".sr")] for p in SAMPLES.glob("*.sr"))

# (sample, bus) -> why the per-packet figures are not all equal to the truth yet.
PACKET_GAPS: dict[tuple[str, str], str] = {}


@functools.lru_cache(maxsize=None)
def _load(name: str):
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    return analyse(decode_capture(SAMPLES / f"{name}.sr")), truth


def _buses(name: str) -> list[str]:
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    return sorted(b for b, v in truth["buses"].items() if v["kind"] in ("pci", "pcix"))


CASES = [(n, b) for n in SAMPLE_NAMES for b in _buses(n)]


@pytest.mark.parametrize("name,bus", CASES)
def test_occupancy_equals_truth(name, bus):
    analysis, truth = _load(name)
    b = analysis.buses[bus]
    occ = truth["occupancy"][bus]
    # busy = every clock with FRAME# or IRDY# asserted, stray IRDY# clocks of the violations
    # sample included (they belong to no transaction: the split reports them apart)
    got = {"busy": b.split.busy_clocks, "data": b.split.data, "wait": b.split.wait,
           "address": b.split.address, "retry": b.split.retry, "stray": b.split.stray,
           "clocks": b.split.total_clocks}
    assert got == {k: occ[k] for k in got}
    assert b.split.by_initiator == {k: occ["by_initiator"].get(k, 0) for k in b.split.by_initiator}


def analysis_findings(name):
    res = decode_capture(SAMPLES / f"{name}.sr")
    return res.findings["kind"]


@pytest.mark.parametrize("name,bus", CASES)
def test_packets_and_bytes_equal_truth(name, bus, request):
    analysis, truth = _load(name)
    p = analysis.buses[bus].packets
    exp = expected_packets(truth, bus)
    assert len(p) == len(exp)
    np.testing.assert_array_equal(p["data_bytes"], [e["data_bytes"] for e in exp])
    period = truth["buses"][bus]["period_ps"]
    assert np.abs(p["data_start_ps"] - np.array([e["data_start_ps"] for e in exp])).max() <= period


@pytest.mark.parametrize("name,bus", CASES)
def test_per_packet_figures_equal_truth(name, bus, request):
    if (name, bus) in PACKET_GAPS:
        # strict: a gap that closes shows up as XPASS and must be taken off the list
        request.applymarker(pytest.mark.xfail(reason=PACKET_GAPS[(name, bus)], strict=True))
    analysis, truth = _load(name)
    problems = compare(analysis.buses[bus], truth, bus, tol_ps=truth["buses"][bus]["period_ps"],
                       check_occupancy=True)
    assert problems == []


def test_pro1000_reproduces_seed_occupancy():
    # Hughes-Jones et al.: 1400-byte frames every 11 us on 64-bit/66 MHz, send bus ~43 %,
    # receive bus ~30 %.
    analysis, _ = _load("pro1000_66mhz")
    send, recv = analysis.buses["send"], analysis.buses["recv"]
    assert send.occupancy == pytest.approx(0.43, abs=0.03)
    assert recv.occupancy == pytest.approx(0.30, abs=0.03)
    assert send.distributions["packet_occupancy"].median == pytest.approx(0.43, abs=0.03)
    assert recv.distributions["packet_occupancy"].median == pytest.approx(0.30, abs=0.03)
    assert send.classification_rule == "gnt+bar"


def test_request_sample_reproduces_seed_csr_setup():
    # The 64-byte request: ~1.75 us CSR setup then ~0.25 us of DMA.
    analysis, _ = _load("reqresp_64_1400")
    a = analysis.buses["a"]
    from pcitrace.analyse.classify import READ
    req = a.packets[(a.packets["direction"] == READ)]
    assert len(req) >= 2
    assert np.median(req["csr_setup_ps"]) * 1e-6 == pytest.approx(1.75, abs=0.1)
    assert np.median(req["data_dma_ps"]) * 1e-6 == pytest.approx(0.25, abs=0.05)
    # The default coalescence of 64 x 1.024 us shows as ~70 us to the driver's CSR update.
    assert a.distributions["interrupt_delay_us"].median == pytest.approx(70, abs=5)


def test_coalescence_sample_counts_packets_per_interrupt():
    analysis, truth = _load("pro1000_66mhz_coalesce")
    for bus in ("send", "recv"):
        d = analysis.buses[bus].distributions["packets_per_interrupt"]
        starts = [e["irq_start_ps"] for e in expected_packets(truth, bus) if e["irq_start_ps"] >= 0]
        _, counts = np.unique(starts, return_counts=True)
        assert d.median == float(np.median(counts))
        # The truth names the interrupts its packets got; the capture may also hold the one
        # serving its last packets, whose truth falls after the capture's end.
        assert len(counts) <= d.count <= len(counts) + 1

"""The bundled samples: regenerate to their committed truth, decode to it, land in the seed ranges."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pcitrace.decode import decode_capture
from pcitrace.decode.records import diff_records, records_from_dicts
from pcitrace.sim.output import truth_json
from pcitrace.sim.samples import sample_names
from pcitrace.sim.scenario import load_scenario, simulate

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
EXPECTED = {"pro1000_66mhz", "pro1000_66mhz_coalesce", "pro1000_33mhz", "control_only", "reqresp_64_1400",
            "pcix133_mmrbc512", "pcix133_mmrbc4096", "violations"}
US = 1e6


def truth(name):
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


def test_every_sample_is_there_and_small():
    assert set(sample_names(SAMPLES)) >= EXPECTED
    for name in EXPECTED:
        for ext in (".sr", ".scenario.toml", ".profile.toml", ".truth.json"):
            assert (SAMPLES / f"{name}{ext}").exists(), name + ext
        assert (SAMPLES / f"{name}.sr").stat().st_size < 5e6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_truth_is_a_fresh_run(name):
    fresh = simulate(load_scenario(SAMPLES / f"{name}.scenario.toml"))
    assert truth_json(fresh.truth) == (SAMPLES / f"{name}.truth.json").read_text(), \
        f"regenerate with: python -m pcitrace.sim.samples {name}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fast_engine_decodes_the_truth(name):
    res = decode_capture(SAMPLES / f"{name}.sr", SAMPLES / f"{name}.profile.toml")
    want = records_from_dicts(truth(name)["records"])
    assert diff_records(want, res.records) == []


@pytest.mark.sigrok
@pytest.mark.slow
@pytest.mark.parametrize("name", ["control_only", "reqresp_64_1400", "pcix133_mmrbc512", "violations"])
def test_sigrok_engine_decodes_the_truth(name, sigrok_cli):
    res = decode_capture(SAMPLES / f"{name}.sr", SAMPLES / f"{name}.profile.toml", engine="sigrok")
    want = records_from_dicts(truth(name)["records"])
    assert diff_records(want, res.records) == []


def per_frame_busy_us(t, bus):
    frames = sum(1 for f in t["frames"] if f["link"] == "a_to_b" and f["kind"] == "data")
    return t["occupancy"][bus]["busy_ps"] / US / frames


def test_pro1000_66mhz_in_seed_range():
    t = truth("pro1000_66mhz")
    occ = t["occupancy"]
    # seed: send ~4.7 us busy per 11 us packet (43 %), receive ~3.25 us (30 %)
    assert 0.38 <= occ["send"]["fraction"] <= 0.48
    assert 0.25 <= occ["recv"]["fraction"] <= 0.35
    assert 4.3 <= per_frame_busy_us(t, "send") <= 5.3
    assert 3.0 <= per_frame_busy_us(t, "recv") <= 3.7
    done = [p for p in t["packets"] if p["rx_first_word_ps"] > 0]
    assert all(abs(p["wire_time_ps"] / US - 11.63) < 0.01 for p in done)          # 11.6 us on the wire
    assert 20 <= np.median([p["send_to_recv_ps"] for p in done]) / US <= 28       # seed: 23-27 us
    assert np.median([p["csr_setup_ps"] for p in done]) / US == pytest.approx(1.75, abs=0.15)
    settled = [p for p in done if p["rx_dma_end_ps"] < t["duration_ps"] - 20 * US]
    assert all(p["tx_irq_csr_records"] and p["rx_irq_csr_records"] for p in settled)   # an interrupt per frame
    assert all(0 < p["tx_interrupt_delay_ps"] < 10 * US for p in settled)


def test_pro1000_33mhz_in_seed_range():
    t = truth("pro1000_33mhz")
    # seed (IBM das, 64-bit/33 MHz): send ~9.3 us (82 %), receive ~5.9 us (50 %)
    assert 8.5 <= per_frame_busy_us(t, "send") <= 10.0
    assert 5.3 <= per_frame_busy_us(t, "recv") <= 6.5
    assert t["occupancy"]["send"]["fraction"] >= 0.72
    assert 0.45 <= t["occupancy"]["recv"]["fraction"] <= 0.56


def test_coalescence_delay_and_pause_gaps():
    t = truth("pro1000_66mhz_coalesce")
    done = [p for p in t["packets"] if p["rx_interrupt_delay_ps"] > 0]
    groups = {}
    for p in done:
        groups.setdefault(p["rx_irq_csr_start_ps"], []).append(p["rx_interrupt_delay_ps"])
    # seed: ~70 us from the PCI transfer to the CSR update (64 x 1.024 us)
    longest = [max(v) / US for v in groups.values()]
    assert all(65 <= d <= 78 for d in longest), longest
    assert np.mean([len(v) for v in groups.values()]) >= 4
    # a pause about every 900 us: a gap in a -> b frames longer than the usual spacing
    starts = np.array([f["wire_start_ps"] for f in t["frames"] if f["link"] == "a_to_b"])
    gaps = np.diff(starts) / US
    assert len(t["pauses"]) == 1 and 890 <= t["pauses"][0]["start_ps"] / US <= 910
    assert gaps.max() >= 30 and np.median(gaps) < 12.5


def test_request_response_csr_and_dma_times():
    t = truth("reqresp_64_1400")
    req = [p for p in t["packets"] if p["src"] == "a" and 0 < p["first_dma_ps"] < t["duration_ps"] - 100 * US]
    resp = [p for p in t["packets"] if p["src"] == "b" and p["rx_first_word_ps"] > 0]
    assert req and resp
    for p in req:
        # seed: CSR setup 1.75 us, then 0.25 us of DMA for the 64-byte request
        assert p["csr_setup_ps"] / US == pytest.approx(1.75, abs=0.15)
        assert 0.2 <= (p["tx_dma_end_ps"] - p["tx_data_start_ps"]) / US <= 0.35
        assert p["frame_bytes"] == 110
        # ~70 us from the transfer to the CSR update, on send and receive
        assert 65 <= p["tx_interrupt_delay_ps"] / US <= 78
        assert 65 <= p["rx_interrupt_delay_ps"] / US <= 78
    assert all(p["frame_bytes"] == 1446 for p in resp)


def test_pcix_mmrbc_4096_beats_512():
    small, large = truth("pcix133_mmrbc512"), truth("pcix133_mmrbc4096")

    def dma_us(t):
        ps = [p["tx_dma_end_ps"] - p["tx_data_start_ps"] for p in t["packets"] if p["tx_dma_end_ps"] > 0]
        return np.median(ps) / US

    def requests(t):
        return sum(1 for r in t["records"] if r["bus"] == "send" and r["purpose"] == "data_read")

    def frames(t):
        return sum(1 for f in t["frames"] if f["link"] == "a_to_b")

    assert dma_us(large) < 0.7 * dma_us(small)
    assert frames(large) > 1.4 * frames(small)
    assert requests(small) / frames(small) > 4 * requests(large) / frames(large)
    assert all(r["byte_count"] <= 512 for r in small["records"] if r["purpose"] == "data_read")


def test_control_only_has_no_ad_but_gnt():
    t = truth("control_only")
    assert t["ad"] is False and t["gnt"] is True
    recs = t["records"]
    assert all(r["command"] == "unknown" and r["address"] == 0 for r in recs)
    assert {r["gnt"] for r in recs if r["master"] == "nic"} == {1}
    assert {r["gnt"] for r in recs if r["master"] != "nic"} == {0}
    assert any(r["master"] == "other" for r in recs)


def test_violations_lists_every_kind():
    kinds = {f["kind"] for f in truth("violations")["findings"]}
    assert kinds >= {"parity_error", "initial_latency", "glitch", "irdy_without_transaction", "trdy_without_devsel"}
    assert any(r["termination"] == "retry" for r in truth("violations")["records"])

"""Wire-to-PCI chain: frames on the probe matched to their send and receive DMAs.

The simulator's truth names, per packet, the send and receive first data words and the frame
on the wire; every delay must equal it within one bus clock, including captures where the
receiver drops frames and where pause frames stall the sender.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from pcitrace.analyse import analyse
from pcitrace.analyse.wire import CONTROL, MATCHED, NO_RECV_DMA, link_chain, link_chains
from pcitrace.capture import open_capture
from pcitrace.capture.profile import resolve_profile
from pcitrace.decode import decode_capture
from pcitrace.sim.scenario import scenario_from_dict, simulate

from tests.conftest import SAMPLES


def chains_of(capture, profile):
    res = decode_capture(capture, profile)
    return res, link_chains(res, analyse(res))


def truth_by_frame(truth, link):
    """wire start (probe sample time) -> truth packet, for the data frames of ``link``."""
    by_seq = {}
    for q in truth["packets"]:
        by_seq.setdefault(q["seq"], []).append(q)
    out = {}
    for f in truth["frames"]:
        if f["link"] != link or f["kind"] != "data" or f.get("truncated"):
            continue
        cands = [q for q in by_seq.get(f["seq"], []) if q.get("wire_start_ps") is not None]
        q = min(cands, key=lambda q: abs(q["wire_start_ps"] - f["start_ps"]))
        out[f["start_ps"]] = q
    return out


def check_chain(lc, truth, clock_ps: float):
    expect = truth_by_frame(truth, lc.link)
    seen = 0
    for row in lc.chain:
        if row["status"] == CONTROL:
            continue
        q = expect[int(row["wire_start_ps"])]
        seen += 1
        if q.get("tx_first_word_ps") is not None and q["tx_first_word_ps"] >= 0:
            assert row["send_packet"] >= 0, f"frame {q['seq']} lost its send DMA"
            assert abs(row["send_first_word_ps"] - q["tx_first_word_ps"]) <= clock_ps
        if q["lost"]:
            assert row["recv_packet"] == -1, f"dropped frame {q['seq']} was paired with a receive DMA"
            assert row["status"] == NO_RECV_DMA
        elif q.get("rx_first_word_ps") is None or q["rx_first_word_ps"] < 0:
            # no receive DMA inside the capture (it ends first, or no receive bus is probed)
            assert row["recv_packet"] == -1
        else:
            assert row["recv_packet"] >= 0, f"frame {q['seq']} lost its receive DMA"
            assert abs(row["recv_first_word_ps"] - q["rx_first_word_ps"]) <= clock_ps
            assert abs(row["pci_to_pci_ps"] - q["send_to_recv_ps"]) <= clock_ps
        assert row["wire_time_ps"] == row["wire_end_ps"] - row["wire_start_ps"]
    assert seen == len(expect)


def _samples_with_links():
    return sorted(p.name[:-len(".profile.toml")] for p in Path(SAMPLES).glob("*.profile.toml")
                  if "gbe_probe" in p.read_text())


@pytest.mark.parametrize("name", _samples_with_links())
def test_every_probe_sample_chain_equals_truth(name):
    import json
    cap = open_capture(Path(SAMPLES) / f"{name}.sr")
    prof = resolve_profile(cap, Path(SAMPLES) / f"{name}.profile.toml")
    truth = json.loads((Path(SAMPLES) / f"{name}.truth.json").read_text())
    res, chains = chains_of(cap, prof)
    assert chains
    clock_ps = max(1e12 / b.clock_hz for b in res.buses.values() if b.kind != "gbe_probe")
    for lc in chains.values():
        check_chain(lc, truth, clock_ps)


def _scenario(**link):
    data = tomllib.loads((Path(SAMPLES) / "pro1000_66mhz.scenario.toml").read_text())
    data["duration_us"] = 400
    data["link"].update(link)
    return scenario_from_dict(data)


def test_dropped_frames_keep_no_receive_dma_and_the_rest_stay_in_step():
    sim = simulate(_scenario(lost=[3, 4, 11, 20]))
    res, chains = chains_of(sim.capture, sim.profile)
    lc = chains["a_to_b"]
    assert (lc.send_bus, lc.recv_bus) == ("send", "recv")
    check_chain(lc, sim.truth, 1e12 / 66e6)
    lost_rows = lc.chain[lc.chain["status"] == NO_RECV_DMA]
    assert len(lost_rows) == 4
    assert (lc.chain["status"] == MATCHED).sum() >= len(lc.chain) - 4 - 1


def test_pause_gaps_stall_the_sender_without_breaking_the_chain():
    sim = simulate(_scenario(pause_interval_us=150, pause_us=40, reverse_probe=True))
    assert sim.truth["pauses"], "the scenario should pause the sender"
    res, chains = chains_of(sim.capture, sim.profile)
    lc = chains["a_to_b"]
    check_chain(lc, sim.truth, 1e12 / 66e6)
    # the jump in send delay at each pause is followed, not mistaken for lost frames
    s2w = lc.chain["send_pci_to_wire_ps"][lc.chain["status"] == MATCHED]
    assert s2w.max() - np.median(s2w) > 20e6
    rev = chains["b_to_a"]
    assert (rev.chain["status"] == CONTROL).sum() == len(sim.truth["pauses"])


def test_frames_with_no_dma_anywhere_are_reported_unmatched_not_forced():
    import json
    name = "pro1000_66mhz"
    cap = open_capture(Path(SAMPLES) / f"{name}.sr")
    prof = resolve_profile(cap, Path(SAMPLES) / f"{name}.profile.toml")
    res = decode_capture(cap, prof)
    an = analyse(res)
    frames = res.frames["a_to_b"].copy()
    # shift the frames far beyond every DMA: nothing may pair
    frames["start_ps"] += 10**12
    frames["end_ps"] += 10**12
    lc = link_chain("a_to_b", frames, an, res.words, send_bus="send", recv_bus="recv")
    assert (lc.chain["send_packet"] == -1).all()
    assert (lc.chain["recv_packet"] == -1).all()
    assert len(lc.unmatched_send) > 30 and len(lc.unmatched_recv) > 30
    assert json.dumps(lc.counts())


def test_a_link_given_the_wrong_way_round_is_taken_as_given_and_warned_about(tmp_path):
    # issue 17: a request/response link's buses could be put the wrong way round, and no option
    # let the user say which bus sends. The profile now says it; against the data it is warned about.
    from pcitrace import pipeline
    from pcitrace.capture.profile import load_profile
    from tests.conftest import SAMPLES

    text = (SAMPLES / "reqresp_64_1400.profile.toml").read_text()
    path = tmp_path / "p.toml"
    for send, recv, wrong in (("b", "a", False), ("a", "b", True)):
        path.write_text(text.replace('name = "b_to_a"\nkind = "gbe_probe"\n',
                                     f'name = "b_to_a"\nkind = "gbe_probe"\nsend_bus = "{send}"\nrecv_bus = "{recv}"\n'))
        chain = pipeline.run(SAMPLES / "reqresp_64_1400.sr", load_profile(path)).chains["b_to_a"]
        assert (chain.send_bus, chain.recv_bus) == (send, recv)
        assert bool(chain.warnings) == wrong

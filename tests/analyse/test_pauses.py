"""Transmit gaps against the simulator's pause frames (pcitrace.sim, link.pause_interval_us)."""

import numpy as np

from pcitrace.analyse import analyse
from pcitrace.decode import decode_capture
from pcitrace.sim.scenario import scenario_from_dict, simulate


def test_every_pause_frame_is_a_transmit_gap():
    sc = {"name": "pauses", "seed": 2, "duration_us": 600, "mode": "state",
          "link": {"pause_interval_us": 150, "pause_us": 60}, "bus": [{"name": "send", "pc": "a"}]}
    res = simulate(scenario_from_dict(sc))
    a = analyse(decode_capture(res.capture, res.profile)).buses["send"]
    truth = [p for p in res.truth["pauses"] if p["end_ps"] < res.truth["duration_ps"] - 20_000_000]
    assert len(a.pause_after) == len(truth) == 3
    p = a.packets
    for i, pause in zip(a.pause_after, truth):
        # The NIC stops reading frames for the pause: the gap spans it.
        assert p["data_start_ps"][i] <= pause["start_ps"] + 11_000_000
        assert p["data_start_ps"][i + 1] >= pause["end_ps"]
    gap_us = a.distributions["pause_us"]
    assert gap_us.count == 3
    assert 60 <= gap_us.min and gap_us.max <= 60 + 2 * 11.7
    # The driver's send routine keeps its rhythm through the pause.
    assert np.nanmax(p["period_ps"]) < 2 * np.nanmedian(p["period_ps"])

"""The sigrok decoder on every bundled sample (samples/NAME.sr): records equal NAME.truth.json.

The simulator wrote each sample together with the records it holds; the reference decoder,
run by the real sigrok-cli through pcitrace.decode.sigrok.run_sigrok, must give exactly those
for every PCI bus of the sample's profile (a truncated last transaction excepted: 0.5.3
never reports it), and the same findings (samples/violations.sr holds every kind).
"""

from __future__ import annotations

import numpy as np
import pytest

from pcitrace.capture.profile import load_profile
from pcitrace.decode.records import diff_records, records_from_dicts
from pcitrace.decode.sigrok import run_sigrok
from pcitrace.sim.output import load_truth

from tests.conftest import SAMPLES

pytestmark = pytest.mark.sigrok

SAMPLE_NAMES = sorted(p.name[: -len(".truth.json")] for p in SAMPLES.glob("*.truth.json")
                      if (SAMPLES / (p.name[: -len(".truth.json")] + ".sr")).exists())


def test_there_are_samples():
    assert len(SAMPLE_NAMES) >= 5


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_sample_decodes_to_its_truth(sigrok_cli, name):
    sr = SAMPLES / f"{name}.sr"
    profile = load_profile(SAMPLES / f"{name}.profile.toml")
    truth = load_truth(SAMPLES / f"{name}.truth.json")
    buses = profile.pci_buses
    assert buses
    for bus in buses:
        want = records_from_dicts(r for r in truth["records"] if r["bus"] == bus.name)
        want = want[want["termination"] != "truncated"]
        got = run_sigrok(sr, bus)
        # one bus alone: data_index counts this bus's words; the truth's is the merged index of
        # all buses (checked through decode_capture in tests/sim/test_samples.py)
        assert diff_records(want, got.records, ignore=("data_index",)) == [], (name, bus.name)
        assert int(want["data_phases"].sum()) == len(got.words)
        assert got.records["data_index"].tolist() == np.concatenate(
            ([0], np.cumsum(got.records["data_phases"])[:-1])).tolist()[:len(got.records)]
        # every finding the simulator meant (violations.sr injects each kind) and no other
        want_f = sorted((f["kind"], int(f["time_ps"])) for f in truth.get("findings", [])
                        if f["bus"] == bus.name)
        got_f = sorted((str(k), int(t)) for k, t in zip(got.findings["kind"], got.findings["time_ps"]))
        assert got_f == want_f, (name, bus.name)

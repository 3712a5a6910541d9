"""Property tests: simulated bus activity -> .sr -> real sigrok-cli + decoders/pci -> the truth.

The bus renderer (pcitrace.sim) writes legal PCI / PCI-X activity, in state or timing mode,
with or without AD and C/BE#, together with the records docs/records.md says it holds; the
sigrok decoder must give those records exactly (libsigrokdecode 0.5.3 never reports a
transaction still running at the end of the capture, so a truncated last record is left out).
Each example runs sigrok-cli once, so the example counts stay small.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from pcitrace.capture import write_sr
from pcitrace.decode.records import diff_records
from pcitrace.decode.sigrok import run_sigrok
from pcitrace.sim.strategies import captures_with_truth, faulty_activity

pytestmark = pytest.mark.sigrok

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                        HealthCheck.too_slow])


def _decode(capture, profile):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sim.sr"
        write_sr(capture, path)
        return run_sigrok(path, profile.buses[0])


def _complete(records, words):
    keep = records["termination"] != "truncated"
    kept = records[keep]
    wkeep = np.isin(words["record"], np.flatnonzero(keep))
    return kept, words[wkeep]


@settings(max_examples=60, **SETTINGS)
@given(ct=captures_with_truth(max_txns=6))
def test_simulated_activity_decodes_to_its_truth(sigrok_cli, ct):
    capture, profile, truth, truth_words = ct
    got = _decode(capture, profile)
    truth, truth_words = _complete(truth, truth_words)
    assert diff_records(truth, got.records) == []
    assert list(got.words["time_ps"]) == list(truth_words["time_ps"])
    assert list(got.words["value"]) == list(truth_words["value"])
    assert list(got.words["byte_enables"]) == list(truth_words["byte_enables"])
    assert list(got.words["record"]) == list(truth_words["record"])
    assert len(got.findings) == 0, got.findings


@st.composite
def faulty(draw):
    # faulty_activity loses track of a fault host it placed first (StopIteration while
    # drawing); such draws are skipped here rather than failing this decoder's test.
    try:
        return draw(faulty_activity())
    except StopIteration:
        reject()


@settings(max_examples=25, **SETTINGS)
@given(fc=faulty())
def test_injected_faults_are_found_and_records_stay_exact(sigrok_cli, fc):
    capture, profile, truth, truth_words = fc.truth
    got = _decode(capture, profile)
    truth, _ = _complete(truth, truth_words)
    assert diff_records(truth, got.records) == []
    found = {(str(f["kind"]), int(f["time_ps"])) for f in got.findings}
    for kind, t in fc.faults:
        assert (kind, t) in found, (kind, t, sorted(found))

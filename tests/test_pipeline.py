"""pcitrace.pipeline: the stages, until=, progress, cancel and the one error policy."""

from __future__ import annotations

import shutil

import pytest

from pcitrace import pipeline
from pcitrace.analyse import AnalysisOptions
from pcitrace.decode import decode_capture
from pcitrace.errors import PcitraceError
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "pro1000_33mhz.sr"


def test_every_stage_runs_and_gives_what_decode_gives():
    run = pipeline.run(SAMPLE)
    assert run.stage == "link"
    ref = decode_capture(SAMPLE)
    assert (run.decoded.records == ref.records).all()
    assert set(run.analysis.buses) == {n for n, s in ref.buses.items() if s.kind in ("pci", "pcix")}
    assert set(run.chains) == set(ref.frames)     # one chain per probe link
    assert run.path == str(SAMPLE)


@pytest.mark.parametrize("until, filled", [("open", "capture"), ("profile", "profile"),
                                           ("decode", "decoded"), ("analyse", "analysis")])
def test_until_stops_after_that_stage(until, filled):
    run = pipeline.run(SAMPLE, until=until)
    assert run.stage == until
    order = ["capture", "profile", "decoded", "analysis"]
    for name in order[:order.index(filled) + 1]:
        assert getattr(run, name) is not None
    for name in order[order.index(filled) + 1:]:
        assert getattr(run, name) is None


def test_an_open_capture_and_profile_are_taken_as_they_are():
    first = pipeline.run(SAMPLE, until="profile")
    run = pipeline.run(first.capture, first.profile, until="decode")
    assert run.capture is first.capture and run.profile is first.profile


def test_progress_names_every_stage_and_counts_decoded_clocks():
    calls = []
    run = pipeline.run(SAMPLE, progress=lambda stage, n: calls.append((stage, n)))
    assert [s for s, n in calls if n == 0][:5] == list(pipeline.STAGES)
    clocks = sum(n for s, n in calls if s == "decode")
    assert clocks == sum(s.clocks for s in run.decoded.buses.values())


def test_cancel_stops_between_stages_and_while_decoding():
    with pytest.raises(pipeline.Cancelled):
        pipeline.run(SAMPLE, cancelled=lambda: True)
    asked = []

    def cancel_in_decode():
        asked.append(1)
        return len(asked) > 4       # open, profile, decode start, then the first decoded chunk
    with pytest.raises(pipeline.Cancelled):
        pipeline.run(SAMPLE, chunk_clocks=1 << 10, cancelled=cancel_in_decode)
    assert len(asked) == 5


def test_a_missing_file_is_a_user_error():
    with pytest.raises(PcitraceError, match="no such file") as info:
        pipeline.run(SAMPLES / "nope.sr")
    assert info.value.run.capture is None


def test_an_unknown_stage_is_a_user_error():
    with pytest.raises(PcitraceError, match="unknown pipeline stage"):
        pipeline.run(SAMPLE, until="report")


def test_an_analysis_error_carries_the_decoded_run():
    # the control-only sample holds no AD: the "gnt+bar" rule cannot apply
    with pytest.raises(PcitraceError, match="classification rule .gnt.bar. needs") as info:
        pipeline.run(SAMPLES / "control_only.sr", options=AnalysisOptions(classification="gnt+bar"))
    run = info.value.run
    assert run.stage == "decode" and len(run.decoded.records) and run.analysis is None


def test_a_failing_read_becomes_a_user_error_naming_file_and_stage(tmp_path, monkeypatch):
    path = tmp_path / "c.sr"
    shutil.copy(SAMPLE, path)
    shutil.copy(SAMPLES / "pro1000_33mhz.profile.toml", tmp_path / "c.profile.toml")
    import pcitrace.decode as dec

    def broken(*a, **k):
        raise OSError("Input/output error")
    monkeypatch.setattr(dec, "decode_capture", broken)
    with pytest.raises(PcitraceError) as info:
        pipeline.run(path)
    err = info.value
    assert err.path == str(path) and err.where == "decode" and "Input/output error" in str(err) and err.fix
    assert err.run.stage == "profile"


def test_out_of_memory_becomes_a_user_error(monkeypatch):
    import pcitrace.analyse as an

    def broken(*a, **k):
        raise MemoryError()
    monkeypatch.setattr(an, "analyse", broken)
    with pytest.raises(PcitraceError, match="out of memory") as info:
        pipeline.run(SAMPLE)
    assert info.value.where == "analyse"


def test_a_bug_is_not_hidden(monkeypatch):
    import pcitrace.analyse as an

    def broken(*a, **k):
        raise ZeroDivisionError("bug")
    monkeypatch.setattr(an, "analyse", broken)
    with pytest.raises(ZeroDivisionError):
        pipeline.run(SAMPLE)


def test_streamed_records_are_the_decoded_records_chunk_by_chunk():
    import numpy as np

    calls = []
    opened, chunks = pipeline.stream_records(SAMPLE, chunk_clocks=4096, progress=lambda st, n: calls.append((st, n)))
    streamed = np.concatenate(list(chunks))
    assert opened.stage == "profile"
    want = decode_capture(SAMPLE).records
    assert streamed.tobytes() == want.tobytes()
    assert sum(n for st, n in calls if st == "decode") > 0


def test_streamed_records_have_the_error_policy_and_cancel(monkeypatch):
    import pcitrace.decode as dec

    def broken(*a, **k):
        raise OSError("Input/output error")
        yield
    monkeypatch.setattr(dec, "iter_records", broken)
    opened, chunks = pipeline.stream_records(SAMPLE)
    with pytest.raises(PcitraceError) as info:
        list(chunks)
    assert info.value.where == "decode" and info.value.run is opened
    monkeypatch.undo()
    asked = []

    def cancel_once_decoding():                     # open and profile run; decoding is cancelled
        asked.append(1)
        return len(asked) > 2
    _, chunks = pipeline.stream_records(SAMPLE, chunk_clocks=1024, cancelled=cancel_once_decoding)
    with pytest.raises(pipeline.Cancelled):
        list(chunks)

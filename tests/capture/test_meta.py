"""pcitrace's own capture metadata: every field typed and ranged, errors naming the field."""

from __future__ import annotations

import pytest

from pcitrace.capture.meta import OwnMeta, parse_own_meta
from pcitrace.errors import PcitraceError


def test_what_pcitrace_writes_reads_back():
    obj = {"format": "pcitrace-sr/1", "mode": "state", "start_ps": -5, "clock_hz": 66.666e6, "timestamps": True,
           "num_samples": 33333, "vectors": {"AD": 64}, "metadata": {"scenario": "x", "end_ps": 12}}
    m = parse_own_meta(obj, "c.sr", "zip member pcitrace.json")
    assert m == OwnMeta(mode="state", start_ps=-5, clock_hz=66.666e6, timestamps=True, num_samples=33333,
                        vectors={"AD": 64}, metadata={"scenario": "x", "end_ps": 12})


def test_no_object_and_a_null_clock_are_the_defaults():
    assert parse_own_meta(None, "c.sr", "x") == OwnMeta()
    assert parse_own_meta({"clock_hz": None}, "c.sr", "x").clock_hz is None


@pytest.mark.parametrize("obj,field", [
    ([1], "not a JSON object"),
    ({"mode": "fast"}, "mode"),
    ({"mode": ["state"]}, "mode"),
    ({"start_ps": 1.5}, "start_ps"),
    ({"start_ps": "0"}, "start_ps"),
    ({"start_ps": 2**70}, "start_ps"),
    ({"samplerate_hz": float("inf")}, "samplerate_hz"),
    ({"samplerate_hz": float("nan")}, "samplerate_hz"),
    ({"samplerate_hz": 10**400}, "samplerate_hz"),
    ({"clock_hz": {"a": 1}}, "clock_hz"),
    ({"clock_hz": 1e-300}, "clock_hz"),
    ({"clock_hz": True}, "clock_hz"),
    ({"num_samples": -1}, "num_samples"),
    ({"num_samples": "None"}, "num_samples"),
    ({"sample_clock": 1}, "sample_clock"),
    ({"vectors": {"AD": 2**31}}, "vectors"),
    ({"vectors": 3}, "vectors"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": {"end_ps": "late"}}, "metadata.end_ps"),
    ({"metadata": {"trigger_sample": 1e300}}, "metadata.trigger_sample"),
])
def test_a_field_of_the_wrong_type_or_range_is_the_error_naming_it(obj, field):
    with pytest.raises(PcitraceError, match=field) as exc:
        parse_own_meta(obj, "c.sr", "zip member pcitrace.json")
    text = str(exc.value)
    assert text.startswith("c.sr (zip member pcitrace.json") and "\n" not in text and len(text) < 300

"""The one error type's text, and the one line a bug is reported with."""

from __future__ import annotations

from pcitrace.errors import PcitraceError, describe_bug


def test_a_user_error_names_file_place_and_fix():
    e = PcitraceError("no FRAME# channel", path="c.sr", where="profile", fix="map frame_n")
    assert str(e) == "c.sr (profile): no FRAME# channel Fix: map frame_n"


def test_a_bug_is_one_line_with_where_it_was_raised():
    try:
        raise ValueError("first\nsecond")
    except ValueError as exc:
        text = describe_bug(exc)
    assert text.startswith("ValueError: first second (in test_errors.py:")
    assert text.endswith("; please report this with the file)") and "\n" not in text
    assert describe_bug(KeyError("k")) == "KeyError: 'k' (please report this with the file)"

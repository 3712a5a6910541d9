"""The one list of capture formats: every suffix, in any case, and the names around it."""

from __future__ import annotations

import pytest

from pcitrace.capture.formats import SUFFIXES, dialog_filter, format_of, stem


@pytest.mark.parametrize("name,fmt,base", [("a.sr", "sr", "a"), ("B.SR", "sr", "B"), ("x.vcd", "vcd", "x"),
                                           ("run.1.vcd.gz", "vcd", "run.1"), ("t.VCD.GZ", "vcd", "t"),
                                           ("a.srx", None, None), ("vcd", None, None), ("a.gz", None, None)])
def test_format_and_stem_from_the_name(name, fmt, base):
    assert format_of(f"/d/{name}") == fmt
    assert stem(f"/d/{name}") == base


def test_every_part_that_lists_captures_asks_this_list(tmp_path):
    from pcitrace.correlate.sweep import find_captures
    from pcitrace.report.batch import _is_capture

    for s in SUFFIXES:
        (tmp_path / f"c{s.upper()}").write_bytes(b"")
        assert _is_capture(tmp_path / f"c{s.upper()}")
        assert f"*{s}" in dialog_filter()
    (tmp_path / "notes.txt").write_text("")
    assert [p.name for p in find_captures(tmp_path)] == sorted(f"c{s.upper()}" for s in SUFFIXES)

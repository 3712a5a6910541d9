"""A plain clone tests itself: nothing in tests/ or bench/ reads the shared folder beside the
checkout (its data is copied into tests/data; tests/data/README.md says from where)."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_no_test_or_bench_reads_the_folder_beside_the_checkout():
    pattern = re.compile(r"""\.\./shared|parents?\[\d\]\s*/\s*["']shared["']|parent\s*/\s*["']shared["']""")
    offenders = [f"{p.relative_to(ROOT)}:{n}" for folder in ("tests", "bench") for p in (ROOT / folder).rglob("*.py")
                 if p.name != "test_plain_clone.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 # code, not a comment or docstring saying where the data was copied from
                 if pattern.search(line.split("#")[0]) and "copied from" not in line]
    assert not offenders, offenders

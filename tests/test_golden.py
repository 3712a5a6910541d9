"""Golden outputs: `pcitrace report` (JSON, CSV, Markdown) and `pcitrace decode` (CSV, JSONL) of
every bundled sample and of the OpenCores trace, byte for byte as committed in tests/data/golden.

They pin what users read while the code underneath is reorganised. The fields that cannot
repeat, the report's "generated" time stamp and each capture's "seconds" of analysis, is replaced by a fixed text before comparing.
To accept a deliberate change of output: `PCITRACE_REGEN_GOLDEN=1 ./run tests tests/test_golden.py`,
then review `git diff tests/data/golden` and say why in the commit.
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcitrace.cli import cli
from tests.conftest import DATA, OPENCORES_VCD, ROOT, SAMPLES

GOLDEN = DATA / "golden"
REGEN = os.environ.get("PCITRACE_REGEN_GOLDEN") == "1"
STAMP = re.compile(r'"(generated|seconds)": ("[^"]*"|[0-9.e+-]+)')

CAPTURES = [p.relative_to(ROOT) for p in sorted(SAMPLES.glob("*.sr"))] + [OPENCORES_VCD.relative_to(ROOT)]
CASES = [(cap, cmd, fmt) for cap in CAPTURES
         for cmd, fmts in (("report", ("json", "csv", "md")), ("decode", ("csv", "jsonl")))
         for fmt in fmts]


def _golden_path(capture: Path, cmd: str, fmt: str) -> Path:
    name = capture.name.split(".")[0]
    gz = ".gz" if capture == CAPTURES[-1] and cmd == "decode" else ""   # the OpenCores decode is 33 MB raw
    return GOLDEN / f"{name}.{cmd}.{fmt}{gz}"


def _run(capture: Path, cmd: str, fmt: str, out: Path) -> bytes:
    result = CliRunner().invoke(cli, [cmd, str(capture), "--format", fmt, "-o", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    return STAMP.sub(r'"\1": "-"', data.decode()).encode() if cmd == "report" else data


@pytest.mark.parametrize("capture,cmd,fmt", CASES, ids=[f"{c.name.split('.')[0]}-{m}-{f}" for c, m, f in CASES])
def test_output_is_byte_identical_to_the_golden_file(capture, cmd, fmt, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)                      # paths in the report are as the user typed them
    got = _run(capture, cmd, fmt, tmp_path / f"out.{fmt}")
    path = _golden_path(capture, cmd, fmt)
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(got, mtime=0) if path.suffix == ".gz" else got)
    want = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if got != want:
        got_lines, want_lines = got.splitlines(), want.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(got_lines, want_lines)) if a != b),
                     min(len(got_lines), len(want_lines)))
        pytest.fail(f"{path.name} differs from line {first + 1}: "
                    f"got {got_lines[first:first + 1]!r}, want {want_lines[first:first + 1]!r} "
                    f"({len(got_lines)} vs {len(want_lines)} lines)")

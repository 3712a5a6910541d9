"""The `pcitrace` command's promise for bad input: one line on stderr naming the problem and
the fix, exit status 2, no traceback, and no output file (not even a temporary one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, UDP_TOOLS

SAMPLE = str(SAMPLES / "pro1000_66mhz.sr")
G_LOG = str(UDP_TOOLS / "udpmon_bw_1472_w12_G.txt")
SCAN = str(UDP_TOOLS / "udpmon_bw_1472_scan_x.txt")


def pcitrace(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pcitrace", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def assert_one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pcitrace: error:")
    for w in words:
        assert w in lines[0]


@pytest.mark.parametrize("args,words", [
    (["decode", SAMPLE, "--engine", "bogus"], ["--engine", "Fix:", "pcitrace decode --help"]),
    (["report", SAMPLES, "--jobs", "0"], ["--jobs", "Fix:"]),
    (["nosuchcommand"], ["nosuchcommand", "Fix:"]),
    (["decode"], ["CAPTURE", "Fix:"]),
])
def test_usage_errors_are_one_line_with_a_fix(args, words):
    assert_one_line_error(pcitrace(*map(str, args)), *words)


@pytest.mark.parametrize("make_args", [
    lambda out: ["decode", SAMPLE, "-o", out + ".csv"],
    lambda out: ["report", SAMPLE, "-o", out + ".json"],
    lambda out: ["convert", SAMPLE, out + ".vcd"],
    lambda out: ["runlog", G_LOG, "-o", out + ".json"],
    lambda out: ["correlate", SAMPLE, G_LOG, "-o", out + ".txt"],
])
def test_output_into_a_missing_directory_is_refused_cleanly(tmp_path, make_args):
    out = str(tmp_path / "no" / "such" / "dir" / "out")
    proc = pcitrace(*make_args(out))
    assert_one_line_error(proc, "does not exist")
    assert not (tmp_path / "no").exists()


def test_output_where_nothing_can_be_written_is_refused_cleanly(tmp_path):
    proc = pcitrace("report", SAMPLE, "-o", "/proc/pcitrace-report.json")
    assert_one_line_error(proc, "/proc", "Fix:")


def test_output_path_that_is_a_directory_is_refused(tmp_path):
    (tmp_path / "d.json").mkdir()
    proc = pcitrace("report", SAMPLE, "--format", "json", "-o", str(tmp_path / "d.json"))
    assert_one_line_error(proc, "directory")


def test_report_refuses_an_output_suffix_it_cannot_write(tmp_path):
    proc = pcitrace("report", SAMPLE, "-o", str(tmp_path / "r.xyz"))
    assert_one_line_error(proc, ".xyz", "--format")
    assert list(tmp_path.iterdir()) == []


def test_report_refuses_a_malformed_dask_address():
    proc = pcitrace("report", SAMPLE, "--dask", "garbage")
    assert_one_line_error(proc, "Dask", "garbage")


def test_sweep_refuses_a_bad_plot_name_before_any_analysis(tmp_path):
    (tmp_path / "caps").mkdir()
    proc = pcitrace("sweep", str(tmp_path / "caps"), SCAN, "-o", str(tmp_path / "plot.txt"))
    assert_one_line_error(proc, "plot", ".png")
    proc = pcitrace("sweep", str(tmp_path / "caps"), SCAN, "-o", str(tmp_path / "missing" / "plot.png"))
    assert_one_line_error(proc, "does not exist")


def test_files_written_atomically_get_normal_permissions(tmp_path):
    out = tmp_path / "run.json"
    assert pcitrace("runlog", G_LOG, "--format", "json", "-o", str(out)).returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == (0o666 & ~umask)
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["run.json"]

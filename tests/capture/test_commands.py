"""`pcitrace info` and `pcitrace convert`, including the OpenCores conformance trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pcitrace.capture import open_capture, write_sr, write_vcd
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.cli import main


def run(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def small_capture(tmp_path):
    n = 200
    clk = np.arange(n) % 2
    cap = Capture.from_arrays({"CLK": clk, "FRAME#": (np.arange(n) // 10) % 2, "IRDY#": np.ones(n),
                               "AD": np.arange(n) * 3}, TimeBase.timing(10e6), widths={"AD": 16})
    write_sr(cap, tmp_path / "c.sr")
    return tmp_path / "c.sr"


def test_info_on_sr(tmp_path, capsys):
    path = small_capture(tmp_path)
    rc, out, err = run(["info", str(path)], capsys)
    assert rc == 0, err
    assert "10 MHz sample rate" in out
    assert "CLK: 5 MHz, 100 rising edges" in out
    assert "pci: PCI 32-bit, clock CLK" in out
    assert "ad=AD0..AD15" in out
    rc, out, _ = run(["info", "--json", str(path)], capsys)
    s = json.loads(out)
    assert s["samples"] == 200 and s["buses"][0]["signals"]["frame_n"] == "FRAME#"
    assert len(s["channels"]) == 3 + 16


def test_info_with_profile_missing_channel(tmp_path, capsys):
    path = small_capture(tmp_path)
    prof = tmp_path / "p.toml"
    prof.write_text("[[bus]]\nname='x'\n[bus.signals]\nclk='CLK'\nframe_n='FRAME'\n")
    rc, out, err = run(["info", str(path), "--profile", str(prof)], capsys)
    assert rc == 2
    assert "p.toml" in err and "'FRAME'" in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_convert_round_trip(tmp_path, capsys):
    path = small_capture(tmp_path)
    rc, _, err = run(["convert", str(path), str(tmp_path / "c.vcd")], capsys)
    assert rc == 0, err
    rc, _, err = run(["convert", str(tmp_path / "c.vcd"), str(tmp_path / "d.sr")], capsys)
    assert rc == 0, err
    a, d = open_capture(path).read(), open_capture(tmp_path / "d.sr").read()
    assert all(np.array_equal(a[k], d[k]) for k in a)


def test_convert_clocked_and_resampled(tmp_path, capsys):
    n = 100
    cap = Capture.from_arrays({"CLK": (np.arange(n) // 2) % 2, "D": np.arange(n) % 3 == 0},
                              TimeBase.timing(100e6))
    write_vcd(cap, tmp_path / "t.vcd")
    text = [l for l in (tmp_path / "t.vcd").read_text().splitlines() if not l.startswith("$comment")]
    (tmp_path / "f.vcd").write_text("\n".join(text) + "\n")      # a foreign, event-timed VCD
    rc, _, err = run(["convert", str(tmp_path / "f.vcd"), str(tmp_path / "x.sr")], capsys)
    assert rc == 2 and "--clock" in err
    rc, _, err = run(["convert", str(tmp_path / "f.vcd"), str(tmp_path / "s.sr"), "--clock", "CLK"], capsys)
    assert rc == 0, err
    s = open_capture(tmp_path / "s.sr")
    assert s.timebase.mode == "state" and s.num_samples == 25
    # just before each rising edge (samples 2, 6, 10, ...): sample 1, 5, 9, ...
    assert s.read()["D"].tolist() == [int(i % 3 == 0) for i in range(1, 98, 4)]
    rc, _, err = run(["convert", str(tmp_path / "f.vcd"), str(tmp_path / "r.sr"), "--samplerate", "100e6"], capsys)
    assert rc == 0, err
    r = open_capture(tmp_path / "r.sr").read()
    assert r["D"][:n].tolist() == (np.arange(n) % 3 == 0).astype(int).tolist()


def test_corrupt_file_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.vcd"
    bad.write_text("$timescale 1ns $end\n$scope module t $end\n$var wire 1 ! a $end\n$upscope $end\n"
                   "$enddefinitions $end\n#0\n0!\n#1\n1\"\n#2\n")
    r = subprocess.run([sys.executable, "-m", "pcitrace", "info", str(bad)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "RUST_BACKTRACE": "1"})
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert "line 9" in r.stderr and "bad.vcd" in r.stderr


def test_help_on_subcommands(capsys):
    for cmd in ("info", "convert"):
        rc, out, _ = run([cmd, "--help"], capsys)
        assert rc == 0 and "Usage" in out


@pytest.mark.slow
def test_info_on_the_opencores_trace(opencores_vcd, capsys):
    rc, out, err = run(["info", "--json", str(opencores_vcd)], capsys)
    assert rc == 0, err
    s = json.loads(out)
    assert len(s["channels"]) == 20
    clocks = {c["channel"]: c for c in s["clocks"]}
    assert list(clocks) == ["pci_clock"]
    assert clocks["pci_clock"]["frequency_hz"] == pytest.approx(33.33e6, rel=0.01)
    assert abs(clocks["pci_clock"]["rising_edges"] - 646_900) < 1000
    assert len(s["buses"]) == 1
    bus = s["buses"][0]
    assert bus["kind"] == "pci" and bus["width"] == 32 and bus["clock"] == "pci_clock"
    assert bus["signals"]["ad"] == "AD" and bus["signals"]["frame_n"] == "FRAME"
    assert s["unknown_counts"]["AD"]["z"] > 0
    # the testbench's x's are turnaround glitches: no control line is unknown at a sampling edge
    at = s["unknown_at_clock"]
    assert at["clock"] == "pci_clock"
    assert not {"FRAME", "IRDY", "TRDY", "STOP", "DEVSEL"} & set(at["channels"])
    rc, out, _ = run(["info", str(opencores_vcd)], capsys)
    assert "pci_clock: 33.3333 MHz, 646 942 rising edges" in out
    assert "unknown" in out


def test_summary_text_parts():
    from pcitrace.capture.commands import _bus_lines, _channel_lines, _timebase_text, _unknown_lines
    assert _timebase_text({"mode": "state", "clock_hz": 66e6}).startswith("state, one sample per bus clock at 66")
    assert _timebase_text({"mode": "state"}) == "state, one sample per bus clock (per-sample timestamps)"
    assert _timebase_text({"mode": "timing", "event_timed": True, "timescale_ps": 0.1}) == \
        "timing, sampled at each value change (VCD timescale 100.0 fs)"
    assert _channel_lines([{"name": "AD", "width": 32}, {"name": "FRAME#", "width": 1}],
                          {"FRAME#": {"x": 2, "z": 0}}) == \
        ["  AD       32 bits", "  FRAME#     1 bit  unknown: x 2"]
    bus = {"name": "send", "kind": "pci", "mode": "pcix", "width": 64, "clock": "CLK", "clock_hz": None,
           "signals": {"frame_n": "FRAME#", "ad": ["AD0", "AD1", "AD63"]}, "inverted": ["GNT#"],
           "nic": {"gnt": "GNT#", "req": "REQ#", "bars": [(0x1000, 0x1fff)]}}
    assert _bus_lines(bus) == ["  send: PCI-X 64-bit, clock CLK", "    frame_n=FRAME#, ad=AD0..AD63",
                               "    inverted: GNT#", "    NIC: gnt=GNT# req=REQ# bars=0x1000-0x1fff"]
    assert _unknown_lines({}, {}) == []
    assert _unknown_lines({"A": {"x": 1, "z": 2}}, {"clock": "CLK"}) == [
        "unknown   1 x and 2 z value changes read by the rule: active-low lines deasserted (1), other bits 0",
        "          none sampled just before CLK edges"]


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_info_decode_report_on_a_cut_sr_warn_where_the_data_stops(tmp_path, capsys, cut):
    """A real capture cut at 10/50/90 % of its bytes: decode gives the records of the whole
    chunks before the cut, and info, decode and report say on one line where the data stops
    (issue 18)."""
    from tests.conftest import SAMPLES

    full = open_capture(SAMPLES / "pro1000_66mhz.sr")
    write_sr(full, tmp_path / "ok.sr", chunk_bytes=64 << 10)
    data = (tmp_path / "ok.sr").read_bytes()
    path = tmp_path / "cut.sr"
    path.write_bytes(data[:int(len(data) * cut)])
    (tmp_path / "cut.profile.toml").write_bytes((SAMPLES / "pro1000_66mhz.profile.toml").read_bytes())
    cap = open_capture(path)
    for argv in (["info", path], ["decode", path, "--format", "jsonl", "-o", tmp_path / "r.jsonl"],
                 ["report", path, "--format", "json", "-o", tmp_path / "r.json"]):
        assert main([str(a) for a in argv]) == 0
        err = capsys.readouterr().err.strip().splitlines()
        warn = [l for l in err if l.startswith("pcitrace: warning: ")]
        assert len(warn) == 1 and f"the data stops after sample {cap.num_samples - 1}" in warn[0], err
    records = (tmp_path / "r.jsonl").read_text().splitlines()
    assert cut > 0.5 or 0 < cap.num_samples < full.num_samples
    last = cap.timebase.time_ps(cap.num_samples - 1)
    assert records and all(json.loads(r)["end_ps"] <= last for r in records)


def test_a_corrupt_second_chunk_gives_the_records_before_it(tmp_path, capsys):
    """The second chunk of a real capture damaged: decode gives the records of the first one
    and one warning line saying where the data stops (issue 18); a damaged first chunk is the
    one error."""
    from tests.conftest import SAMPLES

    full = open_capture(SAMPLES / "pro1000_66mhz.sr")
    write_sr(full, tmp_path / "ok.sr", chunk_bytes=256 << 10)
    data = bytearray((tmp_path / "ok.sr").read_bytes())
    second = data.find(b"logic-1-2") + len(b"logic-1-2") + 200
    data[second:second + 64] = bytes(64)
    path = tmp_path / "bad.sr"
    path.write_bytes(bytes(data))
    (tmp_path / "bad.profile.toml").write_bytes((SAMPLES / "pro1000_66mhz.profile.toml").read_bytes())
    assert main(["decode", str(path), "--format", "jsonl", "-o", str(tmp_path / "r.jsonl")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pcitrace: warning: ") and "'logic-1-2'" in err[0], err
    assert "the data stops after sample" in err[0]
    assert (tmp_path / "r.jsonl").read_text().count("\n") > 0

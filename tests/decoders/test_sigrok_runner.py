"""pcitrace.decode.sigrok: run_sigrok's channel mapping, time mapping and the decoders command."""

from __future__ import annotations

import os
import subprocess

import pytest
from click.testing import CliRunner

from busgen import Bus
from pcitrace.capture.profile import BusProfile, NicIdentity
from pcitrace.decode.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE
from pcitrace.decode.sigrok import decoders, decoders_dir, run_sigrok
from pcitrace.errors import PcitraceError

SIGNALS = {"frame_n": "FRAME", "irdy_n": "IRDY", "trdy_n": "TRDY", "stop_n": "STOP",
           "devsel_n": "DEVSEL", "ad": "AD", "cbe_n": "CBE", "par": "PAR", "gnt_n": "GNT"}


def activity() -> Bus:
    b = Bus()
    b.idle(3, GNT=1)
    b.clock(F=1, AD=0x1000, CBE=0x7)
    b.clock(F=1, I=1, D=1, T=1, AD=0x11, CBE=0, GNT=0)
    b.clock(I=1, D=1, T=1, AD=0x22, CBE=0x3)
    b.idle(3)
    return b


@pytest.mark.sigrok
@pytest.mark.parametrize("timing", [False, True], ids=["state", "timing"])
def test_run_sigrok_records_words_and_times(sigrok_cli, tmp_path, timing):
    sr = activity().write(tmp_path / "a.sr", timing=timing)
    signals = dict(SIGNALS, **({"clk": "CLK"} if timing else {}))
    res = run_sigrok(sr, BusProfile("send", "pci", signals, nic=NicIdentity(gnt="gnt_n")))
    records, words, findings = res
    assert records.dtype == RECORD_DTYPE and words.dtype == WORD_DTYPE
    assert findings.dtype == FINDING_DTYPE and len(findings) == 0
    assert len(records) == 1
    r = records[0]
    assert (str(r["bus"]), str(r["command"]), int(r["gnt"]), int(r["bytes"])) == ("send", "mem_write", 1, 6)
    period = 1e12 / 33e6
    first = 3 * period + (period if timing else 0)
    assert abs(int(r["start_ps"]) - first) <= 1
    assert abs(int(r["end_ps"]) - (first + 2 * period)) <= 1
    assert list(words["value"]) == [0x11, 0x22] and list(words["record"]) == [0, 0]
    assert abs(int(words["time_ps"][0]) - (first + period)) <= 1
    assert int(words["time_ps"][1]) == int(r["end_ps"])


@pytest.mark.sigrok
def test_inverted_probe_lines_go_through_a_state_copy(sigrok_cli, tmp_path):
    b = activity()
    cap = b.capture()
    arrays = cap.read()
    arrays["TRDY"] ^= 1          # the probe shows TRDY# inverted
    from pcitrace.capture import write_sr
    from pcitrace.capture.model import Capture
    write_sr(Capture.from_arrays(arrays, cap.timebase, widths={"AD": 32, "CBE": 4}), tmp_path / "i.sr")
    prof = BusProfile("send", "pci", dict(SIGNALS), inverted={"trdy_n"})
    records, words, findings = run_sigrok(tmp_path / "i.sr", prof)
    assert [int(x) for x in records["data_phases"]] == [2]
    assert len(findings) == 0
    # the same file read as if it were not inverted: TRDY# "asserted" while idle, no data
    plain = run_sigrok(tmp_path / "i.sr", BusProfile("send", "pci", dict(SIGNALS)))
    assert [int(x) for x in plain.records["data_phases"]] == [0]


@pytest.mark.sigrok
def test_bit_channel_lists_and_missing_channel(sigrok_cli, tmp_path):
    sr = activity().write(tmp_path / "a.sr")
    sig = dict(SIGNALS, ad=[f"AD{i}" for i in range(32)], cbe_n=[f"CBE{i}" for i in range(4)])
    assert int(run_sigrok(sr, BusProfile("b", "pci", sig)).records["address"][0]) == 0x1000
    with pytest.raises(PcitraceError, match="DEVSEL"):
        run_sigrok(sr, BusProfile("b", "pci", dict(SIGNALS, devsel_n="NOPE")))


def test_decoders_path_and_install(tmp_path):
    runner = CliRunner()
    out = runner.invoke(decoders, ["path"])
    assert out.exit_code == 0 and out.output.strip() == str(decoders_dir())
    assert (decoders_dir() / "pci" / "pd.py").exists()
    dest = tmp_path / "decs"
    out = runner.invoke(decoders, ["install", "--dest", str(dest)])
    assert out.exit_code == 0, out.output
    for name in ("pci", "gbe_probe"):
        assert (dest / name / "pd.py").read_bytes() == (decoders_dir() / name / "pd.py").read_bytes()
        assert not (dest / name / "__pycache__").exists()
    # installing again replaces the copies whole (no stale files left behind)
    (dest / "pci" / "stale.py").write_text("x")
    assert runner.invoke(decoders, ["install", "--dest", str(dest)]).exit_code == 0
    assert not (dest / "pci" / "stale.py").exists()
    assert sorted(p.name for p in dest.iterdir()) == ["gbe_probe", "pci"]


@pytest.mark.sigrok
def test_installed_decoder_is_found_by_sigrok_cli(sigrok_cli, tmp_path):
    home = tmp_path / "home"
    assert CliRunner().invoke(decoders, ["install"], env={"HOME": str(home)}).exit_code == 0
    env = {k: v for k, v in os.environ.items() if k != "SIGROKDECODE_DIR"}
    env["HOME"] = str(home)
    env.pop("XDG_DATA_HOME", None)
    out = subprocess.run([sigrok_cli, "-L"], capture_output=True, env=env, check=True).stdout.decode()
    assert any(line.split()[:1] == ["pci"] for line in out.splitlines())


def test_install_into_unwritable_place_is_a_pcitrace_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = CliRunner().invoke(decoders, ["install", "--dest", str(blocker / "sub")])
    assert isinstance(out.exception, PcitraceError)

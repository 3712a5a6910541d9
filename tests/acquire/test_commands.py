"""`pcitrace capture` and `pcitrace emulate-sump`: real ptys, .sr files, decoding what was captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import random_capture
from pcitrace.acquire.commands import parse_channels, parse_quantity, parse_trigger
from pcitrace.capture import open_capture, write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.capture.profile import BusProfile, Profile, save_profile
from pcitrace.cli import main
from pcitrace.errors import PcitraceError

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = Path(os.environ.get("PCITRACE_SAMPLES_DIR", ROOT / "samples"))
CONTROL = ["clk", "frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n", "gnt_n", "req_n"]
CHANNEL_OF = {"clk": "CLK", "frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
              "devsel_n": "DEVSEL#", "gnt_n": "GNT#", "req_n": "REQ#"}


def test_parse_quantity():
    assert parse_quantity("100M", "rate", "Hz") == 100e6
    assert parse_quantity("33.3MHz", "rate", "Hz") == pytest.approx(33.3e6)
    assert parse_quantity("24Ki", "memory") == 24576
    assert parse_quantity("4k", "samples") == 4000
    with pytest.raises(PcitraceError, match="not a number"):
        parse_quantity("fast", "rate", "Hz")


def test_parse_channels_and_trigger():
    names = ["CLK", "FRAME#", "IRDY#"]
    assert parse_channels(None, names) == {0: "CLK", 1: "FRAME#", 2: "IRDY#"}
    assert parse_channels(None, None) is None
    assert parse_channels("0-1,IRDY#,GNT#=9,12", names) == {0: "CLK", 1: "FRAME#", 2: "IRDY#", 9: "GNT#",
                                                             12: "CH12"}
    with pytest.raises(PcitraceError, match="unknown channel 'TRDY#'"):
        parse_channels("TRDY#", names)
    chans = {0: "CLK", 1: "FRAME#", 2: "IRDY#"}
    (s0, s1) = parse_trigger(("FRAME#=0", "IRDY#=0,CLK=1"), chans, names)
    assert (s0.mask, s0.value, s0.level, s0.start) == (0b010, 0, 0, False)
    assert (s1.mask, s1.value, s1.level, s1.start) == (0b101, 0b001, 1, True)
    with pytest.raises(PcitraceError, match="unknown channel 'STOP#'"):
        parse_trigger(("STOP#=0",), chans, names)
    with pytest.raises(PcitraceError, match="NAME=0 or NAME=1"):
        parse_trigger(("FRAME#",), chans, names)


def control_only_capture(tmp_path, oversample=4, clock_hz=25e6):
    """A control-only PCI timing capture (CLK + 7 control lines) and its profile, from the bus renderer."""
    from pcitrace.sim.bus import TxnSpec, render

    specs = [TxnSpec(command=0x7, address=0x1000, data=[1, 2, 3, 4], target_waits={0: 1}, idle_before=6),
             TxnSpec(command=0x6, address=0x2000, data=[5], devsel="medium", idle_before=3),
             TxnSpec(command=0x7, address=0x3000, data=[], termination="retry", idle_before=2),
             TxnSpec(command=0x6, address=0x4000, data=[1, 2], initiator_waits={1: 2}, idle_before=5),
             TxnSpec(command=0x7, address=0x5000, data=[9, 9, 9], termination="disconnect_with_data",
                     idle_before=1)]
    rb = render(specs, clock_hz=clock_hz, with_ad=False, total_clocks=200)
    n = rb.clocks
    half = oversample // 2
    arrays = {"CLK": np.tile(np.r_[np.zeros(half), np.ones(oversample - half)], n).astype(np.uint8)}
    for sig in CONTROL[1:]:
        # each clock's level is held over its 4 samples; the decoder reads it where CLK rises
        arrays[CHANNEL_OF[sig]] = np.repeat(rb.signals[sig], oversample)
    cap = Capture.from_arrays(arrays, TimeBase.timing(clock_hz * oversample))
    path = tmp_path / "control.sr"
    write_sr(cap, path)
    profile = Profile([BusProfile("pci", "pci", signals={s: CHANNEL_OF[s] for s in CONTROL})], source="memory")
    prof_path = tmp_path / "control.profile.toml"
    save_profile(profile, prof_path)
    return path, prof_path, rb


def decode(path, profile):
    from pcitrace.decode import decode_capture

    return decode_capture(open_capture(path), profile).records


def test_capture_decodes_to_the_same_transactions(tmp_path, emulator, capsys):
    from pcitrace.decode.records import diff_records

    src, prof, rb = control_only_capture(tmp_path)
    emu = emulator(open_capture(src), memory=1 << 20)
    out = tmp_path / "captured.sr"
    rc = main(["capture", "--port", emu.port, "--rate", "100M", "--samples", "800", "--profile", str(prof),
               "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "wrote 800 samples x 8 channels at 100,000,000 Hz" in capsys.readouterr().err
    original = decode(src, prof)
    captured = decode(out, prof)
    assert len(original) == len(rb.records) == 5
    assert diff_records(original, captured) == []


def test_triggered_capture_decodes_to_the_same_transactions_shifted(tmp_path, emulator, capsys):
    from pcitrace.decode.records import FIELD_NAMES, diff_records

    src, prof, rb = control_only_capture(tmp_path)
    cap = open_capture(src)
    emu = emulator(cap, memory=1 << 20)
    out = tmp_path / "trig.sr"
    rc = main(["capture", "--port", emu.port, "--rate", "100M", "--samples", "800", "--profile", str(prof),
               "--trigger", "FRAME#=0", "--pretrigger", "5", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    got = open_capture(out)
    assert got.metadata["trigger_sample"] == 40
    first_frame = int(np.flatnonzero(cap.read(["FRAME#"])["FRAME#"] == 0)[0])
    shift_ps = (40 - first_frame) * 10_000
    original, captured = decode(src, prof), decode(out, prof)
    assert len(captured) == len(original)
    assert (captured["start_ps"] - original["start_ps"] == shift_ps).all()
    assert diff_records(original, captured, ignore=("start_ps", "end_ps")) == []
    assert set(FIELD_NAMES) > {"start_ps", "end_ps"}


def test_decimated_capture_decodes_the_same(tmp_path, emulator, capsys):
    from pcitrace.decode.records import diff_records

    src, prof, _ = control_only_capture(tmp_path, oversample=8, clock_hz=25e6)    # 200 MHz original
    emu = emulator(open_capture(src), memory=1 << 20, max_rate_hz=100_000_000)
    out = tmp_path / "half.sr"
    assert main(["capture", "--port", emu.port, "--rate", "100M", "--samples", "800", "--profile", str(prof),
                 "-o", str(out)]) == 0
    assert diff_records(decode(src, prof), decode(out, prof)) == []


def test_external_clock_capture_is_a_state_capture_that_decodes_the_same(tmp_path, emulator, capsys):
    from pcitrace.decode.records import diff_records

    src, prof, rb = control_only_capture(tmp_path)
    emu = emulator(open_capture(src), memory=1 << 20)
    assert emu.clock_line[0] == "CLK"
    out = tmp_path / "state.sr"
    ctl = [CHANNEL_OF[s] for s in CONTROL[1:]]
    chans = ",".join(f"{c}={i + 1}" for i, c in enumerate(ctl))    # probe 0 is CLK: not needed
    rc = main(["capture", "--port", emu.port, "--external-clock", "--rate", "25M", "--samples", "200",
               "--channels", chans, "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    got = open_capture(out)
    assert got.timebase.mode == "state" and got.timebase.clock_hz == 25e6 and got.num_samples == 200
    state_prof = tmp_path / "state.profile.toml"
    save_profile(Profile([BusProfile("pci", "pci", signals={s: CHANNEL_OF[s] for s in CONTROL[1:]},
                                     clock_hz=25e6)]), state_prof)
    original, captured = decode(src, prof), decode(out, state_prof)
    assert len(captured) == len(rb.records) == 5
    # clock i is at its rising edge (sample 4i + 2 = 40i + 20 ns) in the timing original
    assert ((original["start_ps"] - captured["start_ps"]) == 20_000).all()
    assert diff_records(original, captured, ignore=("start_ps", "end_ps")) == []


def test_external_clock_on_a_state_capture_takes_every_sample(emulator):
    from pcitrace.acquire.client import CaptureRequest, acquire

    cap = Capture.from_arrays({"A": np.arange(100) % 3 == 0, "B": np.arange(100) % 5 == 0},
                              TimeBase.state(clock_hz=66e6))
    emu = emulator(cap)
    acq = acquire(emu.port, CaptureRequest(rate_hz=66e6, samples=100, channels={0: "A", 1: "B"},
                                           external_clock=True))
    got = acq.capture.read()
    assert acq.capture.timebase.mode == "state"
    assert np.array_equal(got["A"], (np.arange(100) % 3 == 0).astype(np.uint8))
    assert np.array_equal(got["B"], (np.arange(100) % 5 == 0).astype(np.uint8))


def test_unplugged_capture_exits_2_and_keeps_the_samples(tmp_path, emulator, capsys):
    cap, arrays = random_capture(n=6000, lines=8, rate=10e6)
    emu = emulator(cap, memory=16384, fault_after=3000)
    out = tmp_path / "cut.sr"
    rc = main(["capture", "--port", emu.port, "--rate", "10M", "--samples", "4000", "--channels", "0-7",
               "--timeout", "1", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "went away after 3000 of 4000 bytes" in err and "wrote 3000 samples" in err and "Traceback" not in err
    kept = open_capture(out)
    assert kept.num_samples == 3000 and kept.channel_names == [f"CH{i}" for i in range(8)]
    assert np.array_equal(kept.read(["CH3"])["CH3"], arrays["L3"][1000:4000])
    assert kept.metadata.get("complete") is False


@pytest.mark.parametrize("args, match, sent", [
    (["--channels", "0-3", "--trigger", "NOPE=1"], "unknown channel 'NOPE'", b""),
    (["--channels", "FOO"], "unknown channel 'FOO'", b""),
    (["--channels", "0,33"], "SUMP devices have probes 0-31", b""),
    (["--channels", "0-3", "--rate", "150M"], "above", b"\x00" * 5 + b"\x02\x04"),
    (["--channels", "0-3", "--samples", "5000"], "do not fit", b"\x00" * 5 + b"\x02\x04"),
    (["--channels", "12"], "has 8 probes", b"\x00" * 5 + b"\x02\x04"),
])
def test_impossible_requests_are_refused_before_anything_is_sent(tmp_path, emulator, capsys, args, match, sent):
    cap, _ = random_capture(n=2000, lines=6, rate=10e6)
    emu = emulator(cap, memory=4096, max_rate_hz=100_000_000)
    base = {"--rate": "10M", "--samples": "1000"}
    for k in ("--rate", "--samples"):
        if k in args:
            base.pop(k)
    argv = ["capture", "--port", emu.port, *[x for kv in base.items() for x in kv], *args,
            "-o", str(tmp_path / "x.sr")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert bytes(emu.received) == sent
    assert not (tmp_path / "x.sr").exists()


def test_rle_capture_on_the_command_line(tmp_path, emulator, capsys):
    cap, arrays = random_capture(n=40_000, lines=4, rate=10e6, p_change=0.05)
    emu = emulator(cap, memory=2048)
    out = tmp_path / "rle.sr"
    assert main(["capture", "--port", emu.port, "--rate", "10M", "--samples", "1k", "--channels",
                 "A=0,B=1,C=2,D=3", "--rle", "-o", str(out)]) == 0
    got = open_capture(out)
    n = got.num_samples
    assert 2 * 1000 < n < 40_000 and got.metadata["rle"] is True     # 1000 memory entries
    assert np.array_equal(got.read(["C"])["C"], arrays["L2"][:n])


def test_emulate_sump_serves_a_capture_file(tmp_path):
    """The real command in its own process: prints the pty, serves a capture, stops on SIGTERM."""
    cap, arrays = random_capture(n=3000, lines=5, rate=20e6)
    src = tmp_path / "play.sr"
    write_sr(cap, src)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "pcitrace", "emulate-sump", str(src), "--memory", "8Ki",
                             "--max-rate", "50M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    try:
        port = proc.stdout.readline().strip()
        assert port.startswith("/dev/"), proc.stderr.read()
        out = tmp_path / "got.sr"
        assert main(["capture", "--port", port, "--rate", "20M", "--samples", "2000", "--channels",
                     "L0=0,L1=1,L2=2,L3=3,L4=4", "-o", str(out)]) == 0
        got = open_capture(out).read()
        for i in range(5):
            assert np.array_equal(got[f"L{i}"], arrays[f"L{i}"][:2000])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
    assert "probe 4: L4" in proc.stderr.read()


def test_emulator_refuses_captures_wider_than_32_probes(tmp_path, capsys):
    cap, _ = random_capture(n=100, lines=33)
    src = tmp_path / "wide.sr"
    write_sr(cap, src)
    assert main(["emulate-sump", str(src)]) == 2
    assert "choose up to 32 lines with --probes" in capsys.readouterr().err


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.sr")), ids=lambda p: p.name)
def test_bundled_samples_play_back_and_decode_the_same(sample, tmp_path, emulator, capsys):
    """Every bundled sample with a PCI bus: play its single-line signals back through the
    emulator, capture them as a SUMP device would (same rate; decimated; or on the bus clock
    through the external clock input when decimation leaves too few samples per clock, as a
    real 200 MS/s analyser needs for PCI-X 133), decode, and compare with the original."""
    from pcitrace.capture.profile import VECTOR_SIGNALS, resolve_profile
    from pcitrace.decode import decode_capture
    from pcitrace.decode.records import diff_records

    cap = open_capture(sample)
    profile = resolve_profile(cap, None)
    tb = cap.timebase
    state = tb.mode == "state"
    if not profile.pci_buses or (state and not tb.clock_hz):
        pytest.skip(f"{sample.name}: no PCI bus with a uniform clock")
    bus = profile.pci_buses[0]
    # every single-line signal of the bus (AD and C/BE# would not fit 32 probes)
    signals = {s: c for s, c in bus.signals.items() if isinstance(c, str) and s not in VECTOR_SIGNALS}
    if not state and "clk" not in signals:
        pytest.skip(f"{sample.name}: timing capture without CLK")

    def control_profile(with_clk: bool, clock_hz):
        sig = {s: c for s, c in signals.items() if with_clk or s != "clk"}
        path = tmp_path / f"control_{with_clk}.profile.toml"
        save_profile(Profile([BusProfile(bus.name, bus.kind, signals=sig, inverted=set(bus.inverted) & set(sig),
                                         width=bus.width, clock_hz=clock_hz)]), path)
        return str(path)

    prof = control_profile(not state, bus.clock_hz if state else None)
    first = decode_capture(cap, prof, buses=bus.name)
    summary = first.buses[bus.name]
    rate = tb.clock_hz if state else tb.samplerate_hz
    external = state
    dev_rate = rate
    if not state:
        # the fastest SUMP rate the lines allow, decimating the original if it is faster
        dev_rate = min(rate, 200e6 if len(signals) <= 16 else 100e6)
        base = 200e6 if dev_rate > 100e6 else 100e6
        if (base / dev_rate) % 1 or (rate / dev_rate) % 1:
            pytest.skip(f"{sample.name} at {rate:g} Hz does not decimate to a SUMP rate")
        if dev_rate < rate and dev_rate < 4 * summary.clock_hz:
            external, dev_rate = True, summary.clock_hz
    lines = [c for s, c in signals.items() if not (external and s == "clk")]
    n = (summary.clocks if external else int(cap.num_samples * dev_rate / rate)) // 4 * 4
    if n > (1 << 22):
        pytest.skip(f"{sample.name}: {n} samples is more than a SUMP memory is worth emulating")
    emu = emulator(cap, probes=lines, memory=4 * (n + 4), max_rate_hz=200_000_000,
                   clock_line=None if state else signals["clk"])
    out = tmp_path / "played.sr"
    chans = ",".join(f"{c}={i}" for i, c in enumerate(lines))
    argv = ["capture", "--port", emu.port, "--rate", repr(float(dev_rate)), "--samples", str(n),
            "--channels", chans, "-o", str(out)] + (["--external-clock"] if external else [])
    assert main(argv) == 0, capsys.readouterr().err
    played = open_capture(out)
    original = first.records
    captured = decode_capture(played, control_profile(False, dev_rate) if external else prof,
                              buses=bus.name).records
    # the played-back window ends before the original does; transactions cut there are left out
    shift = int(original["start_ps"][0] - captured["start_ps"][0]) if len(captured) else 0
    last = played.timebase.time_ps(played.num_samples - 1) - 2 * 10**12 / dev_rate
    original = original[original["end_ps"] - shift < last]
    captured = captured[captured["end_ps"] < last]
    assert len(original) > 10
    assert diff_records(original, captured, ignore=("start_ps", "end_ps")) == []
    # the same times, up to where the played-back capture starts and one sample of decimation
    tol = 1e12 / rate + 1 if external else 1e12 / dev_rate
    assert np.ptp(original["start_ps"] - captured["start_ps"]) <= tol
    assert np.ptp(original["end_ps"] - captured["end_ps"]) <= tol


def test_readme_flow_control_only_sample_with_its_own_profile(tmp_path, emulator, capsys):
    """The README's example: serve samples/control_only.sr, capture it on the external clock with
    the sample's profile naming the probes, decode both buses with that profile."""
    from pcitrace.decode import decode_capture
    from pcitrace.decode.records import diff_records

    src, prof = SAMPLES / "control_only.sr", SAMPLES / "control_only.profile.toml"
    if not src.exists():
        pytest.skip("samples/control_only.sr is not built")
    cap = open_capture(src)
    emu = emulator(cap, memory=1 << 20)
    n = cap.num_samples // 4 * 4
    out = tmp_path / "cap.sr"
    assert main(["capture", "--port", emu.port, "--external-clock", "--rate", repr(cap.timebase.clock_hz),
                 "--samples", str(n), "--profile", str(prof), "-o", str(out)]) == 0, capsys.readouterr().err
    got = open_capture(out)
    assert got.channel_names == cap.channel_names
    a = decode_capture(cap, str(prof)).records
    b = decode_capture(got, str(prof)).records
    last = got.timebase.time_ps(n - 1) - 10**6
    a, b = a[a["end_ps"] - cap.timebase.start_ps < last], b[b["end_ps"] < last]
    assert len(a) > 100 and set(a["bus"]) == {"send", "recv"}
    assert diff_records(a, b, ignore=("start_ps", "end_ps")) == []
    assert (a["start_ps"] - b["start_ps"] == cap.timebase.start_ps).all()

"""The emulated analyser spoken to byte by byte: what a device does that a well-behaved client never asks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import serial

from conftest import probe_words, random_capture
from pcitrace.acquire import sump
from pcitrace.acquire.emulator import SumpEmulator
from pcitrace.capture import open_capture
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.errors import PcitraceError

ROOT = Path(__file__).resolve().parents[2]


def read_n(port: serial.Serial, n: int, limit_s: float = 5.0) -> bytes:
    buf = bytearray()
    deadline = time.monotonic() + limit_s
    while len(buf) < n and time.monotonic() < deadline:
        buf += port.read(n - len(buf))
    return bytes(buf)


def configure(port, *, read_quads, delay_quads, flags, divider=0, stages=((0, 0, 1 << 27),)):
    out = bytearray(b"\x00" * 5)
    for s, (mask, value, config) in enumerate(stages):
        out += sump.long_command(0xC0 + 4 * s, mask) + sump.long_command(0xC1 + 4 * s, value)
        out += sump.long_command(0xC2 + 4 * s, config)
    out += sump.long_command(0x80, divider)
    out += sump.count_commands(read_quads, delay_quads, extended=False)
    out += sump.long_command(0x82, flags)
    port.write(bytes(out))


@pytest.fixture
def port_of():
    opened = []

    def open_(emu):
        p = serial.Serial(emu.port, 115200, timeout=0.2)
        opened.append(p)
        return p

    yield open_
    for p in opened:
        p.close()


def test_identify_metadata_and_unknown_commands(emulator, port_of):
    cap, _ = random_capture(n=100, lines=3)
    emu = emulator(cap, memory=1000, max_rate_hz=12_345_678)
    p = port_of(emu)
    p.write(b"\x02")
    assert read_n(p, 4) == b"1ALS"
    p.write(b"\x0f\x06\x04")               # Demon-core extensions are ignored, as by a plain OLS
    info = sump.parse_metadata(read_n(p, len(sump.encode_metadata(emu.info))))
    assert (info.probes, info.sample_memory, info.max_rate_hz) == (8, 1000, 12_345_678)


def test_device_returns_no_more_than_its_memory(emulator, port_of):
    cap, arrays = random_capture(n=5000, lines=8, rate=100e6)
    emu = emulator(cap, memory=400)
    p = port_of(emu)
    configure(p, read_quads=250, delay_quads=250, flags=0x38)   # asks 1000 samples of one group
    p.write(b"\x01")
    data = read_n(p, 1000, limit_s=1.0)
    assert len(data) == 400
    w = probe_words(arrays, [f"L{i}" for i in range(8)])
    # the newest 400 samples of the 1000-sample window, newest first
    assert list(data) == w[600:1000][::-1].tolist()


def test_reset_abandons_a_transfer(emulator, port_of):
    cap, _ = random_capture(n=50_000, lines=8, rate=100e6)
    emu = emulator(cap, memory=65536, bytes_per_s=20_000)
    p = port_of(emu)
    configure(p, read_quads=10_000, delay_quads=10_000, flags=0x38)
    p.write(b"\x01")
    assert len(read_n(p, 100)) == 100
    p.write(b"\x00" * 5)
    time.sleep(0.1)
    p.reset_input_buffer()
    p.write(b"\x02")
    assert read_n(p, 4) == b"1ALS"          # no sample bytes left in the way
    assert emu.sent_total < 40_000


def test_xoff_pauses_and_xon_resumes(emulator, port_of):
    cap, _ = random_capture(n=5000, lines=8, rate=100e6)
    emu = emulator(cap, memory=8192, bytes_per_s=20_000)
    p = port_of(emu)
    configure(p, read_quads=1000, delay_quads=1000, flags=0x38)
    p.write(b"\x01")
    read_n(p, 50)
    p.write(b"\x13")
    time.sleep(0.1)
    before = emu.sent_total
    time.sleep(0.3)
    assert emu.sent_total == before
    p.write(b"\x11")
    assert len(read_n(p, 4000 - 50, limit_s=5)) == 4000 - 50


def test_trigger_delay_moves_the_trigger_point(emulator, port_of):
    cap, arrays = random_capture(n=5000, lines=8, rate=100e6, seed=9)
    emu = emulator(cap, memory=8192)
    w = probe_words(arrays, [f"L{i}" for i in range(8)])
    hit = int(np.flatnonzero((w & 0x7) == 0x6)[0])
    p = port_of(emu)
    configure(p, read_quads=100, delay_quads=50, flags=0x38,
              stages=((0x7, 0x6, (1 << 27) | 30),))     # start 30 samples after the match
    p.write(b"\x01")
    got = np.frombuffer(read_n(p, 400), np.uint8)[::-1].astype(np.uint32)
    trig = hit + 30
    idx = np.clip(np.arange(trig - 200, trig + 200), 0, None)
    assert np.array_equal(got, w[idx])


def test_upsampling_holds_each_level(emulator):
    arrays = {"A": np.array([0, 1, 1, 0, 1], np.uint8)}
    emu = emulator(Capture.from_arrays(arrays, TimeBase.timing(1e6)))
    assert emu.world(4e6).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1]


def test_state_capture_with_timestamps_is_sampled_by_time(emulator):
    cap = Capture.from_arrays({"A": np.array([1, 0, 1], np.uint8)},
                              TimeBase.state(timestamps_ps=np.array([0, 3_000_000, 4_000_000])))
    emu = emulator(cap)
    assert emu.world(1e6).tolist() == [1, 1, 1, 0, 1]


def test_vector_lines_and_probe_selection(emulator):
    cap = Capture.from_arrays({"AD": np.array([5, 6], np.uint64), "F": np.array([1, 0], np.uint8)},
                              TimeBase.timing(1e6), widths={"AD": 4})
    emu = emulator(cap, probes=["F", "AD2", "AD0"])
    assert [ln[0] for ln in emu.lines] == ["F", "AD2", "AD0"]
    w = emu.world(1e6)
    assert w.tolist() == [(1 << 0) | (1 << 1) | (1 << 2), (0 << 0) | (1 << 1) | (0 << 2)]
    with pytest.raises(PcitraceError, match="no line named 'AD9'"):
        SumpEmulator(cap, probes=["AD9"])


def test_ctrl_c_on_the_command_line_keeps_the_samples(tmp_path, emulator):
    cap, arrays = random_capture(n=40_000, lines=8, rate=10e6)
    emu = emulator(cap, memory=65536, bytes_per_s=20_000)        # 30 000 bytes take 1.5 s
    out = tmp_path / "stopped.sr"
    proc = subprocess.Popen([sys.executable, "-m", "pcitrace", "capture", "--port", emu.port, "--rate", "10M",
                             "--samples", "30000", "--channels", "0-7", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 20
    while emu.sent_total < 5000 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "interrupted; kept the samples read so far" in err and "Traceback" not in err
    kept = open_capture(out)
    n = kept.num_samples
    assert 4000 <= n < 30_000
    assert np.array_equal(kept.read(["CH5"])["CH5"], arrays["L5"][30_000 - n:30_000])

"""The probe twin engine against generated truth and against the sigrok decoder gbe_probe."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture import Capture, TimeBase, open_capture, write_sr
from pcitrace.capture.profile import BusProfile, resolve_profile
from pcitrace.decode.probe import (FRAME_DTYPE, decode_probe_capture, decode_probe_chunks,
                                   frame_bytes_from_wire, run_sigrok_probe)
from pcitrace.errors import PcitraceError

from tests.conftest import SAMPLES

RATE = 500_000_000          # 2 ns per sample: a 125 MHz RX_CLK is 4 samples
PS = 2000


def udp_frame(seq: int, payload_len: int, sport=5001, dport=5002) -> bytes:
    """Ethernet + IPv4 + UDP frame carrying a UDPmon-shaped payload (frame number at 8)."""
    payload = struct.pack("<iiqq", 4, 1, seq, 0) + bytes((i * 7) & 0xFF for i in range(max(0, payload_len - 24)))
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = bytes([0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    return bytes([0xFF] * 6) + bytes([0, 1, 2, 3, 4, 5]) + b"\x08\x00" + ip + udp + bytes(4)


@st.composite
def probe_activity(draw):
    """Frames laid on a timeline of samples, with optional SOF and GMII, plus their truth."""
    gmii = draw(st.booleans())
    with_sof = draw(st.booleans())
    nframes = draw(st.integers(0, 5))
    pos = draw(st.integers(0, 40))
    frames = []
    for _ in range(nframes):
        gap = draw(st.integers(1, 60))
        pos += gap
        if gmii:
            seq = draw(st.integers(0, 2**40))
            body = udp_frame(seq, draw(st.integers(24, 80)))
            wire = bytes([0x55] * 7 + [0xD5]) + body
            # the line is asserted a little before the first byte and released after the last
            length = 4 * len(wire) + draw(st.integers(2, 6))
        else:
            seq, body, wire = None, None, None
            length = draw(st.integers(1, 400))
        sof_at = draw(st.integers(0, min(length - 1, 8))) if with_sof else None
        frames.append(dict(start=pos, length=length, sof=sof_at, wire=wire, body=body, seq=seq))
        pos += length
    tail_open = draw(st.booleans()) and nframes > 0
    n = pos + (0 if tail_open else draw(st.integers(1, 30)))
    if tail_open:
        # the last frame runs past the end of the capture
        n = frames[-1]["start"] + max(1, frames[-1]["length"] // 2)
    return dict(n=max(n, 2), frames=frames, gmii=gmii, with_sof=with_sof, tail_open=tail_open)


def render(act) -> tuple[Capture, BusProfile, np.ndarray]:
    n = act["n"]
    frame = np.zeros(n, np.uint8)
    sof = np.zeros(n, np.uint8)
    clk = ((np.arange(n) % 4) < 2).astype(np.uint8)
    clk[:4] = 0
    dv = np.zeros(n, np.uint8)
    rxd = np.zeros(n, np.uint64)
    truth = []
    for i, f in enumerate(act["frames"]):
        s, e = f["start"], min(f["start"] + f["length"], n)
        frame[s:e] = 1
        if f["sof"] is not None and s + f["sof"] < e:
            sof[s + f["sof"]:s + f["sof"] + 2] = 1
        truncated = f["start"] + f["length"] >= n
        if f["wire"] is not None:
            # bytes sit on the rising RX_CLK edges strictly after the frame start
            first_edge = (s // 4 + 1) * 4
            for j, b in enumerate(f["wire"]):
                e_idx = first_edge + 4 * j
                if e_idx >= min(s + f["length"], n):
                    break
                dv[e_idx - 1:e_idx + 2] = 1
                rxd[e_idx - 1:e_idx + 2] = b
        if truncated and not act["tail_open"]:
            truncated = False
        truth.append(dict(start=s, end=e, truncated=truncated, sof=f["sof"], body=f["body"], seq=f["seq"]))
    arrays = {"P.FRAME": frame}
    widths = {}
    signals = {"frame_present": "P.FRAME"}
    if act["with_sof"]:
        arrays["P.SOF"] = sof
        signals["sof"] = "P.SOF"
    if act["gmii"]:
        arrays.update({"P.RXD": rxd, "P.RX_DV": dv, "P.RX_CLK": clk})
        widths["P.RXD"] = 8
        signals.update(rxd="P.RXD", rx_dv="P.RX_DV", rx_clk="P.RX_CLK")
    cap = Capture.from_arrays(arrays, TimeBase.timing(RATE), widths=widths)
    bus = BusProfile(name="P", kind="gbe_probe", signals=signals, link_bps=1e9)
    return cap, bus, truth


def check_against_truth(frames: np.ndarray, truth: list[dict], act) -> None:
    # a frame already asserted at sample 0 is skipped (its start is unknown)
    truth = [t for t in truth if t["start"] > 0]
    assert len(frames) == len(truth)
    for f, t in zip(frames, truth):
        assert f["start_ps"] == t["start"] * PS
        assert bool(f["truncated"]) == t["truncated"]
        if not t["truncated"]:
            assert f["end_ps"] == t["end"] * PS
            assert f["wire_time_ps"] == (t["end"] - t["start"]) * PS
        if act["with_sof"] and t["sof"] is not None and t["start"] + t["sof"] < t["end"]:
            assert f["sof_ps"] == (t["start"] + t["sof"]) * PS
        if act["gmii"] and not t["truncated"]:
            assert f["gmii"]
            assert f["frame_bytes"] == len(t["body"])
            assert f["udpmon_seq"] == t["seq"]
            assert f["udp_sport"] == 5001 and f["udp_dport"] == 5002
            assert f["ip_src"] == 0x0A000001 and f["ethertype"] == 0x0800
        elif not act["gmii"] and not t["truncated"]:
            assert f["frame_bytes"] == frame_bytes_from_wire((t["end"] - t["start"]) * PS, 1000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(probe_activity(), st.sampled_from([7, 64, 1 << 20]))
def test_fast_engine_recovers_generated_frames_in_any_chunking(act, chunk):
    cap, bus, truth = render(act)
    frames = decode_probe_capture(cap, bus, chunk_samples=chunk)
    check_against_truth(frames, truth, act)
    whole = decode_probe_capture(cap, bus)
    assert (frames == whole).all()


@pytest.mark.sigrok
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(act=probe_activity())
def test_sigrok_decoder_gives_the_same_frames(act, sigrok_cli, tmp_path_factory):
    cap, bus, truth = render(act)
    path = tmp_path_factory.mktemp("probe") / "p.sr"
    write_sr(cap, path)
    # an .sr holds 1-bit lines: the RXD vector is written as P.RXD0..P.RXD7
    if "rxd" in bus.signals:
        bus = BusProfile(name=bus.name, kind=bus.kind, link_bps=bus.link_bps,
                         signals={**bus.signals, "rxd": [f"P.RXD{i}" for i in range(8)]})
    fast = decode_probe_capture(open_capture(path), bus)
    ref = run_sigrok_probe(path, bus, sigrok_cli=sigrok_cli)
    # libsigrokdecode 0.5.3 never flushes a frame still on the wire at the end of the data
    if len(fast) and fast["truncated"][-1]:
        fast = fast[:-1]
    assert len(ref) == len(fast)
    assert (ref == fast).all(), [(a, b) for a, b in zip(ref, fast) if a != b][:3]
    check_against_truth(ref, [t for t in truth if not t["truncated"]], act)


def _probe_samples():
    out = []
    for prof in sorted(Path(SAMPLES).glob("*.profile.toml")):
        if "gbe_probe" in prof.read_text():
            out.append(prof.name[: -len(".profile.toml")])
    return out


@pytest.mark.sigrok
@pytest.mark.parametrize("name", _probe_samples())
def test_both_engines_agree_on_every_probe_sample(name, sigrok_cli):
    path = Path(SAMPLES) / f"{name}.sr"
    cap = open_capture(path)
    profile = resolve_profile(cap, Path(SAMPLES) / f"{name}.profile.toml")
    assert profile.probe_buses
    for bus in profile.probe_buses:
        fast = decode_probe_capture(cap, bus)
        ref = run_sigrok_probe(path, bus, sigrok_cli=sigrok_cli)
        assert len(fast) > 0
        if fast["truncated"][-1]:
            fast = fast[:-1]
        assert (fast == ref).all()


def test_inverted_probe_line_reads_the_same_frames():
    act = dict(n=200, gmii=False, with_sof=True, tail_open=False,
               frames=[dict(start=20, length=50, sof=3, wire=None, body=None, seq=None),
                       dict(start=100, length=60, sof=0, wire=None, body=None, seq=None)])
    cap, bus, truth = render(act)
    plain = decode_probe_capture(cap, bus)
    data = cap.read()
    inv = Capture.from_arrays({k: 1 - v for k, v in data.items()}, cap.timebase)
    bus_inv = BusProfile(name="P", kind="gbe_probe", signals=bus.signals, link_bps=1e9,
                         inverted={"frame_present", "sof"})
    assert (decode_probe_capture(inv, bus_inv) == plain).all()
    assert list(plain["sof_ps"]) == [23 * PS, 100 * PS]


def test_wire_time_gives_the_frame_size_at_1_and_10_gbit():
    # 1446-byte frame + 8 preamble bytes = 11.632 us at 1 Gbit/s, 1.1632 us at 10 Gbit/s
    assert frame_bytes_from_wire(11_632_000, 1000) == 1446
    assert frame_bytes_from_wire(1_163_200, 10_000) == 1446
    assert frame_bytes_from_wire(10, 1000) == 0


def test_bad_probe_profiles_are_refused_clearly(tmp_path):
    cap = Capture.from_arrays({"F": np.zeros(10, np.uint8)}, TimeBase.timing(RATE))
    with pytest.raises(PcitraceError, match="frame_present"):
        decode_probe_capture(cap, BusProfile(name="x", kind="gbe_probe", signals={"sof": "F"}))
    with pytest.raises(PcitraceError, match="link_bps"):
        decode_probe_capture(cap, BusProfile(name="x", kind="gbe_probe",
                                             signals={"frame_present": "F"}, link_bps=2.5e9))
    with pytest.raises(PcitraceError, match=r"\.sr captures only"):
        run_sigrok_probe(tmp_path / "x.vcd", BusProfile(name="x", kind="gbe_probe",
                                                       signals={"frame_present": "F"}))


def test_chunks_api_handles_empty_chunks_and_no_frames():
    t = np.arange(10, dtype=np.int64)
    out = decode_probe_chunks([(0, t[:0], {"frame_present": np.zeros(0, np.uint8)}),
                               (0, t, {"frame_present": np.zeros(10, np.uint8)})])
    assert out.dtype == FRAME_DTYPE and len(out) == 0


def test_frame_bytes_from_wire_holds_any_int64_wire_time():
    """A long wire time times the rate overflowed int64 (issue 18): the figure is exact for
    every wire time an int64 holds."""
    big = 2**62 + 12_345
    assert int(frame_bytes_from_wire(big, 10_000)) == (big * 10_000 + 4_000_000) // 8_000_000 - 8
    assert frame_bytes_from_wire(np.array([big, 11_632_000]), 1000).tolist() == \
        [(big * 1000 + 4_000_000) // 8_000_000 - 8, 1446]

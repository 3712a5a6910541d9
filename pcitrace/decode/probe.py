"""Fast engine for Ethernet probe lines: the twin of the sigrok decoder decoders/gbe_probe.

Same frames, same fields (decoders/gbe_probe/lists.py), same rules:
- a frame runs from the first sample with the frame-present line asserted to the first
  sample after it with the line released (end exclusive); a frame already on the wire at
  the first sample is skipped (its start is unknown), one still on the wire at the last
  sample is reported with ``truncated`` (the sigrok decoder never flushes it);
- ``sof_ps``: the first sample in [start, end) with the SOF line asserted;
- GMII bytes are read at RX_CLK rising edges (first sample reading 1 after 0) strictly
  inside (start, end) where RX_DV reads 1; the frame follows the 0xD5 SFD.
Edges are found with numpy over streamed chunks; only per-frame work is Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from pcitrace.capture.clocked import rising_edges
from pcitrace.records import FRAME_DTYPE, FRAME_FIELD_NAMES, FRAME_FIELDS
from pcitrace.records import GBE_LISTS as _lists

LINK_RATES: dict[str, int] = _lists.LINK_RATES
PREAMBLE_BYTES: int = _lists.PREAMBLE_BYTES


def frame_bytes_from_wire(wire_ps: np.ndarray | int, rate_mbps: int):
    """Ethernet frame bytes from the time the frame-present line was asserted: round(wire_ps *
    rate_mbps / 8e6) less the preamble, in two parts so that no product outgrows int64."""
    whole, part = np.divmod(np.asarray(wire_ps, dtype=np.int64), 8_000_000)
    n = whole * rate_mbps + (part * rate_mbps + 4_000_000) // 8_000_000 - PREAMBLE_BYTES
    return np.maximum(n, 0)


def frames_array(rows: list[dict]) -> np.ndarray:
    """FRAME_DTYPE array from frame dicts with the FRAME_FIELDS keys (one per frame)."""
    arr = np.zeros(len(rows), FRAME_DTYPE)
    for n in FRAME_FIELD_NAMES:
        arr[n] = [rec[n] for rec in rows]
    return arr


def _blank_frame() -> dict:
    return {n: (-1 if k == "i" else False if k == "b" else 0 if k == "u" else "") for n, k in FRAME_FIELDS}


def parse_gmii(raw: bytes, rec: dict) -> None:
    """Fill the header fields of ``rec`` from the GMII bytes of one frame (preamble included)."""
    sfd = raw.find(b"\xd5")
    if sfd < 0:
        return
    frame = raw[sfd + 1:]
    rec["gmii"] = True
    rec["frame_bytes"] = len(frame)
    if len(frame) < 14:
        return
    be = lambda a, n: int.from_bytes(frame[a:a + n], "big")
    rec["eth_dst"], rec["eth_src"], rec["ethertype"] = be(0, 6), be(6, 6), be(12, 2)
    if rec["ethertype"] != 0x0800 or len(frame) < 34:
        return
    ihl = (frame[14] & 0x0F) * 4
    if frame[14] >> 4 != 4 or ihl < 20 or len(frame) < 14 + ihl:
        return
    rec["ip_proto"], rec["ip_src"], rec["ip_dst"] = frame[23], be(26, 4), be(30, 4)
    u = 14 + ihl
    if rec["ip_proto"] != 17 or len(frame) < u + 8:
        return
    rec["udp_sport"], rec["udp_dport"], rec["udp_len"] = be(u, 2), be(u + 2, 2), be(u + 4, 2)
    p = u + 8
    if len(frame) >= p + 4:
        rec["iperf_seq"] = int.from_bytes(frame[p:p + 4], "big", signed=True)
    if len(frame) >= p + 16:
        rec["udpmon_seq"] = int.from_bytes(frame[p + 8:p + 16], "little", signed=True)


@dataclass
class ProbeState:
    """What one chunk hands the next: last levels and the frame still on the wire."""

    first: bool = True
    prev_frame: int = 0
    prev_clk: int = 0
    open_start: int | None = None     # sample index of the open frame's start
    open_start_ps: int = 0
    open_sof_ps: int = -1
    open_bytes: bytearray = field(default_factory=bytearray)
    open_error: bool = False
    skipping: bool = False            # inside a frame that began before the capture
    last_index: int = -1
    last_ps: int = 0


def decode_probe_chunks(chunks: Iterable[tuple[int, np.ndarray, dict[str, np.ndarray]]], *,
                        link: str = "link", rate: str = "1G", active_high: bool = True) -> np.ndarray:
    """Frames from streamed chunks ``(start_index, times_ps, signals)``.

    ``signals``: ``frame_present`` (required), optional ``sof``, and for GMII ``rxd``
    (byte values), ``rx_dv``, ``rx_clk``, optional ``rx_er``; electrical levels (0/1).
    """
    rate_mbps = LINK_RATES[rate] // 1_000_000
    st = ProbeState()
    out: list[dict] = []
    for start, times, sig in chunks:
        if len(times) == 0:
            continue
        _decode_chunk(start, times, sig, st, out, link, rate_mbps, active_high)
    if st.open_start is not None:
        rec = _finish(st, st.last_ps, link, rate_mbps)
        rec["truncated"] = True
        out.append(rec)
    return frames_array(out)


def _finish(st: ProbeState, end_ps: int, link: str, rate_mbps: int) -> dict:
    rec = _blank_frame()
    wire = end_ps - st.open_start_ps
    rec.update(link=link, start_ps=st.open_start_ps, end_ps=end_ps, wire_time_ps=wire,
               frame_bytes=int(frame_bytes_from_wire(wire, rate_mbps)), sof_ps=st.open_sof_ps,
               rx_error=st.open_error, truncated=False)
    if st.open_bytes:
        parse_gmii(bytes(st.open_bytes), rec)
    st.open_start = None
    st.open_sof_ps = -1
    st.open_bytes = bytearray()
    st.open_error = False
    return rec


def _decode_chunk(start, times, sig, st, out, link, rate_mbps, active_high):
    n = len(times)
    f = sig["frame_present"].astype(np.uint8)
    if not active_high:
        f = 1 - f
    if st.first:
        # A frame on the wire at the first sample started before the capture: skip it.
        st.skipping = bool(f[0])
        prev_f = f[0]
        st.first = False
        st.prev_clk = int(sig["rx_clk"][0]) if "rx_clk" in sig else 0
        clk_prev = st.prev_clk
    else:
        prev_f = st.prev_frame
        clk_prev = st.prev_clk
    starts = rising_edges(f, prev_f)
    ends = rising_edges(1 - f, 1 - prev_f)

    sof_idx = None
    if "sof" in sig:
        s = sig["sof"].astype(np.uint8)
        sof_idx = np.flatnonzero(s == (1 if active_high else 0))
    byte_idx = None
    if all(k in sig for k in ("rxd", "rx_dv", "rx_clk")):
        edges = rising_edges(sig["rx_clk"].astype(np.uint8), clk_prev)
        byte_idx = edges[sig["rx_dv"][edges] == 1]
        rxd = sig["rxd"]
        rx_er = sig.get("rx_er")

    # Walk the frame boundaries of this chunk in order (a few per chunk, not per sample).
    events = sorted([(int(i), 1) for i in starts] + [(int(i), 0) for i in ends])
    cursor = 0   # local index from which the open frame's contents still need collecting

    def collect(lo: int, hi: int):
        """Add SOF / GMII bytes with local index in (lo', hi) to the open frame."""
        if st.open_start is None:
            return
        open_local = st.open_start - start   # may be negative (frame began in an earlier chunk)
        if sof_idx is not None and st.open_sof_ps < 0:
            j = np.searchsorted(sof_idx, max(lo, open_local))
            if j < len(sof_idx) and sof_idx[j] < hi:
                st.open_sof_ps = int(times[sof_idx[j]])
        if byte_idx is not None:
            a = np.searchsorted(byte_idx, max(lo, open_local + 1))
            b = np.searchsorted(byte_idx, hi)
            if b > a:
                sel = byte_idx[a:b]
                st.open_bytes.extend(np.asarray(rxd[sel], dtype=np.uint8).tobytes())
                if rx_er is not None and np.any(rx_er[sel] == 1):
                    st.open_error = True

    for idx, kind in events:
        if kind == 1:          # frame asserted
            st.skipping = False
            st.open_start = start + idx
            st.open_start_ps = int(times[idx])
            st.open_sof_ps = -1
            cursor = idx
        else:                  # frame released
            if st.skipping:
                st.skipping = False
                continue
            if st.open_start is None:
                continue
            collect(cursor, idx)
            out.append(_finish(st, int(times[idx]), link, rate_mbps))
            cursor = idx
    if st.open_start is not None:
        collect(cursor, n)
    st.prev_frame = int(f[-1])
    if "rx_clk" in sig:
        st.prev_clk = int(sig["rx_clk"][-1])
    st.last_index = start + n - 1
    st.last_ps = int(times[-1])


# -- captures ------------------------------------------------------------------------------

_SIGROK_IDS = {"frame_present": "frame", "sof": "sof", "rx_dv": "rx_dv", "rx_er": "rx_er",
               "rx_clk": "rx_clk"}


def _rate_name(bus) -> str:
    bps = float(bus.link_bps or LINK_RATES["1G"])
    for name, r in LINK_RATES.items():
        if abs(bps - r) < 1e-6 * r:
            return name
    from pcitrace.errors import PcitraceError
    raise PcitraceError(f"probe link {bus.name!r} has link_bps = {bps:g}; the probe decoders know "
                        f"{', '.join(f'{v:g}' for v in LINK_RATES.values())}",
                        fix="set link_bps to 1e9 or 1e10 in the profile")


def _probe_chunks(capture, bus, chunk_samples: int):
    from pcitrace.capture.clocked import _assemble
    from pcitrace.capture.profile import check_bus

    check_bus(capture, bus)
    chans = list(dict.fromkeys(bus.all_channels()))
    widths = {c: capture.channel(c).width for c in chans}
    tb = capture.timebase
    for ch in capture.iter_chunks(chans, chunk_samples=chunk_samples):
        sig = {s: _assemble(bus, s, ch.data, widths, None) for s in bus.signals}
        # a frame's times are read at its few edges only: not computed for every sample
        yield ch.start, tb.lazy_times(ch.start, ch.start + ch.length), sig


def decode_probe_capture(capture, bus, *, chunk_samples: int = 1 << 20) -> np.ndarray:
    """Frames (FRAME_DTYPE) of one probe link (a BusProfile of kind gbe_probe).

    Inversions in the profile are undone before decoding, so the frame-present and SOF
    lines read 1 while asserted.
    """
    if "frame_present" not in bus.signals:
        from pcitrace.errors import PcitraceError
        raise PcitraceError(f"probe link {bus.name!r} has no frame_present line in its profile",
                            fix="map frame_present to the probe's frame-present channel")
    return decode_probe_chunks(_probe_chunks(capture, bus, chunk_samples), link=bus.name,
                               rate=_rate_name(bus), active_high=True)


def run_sigrok_probe(capture_path, bus, *, sigrok_cli: str | None = None) -> np.ndarray:
    """The same frames through the reference decoder decoders/gbe_probe and sigrok-cli.

    Only .sr captures (sigrok-cli's own VCD import drops vectors and makes one sample per
    timescale tick); a frame still on the wire at the end is absent, as libsigrokdecode
    0.5.3 never reports the end of the data.
    """
    import json
    import os
    import subprocess

    from pcitrace.capture import open_capture
    from pcitrace.decode.sigrok import _bit_names, decoders_dir, sigrok_cli_path
    from pcitrace.errors import PcitraceError

    path = os.fspath(capture_path)
    if not path.lower().endswith(".sr"):
        raise PcitraceError("the sigrok probe decoder reads .sr captures only", path=path,
                            fix="convert it first: pcitrace convert CAPTURE OUT.sr")
    exe = sigrok_cli or sigrok_cli_path()
    capture = open_capture(path)
    inverted = {s for s in ("frame_present", "sof") if s in bus.signals and s in bus.inverted}
    if inverted and inverted != {s for s in ("frame_present", "sof") if s in bus.signals}:
        raise PcitraceError(f"probe link {bus.name!r} inverts only one of frame_present / sof; the "
                            "sigrok decoder has one polarity option for both", path=path,
                            fix="use the fast engine, or invert both lines in the profile")
    mapping = {}
    for sig, value in bus.signals.items():
        chans = [value] if isinstance(value, str) else list(value)
        bits = [b for c in chans for b in _bit_names(capture, c)]
        if sig == "rxd":
            mapping.update({f"rxd{i}": name for i, name in enumerate(bits[:8])})
        elif sig in _SIGROK_IDS:
            mapping[_SIGROK_IDS[sig]] = bits[0]
    options = {"link": bus.name, "rate": _rate_name(bus),
               "polarity": "active-low" if inverted else "active-high"}
    spec = "gbe_probe:" + ":".join(f"{k}={v}" for k, v in {**mapping, **options}.items())
    env = dict(os.environ, SIGROKDECODE_DIR=str(decoders_dir()))
    proc = subprocess.run([exe, "-i", path, "-P", spec, "-B", "gbe_probe=json"],
                          capture_output=True, env=env)
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0 or "Traceback" in err:
        tail = " ".join(err.strip().splitlines()[-3:]) or f"exit status {proc.returncode}"
        raise PcitraceError(f"sigrok-cli failed on the gbe_probe decoder: {tail}", path=path,
                            fix="check the capture with `pcitrace info` and the channel profile")
    tb, last = capture.timebase, max(capture.num_samples - 1, 0)
    rate_mbps = LINK_RATES[options["rate"]] // 1_000_000
    rows = []
    for line in proc.stdout.decode().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        # Times through the capture's own time base, exactly as the fast engine maps them.
        obj["start_ps"] = tb.time_ps(min(obj["start_sample"], last))
        obj["end_ps"] = tb.time_ps(min(obj["end_sample"], last))
        obj["wire_time_ps"] = obj["end_ps"] - obj["start_ps"]
        if obj["sof_sample"] >= 0:
            obj["sof_ps"] = tb.time_ps(min(obj["sof_sample"], last))
        if not obj["gmii"]:
            obj["frame_bytes"] = int(frame_bytes_from_wire(obj["wire_time_ps"], rate_mbps))
        rows.append(obj)
    return frames_array(rows)

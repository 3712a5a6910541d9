"""pcap / pcapng reader for UDP test streams (dpkt parses the containers and the headers).

Gives per packet: capture time (ps, integer, no float rounding), UDP payload size, and the
test tool's sequence number read from the payload: UDPmon's int64 frame number at payload
offset 8 (little-endian: UDPmon writes host order and runs on x86), iperf3's packet count
(big-endian, at offset 8 after tv_sec / tv_usec), or iperf2's datagram id (big-endian int32 at
offset 0). The payload kind is detected from the stream itself when not given.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import dpkt
import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.errors import PcitraceError

PAYLOAD_KINDS = ("auto", "udpmon", "iperf3", "iperf2", "none")
UDPMON_CMD_DATA = 4
_HEAD = 24  # payload bytes kept per packet: enough for every tool's header


@dataclass
class UdpPackets:
    """UDP datagrams of one capture file (after the port / address filter)."""
    path: str
    time_ps: np.ndarray      # int64, capture time since the first datagram kept
    start_epoch_ns: int      # wall-clock time of that first datagram (epoch ps overflow int64)
    size: np.ndarray         # int64, UDP payload bytes (as on the wire, not the snap length)
    src_port: np.ndarray     # int32
    dst_port: np.ndarray     # int32
    seq: np.ndarray          # int64, tool sequence number (-1 where unknown)
    payload_kind: str        # 'udpmon', 'iperf3', 'iperf2' or 'none'

    def __len__(self) -> int:
        return len(self.time_ps)


def _ts_ps_pcap(ts) -> int:
    # dpkt gives Decimal seconds for nanosecond pcaps (exact) and float seconds for microsecond
    # ones, where rounding to the microsecond recovers the exact stored value.
    if isinstance(ts, Decimal):
        return int(ts * 1_000_000_000_000)
    return int(round(ts * 1e6)) * 1_000_000


def _check_pcapng_blocks(f) -> None:
    """Walk the block headers of a pcapng file before anything reads a block: every block
    length must be a multiple of 4, hold at least its header and trailer, and end inside the
    file (a length read from the file is never allocated unchecked)."""
    size = f.seek(0, 2)
    pos, n, fmt = 0, 0, "<II"
    while pos < size:
        n += 1
        f.seek(pos)
        head = f.read(12)
        if len(head) < 12:
            raise _Truncated(f"block {n}")
        if head[:4] == b"\x0a\x0d\x0d\x0a":            # a section header sets the byte order
            fmt = "<II" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">II"
        _, blen = struct.unpack(fmt, head[:8])
        if blen < 12 or blen % 4:
            raise ValueError(f"block {n} at byte {pos} declares a length of {blen} bytes")
        if pos + blen > size:
            raise _Truncated(f"block {n}")
        pos += blen
    f.seek(0)


def _iter_pcapng(f):
    """(timestamp ps, frame bytes, linktype) from a pcapng file, timestamps kept as integers
    (dpkt's own iterator divides them into float seconds, losing nanoseconds)."""
    _check_pcapng_blocks(f)
    r = dpkt.pcapng.Reader(f)
    le = r._Reader__le  # byte order of the section, as dpkt parsed it
    divisor = int(round(r._divisor))
    offset_ps = int(r._tsoffset) * 10 ** 12
    linktype = r.datalink()
    epb_cls = dpkt.pcapng.EnhancedPacketBlockLE if le else dpkt.pcapng.EnhancedPacketBlock
    pb_cls = dpkt.pcapng.PacketBlockLE if le else dpkt.pcapng.PacketBlock
    fmt = "<II" if le else ">II"
    n = 0
    while True:
        head = f.read(8)
        if not head:
            return
        btype, blen = struct.unpack(fmt, head) if len(head) == 8 else (0, 8)
        buf = head + f.read(blen - 8)
        n += 1
        if len(head) < 8 or len(buf) < blen:
            raise _Truncated(f"block {n}")
        if btype == dpkt.pcapng.PCAPNG_BT_EPB:
            blk = epb_cls(buf)
        elif btype == dpkt.pcapng.PCAPNG_BT_PB:
            blk = pb_cls(buf)
        else:
            continue
        ticks = (blk.ts_high << 32) | blk.ts_low
        yield offset_ps + ticks * 10 ** 12 // divisor, blk.pkt_data, linktype


class _Truncated(Exception):
    """The file ends inside a record (the capture was cut or is still being written)."""


def _check_pcap_records(f, magic: bytes) -> None:
    """Walk the record headers of a classic pcap: the last one must end at the end of the
    file (dpkt yields a cut last record as a short frame, which would be skipped unnoticed)."""
    fmt = "<I" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">I"
    size = f.seek(0, 2)
    pos, n = 24, 0
    while pos < size:
        n += 1
        f.seek(pos + 8)
        caplen = f.read(4)
        if pos + 16 > size or len(caplen) < 4:
            raise _Truncated(f"record {n}")
        pos += 16 + struct.unpack(fmt, caplen)[0]
        if pos > size:
            raise _Truncated(f"record {n}")


def _udp_of(frame: bytes, linktype: int):
    if linktype == dpkt.pcap.DLT_EN10MB:
        pkt = dpkt.ethernet.Ethernet(frame).data
    elif linktype in (dpkt.pcap.DLT_RAW, 101, 228, 229):
        pkt = dpkt.ip.IP(frame) if frame and frame[0] >> 4 == 4 else dpkt.ip6.IP6(frame)
    elif linktype == dpkt.pcap.DLT_LINUX_SLL:
        pkt = dpkt.sll.SLL(frame).data
    elif linktype in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        pkt = dpkt.loopback.Loopback(frame).data
    else:
        raise ValueError(f"link type {linktype}")
    if isinstance(pkt, (dpkt.ip.IP, dpkt.ip6.IP6)) and isinstance(pkt.data, dpkt.udp.UDP):
        return pkt.data
    return None


def read_pcap(path: str | Path, *, port: int | None = None, payload: str = "auto") -> UdpPackets:
    """Read the UDP datagrams of a pcap or pcapng file.

    ``port``: keep datagrams whose source or destination port is this (default: the busiest
    destination port, i.e. the test stream). ``payload``: how to read sequence numbers
    (one of PAYLOAD_KINDS).
    """
    path = Path(path)
    if payload not in PAYLOAD_KINDS:
        raise PcitraceError(f"unknown payload kind {payload!r}", where="--payload",
                            fix=f"use one of {', '.join(PAYLOAD_KINDS)}")
    times, sizes, sports, dports, heads = [], [], [], [], []
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise PcitraceError(f"cannot open the packet capture: {exc.strerror}", path=path,
                            fix="give the path of a .pcap or .pcapng file") from None
    with f:
        magic = f.read(4)
        f.seek(0)
        try:
            if magic == b"\x0a\x0d\x0d\x0a":
                it = _iter_pcapng(f)
            else:
                _check_pcap_records(f, magic)
                f.seek(0)
                r = dpkt.pcap.Reader(f)
                lt = r.datalink()
                it = ((_ts_ps_pcap(ts), buf, lt) for ts, buf in r)
            for n, (t, frame, lt) in enumerate(it):
                try:
                    udp = _udp_of(frame, lt)
                except ValueError as exc:
                    raise PcitraceError(f"unsupported {exc}", path=path, where=f"packet {n + 1}",
                                        fix="capture on an Ethernet, raw-IP, loopback or Linux cooked interface") from None
                except (dpkt.dpkt.UnpackError, IndexError, struct.error):
                    continue  # truncated or non-IP frame: not part of the stream
                if udp is None:
                    continue
                data = bytes(udp.data)
                times.append(t)
                sizes.append(max(udp.ulen - 8, len(data)) if udp.ulen else len(data))
                sports.append(udp.sport)
                dports.append(udp.dport)
                heads.append(data[:_HEAD].ljust(_HEAD, b"\0"))
        except PcitraceError:
            raise
        except _Truncated as exc:
            raise PcitraceError("the packet capture ends in the middle of a record (cut short?)", path=path,
                                where=str(exc), fix="use the complete file; stop tcpdump / tshark before "
                                "reading what it wrote") from None
        except (ValueError, dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError, struct.error) as exc:
            raise PcitraceError(f"not a readable pcap / pcapng file ({exc})", path=path, where="file header",
                                fix="write the capture with tcpdump -w / tshark -w / Wireshark") from None
    t0 = min(times) if times else 0
    if times and max(times) - t0 >= 2**62:
        raise PcitraceError("packet times span more than 50 days", path=path, where="timestamps",
                            fix="check the capture's timestamps (tcpdump -tt -r FILE | head)")
    time_ps = np.array([t - t0 for t in times], np.int64)
    size = np.array(sizes, np.int64)
    sp = np.array(sports, np.int32)
    dp = np.array(dports, np.int32)
    head = np.frombuffer(b"".join(heads), np.uint8).reshape(-1, _HEAD) if heads else np.zeros((0, _HEAD), np.uint8)
    if len(time_ps) == 0:
        raise PcitraceError("no UDP datagrams in the capture", path=path,
                            fix="capture the test stream (e.g. tcpdump -w run.pcap udp port 14299)")
    if port is None:
        ports, counts = np.unique(dp, return_counts=True)
        port = int(ports[np.argmax(counts)])
    keep = (sp == port) | (dp == port)
    if not keep.any():
        raise PcitraceError(f"no UDP datagrams to or from port {port}", path=path,
                            fix=f"ports in the capture: {', '.join(map(str, np.unique(dp)[:10]))}")
    time_ps, size, sp, dp, head = time_ps[keep], size[keep], sp[keep], dp[keep], head[keep]
    first = int(time_ps.min())
    time_ps -= first
    start_epoch_ns = (t0 + first) // 1000
    kind = _detect(head) if payload == "auto" else payload
    seq = payload_sequence(head, kind)
    return UdpPackets(str(path), time_ps, start_epoch_ns, size, sp, dp, seq, kind)


def payload_sequence(head: np.ndarray, kind: str) -> np.ndarray:
    """Sequence numbers from the first bytes of each payload (rows of uint8, >= 16 columns)."""
    n = len(head)
    if kind == "none" or n == 0:
        return np.full(n, -1, np.int64)
    h = np.ascontiguousarray(head[:, :16])
    if kind == "udpmon":
        return h[:, 8:16].copy().view("<i8").reshape(n).astype(np.int64)
    if kind == "iperf3":
        # iperf3 writes a 64-bit count when the test uses 64-bit counters, else 32-bit; the
        # upper word of the 64-bit form is 0 for any realistic run, which tells them apart.
        hi32 = h[:, 8:12].copy().view(">u4").reshape(n)
        if np.all(hi32 == 0):
            return h[:, 8:16].copy().view(">i8").reshape(n).astype(np.int64)
        return hi32.astype(np.int64)
    if kind == "iperf2":
        return h[:, 0:4].copy().view(">i4").reshape(n).astype(np.int64)
    raise ValueError(kind)


def _mostly_consecutive(seq: np.ndarray) -> float:
    if len(seq) < 2:
        return 1.0 if len(seq) else 0.0
    d = np.diff(seq)
    return float(np.mean((d >= 1) & (d <= 4)))


def _detect(head: np.ndarray) -> str:
    """Which tool wrote these payloads: the candidate whose sequence field counts up."""
    n = len(head)
    h = np.ascontiguousarray(head[:, :16])
    cmd = h[:, 0:4].copy().view("<i4").reshape(n)
    if np.mean(cmd == UDPMON_CMD_DATA) > 0.9:
        return "udpmon"
    scores = {k: _mostly_consecutive(payload_sequence(head, k)) for k in ("iperf3", "iperf2")}
    best = max(scores, key=scores.get)
    return best if scores[best] > 0.5 else "none"


def write_pcap(path: str | Path, time_ps: np.ndarray, payloads: list[bytes], *, start_epoch_ns: int = 0,
               src: str = "10.0.0.1",
               dst: str = "10.0.0.2", sport: int = 40000, dport: int = 14299, nanosecond: bool = True) -> None:
    """Write UDP datagrams as an Ethernet pcap (used to make test captures and demo data).

    Written to a temporary file and renamed, so a reader never sees half a file.
    """
    import socket

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=nanosecond, linktype=dpkt.pcap.DLT_EN10MB)
        for t, pl in zip(np.asarray(time_ps, np.int64), payloads):
            udp = dpkt.udp.UDP(sport=sport, dport=dport, data=pl)
            udp.ulen = 8 + len(pl)
            ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_UDP,
                            data=udp)
            ip.len = 20 + udp.ulen
            eth = dpkt.ethernet.Ethernet(src=b"\x02\0\0\0\0\1", dst=b"\x02\0\0\0\0\2",
                                         type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            sec, rem = divmod(int(t) + start_epoch_ns * 1000, 10 ** 12)
            ts = Decimal(sec) + Decimal(rem) / Decimal(10 ** 12) if nanosecond else sec + rem / 1e12
            w.writepkt(bytes(eth), ts=ts)


def udpmon_payload(frame_number: int, send_time_tenth_us: int, size: int, *, seed: int = 0) -> bytes:
    """A UDPmon data payload: int32 cmd=4, int32 version, int64 frame number, int64 send time
    (0.1 us), random fill (DOMAIN.md)."""
    head = struct.pack("<iiqq", UDPMON_CMD_DATA, 152, frame_number, send_time_tenth_us)
    rng = np.random.default_rng(seed + frame_number)
    fill = rng.integers(0, 256, max(0, size - len(head)), dtype=np.uint8).tobytes()
    return (head + fill)[:max(size, len(head))]

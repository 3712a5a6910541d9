"""Correlate a capture with a UDP test run: which DMA is which packet, which packets were lost
and where, and the PCI figures of every packet beside the run's own.

The capture side is a per-bus packet series (send DMAs on the sender's bus, receive DMAs on the
receiver's, frames on a probe) with per-packet PCI figures, from the analyser. The run side is
UDPmon's per-packet table (``-G``) or a pcap of the stream. :func:`correlate` aligns the two
(:mod:`pcitrace.correlate.align`) and joins them into one table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcitrace.correlate.align import Alignment, align
from pcitrace.correlate.pcap import UdpPackets
from pcitrace.correlate.runlog import RunLog
from pcitrace.errors import PcitraceError


@dataclass
class CapturePackets:
    """One bus's packets as the capture shows them.

    ``time_ps``: the packet's reference time on the bus (start of its data DMA; frame start on a
    probe). ``figures``: per-packet PCI figures (same length), e.g. csr_setup_us, data_dma_us,
    occupancy. ``seq``: UDPmon frame numbers when the payload was readable on the bus.
    """
    bus: str
    direction: str                     # 'tx', 'rx', 'wire' (probe) or '?'
    time_ps: np.ndarray
    bytes: np.ndarray
    figures: dict[str, np.ndarray] = field(default_factory=dict)
    seq: np.ndarray | None = None
    occupancy: float | None = None     # whole-capture bus occupancy (0..1)
    clock_mhz: float | None = None
    source: str = "analyser"

    def __len__(self) -> int:
        return len(self.time_ps)


@dataclass
class RunPackets:
    """The run's per-packet series: number, time (ps), and which numbers the run says were lost."""
    source: str
    number: np.ndarray      # int64 packet numbers of packets with a time
    time_ps: np.ndarray     # int64
    lost_numbers: np.ndarray
    which: str              # 'send' or 'recv' (UDPmon), 'capture' (pcap)
    other_time_ps: np.ndarray | None = None   # the other side's time (UDPmon: recv if which=send)


@dataclass
class Correlation:
    capture: CapturePackets
    run: RunPackets
    alignment: Alignment
    rows: list[dict]
    lost: list[dict]

    def summary(self) -> dict:
        s = self.alignment.summary()
        s.update(bus=self.capture.bus, direction=self.capture.direction,
                 capture_packets=len(self.capture), run_packets=len(self.run.number),
                 run_lost=len(self.run.lost_numbers),
                 lost_seen_on_bus=sum(1 for x in self.lost if x["on_bus"]),
                 lost_not_on_bus=sum(1 for x in self.lost if not x["on_bus"] and x["in_window"]))
        return s

    def to_dict(self) -> dict:
        return {"summary": self.summary(), "lost": self.lost, "packets": self.rows}


# --- run side --------------------------------------------------------------------------------
def run_packets(run: RunLog | UdpPackets, which: str = "send") -> RunPackets:
    """The per-packet series of a UDPmon -G log (``which`` = 'send' or 'recv' times) or a pcap."""
    if isinstance(run, UdpPackets):
        seq = run.seq if (run.seq >= 0).all() else np.arange(len(run), dtype=np.int64)
        return RunPackets(run.path, seq.astype(np.int64), run.time_ps, np.zeros(0, np.int64), "capture")
    if which not in ("send", "recv"):
        raise PcitraceError(f"unknown run time {which!r}", where="--run-times", fix="use send or recv")
    p = run.packets
    if p is None:
        raise PcitraceError(
            f"the run log ({run.kind}, {run.variant}) has no per-packet times", path=run.path,
            fix="run udpmon_bw_mon with -G N (N >= the packet count) or give a pcap of the stream")
    ok = ~p.lost
    t = p.send_time_ps if which == "send" else p.recv_time_ps
    other = p.recv_time_ps if which == "send" else p.send_time_ps
    return RunPackets(run.path, p.number[ok], t[ok], p.lost_numbers, which, other[ok])


# --- capture side ----------------------------------------------------------------------------
def capture_packets(path: str | Path, *, profile: str | Path | None = None, engine: str = "fast") -> list[CapturePackets]:
    """Decode and analyse a capture; one CapturePackets per bus that carried packets."""
    from pcitrace import pipeline

    run = pipeline.run(path, profile, until="analyse", engine=engine)
    result = run.decoded
    packets = packets_from_analysis(run.analysis)
    for cp in packets:
        cp.seq = payload_numbers(result, cp.bus, cp.time_ps)
    return packets + packets_from_frames(result.frames)


def packets_from_frames(frames: dict) -> list[CapturePackets]:
    """Probe links as packet series: one per frame, at the frame's start on the wire, with the
    UDPmon (or iperf2) number the probe's GMII bytes carried when it had them."""
    out = []
    for link, f in sorted(frames.items()):
        if len(f) == 0:
            continue
        seq = None
        for col in ("udpmon_seq", "iperf_seq"):
            if col in f.dtype.names and (f[col] >= 0).any():
                seq = f[col].astype(np.int64)
                break
        figures = {"wire_time_us": f["wire_time_ps"].astype(float) / 1e6}
        out.append(CapturePackets(str(link), "wire", f["start_ps"].astype(np.int64),
                                  f["frame_bytes"].astype(np.int64), figures, seq, None, None, source="probe"))
    return out


def _frame_head(words_t, words_a, words_v, words_wb, base: int, t0: int, t1: int, nbytes: int) -> bytes | None:
    """The first ``nbytes`` of the buffer at ``base`` as moved by the words between t0 and t1."""
    lo, hi = np.searchsorted(words_t, [t0, t1], side="left")
    hi = np.searchsorted(words_t, t1, side="right")
    a, v, wb = words_a[lo:hi], words_v[lo:hi], words_wb[lo:hi]
    buf = bytearray(nbytes)
    have = np.zeros(nbytes, bool)
    off = a.astype(np.int64) - base
    sel = (off > -8) & (off < nbytes)
    for o, val, w in zip(off[sel].tolist(), v[sel].tolist(), wb[sel].tolist()):
        for k in range(w):
            pos = o + k
            if 0 <= pos < nbytes:
                buf[pos] = (val >> (8 * k)) & 0xFF
                have[pos] = True
    return bytes(buf) if have.all() else None


def payload_numbers(result, bus: str, data_start_ps: np.ndarray) -> np.ndarray | None:
    """UDPmon frame numbers read from the frames the NIC moved, when AD was captured.

    A packet's data DMA starts at its buffer's address; PCI carries bytes little-endian by lane,
    so the Ethernet / IPv4 / UDP headers and the UDPmon header (int32 cmd = 4, int32 version,
    int64 frame number) can be read back from the data words. -1 where the frame is not a
    UDPmon data packet or its words are incomplete; None when AD was not captured on the bus
    (its words then carry only their times).
    """
    recs, words = result.records, result.words
    if len(words) == 0 or len(recs) == 0:
        return None
    bus_profile = next((b for b in getattr(getattr(result, "profile", None), "buses", None) or []
                        if b.name == bus), None)
    if bus_profile is not None and "ad" not in bus_profile.signals:
        return None
    on_bus = recs["bus"][words["record"]] == bus
    if not on_bus.any():
        return None
    w = words[on_bus]
    r = recs[w["record"]]
    order = np.lexsort((w["time_ps"], w["record"]))
    w, r = w[order], r[order]
    first = np.r_[True, w["record"][1:] != w["record"][:-1]]
    grp_start = np.maximum.accumulate(np.where(first, np.arange(len(w)), 0))
    k = np.arange(len(w)) - grp_start
    wb = (r["width"] // 8).astype(np.int64)
    addr = r["address"].astype(np.int64) + k * wb
    by_t = np.argsort(w["time_ps"], kind="stable")
    wt, wa, wv, wwb = w["time_ps"][by_t], addr[by_t], w["value"][by_t], wb[by_t]
    bus_recs = recs[recs["bus"] == bus]
    rstart = bus_recs["start_ps"]
    out = np.full(len(data_start_ps), -1, np.int64)
    for i, t0 in enumerate(np.asarray(data_start_ps).tolist()):
        j = int(np.searchsorted(rstart, t0))
        if j >= len(bus_recs) or rstart[j] != t0:
            continue
        base = int(bus_recs["address"][j])
        # headers fit in 14 + 60 + 8 + 16 bytes; the words of the first few microseconds hold them
        head = _frame_head(wt, wa, wv, wwb, base, t0, t0 + 20_000_000, 98)
        if head is None or head[12:14] != b"\x08\x00" or head[23] != 17:
            continue
        ihl = (head[14] & 0x0F) * 4
        pl = 14 + ihl + 8
        if pl + 16 > len(head) or int.from_bytes(head[pl:pl + 4], "little") != 4:
            continue
        out[i] = int.from_bytes(head[pl + 8:pl + 16], "little", signed=True)
    return out


def packets_from_analysis(analysis) -> list[CapturePackets]:
    """CapturePackets from the analyser's per-bus packet tables (analyse.packets.PACKET_DTYPE)."""
    from pcitrace.analyse.classify import READ, WRITE
    out = []
    for name, ba in analysis.buses.items():
        pk = ba.packets
        if pk is None or len(pk) == 0:
            continue
        dirs = pk["direction"]
        direction = "tx" if np.all(dirs == READ) else "rx" if np.all(dirs == WRITE) else "?"
        figures = {}
        for col in ("csr_setup_ps", "descriptor_fetch_ps", "data_dma_ps", "status_writeback_ps",
                    "csr_to_dma_ps", "interrupt_delay_ps", "period_ps", "busy_ps"):
            if col in pk.dtype.names:
                figures[col[:-3] + "_us"] = pk[col].astype(float) / 1e6
        if "occupancy" in pk.dtype.names:
            figures["occupancy"] = pk["occupancy"].astype(float)
        out.append(CapturePackets(str(name), direction, pk["data_start_ps"].astype(np.int64),
                                  pk["data_bytes"].astype(np.int64), figures, None,
                                  float(ba.split.occupancy), ba.facts.clock_hz / 1e6))
    return out


def packets_from_truth(truth: dict, bus: str) -> CapturePackets:
    """The packet series the simulator says a bus carries (start of each frame's data DMA).

    For tests and for checking the analyser against the simulator, not for real captures.
    """
    rows = truth.get("packets", [])
    times, nbytes, seq = [], [], []
    direction = None
    for r in rows:
        for side, dirname in (("tx", "tx"), ("rx", "rx")):
            if r.get("send_bus" if side == "tx" else "recv_bus") != bus:
                continue
            # the data DMA's start, as the analyser reports it (older truth: its first word)
            t = r.get(f"{side}_data_start_ps", r.get(f"{side}_first_word_ps", -1))
            if t is None or t < 0:
                continue
            times.append(t)
            nbytes.append(r[f"{side}_bytes"])
            seq.append(r["seq"])
            direction = dirname
    if not times:
        raise PcitraceError(f"the truth has no packets on bus {bus!r}", where="packets",
                            fix=f"buses in the truth: {', '.join(truth.get('buses', {}))}")
    occ = truth.get("occupancy", {}).get(bus, {}).get("fraction")
    return CapturePackets(bus, direction or "?", np.array(times, np.int64), np.array(nbytes, np.int64),
                          {}, np.array(seq, np.int64), occ, None, source="truth")


def choose_bus(packets: list[CapturePackets], bus: str | None, run: RunPackets) -> CapturePackets:
    if not packets:
        raise PcitraceError("the capture shows no packets (no NIC data DMA or probe frame)",
                            fix="check the profile's NIC identity (REQ#/GNT#, BARs) with `pcitrace info`")
    if bus is not None:
        for p in packets:
            if p.bus == bus:
                return p
        raise PcitraceError(f"no packets on bus {bus!r}", where="--bus",
                            fix=f"buses with packets: {', '.join(p.bus for p in packets)}")
    # Default: the send side for send times, the receive side for receive times.
    want = "tx" if run.which in ("send", "capture") else "rx"
    for p in packets:
        if p.direction == want:
            return p
    return max(packets, key=len)


# --- the join --------------------------------------------------------------------------------
def correlate(cap: CapturePackets, run: RunPackets, *, use_capture_seq: bool = True) -> Correlation:
    """Align ``cap`` with ``run`` and build the per-packet table and the lost-packet list."""
    cseq = cap.seq if (use_capture_seq and cap.seq is not None) else None
    a = align(cap.time_ps, run.time_ps, capture_seq=cseq, run_seq=run.number)
    number_of_cap = a.capture_number
    run_pos = {int(n): j for j, n in enumerate(run.number)}
    # capture index -> run index for pairs
    pair_run = np.full(len(cap), -1, np.int64)
    pair_run[a.capture_index] = a.run_index
    slope = a.drift_ppm * 1e-6
    rows = []
    for i in np.argsort(cap.time_ps, kind="stable"):
        j = int(pair_run[i])
        num = int(number_of_cap[i]) if number_of_cap[i] >= 0 else None
        row = {"capture_index": int(i), "number": num,
               "capture_time_us": cap.time_ps[i] / 1e6,
               "bytes": int(cap.bytes[i]),
               "matched": j >= 0}
        # The capture time in the run's clock, so it reads beside the run's own times.
        row["capture_in_run_us"] = (cap.time_ps[i] - a.offset_ps) / (1 + slope) / 1e6
        if j >= 0:
            row[f"run_{run.which}_us"] = run.time_ps[j] / 1e6
            if run.other_time_ps is not None:
                other = "recv" if run.which == "send" else "send"
                row[f"run_{other}_us"] = run.other_time_ps[j] / 1e6
            row["residual_us"] = (cap.time_ps[i] - (run.time_ps[j] * (1 + slope) + a.offset_ps)) / 1e6
        else:
            row["run_lost"] = num is not None and num not in run_pos
        for k, v in cap.figures.items():
            x = float(v[i])
            row[k] = None if math.isnan(x) else x
        rows.append(row)
    seen = {int(n) for n in number_of_cap if n >= 0}
    lo = int(number_of_cap[number_of_cap >= 0].min()) if (number_of_cap >= 0).any() else None
    hi = int(number_of_cap[number_of_cap >= 0].max()) if (number_of_cap >= 0).any() else None
    lost = []
    for n in run.lost_numbers.tolist():
        in_window = lo is not None and lo <= n <= hi
        lost.append({"number": int(n), "on_bus": n in seen, "in_window": bool(in_window)})
    return Correlation(cap, run, a, rows, lost)


def lost_ranges(numbers) -> list[tuple[int, int]]:
    """Consecutive runs of packet numbers as (first, last) pairs, for compact printing."""
    nums = sorted(int(x) for x in numbers)
    out: list[tuple[int, int]] = []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out

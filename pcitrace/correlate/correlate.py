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
    direction: str                     # 'tx', 'rx' or '?'
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
    from pcitrace.capture import open_capture
    from pcitrace.decode import decode_capture

    try:
        from pcitrace import analyse as analyse_mod
        analyse = analyse_mod.analyse
    except (ImportError, AttributeError):
        raise PcitraceError("the analyser (pcitrace.analyse.analyse) is not available in this install",
                            path=path, fix="update pcitrace; correlate needs the analyser's per-packet tables") from None
    cap = open_capture(path)
    from pcitrace.capture.profile import resolve_profile
    prof = resolve_profile(cap, profile)
    result = decode_capture(cap, prof, engine=engine)
    analysis = analyse(result, None)
    return packets_from_analysis(analysis, result)


def _field(obj, *names, default=None):
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def packets_from_analysis(analysis, decode_result=None) -> list[CapturePackets]:
    """CapturePackets from the analyser's per-bus packet tables (PACKET_DTYPE rows)."""
    buses = _field(analysis, "buses", default=None)
    if buses is None:
        raise PcitraceError("the analysis has no per-bus results", fix="report this as a pcitrace bug")
    items = buses.items() if isinstance(buses, dict) else ((_field(b, "name"), b) for b in buses)
    out = []
    for name, ba in items:
        pk = _field(ba, "packets", default=None)
        if pk is None or len(pk) == 0:
            continue
        from pcitrace.analyse.classify import READ, WRITE
        dirs = pk["direction"]
        direction = "tx" if np.all(dirs == READ) else "rx" if np.all(dirs == WRITE) else "?"
        figures = {}
        for col, unit in (("csr_setup_ps", 1e6), ("descriptor_fetch_ps", 1e6), ("data_dma_ps", 1e6),
                          ("status_writeback_ps", 1e6), ("csr_to_dma_ps", 1e6), ("interrupt_delay_ps", 1e6),
                          ("period_ps", 1e6), ("busy_ps", 1e6)):
            if col in pk.dtype.names:
                figures[col.replace("_ps", "_us")] = pk[col].astype(float) / unit
        if "occupancy" in pk.dtype.names:
            figures["occupancy"] = pk["occupancy"].astype(float)
        occ = _field(ba, "occupancy", default=None)
        if occ is not None and not isinstance(occ, (int, float)):
            occ = _field(occ, "fraction", "total", "occupancy", default=None)
        clock = _field(ba, "clock_mhz", default=None)
        out.append(CapturePackets(str(name), direction, pk["data_start_ps"].astype(np.int64),
                                  pk["data_bytes"].astype(np.int64), figures, None,
                                  float(occ) if occ is not None else None,
                                  float(clock) if clock is not None else None))
    return out


def packets_from_truth(truth: dict, bus: str) -> CapturePackets:
    """The packet series the simulator says a bus carries (its first data word per packet).

    For tests and for checking the analyser against the simulator, not for real captures.
    """
    rows = truth.get("packets", [])
    times, nbytes, seq = [], [], []
    direction = None
    for r in rows:
        if r.get("send_bus") == bus and r.get("tx_first_word_ps", -1) >= 0:
            times.append(r["tx_first_word_ps"])
            nbytes.append(r["tx_bytes"])
            direction = "tx"
        elif r.get("recv_bus") == bus and r.get("rx_first_word_ps", -1) >= 0:
            times.append(r["rx_first_word_ps"])
            nbytes.append(r["rx_bytes"])
            direction = "rx"
        else:
            continue
        seq.append(r["seq"])
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

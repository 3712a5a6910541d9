"""Wire-to-PCI delays: each frame on a probed link matched to the DMA that sent it and the DMA
that delivered it, and the per-packet causal chain

    CSR setup -> send DMA (first data word) -> wire start -> wire end
              -> receive DMA (first data word) -> receive interrupt (next CSR group)

with ``send_pci_to_wire`` = wire start - send first word, ``wire_to_recv_pci`` = receive first
word - wire end, ``pci_to_pci`` = receive first word - send first word (the seed papers' "send
PCI -> receive PCI") and ``wire_time`` = wire end - wire start.

Matching (never by force):
1. Sequence numbers, when both sides show them (GMII bytes give the frame's UDPmon number;
   ``packet_seq`` maps a bus's packets to the numbers read from their DMA'd payload).
2. Otherwise by time, in order and causally (send DMA before the wire start, receive DMA
   after it): the delay is followed from frame to frame, because a transmit queue makes it
   drift, and each frame takes the unused DMA nearest to where the last delay puts it, within
   ``tolerance`` (default: half the median frame spacing, at least 1 us). A frame the
   receiver dropped therefore keeps no receive DMA, and a DMA whose frame the probe never
   saw stays unmatched.
MAC control frames (flow-control pauses) are made by the MAC and never DMA'd: a frame whose
GMII bytes show ethertype 0x8808, or without GMII a frame of exactly ``control_frame_bytes``
(64, the size of a pause frame; pass None when the traffic has 64-byte data frames) gets
status ``control`` and takes part in no matching.
Which bus sends on a link is taken from the caller or found as the bus whose transmit DMAs
best precede the link's frames (and the receive bus the one whose receive DMAs follow them).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcitrace.analyse.dma import DATA
from pcitrace.analyse.classify import READ, UNKNOWN_DIR, WRITE
from pcitrace.analyse.metrics import link_distributions
from pcitrace.analyse.stats import Distribution

MATCHED, NO_SEND_DMA, NO_RECV_DMA, UNMATCHED = "matched", "no_send_dma", "no_recv_dma", "unmatched"
CONTROL = "control"   # a MAC control (pause) frame: made by the MAC, never DMA'd
ETHERTYPE_MAC_CONTROL = 0x8808

CHAIN_DTYPE = np.dtype([
    ("frame", np.int64),               # index in the link's frame array
    ("seq", np.int64),                 # UDPmon frame number when known, else -1
    ("send_packet", np.int64), ("recv_packet", np.int64),   # packet indices or -1
    ("csr_setup_start_ps", np.int64),  # send packet's setup group start, -1 if none
    ("send_first_dma_ps", np.int64),   # send packet's first DMA (descriptor fetch, else data)
    ("send_first_word_ps", np.int64), ("send_dma_end_ps", np.int64),
    ("wire_start_ps", np.int64), ("wire_end_ps", np.int64),
    ("recv_first_word_ps", np.int64), ("recv_dma_end_ps", np.int64),
    ("recv_interrupt_ps", np.int64),   # start of the CSR group that serviced the receive, -1
    ("send_pci_to_wire_ps", np.int64), ("wire_time_ps", np.int64),
    ("wire_to_recv_pci_ps", np.int64), ("pci_to_pci_ps", np.int64),
    ("status", "U16"),
])

# Fields that only a matched DMA fills (-1 otherwise).
_PER_MATCH = ("send_packet", "recv_packet", "csr_setup_start_ps", "send_first_dma_ps", "send_first_word_ps",
              "send_dma_end_ps", "recv_first_word_ps", "recv_dma_end_ps", "recv_interrupt_ps",
              "send_pci_to_wire_ps", "wire_to_recv_pci_ps", "pci_to_pci_ps")

CHAIN_FIGURES = {f.name: f.field for f in link_distributions()}


@dataclasses.dataclass
class LinkChain:
    link: str
    send_bus: str | None
    recv_bus: str | None
    chain: np.ndarray                 # CHAIN_DTYPE, one row per frame
    unmatched_send: np.ndarray        # send-bus tx packet indices with no frame
    unmatched_recv: np.ndarray        # recv-bus rx packet indices with no frame
    method: str                       # 'sequence' | 'time' | 'none'
    distributions: dict[str, Distribution]
    warnings: list[str] = dataclasses.field(default_factory=list)   # evidence against the matching
    doubtful_buses: list[str] = dataclasses.field(default_factory=list)   # packet count doubted (count_warnings)

    def counts(self) -> dict:
        s = self.chain["status"]
        return {"frames": int(len(s)), "matched": int((s == MATCHED).sum()),
                "control": int((s == CONTROL).sum()),
                "no_send_dma": int((s == NO_SEND_DMA).sum()), "no_recv_dma": int((s == NO_RECV_DMA).sum()),
                "unmatched": int((s == UNMATCHED).sum()),
                "unmatched_send_dmas": int(len(self.unmatched_send)),
                "unmatched_recv_dmas": int(len(self.unmatched_recv))}


def first_words(bus_analysis, words: np.ndarray) -> np.ndarray:
    """Per packet, the time of its first data word (first data phase of its first data burst);
    -1 for a packet whose data moved no word."""
    ba = bus_analysis
    n = len(ba.packets)
    out = np.full(n, -1, np.int64)
    if n == 0 or len(ba.bursts) == 0:
        return out
    b = ba.bursts
    tr = ba.transfers[b["transfer"]]
    keep = (tr["kind"] == DATA) & (tr["packet"] >= 0) & (b["data_phases"] > 0)
    if not keep.any():
        return out
    b, pkt = b[keep], tr["packet"][keep]
    order = np.lexsort((b["start_ps"], pkt))
    b, pkt = b[order], pkt[order]
    first = np.ones(len(pkt), bool)
    first[1:] = pkt[1:] != pkt[:-1]
    recs = ba.records[b["record"][first]]
    t = words["time_ps"][recs["data_index"]] if len(words) else recs["start_ps"]
    out[pkt[first]] = t
    return out


def _match_causal(anchor: np.ndarray, cand: np.ndarray, *, before: bool, tol: float,
                  window: float) -> np.ndarray:
    """Pair each anchor (a frame's wire start or end, sorted) with a candidate DMA time
    (sorted): the send DMA strictly before the wire start, the receive DMA after it.

    The delay is followed from frame to frame (a transmit queue makes it drift): each frame
    takes the unused candidate nearest to anchor -/+ the last matched delay, within ``tol``;
    the first frame, a send frame after a miss (a pause jumps the delay) and a receive frame
    after a long unmatched run take the earliest causal candidate within ``window``. Pairs stay in order and a candidate is used once; -1 = none.
    """
    out = np.full(len(anchor), -1, np.int64)
    if len(anchor) == 0 or len(cand) == 0:
        return out
    lo = 0                 # candidates below lo are used or passed
    delay = None           # last matched |anchor - candidate|
    misses = 0
    for i, a in enumerate(anchor):   # one step per frame, not per sample
        if before:
            pool_lo, pool_hi = lo, int(np.searchsorted(cand, a, side="left"))    # cand < a
        else:
            pool_lo, pool_hi = max(lo, int(np.searchsorted(cand, a, side="right"))), len(cand)
        if pool_lo >= pool_hi:
            misses += 1
            continue
        best = -1
        if delay is not None:
            want = a - delay if before else a + delay
            j = int(np.searchsorted(cand, want))
            bd = tol
            for k in (j - 1, j):
                if pool_lo <= k < pool_hi:
                    d = abs(cand[k] - want)
                    if d <= bd:
                        best, bd = k, d
        # (Re)acquire with the earliest causal candidate in the window: for the first frame;
        # for a send frame whose delay jumped (a pause frame stalls the transmitter); for a
        # receive frame only after a run of misses, since one miss is a frame the receiver
        # dropped and the next DMA belongs to the next frame.
        if best < 0 and (delay is None or before or misses >= 3):
            k = max(int(np.searchsorted(cand, a - window, side="left")), pool_lo) if before else pool_lo
            if k < pool_hi and abs(a - cand[k]) <= window:
                best = k
        if best >= 0:
            out[i] = best
            delay = abs(a - cand[best])
            lo = best + 1
            misses = 0
        else:
            misses += 1
    return out


def _side(anchor: np.ndarray, t: np.ndarray, after: bool, tol: float | None, spacing: float) -> np.ndarray:
    tol = tol if tol is not None else max(1e6, spacing / 2)
    return _match_causal(anchor, t, before=not after, tol=tol, window=max(4 * spacing, 50e6))


def _pick(values: np.ndarray, idx: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """values[idx] where ok, else -1 (idx may hold -1 where not ok; values may be empty)."""
    if len(values) == 0:
        return np.full(len(idx), -1, np.int64)
    return np.where(ok, values[np.maximum(idx, 0)], -1).astype(np.int64)


def link_chain(link: str, frames: np.ndarray, analysis, words: np.ndarray, *,
               send_bus: str | None = None, recv_bus: str | None = None,
               tolerance_ps: float | None = None,
               packet_seq: dict[str, np.ndarray] | None = None,
               control_frame_bytes: int | None = 64) -> LinkChain:
    """Match the frames of one probed link to DMAs on the PCI buses of ``analysis``."""
    frames = frames[~frames["truncated"]] if len(frames) else frames
    control = np.zeros(len(frames), bool)
    if len(frames):
        control = frames["gmii"] & (frames["ethertype"] == ETHERTYPE_MAC_CONTROL)
        if control_frame_bytes is not None:
            control |= ~frames["gmii"] & (frames["frame_bytes"] == control_frame_bytes)
    all_frames, frames = frames, frames[~control]
    n = len(frames)
    ws, we = frames["wire_start_ps" if "wire_start_ps" in frames.dtype.names else "start_ps"], frames["end_ps"]
    ws = np.asarray(ws, np.int64)
    we = np.asarray(we, np.int64)
    spacing = float(np.median(np.diff(ws))) if n > 2 else 11e6
    buses = analysis.buses

    def tx_rx(name, direction):
        ba = buses[name]
        fw = first_words(ba, words)
        # without C/BE# a packet's direction is unknown: it may be either side's DMA
        d = ba.packets["direction"]
        sel = np.flatnonzero(((d == direction) | (d == UNKNOWN_DIR)) & (fw >= 0))
        return ba, sel, fw[sel]

    def score(name, direction, after):
        _, sel, t = tx_rx(name, direction)
        if not len(t) or not n:
            return -1
        anchor = we if after else ws
        m = _side(anchor, t, after, tolerance_ps, spacing)
        return int((m >= 0).sum())

    given = (send_bus, recv_bus)
    if send_bus is None and buses:
        send_bus = max(buses, key=lambda b: score(b, READ, False))
        if score(send_bus, READ, False) <= 0:
            send_bus = None
    if recv_bus is None and buses:
        others = [b for b in buses if b != send_bus] or list(buses)
        recv_bus = max(others, key=lambda b: score(b, WRITE, True))
        if score(recv_bus, WRITE, True) <= 0:
            recv_bus = None

    chain = np.zeros(n, CHAIN_DTYPE)
    chain["frame"] = np.arange(n)
    chain["seq"] = frames["udpmon_seq"] if "udpmon_seq" in frames.dtype.names else -1
    chain["wire_start_ps"], chain["wire_end_ps"] = ws, we
    chain["wire_time_ps"] = we - ws
    for f in _PER_MATCH:
        chain[f] = -1
    method = "none"
    un_s = np.zeros(0, np.int64)
    un_r = np.zeros(0, np.int64)

    seqs = packet_seq or {}
    have_frame_seq = n and "udpmon_seq" in frames.dtype.names and (frames["udpmon_seq"] >= 0).all()

    for side, bus, direction in (("send", send_bus, READ), ("recv", recv_bus, WRITE)):
        if bus is None:
            continue
        ba, sel, t = tx_rx(bus, direction)
        if have_frame_seq and bus in seqs:
            # by sequence number: exact, whatever the timing
            pseq = np.asarray(seqs[bus])[sel]
            lookup = {int(s): k for k, s in enumerate(pseq) if s >= 0}
            m = np.array([lookup.get(int(s), -1) for s in frames["udpmon_seq"]], np.int64)
            method = "sequence"
        else:
            anchor = ws if side == "send" else we
            m = _side(anchor, t, side == "recv", tolerance_ps, spacing)
            method = "time" if method == "none" else method
        hit = m >= 0
        pidx = _pick(sel, m, hit)
        used = np.zeros(len(sel), bool)
        used[m[hit]] = True
        p = ba.packets
        chain[f"{side}_packet"] = pidx
        chain[f"{side}_first_word_ps"] = _pick(t, m, hit)
        chain[f"{side}_dma_end_ps"] = _pick(p["data_end_ps"], pidx, hit)
        if side == "send":
            chain["send_first_dma_ps"] = _pick(p["first_dma_ps"], pidx, hit)
            g = _pick(p["setup_group"], pidx, hit)
            chain["csr_setup_start_ps"] = _pick(ba.groups["start_ps"], g, g >= 0)
            un_s = sel[~used]
        else:
            g = _pick(p["interrupt_group"], pidx, hit)
            chain["recv_interrupt_ps"] = _pick(ba.groups["start_ps"], g, g >= 0)
            un_r = sel[~used]

    s_ok = chain["send_packet"] >= 0
    r_ok = chain["recv_packet"] >= 0
    chain["send_pci_to_wire_ps"] = np.where(s_ok, ws - chain["send_first_word_ps"], -1)
    chain["wire_to_recv_pci_ps"] = np.where(r_ok, chain["recv_first_word_ps"] - we, -1)
    chain["pci_to_pci_ps"] = np.where(s_ok & r_ok, chain["recv_first_word_ps"] - chain["send_first_word_ps"], -1)
    chain["status"] = np.where(s_ok & r_ok, MATCHED, np.where(s_ok, NO_RECV_DMA,
                               np.where(r_ok, NO_SEND_DMA, UNMATCHED)))

    if control.any():
        chain = _with_control_frames(chain, all_frames, control)
        r_ok = chain["recv_packet"] >= 0
    dists = _chain_distributions(chain, r_ok)

    warnings = direction_warnings(link, given, send_bus, recv_bus, score)
    doubtful = []
    for side, bus, unmatched in (("send", send_bus, un_s), ("recv", recv_bus, un_r)):
        data_frames = chain[chain["status"] != CONTROL]
        w = count_warnings(link, side, buses[bus], data_frames[f"{side}_packet"] >= 0, unmatched) if bus else []
        warnings += w
        doubtful += [bus] if w else []
    return LinkChain(link, send_bus, recv_bus, chain, un_s, un_r, method, dists, warnings, doubtful)


def _with_control_frames(chain: np.ndarray, all_frames: np.ndarray, control: np.ndarray) -> np.ndarray:
    """The chain with a row for every MAC control frame too (status ``control``, no DMA)."""
    full = np.zeros(len(all_frames), CHAIN_DTYPE)
    full[~control] = chain
    full["frame"] = np.arange(len(all_frames))
    c = np.flatnonzero(control)
    full["seq"][c] = all_frames["udpmon_seq"][c]
    full["wire_start_ps"][c] = all_frames["start_ps"][c]
    full["wire_end_ps"][c] = all_frames["end_ps"][c]
    full["wire_time_ps"][c] = all_frames["end_ps"][c] - all_frames["start_ps"][c]
    for f in _PER_MATCH:
        full[f][c] = -1
    full["status"][c] = CONTROL
    return full


def _chain_distributions(chain: np.ndarray, r_ok: np.ndarray) -> dict:
    """The link's distributions (metrics.link_distributions) over its chain."""
    dists = {}
    for fig in link_distributions():
        v = chain[fig.field]
        if fig.field == "wire_time_ps":
            dists[fig.name] = Distribution.of(v[chain["status"] != CONTROL], fig.scale)
        else:
            dists[fig.name] = Distribution.of(v[v >= 0] if fig.field != "wire_to_recv_pci_ps" else v[r_ok], fig.scale)
    return dists


# Frames at the capture's ends may lack their DMA (and DMAs their frame): this many, or this share
# of the frames, are not a sign of a wrong packet count.
EDGE_FRAMES = 2
EDGE_SHARE = 0.1


def count_warnings(link: str, side: str, ba, matched: np.ndarray, unmatched: np.ndarray) -> list[str]:
    """One frame on the wire probe is one packet: frames without a DMA on the bus, and packets of
    the link's direction without a frame, beyond the capture's edges say the bus's packet count
    is wrong (a frame cut into several packets, or several frames taken for one). Packets of
    unknown direction (no C/BE#) without a frame count only where there are half again as
    many as matched ones (the other direction's packets have no frame on this link). The
    unmatched packets are counted ambiguous."""
    n = int(matched.size)
    if n == 0:
        return []
    d = ba.packets["direction"][unmatched]
    known = d == (READ if side == "send" else WRITE)
    extra = int(known.sum())
    unknown = int((d == UNKNOWN_DIR).sum())
    if unknown > 1.5 * matched.sum() + EDGE_FRAMES:
        extra += unknown
    missing = n - int(matched.sum())
    if extra + missing <= max(EDGE_FRAMES, EDGE_SHARE * n):
        return []
    ba.packets["ambiguous"][unmatched] = True
    return [f"link {link}: {n} frames on the probe, {missing} without a {side} DMA on bus {ba.name} and {extra} "
            f"of its packets without a frame: one frame is one packet, so bus {ba.name}'s packet count is doubtful "
            f"(frames cut into several packets or merged; or frames lost); {unmatched.size} packets counted ambiguous"]


def direction_warnings(link: str, given: tuple, send_bus, recv_bus, score) -> list[str]:
    """A link's direction against the data: each frame must follow one bus's DMA (the sender's
    transmit DMA precedes it) and precede the other's. ``score(bus, direction, after)``: the
    frames with a DMA of that direction before (after=False) or after them on ``bus``."""
    if send_bus is None or recv_bus is None or send_bus == recv_bus:
        return []
    as_given = score(send_bus, READ, False) + score(recv_bus, WRITE, True)
    swapped = score(recv_bus, READ, False) + score(send_bus, WRITE, True)
    if swapped > as_given:
        how = "given" if any(given) else "found"
        return [f"link {link}: the buses {how} ({send_bus} sends, {recv_bus} receives) look the wrong way round: "
                f"{swapped} frames follow a DMA on {recv_bus} and precede one on {send_bus}, {as_given} the other "
                "way; check which bus sends on this link"]
    return []


def link_chains(decode_result, analysis, **kwargs) -> dict[str, LinkChain]:
    """A LinkChain for every probed link of a DecodeResult (``.frames``) analysed in ``analysis``."""
    out = {}
    for link, frames in decode_result.frames.items():
        summary = decode_result.buses.get(link)
        ends = {key: getattr(summary, key) for key in ("send_bus", "recv_bus")
                if summary is not None and getattr(summary, key) is not None}
        out[link] = link_chain(link, frames, analysis, decode_result.words, **{**ends, **kwargs})
    return out


__all__ = ["CHAIN_DTYPE", "CHAIN_FIGURES", "LinkChain", "link_chain", "link_chains", "first_words",
           "MATCHED", "NO_SEND_DMA", "NO_RECV_DMA", "UNMATCHED", "CONTROL"]

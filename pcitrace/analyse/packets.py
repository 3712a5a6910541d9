"""CSR groups, DMA bursts, DMA transfers and packets, from one bus's classified records.

Definitions (docs/report-schema.md repeats them for readers of the report):

- **CSR group**: consecutive CSR accesses whose idle gap (next start - previous end) is below
  ``csr_gap``, with no NIC DMA in between. Its span runs from the first clock of its first access
  to the end of the last busy clock of its last access (end_ps + one clock).
- **DMA burst**: one NIC-initiated transaction.
- **DMA transfer**: consecutive bursts in the same direction that move one buffer. With AD: the
  next burst starts where the previous one stopped (address + bytes; PCI-X split requests advance
  by their byte count, and split completions continue the read they answer). Without AD: the next
  burst follows within ``transfer_gap_clocks`` idle clocks with no CSR access in between.
- A transfer of at least ``min_frame_bytes`` is frame **data**; a smaller read is a **descriptor
  fetch**, a smaller write a **status write-back**. Without C/BE# (direction unknown) a small
  transfer after a packet's data is its status write-back unless a CSR group came in between,
  else it is the next packet's descriptor fetch.
- **Packet** = one data transfer; direction tx (NIC reads the frame) or rx (NIC writes it).
  Descriptor fetches before its data (after the previous packet's data) and status write-backs
  after it belong to it. A tx (or unknown-direction) packet's **setup group** is the last CSR group
  between the previous packet's last DMA and this packet's first DMA. All other CSR groups are
  **interrupt groups** (the driver's update after an interrupt); a packet's **interrupt delay** is
  from the end of its last DMA to the start of the next interrupt group, and that group's
  **packets per interrupt** counts the packets whose next interrupt group it is.
- Packet **period** = from its anchor (setup group start, else first DMA) to the next packet's
  anchor; the occupancy of the period is the busy time inside it over its length.
"""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.classify import CSR, DMA, READ, UNKNOWN_DIR, WRITE
from pcitrace.analyse.occupancy import BusyTime

GROUP_DTYPE = np.dtype([
    ("start_ps", np.int64), ("end_ps", np.int64), ("span_ps", np.float64), ("accesses", np.int64),
    ("retries", np.int64), ("first_record", np.int64), ("last_record", np.int64), ("setup", np.bool_),
    ("packets", np.int64),
])

BURST_DTYPE = np.dtype([
    ("record", np.int64), ("start_ps", np.int64), ("end_ps", np.int64), ("duration_ps", np.float64),
    ("bytes", np.int64), ("data_phases", np.int64), ("waits", np.int64), ("termination", "U24"),
    ("direction", np.int8), ("transfer", np.int64), ("efficiency", np.float64),
])

DATA, DESCRIPTOR, STATUS = 0, 1, 2
TRANSFER_KINDS = ("data", "descriptor", "status")
TRANSFER_DTYPE = np.dtype([
    ("start_ps", np.int64), ("end_ps", np.int64), ("span_ps", np.float64), ("bytes", np.int64),
    ("bursts", np.int64), ("direction", np.int8), ("kind", np.int8), ("packet", np.int64),
])

PACKET_DTYPE = np.dtype([
    ("direction", np.int8),              # READ = tx, WRITE = rx, UNKNOWN_DIR
    ("anchor_ps", np.int64),             # setup group start, else first DMA
    ("data_start_ps", np.int64), ("data_end_ps", np.int64), ("data_bytes", np.int64),
    ("data_bursts", np.int64),
    ("first_dma_ps", np.int64), ("last_dma_end_ps", np.int64),
    ("setup_group", np.int64),           # index into groups or -1
    ("csr_setup_ps", np.float64), ("csr_accesses", np.float64),
    ("descriptor_fetch_ps", np.float64), ("data_dma_ps", np.float64), ("status_writeback_ps", np.float64),
    ("csr_to_dma_ps", np.float64),       # end of setup group to first DMA
    ("interrupt_group", np.int64), ("interrupt_delay_ps", np.float64),
    ("period_ps", np.float64), ("busy_ps", np.float64), ("occupancy", np.float64),
    ("data_dma_ideal_ps", np.float64),
])


def csr_groups(records: np.ndarray, classes: np.ndarray, gap_ps: float, period_ps: float) -> np.ndarray:
    idx = np.flatnonzero(classes == CSR)
    if idx.size == 0:
        return np.zeros(0, GROUP_DTYPE)
    start = records["start_ps"][idx]
    end = records["end_ps"][idx]
    dma_before = np.cumsum(classes == DMA)
    brk = np.ones(idx.size, bool)
    brk[1:] = ((start[1:] - end[:-1]) >= gap_ps) | (dma_before[idx[1:]] != dma_before[idx[:-1]])
    gid = np.cumsum(brk) - 1
    heads = np.flatnonzero(brk)
    tails = np.r_[heads[1:] - 1, idx.size - 1]
    g = np.zeros(heads.size, GROUP_DTYPE)
    g["start_ps"] = start[heads]
    g["end_ps"] = end[tails]
    g["span_ps"] = g["end_ps"] - g["start_ps"] + period_ps
    g["accesses"] = np.bincount(gid, minlength=heads.size)
    g["retries"] = np.bincount(gid, weights=(records["termination"][idx] == "retry").astype(np.float64), minlength=heads.size)
    g["first_record"] = idx[heads]
    g["last_record"] = idx[tails]
    return g


def dma_bursts(records: np.ndarray, classes: np.ndarray, dirs: np.ndarray, period_ps: float,
               bus_width: int) -> np.ndarray:
    idx = np.flatnonzero(classes == DMA)
    b = np.zeros(idx.size, BURST_DTYPE)
    r = records[idx]
    b["record"] = idx
    b["start_ps"] = r["start_ps"]
    b["end_ps"] = r["end_ps"]
    b["duration_ps"] = r["clocks"] * period_ps
    b["bytes"] = r["bytes"]
    b["data_phases"] = r["data_phases"]
    b["waits"] = r["initiator_waits"] + r["target_waits"]
    b["termination"] = r["termination"]
    b["direction"] = dirs[idx]
    b["transfer"] = -1
    ideal = r["bytes"] / (bus_width / 8) * period_ps
    with np.errstate(divide="ignore", invalid="ignore"):
        b["efficiency"] = np.where(b["duration_ps"] > 0, ideal / b["duration_ps"], np.nan)
    return b


def dma_transfers(records: np.ndarray, classes: np.ndarray, bursts: np.ndarray, *, have_ad: bool,
                  gap_ps: float, period_ps: float, min_frame_bytes: int) -> np.ndarray:
    """Group bursts into transfers (fills bursts['transfer']) and label each transfer's kind."""
    m = bursts.size
    if m == 0:
        return np.zeros(0, TRANSFER_DTYPE)
    rec = records[bursts["record"]]
    d = bursts["direction"]
    same_dir = d[1:] == d[:-1]
    idle = bursts["start_ps"][1:] - bursts["end_ps"][:-1] - period_ps
    if have_ad:
        completion = rec["command"] == "split_completion"
        split_req = (rec["termination"] == "split_response") & (rec["byte_count"] > 0)
        advance = np.where(split_req, rec["byte_count"], rec["bytes"]).astype(np.uint64)
        expect = rec["address"] + advance
        # A split completion continues the read it answers: carry the last request's next address.
        src = np.where(~completion, np.arange(m), -1)
        src = np.maximum.accumulate(src)
        has_src = src >= 0
        carried = np.where(has_src, expect[np.maximum(src, 0)], np.uint64(0))
        contiguous = (rec["address"][1:] == carried[:-1]) & has_src[:-1]
        follows = completion[1:] & (d[:-1] == READ) & (idle <= gap_ps)
        merge = same_dir & ~completion[1:] & contiguous | same_dir & follows
    else:
        csr_before = np.cumsum(classes == CSR)
        no_csr = csr_before[bursts["record"][1:]] == csr_before[bursts["record"][:-1]]
        merge = same_dir & no_csr & (idle <= gap_ps)
    brk = np.r_[True, ~merge]
    tid = np.cumsum(brk) - 1
    bursts["transfer"] = tid
    n = int(tid[-1]) + 1
    heads = np.flatnonzero(brk)
    tails = np.r_[heads[1:] - 1, m - 1]
    t = np.zeros(n, TRANSFER_DTYPE)
    t["start_ps"] = bursts["start_ps"][heads]
    t["end_ps"] = bursts["end_ps"][tails]
    t["span_ps"] = t["end_ps"] - t["start_ps"] + period_ps
    t["bytes"] = np.bincount(tid, weights=bursts["bytes"], minlength=n).astype(np.int64)
    t["bursts"] = np.bincount(tid, minlength=n)
    t["direction"] = d[heads]
    t["packet"] = -1
    small = t["bytes"] < min_frame_bytes
    t["kind"] = np.where(~small, DATA, np.where(t["direction"] == WRITE, STATUS, DESCRIPTOR))
    return t


def packets(transfers: np.ndarray, groups: np.ndarray, busy: BusyTime, *, period_ps: float,
            bus_width: int) -> np.ndarray:
    """One row per data transfer; assigns transfers['packet'] and groups['setup'/'packets']."""
    data_idx = np.flatnonzero(transfers["kind"] == DATA)
    p = np.zeros(data_idx.size, PACKET_DTYPE)
    if data_idx.size == 0:
        return p
    P = data_idx.size
    ds = transfers["start_ps"][data_idx]
    de = transfers["end_ps"][data_idx]
    transfers["packet"][data_idx] = np.arange(P)
    p["direction"] = transfers["direction"][data_idx]
    p["data_start_ps"] = ds
    p["data_end_ps"] = de
    p["data_bytes"] = transfers["bytes"][data_idx]
    p["data_bursts"] = transfers["bursts"][data_idx]
    p["data_dma_ps"] = transfers["span_ps"][data_idx]
    p["data_dma_ideal_ps"] = p["data_bytes"] / (bus_width / 8) * period_ps

    # Small transfers: descriptor fetches go to the next packet, write-backs to the previous.
    small = np.flatnonzero(transfers["kind"] != DATA)
    ts = transfers["start_ps"][small]
    j_next = np.searchsorted(ds, ts, side="left")
    j_prev = j_next - 1
    kind = transfers["kind"][small].copy()
    unknown = transfers["direction"][small] == UNKNOWN_DIR
    if unknown.any():
        gstart = groups["start_ps"]
        prev_end = np.where(j_prev >= 0, de[np.maximum(j_prev, 0)], np.iinfo(np.int64).min)
        csr_between = np.searchsorted(gstart, ts, "left") > np.searchsorted(gstart, prev_end, "right")
        as_status = (j_prev >= 0) & ~csr_between
        kind[unknown] = np.where(as_status[unknown], STATUS, DESCRIPTOR)
        transfers["kind"][small] = kind
    owner = np.where(kind == STATUS, j_prev, j_next)
    valid = (owner >= 0) & (owner < P)
    transfers["packet"][small[valid]] = owner[valid]

    def span_of(which: int):
        sel = valid & (kind == which)
        lo = np.full(P, np.iinfo(np.int64).max)
        hi = np.full(P, np.iinfo(np.int64).min)
        np.minimum.at(lo, owner[sel], transfers["start_ps"][small[sel]])
        np.maximum.at(hi, owner[sel], transfers["end_ps"][small[sel]])
        has = hi >= lo
        span = np.where(has, hi - lo + period_ps, np.nan)
        return lo, hi, has, span

    dlo, _, dhas, p["descriptor_fetch_ps"] = span_of(DESCRIPTOR)
    _, shi, shas, p["status_writeback_ps"] = span_of(STATUS)
    first = np.where(dhas, np.minimum(dlo, ds), ds)
    last = np.where(shas, np.maximum(shi, de), de)
    p["first_dma_ps"] = first
    p["last_dma_end_ps"] = last

    # Setup groups: the last CSR group between the previous packet's last DMA and this first DMA.
    p["setup_group"] = -1
    p["interrupt_group"] = -1
    p["csr_setup_ps"] = np.nan
    p["csr_accesses"] = np.nan
    p["csr_to_dma_ps"] = np.nan
    p["interrupt_delay_ps"] = np.nan
    if groups.size:
        g = np.searchsorted(groups["end_ps"], first, side="left") - 1
        prev_last = np.r_[np.iinfo(np.int64).min, last[:-1]]
        ok = (g >= 0) & (p["direction"] != WRITE)
        ok &= groups["start_ps"][np.maximum(g, 0)] > prev_last
        p["setup_group"][ok] = g[ok]
        groups["setup"][g[ok]] = True
        p["csr_setup_ps"][ok] = groups["span_ps"][g[ok]]
        p["csr_accesses"][ok] = groups["accesses"][g[ok]]
        p["csr_to_dma_ps"][ok] = first[ok] - (groups["end_ps"][g[ok]] + period_ps)

        inter = np.flatnonzero(~groups["setup"])
        if inter.size:
            istart = groups["start_ps"][inter]
            end_busy = last + period_ps
            k = np.searchsorted(istart, end_busy, side="left")
            has = k < inter.size
            p["interrupt_group"][has] = inter[k[has]]
            p["interrupt_delay_ps"][has] = istart[k[has]] - end_busy[has]
            groups["packets"][inter] = np.bincount(k[has], minlength=inter.size)[: inter.size]

    anchor = np.where(p["setup_group"] >= 0, groups["start_ps"][np.maximum(p["setup_group"], 0)]
                      if groups.size else first, first)
    p["anchor_ps"] = anchor
    p["period_ps"] = np.nan
    p["busy_ps"] = np.nan
    p["occupancy"] = np.nan
    if P > 1:
        period = np.diff(anchor).astype(np.float64)
        p["period_ps"][:-1] = period
        busy_ps = busy.between(anchor[:-1], anchor[1:])
        p["busy_ps"][:-1] = busy_ps
        with np.errstate(divide="ignore", invalid="ignore"):
            p["occupancy"][:-1] = np.where(period > 0, busy_ps / period, np.nan)
    return p


def pauses(packets_: np.ndarray, factor: float) -> np.ndarray:
    """Indices of packets followed by a pause: a period longer than ``factor`` x the median period."""
    period = packets_["period_ps"]
    finite = np.isfinite(period)
    if finite.sum() < 3:
        return np.zeros(0, np.int64)
    med = np.median(period[finite])
    return np.flatnonzero(finite & (period > factor * med))

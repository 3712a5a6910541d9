"""CSR groups, DMA bursts, DMA transfers and packets, from one bus's classified records.

Definitions (docs/report-schema.md repeats them for readers of the report):

- **CSR group**: consecutive CSR accesses whose idle gap (next start - previous end) is below
  ``csr_gap``, with no frame data DMA in between (descriptor / status DMA does not split a group:
  a late write-back may land amid the driver's register accesses). Without AD, inside that
  window a group is also split where the idle gap exceeds ``csr_split_factor`` x the median gap between accesses
  of one group on this bus (gaps after a retried access excluded): the CPU paces one routine's
  accesses evenly, so such a pause is the next routine (an interrupt service routine running
  into the next send's setup). The send routine is then found by its accesses (see
  **send routine** below), which supersedes that split wherever the routine is recognised. A
  group's span (``csr_group``) runs from the first clock of its first access to the end of the
  last busy clock of its last access (end_ps + one clock).
- **DMA burst**: one NIC-initiated transaction (PCI-X: and the split completions answering it).
- **DMA transfer**: consecutive bursts in the same direction that move one buffer. With AD: the
  next burst starts where the previous one stopped (address + bytes; a PCI-X split request
  advances by its byte count) and split completions continue the read they answer. Without AD:
  a burst the target cut short (retry, disconnect, split response) continues in the next burst
  of the same direction, and the first burst the master ended itself is the transfer's last
  (the rest of the buffer, however small: on a bus the bridge cuts every read at 128 bytes, a
  frame ends with a small piece). The NIC asks for the bus again at once (within
  ``transfer_gap_clocks`` of bus idle time) for the rest of a buffer the target cut, so a small
  burst amid a buffer's bursts is its last piece when no burst follows it at once; when one
  does, it is an interleaved descriptor fetch / write-back if it has the shape of the NIC's own
  small transfers (data phases, target waits, DEVSEL# speed: _control_shapes, those seen away
  from any cut burst, or amid a buffer moving whole descriptors but never as a sure last
  piece). A last piece with exactly a fetch's shape (or moving whole descriptors, where the
  next buffer always follows at once) that the next buffer follows at once runs into it.
- A transfer of more than ``max_control_bytes`` (default 64: four 16-byte descriptors) is frame
  **data**; a smaller read is a **descriptor fetch**, a smaller write a **status write-back**.
  With AD, a read holding the address of a write-back, or starting within 4 KiB of one, is a
  descriptor fetch whatever its size (receive rings are often prefetched many descriptors at a
  time). Without C/BE# (direction
  unknown) on a transmit bus a small transfer within ``descriptor_gap`` after the last access of
  a CSR routine (the doorbell) is a descriptor fetch, on a receive bus (no such transfers) one
  within ``descriptor_gap`` before frame data; any other is a status write-back. Once the send
  routine is recognised, the fetch is the first small transfer after a send's last access for
  which the NIC waited at most ``descriptor_gap`` of bus idle time (busy clocks in between only
  delayed its grant), even with an interrupt routine's accesses around it; where fetches and
  write-backs differ in shape (the bridge answers a read late, posts a write at once), one of
  the write-backs' shape is not taken for the fetch; and where several small transfers are in
  reach of a doorbell, one that started sooner than the NIC's quickest reaction to a doorbell
  (the 5th percentile of the start times after the doorbells with one small transfer in reach,
  less a clock) was asked for before the doorbell: a write-back, not the fetch.
- **Packet** = one data transfer; direction tx (NIC reads the frame) or rx (NIC writes it).
  Descriptor fetches go in ring order: a fetch of n descriptors (bytes / ``descriptor_bytes``)
  serves the next n packets (of the direction of the next data DMA) whose data follows it and
  that no earlier fetch served. Status write-backs go in ring order: each to
  the earliest packet whose data ended before it and that has none yet (with AD, first to the
  packet that fetched that very descriptor), since a transmit write-back may come after the
  frame left on the wire, past the next packet's DMA.
- **Send routine**: every send runs the same register accesses before the NIC's first DMA:
  the same registers with AD, otherwise the same shapes (data phases, DEVSEL# speed, waits: the
  NIC answers a register read late and takes a write at once). The routine is learnt from the
  first sends of the capture (the most common access sequence among them), and with it the
  CPU's pace: the time from one access's end to the next one's start, and step by step the bus
  idle time between them, in the sends that ran alone. It is looked for in every window of CSR
  accesses less than ``csr_gap`` of bus idle time apart (an access held up behind other
  transactions does not end a routine). An interrupt service routine may run just before the
  send or, on another CPU, alongside it access by access; of the ways to pick the send's
  accesses the one is taken where (1) the send goes no faster than the CPU's pace and stands
  idle no longer than when it ran alone (it may only wait for the bus), (2) the other accesses
  around it keep the CPU's pace too, (3) where both routines run they take turns (each CPU has
  one register access outstanding, the host bridge serves them in order, so they alternate),
  (4) the routine already running keeps the earlier of two interchangeable accesses, (5) it is
  the most compact. Each instance is a setup group; what is left keeps the time-only
  grouping (send_routines, _best_instance).
- A tx (or unknown-direction) packet's **setup group** is the last CSR group between the
  previous packet's data and this packet's first DMA; where send routines are recognised, the
  earliest unused one that ended before the packet's first DMA, in ring order (match_sends),
  so an interrupt service routine that ran into or alongside the next send stays an interrupt
  group. **CSR setup** = from the start of that
  group to the packet's first DMA (the seed papers' "CSR setup then DMA"); the group's own span
  is reported too. All other CSR groups are **interrupt groups** (the driver's work after an
  interrupt); a packet's **interrupt delay** runs from the end clock of its last DMA (status
  write-back, else data) to the start of the next interrupt group that starts at least
  ``irq_min_delay`` (at most 5 us: interrupt delivery, entry into the service routine and its
  first register access on the seed papers' PCs; less where this capture shows its host
  quicker, see host_interrupt_latency) later (a routine starting sooner was raised before
  that DMA), and **packets per
  interrupt** counts, per interrupt group, the packets whose next interrupt group it is.
- Packet **period** = from its anchor (setup group start, else first DMA) to the next packet's
  anchor; the occupancy of the period is the busy time inside it over its length.
- **Transmit gaps** (pauses): data DMA to the next packet's data DMA longer than
  ``pause_factor`` (3) x the median.
"""
from __future__ import annotations

import numpy as np

from pcitrace.analyse.classify import CSR, READ, UNKNOWN_DIR
from pcitrace.analyse.csr import match_sends, send_routines
from pcitrace.analyse.dma import DATA, DESCRIPTOR, STATUS
from pcitrace.analyse.dma import TRANSFER_KINDS  # noqa: F401  (still imported from here by the viewer)
from pcitrace.analyse.occupancy import BusyTime

PACKET_DTYPE = np.dtype([
    ("direction", np.int8),              # READ = tx, WRITE = rx, UNKNOWN_DIR
    ("anchor_ps", np.int64),             # setup group start, else first DMA
    ("data_start_ps", np.int64), ("data_end_ps", np.int64), ("data_bytes", np.int64),
    ("data_bursts", np.int64),
    ("first_dma_ps", np.int64), ("last_dma_end_ps", np.int64),
    ("setup_group", np.int64),           # index into groups or -1
    ("csr_setup_ps", np.float64),        # setup group start to the packet's first DMA
    ("csr_group_ps", np.float64),        # setup group: first access start to end of last busy clock
    ("csr_accesses", np.float64),
    ("descriptor_fetch_ps", np.float64), ("data_dma_ps", np.float64), ("status_writeback_ps", np.float64),
    ("csr_to_dma_ps", np.float64),       # end of the setup group's last busy clock to first DMA
    ("interrupt_group", np.int64), ("interrupt_delay_ps", np.float64),
    ("period_ps", np.float64), ("busy_ps", np.float64), ("occupancy", np.float64),
    ("data_dma_ideal_ps", np.float64),
    ("data_dma_efficiency", np.float64),  # data DMA at the bus limit / data DMA time
    ("ambiguous", np.bool_),              # its grouping or routine could not be told (checks.py)
])


def _assign_fetches(transfers: np.ndarray, desc: np.ndarray, ds: np.ndarray, pdir: np.ndarray,
                    descriptor_bytes: int) -> np.ndarray:
    """Packet of each descriptor fetch (-1 = none), in ring order.

    A fetch belongs to the ring of the next data DMA after it (transmit or receive; the
    direction of that packet). Within a ring a fetch of n descriptors (bytes /
    ``descriptor_bytes``) serves the next n packets of that direction whose data DMA starts
    after it and that no earlier fetch served; the fetch counts as the descriptor fetch of the
    first of them. Under a transmit backlog the NIC fetches descriptors as the driver posts
    them, long before it reads the frames, so "the next data transfer" would be the wrong packet.
    """
    owner = np.full(desc.size, -1, np.int64)
    by_dir = {d: np.flatnonzero(pdir == d) for d in np.unique(pdir)}
    served = {d: 0 for d in by_dir}     # position in by_dir[d] of the first unserved packet
    for k, i in enumerate(desc):
        t0 = transfers["start_ps"][i]
        nxt = int(np.searchsorted(ds, t0, side="right"))
        if nxt >= ds.size:
            continue
        d = pdir[nxt]
        mine = by_dir[d]
        first = max(served[d], int(np.searchsorted(mine, nxt)))
        if first >= mine.size:
            continue
        owner[k] = mine[first]
        served[d] = first + max(1, int(transfers["bytes"][i]) // max(descriptor_bytes, 1))
    return owner


def _assign_status(transfers: np.ndarray, status: np.ndarray, de: np.ndarray, desc_owner: dict,
                   have_ad: bool) -> np.ndarray:
    """Packet of each status write-back (-1 = none).

    NICs work through their descriptor rings in order, so write-backs come in packet order,
    whenever they come (a transmit write-back may follow the frame onto the wire, after the
    next packet's DMA): the k-th write-back goes to the earliest packet whose data DMA ended
    before it and that has none yet. With AD, a write-back to the very descriptor a packet
    fetched goes to that packet first.
    """
    owner = np.full(status.size, -1, np.int64)
    taken = np.zeros(de.size, bool)
    head = 0
    for k, i in enumerate(status):
        t0 = transfers["start_ps"][i]
        if have_ad:
            j = desc_owner.get(int(transfers["address"][i]), -1)
            if 0 <= j < de.size and not taken[j] and de[j] < t0:
                owner[k] = j
                taken[j] = True
                continue
        while head < de.size and taken[head]:
            head += 1
        if head < de.size and de[head] < t0:
            owner[k] = head
            taken[head] = True
    return owner


def _doorbell_fetches(transfers: np.ndarray, unk: np.ndarray, routines: np.ndarray, records: np.ndarray,
                      busy: BusyTime, period_ps: float, descriptor_gap_ps: float) -> np.ndarray:
    """Per small transfer of unknown direction (``unk``), whether it is a descriptor fetch, once
    the send routines are known: the first small transfer after a send's last access (the
    doorbell) whose NIC asked for the bus within descriptor_gap (the time the bus was busy in
    between only delayed its grant; an interrupt service routine may go on around it)."""
    ts = transfers["start_ps"][unk]
    doorbell = np.sort(routines["end_ps"][routines["setup"]] + period_ps)
    k = np.searchsorted(doorbell, ts, side="right") - 1
    since = doorbell[np.maximum(k, 0)]
    idle = ts - since - busy.between(since, ts)

    def first_after(allowed):
        sel = np.flatnonzero(allowed)
        ks = k[sel]
        first = np.r_[True, ks[1:] != ks[:-1]] if sel.size else np.zeros(0, bool)
        out = np.zeros(unk.size, bool)
        out[sel[first & (ks >= 0) & (idle[sel] <= descriptor_gap_ps)]] = True
        return out

    # The NIC reacts to the doorbell after a fixed latency (its REQ# a few
    # clocks later, then the grant): the quickest reaction seen in most sends
    # whose doorbell had one small transfer in reach. Where several are in
    # reach, one that started sooner than that was asked for before the
    # doorbell (a write-back), so it is not the fetch.
    soon = np.zeros(unk.size, bool)
    reach = (k >= 0) & (idle <= descriptor_gap_ps)
    kk = np.maximum(k, 0)
    n_reach = np.bincount(k[reach], minlength=doorbell.size)
    alone = reach & (n_reach[kk] == 1)
    if alone.sum() >= 8:
        react = ts - since
        quickest = np.quantile(react[alone], 0.05) - period_ps
        soon = reach & (n_reach[kk] > 1) & (react < quickest)
        # (a doorbell whose transfers in reach all came too soon keeps them)
        n_left = np.bincount(k[reach & ~soon], minlength=doorbell.size)
        soon &= n_left[kk] > 0
    fetch = first_after(~soon)
    # A fetch is a read the bridge answers from memory late, a write-back a
    # write it posts at once: where the two shapes differ (waits, data
    # phases), a transfer of the write-backs' shape is not the fetch, even
    # right after a doorbell.
    rec = records[np.searchsorted(records["start_ps"], ts)]
    shape = rec["target_waits"].astype(np.int64) * 4096 + rec["data_phases"]
    if fetch.any() and (~fetch).any():
        f_vals, f_n = np.unique(shape[fetch], return_counts=True)
        s_vals, s_n = np.unique(shape[~fetch], return_counts=True)
        f_shape, s_shape = f_vals[np.argmax(f_n)], s_vals[np.argmax(s_n)]
        if f_shape != s_shape:
            fetch = first_after((shape != s_shape) & ~soon)
    return fetch


def _unknown_direction_kinds(transfers: np.ndarray, groups: np.ndarray, busy: BusyTime, records: np.ndarray,
                             classes: np.ndarray, plain_groups: np.ndarray | None, ds: np.ndarray, *,
                             period_ps: float, have_ad: bool, csr_gap_ps: float,
                             descriptor_gap_ps: float) -> tuple[np.ndarray | None, bool]:
    """Direction unknown (no C/BE#): relabel the small transfers as descriptor fetches or status
    write-backs by the driver's doorbells. The NIC fetches a descriptor right after the
    doorbell (its last CSR write), even when it reads the frame much later (backlog).
    Returns (send routines if found, whether this bus sends at all)."""
    unk = np.flatnonzero((transfers["kind"] != DATA) & (transfers["direction"] == UNKNOWN_DIR))
    csr_idx = np.flatnonzero(classes == CSR)
    if not (unk.size and csr_idx.size):
        return None, True
    ts = transfers["start_ps"][unk]
    csr_end = records["end_ps"][csr_idx]
    k = np.searchsorted(csr_end, ts, side="left") - 1
    after_csr = (k >= 0) & (ts - csr_end[np.maximum(k, 0)] - period_ps <= descriptor_gap_ps)
    # ... after the routine's last access, not amid it (a write-back may land there).
    csr_start = records["start_ps"][csr_idx]
    nxt = np.searchsorted(csr_start, ts, side="right")
    quiet = (nxt >= csr_idx.size) | (csr_start[np.minimum(nxt, csr_idx.size - 1)] - ts > descriptor_gap_ps)
    after_csr &= quiet
    # ... and only the first transfer after that access (unk is in time order).
    first_after = np.r_[True, k[1:] != k[:-1]]
    after_csr &= first_after
    # A transmit bus shows a fetch after most doorbells: there only that rule holds (a
    # write-back may happen to precede frame data); a receive bus has no doorbells and
    # keeps the "just before frame data" rule.
    if after_csr.sum() < 0.25 * ds.size:
        # No doorbells followed by a fetch: a receive bus. Its CSR groups are the
        # driver's interrupt work, never a send's setup.
        return None, False
    transfers["kind"][unk] = np.where(after_csr, DESCRIPTOR, STATUS)
    if plain_groups is None or not groups.size:
        return None, True
    # Once the send routine is known by the shape of its accesses, the fetch is found from
    # the doorbells (_doorbell_fetches).
    routines = send_routines(groups, records, classes, np.ones(ds.size, bool), ds, search_groups=plain_groups,
                             busy=busy, prompt_gap_ps=csr_gap_ps, have_ad=have_ad)
    if routines is not None and routines["setup"].any():
        fetch = _doorbell_fetches(transfers, unk, routines, records, busy, period_ps, descriptor_gap_ps)
        transfers["kind"][unk] = np.where(fetch, DESCRIPTOR, STATUS)
    return routines, True


def packets(transfers: np.ndarray, groups: np.ndarray, busy: BusyTime, *, period_ps: float,
            bus_width: int, have_ad: bool = False, records: np.ndarray | None = None,
            classes: np.ndarray | None = None, plain_groups: np.ndarray | None = None,
            csr_gap_ps: float = 2e6, descriptor_bytes: int = 16,
            descriptor_gap_ps: float = 0.0, irq_min_delay_ps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(packets, groups): one row per data transfer; assigns transfers['packet'] and the groups'
    'setup' / 'packets' (groups may be split, see send_routines, so they are returned)."""
    data_idx = np.flatnonzero(transfers["kind"] == DATA)
    p = np.zeros(data_idx.size, PACKET_DTYPE)
    if data_idx.size == 0:
        return p, groups
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
    p["data_dma_efficiency"] = p["data_dma_ideal_ps"] / p["data_dma_ps"]

    sends_possible = True
    routines = None             # send routines found before classifying (no C/BE#)
    if records is not None and classes is not None:
        routines, sends_possible = _unknown_direction_kinds(
            transfers, groups, busy, records, classes, plain_groups, ds, period_ps=period_ps, have_ad=have_ad,
            csr_gap_ps=csr_gap_ps, descriptor_gap_ps=descriptor_gap_ps)

    # Descriptor fetches and write-backs both go in ring order.
    desc = np.flatnonzero(transfers["kind"] == DESCRIPTOR)
    d_owner = _assign_fetches(transfers, desc, ds, p["direction"], descriptor_bytes)
    transfers["packet"][desc] = d_owner
    desc_owner = {}
    for i, j in zip(desc, d_owner):
        if j >= 0:
            a = int(transfers["address"][i])
            for off in range(0, max(int(transfers["bytes"][i]), 1), 16):
                desc_owner.setdefault(a + off, int(j))
    status = np.flatnonzero(transfers["kind"] == STATUS)
    s_owner = _assign_status(transfers, status, de, desc_owner, have_ad)
    transfers["packet"][status] = s_owner

    def span_of(idx, owner):
        sel = owner >= 0
        lo = np.full(P, np.iinfo(np.int64).max)
        hi = np.full(P, np.iinfo(np.int64).min)
        np.minimum.at(lo, owner[sel], transfers["start_ps"][idx[sel]])
        np.maximum.at(hi, owner[sel], transfers["end_ps"][idx[sel]])
        has = hi >= lo
        span = np.where(has, hi - lo + period_ps, np.nan)
        return lo, hi, has, span

    dlo, _, dhas, p["descriptor_fetch_ps"] = span_of(desc, d_owner)
    _, shi, shas, p["status_writeback_ps"] = span_of(status, s_owner)
    first = np.where(dhas, np.minimum(dlo, ds), ds)
    last = np.where(shas, np.maximum(shi, de), de)
    p["first_dma_ps"] = first
    p["last_dma_end_ps"] = last

    for f in ("setup_group", "interrupt_group"):
        p[f] = -1
    for f in ("csr_setup_ps", "csr_group_ps", "csr_accesses", "csr_to_dma_ps", "interrupt_delay_ps"):
        p[f] = np.nan
    prev_data_end = np.r_[np.iinfo(np.int64).min, de[:-1]]
    can_send = (p["direction"] == READ) | ((p["direction"] == UNKNOWN_DIR) & sends_possible)

    def setup_groups(groups):
        # Setup group: the last CSR group between the previous packet's data and this first DMA.
        g = np.searchsorted(groups["end_ps"], first, side="left") - 1
        ok = (g >= 0) & can_send
        ok &= groups["start_ps"][np.maximum(g, 0)] > prev_data_end
        return g, ok

    if groups.size:
        g, ok = setup_groups(groups)
        if routines is None and records is not None and plain_groups is not None:
            routines = send_routines(groups, records, classes, can_send, first, search_groups=plain_groups,
                                     busy=busy, prompt_gap_ps=csr_gap_ps,
                                     have_ad=have_ad)
        if routines is not None:
            groups = routines
            g = match_sends(routines, first, can_send)
            ok = (g >= 0) & can_send
        gi = g[ok]
        p["setup_group"][ok] = gi
        groups["setup"][gi] = True
        p["csr_setup_ps"][ok] = first[ok] - groups["start_ps"][gi]
        p["csr_group_ps"][ok] = groups["span_ps"][gi]
        p["csr_accesses"][ok] = groups["accesses"][gi]
        p["csr_to_dma_ps"][ok] = first[ok] - (groups["end_ps"][gi] + period_ps)

        inter = np.flatnonzero(~groups["setup"])
        if inter.size:
            istart = groups["start_ps"][inter]
            # An interrupt service routine starting sooner than ``irq_min_delay`` after a
            # packet's last DMA was raised before it (interrupt delivery and entry take
            # microseconds): that packet waits for the next one.
            min_delay = min_interrupt_delay(istart, last, irq_min_delay_ps, period_ps)
            k = np.searchsorted(istart, last + min_delay, side="right")
            has = k < inter.size
            p["interrupt_group"][has] = inter[k[has]]
            p["interrupt_delay_ps"][has] = istart[k[has]] - last[has]
            groups["packets"][inter] = np.bincount(k[has], minlength=inter.size)[: inter.size]

    anchor = first.copy()
    has_setup = p["setup_group"] >= 0
    if groups.size:
        anchor[has_setup] = groups["start_ps"][p["setup_group"][has_setup]]
    p["anchor_ps"] = anchor
    for f in ("period_ps", "busy_ps", "occupancy"):
        p[f] = np.nan
    if P > 1:
        period = np.diff(anchor).astype(np.float64)
        p["period_ps"][:-1] = period
        busy_ps = busy.between(anchor[:-1], anchor[1:])
        p["busy_ps"][:-1] = busy_ps
        with np.errstate(divide="ignore", invalid="ignore"):
            p["occupancy"][:-1] = np.where(period > 0, busy_ps / period, np.nan)
    return p, groups


LATENCY_WINDOW_PS = 500_000       # the host's spread of interrupt latencies
LATENCY_SHARE = 0.5               # of the packets, at least, in the densest window
LATENCY_PRIOR_PS = 5_000_000      # PCs of the seed papers: ~5-6 us from interrupt to routine
PLAUSIBLE_LATENCY_PS = (1_000_000, 10_000_000)
LATENCY_LAGS = 3


def _crowd(d: np.ndarray) -> float | None:
    """Start of the half microsecond holding at least half of ``d`` (and 4), else None."""
    d = np.sort(d)
    if d.size < 4:
        return None
    inside = np.searchsorted(d, d + LATENCY_WINDOW_PS, side="right") - np.arange(d.size)
    j = int(np.argmax(inside))
    return float(d[j]) if inside[j] >= max(4, LATENCY_SHARE * d.size) else None


def latency_candidates(istart: np.ndarray, last: np.ndarray) -> list[float]:
    """The host's possible times from a packet's last DMA to the interrupt routine it raised:
    the host takes about the same time each time, so where each packet raises its own
    interrupt the times from the packets' last DMAs to the next routine crowd at it (to the
    routine after next, where the packets come faster than the host answers). Periodic traffic
    crowds them at the next routines too, so each lag that crowds is a candidate; coalescence or
    a queue spreads them out (no candidate)."""
    istart = np.sort(istart)
    k = np.searchsorted(istart, last, side="right")
    out = []
    for lag in range(LATENCY_LAGS):
        has = k + lag < istart.size
        c = _crowd(istart[k[has] + lag] - last[has])
        if c is not None:
            out.append(c)
    return out


def host_interrupt_latency(istart: np.ndarray, last: np.ndarray) -> tuple[float | None, bool]:
    """(latency, ambiguous): of the candidates (latency_candidates) the one nearest the seed
    papers' PCs' ~5 us; ambiguous when more than one is a plausible host latency (1 - 10 us):
    packets faster than the host answers leave the lag a guess without INTA#."""
    cands = latency_candidates(istart, last)
    if not cands:
        return None, False
    plausible = [c for c in cands if PLAUSIBLE_LATENCY_PS[0] <= c <= PLAUSIBLE_LATENCY_PS[1]]
    best = min(cands, key=lambda c: abs(c - LATENCY_PRIOR_PS))
    return best, len(plausible) > 1


def min_interrupt_delay(istart: np.ndarray, last: np.ndarray, limit_ps: float, period_ps: float) -> float:
    """The shortest time from a DMA to a routine it raised: the host's latency learnt from the
    capture (host_interrupt_latency) less a clock, at most ``limit_ps`` (the option
    irq_min_delay_us), which is kept where the latency cannot be learnt."""
    latency, _ = host_interrupt_latency(istart, last)
    return limit_ps if latency is None else min(limit_ps, latency - period_ps)


def pause_gaps(packets_: np.ndarray) -> np.ndarray:
    """Time from each packet's data DMA to the next packet's (ps; NaN for the last packet).

    Transmit gaps show here and not in the packet periods: the driver goes on posting frames
    (its send routine keeps its rhythm) while the NIC, stopped by a pause frame, reads none."""
    gaps = np.full(len(packets_), np.nan)
    if len(packets_) > 1:
        gaps[:-1] = np.diff(packets_["data_start_ps"]).astype(np.float64)
    return gaps


def pauses(packets_: np.ndarray, factor: float) -> np.ndarray:
    """Indices of packets followed by a pause: a data-to-data gap longer than ``factor`` x the median."""
    gaps = pause_gaps(packets_)
    finite = np.isfinite(gaps)
    if finite.sum() < 3:
        return np.zeros(0, np.int64)
    med = np.median(gaps[finite])
    return np.flatnonzero(finite & (gaps > factor * med))

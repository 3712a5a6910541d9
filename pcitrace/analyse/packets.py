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
  ``irq_min_delay`` (5 us: interrupt delivery, entry into the service routine and its first
  register access on the seed papers' PCs) later (a routine starting sooner was raised before
  that DMA), and **packets per
  interrupt** counts, per interrupt group, the packets whose next interrupt group it is.
- Packet **period** = from its anchor (setup group start, else first DMA) to the next packet's
  anchor; the occupancy of the period is the busy time inside it over its length.
- **Transmit gaps** (pauses): data DMA to the next packet's data DMA longer than
  ``pause_factor`` (3) x the median.
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
    ("address", np.uint64),
])

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
])


def csr_groups(records: np.ndarray, classes: np.ndarray, gap_ps: float, period_ps: float,
               breaks: np.ndarray | None = None, split_factor: float = 3.0,
               busy: BusyTime | None = None) -> np.ndarray:
    """CSR groups; ``breaks`` marks records that end a group when they fall inside one (frame
    data DMA; default every NIC DMA). Small DMA (a late status write-back) may land in the
    middle of the driver's register accesses without splitting them. With ``busy`` only the
    clocks the bus was idle count towards the gap between two accesses (an access held up
    behind other transactions does not end a routine): the windows send routines are searched in."""
    idx = np.flatnonzero(classes == CSR)
    if idx.size == 0:
        return np.zeros(0, GROUP_DTYPE)
    start = records["start_ps"][idx]
    end = records["end_ps"][idx]
    dma_before = np.cumsum(classes == DMA if breaks is None else breaks)
    gaps = start[1:] - end[:-1]
    if busy is not None and gaps.size:
        gaps = gaps - busy.between(end[:-1], start[1:])
    retried = records["termination"][idx[:-1]] == "retry"
    brk = np.ones(idx.size, bool)
    brk[1:] = (gaps >= gap_ps) | (dma_before[idx[1:]] != dma_before[idx[:-1]])
    if split_factor > 0:
        # The CPU paces one routine's register accesses evenly; a pause several times its usual
        # spacing inside a csr_gap window starts another routine (e.g. the interrupt service
        # routine just before the next send). A retried access is repeated, not a new one.
        inner = ~brk[1:] & ~retried
        if inner.sum() >= 2:
            usual = float(np.median(gaps[inner]))
            brk[1:] |= inner & (gaps > split_factor * max(usual, period_ps))
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


SPLIT_GAP_PS = 1_000_000
RING_NEAR_BYTES = 4096
_TARGET_ENDED = ("retry", "disconnect_with_data", "disconnect_without_data", "split_response")


def _idle_between(a_end: np.ndarray, b_start: np.ndarray, period_ps: float, busy: BusyTime | None) -> np.ndarray:
    """Bus idle time from the end clock of one transaction to the start of another (ps)."""
    idle = (b_start - a_end - period_ps).astype(np.float64)
    if busy is not None and idle.size:
        idle -= busy.between(a_end + period_ps, b_start)
    return idle


def _control_shapes(rec: np.ndarray, d: np.ndarray, start: np.ndarray, end: np.ndarray, *, gap_ps: float,
                    period_ps: float, max_control_bytes: int, busy: BusyTime | None,
                    descriptor_bytes: int = 16) -> tuple[set, np.ndarray]:
    """(shapes, resumed): the shapes (direction, data phases, target waits, DEVSEL# speed) of
    the NIC's own small transfers (descriptor fetches, status write-backs) without AD, and per
    burst whether the NIC's next burst in its direction came within ``gap_ps`` of bus idle time.

    After the target cuts a burst short the NIC asks for the bus again at once for the rest of
    the buffer. So a small burst the master ended itself is a transfer of its own (a fetch or
    write-back) when it came more than ``gap_ps`` after every cut burst, and one that came right
    after a cut burst is the buffer's last piece for sure when no burst follows it at once (the
    buffer would go on). A shape seen in the first case is a control shape; so is one seen amid
    an open buffer (no large burst the master ended since its last cut one) with a burst
    following at once, never as a sure last piece, that moves whole descriptors
    (``descriptor_bytes``): a write-back may always land amid the next frame's bursts, but so
    may a frame's last piece be followed at once by the next frame under a transmit backlog."""
    m = rec.size
    cut = np.isin(rec["termination"], _TARGET_ENDED)
    own = (rec["bytes"] <= max_control_bytes) & ~cut & (rec["command"] != "split_completion")
    resumed = np.zeros(m, bool)
    after_cut = np.zeros(m, bool)      # a cut buffer is still open, its last cut within gap_ps
    right_after = np.zeros(m, bool)    # ... and that cut burst is the one just before
    for dv in np.unique(d).tolist():
        sel = np.flatnonzero(d == dv)
        if sel.size > 1:
            resumed[sel[:-1]] = _idle_between(end[sel[:-1]], start[sel[1:]], period_ps, busy) <= gap_ps
        pos = np.where(cut[sel], np.arange(sel.size), -1)
        last_cut = np.r_[-1, np.maximum.accumulate(pos)[:-1]] if sel.size else pos
        # ... unless a large burst the master ended (a buffer's end) came since
        ended = np.where(~cut[sel] & ~own[sel] & (rec["command"][sel] != "split_completion"),
                         np.arange(sel.size), -1)
        last_end = np.r_[-1, np.maximum.accumulate(ended)[:-1]] if sel.size else ended
        has = (last_cut >= 0) & (last_cut > last_end)
        after_cut[sel[has]] = _idle_between(end[sel[last_cut[has]]], start[sel[has]], period_ps, busy) <= gap_ps
        right_after[sel] = after_cut[sel] & (last_cut == np.arange(sel.size) - 1)
    if not own.any():
        return set(), resumed
    dl, ph, tw, dv = d.tolist(), rec["data_phases"].tolist(), rec["target_waits"].tolist(), rec["devsel"].tolist()

    def shapes(mask):
        return {(dl[i], ph[i], tw[i], dv[i]) for i in np.flatnonzero(own & mask).tolist()}

    alone = shapes(~after_cut)
    whole = rec["bytes"] % max(descriptor_bytes, 1) == 0
    return alone | (shapes(after_cut & resumed & whole) - shapes(right_after & ~resumed)), resumed


def _group_bursts(rec: np.ndarray, d: np.ndarray, start: np.ndarray, end: np.ndarray, *, have_ad: bool,
                  gap_ps: float, period_ps: float, max_control_bytes: int,
                  busy: BusyTime | None = None, descriptor_bytes: int = 16) -> np.ndarray:
    """Transfer number per burst (numbered in order of first burst).

    NICs interleave: a descriptor fetch for the next frame may fall between two bursts of this
    frame's data, so a burst continues any open transfer, not just the previous burst.
    With AD: a burst continues the transfer whose next address it starts at (a PCI-X split
    request advances by its byte count) if the target cut that transfer short or the master went
    on within ``gap_ps`` (a master splitting a buffer itself); a split completion continues the
    request with its requester and tag (without AD: the latest read).
    Without AD: a transfer the target cut short (retry, disconnect, split response) stays open
    and the next burst in its direction continues it. A small burst the master ended itself is
    the rest of the buffer (the transfer's last burst) when no burst follows it at once, or
    when it does not have the shape of one of the NIC's control transfers (_control_shapes);
    otherwise it is an interleaved descriptor fetch / write-back and stands alone (so does
    every small burst followed at once when no control shape is known).
    """
    m = rec.size
    tid = np.empty(m, np.int64)
    cmd = rec["command"].tolist()
    term = rec["termination"].tolist()
    addr = rec["address"].tolist()
    nbytes = rec["bytes"].tolist()
    bcount = rec["byte_count"].tolist()
    dirs = d.tolist()
    starts, ends = start.tolist(), end.tolist()
    n = 0
    expect: dict = {}          # (direction, next address) -> transfer
    open_by_dir: dict = {}     # direction -> transfer left open by the target (no AD)
    last_read = -1
    pending_split: dict = {}   # (requester, tag) -> transfer of the split request
    req = rec["requester"].tolist()
    tag = rec["tag"].tolist()
    last_end: dict = {}        # transfer -> end time of its last burst
    target_ended: dict = {}    # transfer -> its last burst was cut short by the target
    control: set = set()
    if not have_ad:
        control, resumed = _control_shapes(rec, d, start, end, gap_ps=gap_ps, period_ps=period_ps,
                                           max_control_bytes=max_control_bytes, busy=busy,
                                           descriptor_bytes=descriptor_bytes)
        phases, twaits, devsel = rec["data_phases"].tolist(), rec["target_waits"].tolist(), rec["devsel"].tolist()
    for i in range(m):
        t = -1
        if cmd[i] == "split_completion":
            # The completion names the request it answers by requester and tag (PCI-X).
            t = pending_split.get((req[i], tag[i]), last_read) if tag[i] >= 0 else last_read
        elif have_ad:
            t = expect.pop((dirs[i], addr[i]), -1)
            # Descriptor rings are contiguous too: a master-ended transfer is only continued
            # straight away (a master splitting a buffer at cache lines), not microseconds later.
            if t >= 0:
                idle = starts[i] - last_end[t] - period_ps
                ended = target_ended[t]
                # A split request is the normal PCI-X read: the next request follows its
                # completions within about a microsecond when the NIC goes on with the buffer.
                if ended == "split_response" and idle > max(gap_ps, SPLIT_GAP_PS):
                    t = -1
                elif not ended and idle > gap_ps:
                    t = -1
        else:
            o = open_by_dir.get(dirs[i], -1)
            small_own = nbytes[i] <= max_control_bytes and term[i] not in _TARGET_ENDED
            if small_own and o >= 0 and (not resumed[i] or (control and (dirs[i], phases[i], twaits[i], devsel[i]) not in control)):
                # the rest of a buffer the target cut: nothing goes on with it at once, or it
                # does not have the shape of the NIC's own small transfers
                small_own = False
            if o >= 0 and not small_own:
                t = o
        if t < 0:
            t = n
            n += 1
        tid[i] = t
        last_end[t] = ends[i]
        if cmd[i] != "split_completion":
            # A completion answers a split request; whether the read goes on is the request's.
            target_ended[t] = term[i] if term[i] in _TARGET_ENDED else ""
        if cmd[i] != "split_completion":
            if dirs[i] == READ:
                last_read = t
            if term[i] == "split_response" and tag[i] >= 0:
                pending_split[(req[i], tag[i])] = t
            if have_ad:
                adv = bcount[i] if term[i] == "split_response" and bcount[i] > 0 else nbytes[i]
                expect[(dirs[i], addr[i] + adv)] = t
            elif term[i] in _TARGET_ENDED:
                open_by_dir[dirs[i]] = t
            elif open_by_dir.get(dirs[i], -1) == t or not (nbytes[i] <= max_control_bytes):
                open_by_dir.pop(dirs[i], None)
        if have_ad and len(expect) > 64:
            # Only recent transfers can continue; keep the table small.
            for key in list(expect)[: len(expect) - 64]:
                del expect[key]
    return tid


def dma_transfers(records: np.ndarray, classes: np.ndarray, bursts: np.ndarray, *, have_ad: bool,
                  gap_ps: float, period_ps: float, max_control_bytes: int,
                  descriptor_gap_ps: float, busy: BusyTime | None = None,
                  descriptor_bytes: int = 16) -> np.ndarray:
    """Group bursts into transfers (fills bursts['transfer']) and label each transfer's kind
    (``busy``: the bus's busy time, for the idle time between bursts without AD;
    ``descriptor_bytes``: what a fetch or write-back moves a whole number of)."""
    m = bursts.size
    if m == 0:
        return np.zeros(0, TRANSFER_DTYPE)
    rec = records[bursts["record"]]
    d = bursts["direction"]
    tid = _group_bursts(rec, d, bursts["start_ps"], bursts["end_ps"], have_ad=have_ad, gap_ps=gap_ps,
                        period_ps=period_ps, max_control_bytes=max_control_bytes, busy=busy,
                        descriptor_bytes=descriptor_bytes)
    bursts["transfer"] = tid
    # Transfers are numbered by their first burst, so heads are where a new number first appears.
    first_seen = np.r_[True, tid[1:] > np.maximum.accumulate(tid)[:-1]]
    heads = np.flatnonzero(first_seen)
    n = int(tid.max()) + 1
    t = np.zeros(n, TRANSFER_DTYPE)
    t["start_ps"] = bursts["start_ps"][heads]
    ends = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(ends, tid, bursts["end_ps"])
    t["end_ps"] = ends
    t["span_ps"] = t["end_ps"] - t["start_ps"] + period_ps
    t["bytes"] = np.bincount(tid, weights=bursts["bytes"], minlength=n).astype(np.int64)
    t["bursts"] = np.bincount(tid, minlength=n)
    t["direction"] = d[heads]
    t["address"] = rec["address"][heads]
    t["packet"] = -1
    data = t["bytes"] > max_control_bytes
    kind = np.where(data, DATA, np.where(t["direction"] == WRITE, STATUS, DESCRIPTOR))
    # Direction unknown (no C/BE#): a small transfer right before frame data is its descriptor
    # fetch, any other small transfer a status write-back.
    unknown = ~data & (t["direction"] == UNKNOWN_DIR)
    if unknown.any():
        nxt_data = np.r_[data[1:], False]
        nxt_gap = np.r_[t["start_ps"][1:] - t["end_ps"][:-1] - period_ps, np.inf]
        kind[unknown] = np.where(nxt_data[unknown] & (nxt_gap[unknown] <= descriptor_gap_ps),
                                 DESCRIPTOR, STATUS)
    if have_ad:
        # A descriptor ring is read by fetches and written by write-backs at the same addresses:
        # a read holding the address of a write-back is a (multi-descriptor) fetch, whatever its size.
        wb = np.sort(t["address"][kind == STATUS])
        reads = np.flatnonzero((kind == DATA) & (t["direction"] == READ))
        if wb.size and reads.size:
            lo = t["address"][reads]
            hi = lo + t["bytes"][reads].astype(np.uint64)
            hit = np.searchsorted(wb, hi, side="left") > np.searchsorted(wb, lo, side="left")
            # ... or one starting within a page of a write-back (the ring's next descriptors,
            # prefetched before the capture shows them written back).
            j = np.searchsorted(wb, lo)
            below = np.where(j > 0, lo - wb[np.maximum(j - 1, 0)], np.uint64(1 << 63))
            above = np.where(j < wb.size, wb[np.minimum(j, wb.size - 1)] - lo, np.uint64(1 << 63))
            hit |= (np.minimum(below, above) <= np.uint64(RING_NEAR_BYTES))
            kind[reads[hit]] = DESCRIPTOR
    t["kind"] = kind
    return t


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


def _access_keys(records: np.ndarray, idx: np.ndarray, have_ad: bool = True) -> list[tuple]:
    """What tells one register access from another: command and address; without AD the
    access's shape (data phases, DEVSEL# speed, wait states: a NIC answers a register read
    later than it takes a write)."""
    keys = zip(records["command"][idx].tolist(), records["address"][idx].tolist())
    if have_ad:
        return list(keys)
    shape = zip(records["data_phases"][idx].tolist(), records["devsel"][idx].tolist(),
                records["target_waits"][idx].tolist(), records["initiator_waits"][idx].tolist())
    return [k + s for k, s in zip(keys, shape)]


def _suffix_match(keys: list, sig: list) -> int:
    """Index where ``sig`` starts when matched backwards as a subsequence ending at the last
    access of ``keys`` (so the routine's last access is the sequence's last), or -1."""
    if not sig:
        return len(keys)
    if not keys or keys[-1] != sig[-1]:
        return -1
    j = len(sig) - 1
    for i in range(len(keys) - 1, -1, -1):
        if keys[i] == sig[j]:
            j -= 1
            if j < 0:
                return i
    return -1


def _learn_signature(seqs: list[list[tuple]], first: int = 8, share: float = 0.4) -> list[tuple]:
    """The driver's send routine, learnt from the first ``first`` sends of the capture.

    Before the first interrupt the driver has nothing else to do, so the first sends show the
    routine alone; later ones may have an interrupt service routine in front of or interleaved
    with it. The most common sequence (seen twice at least, found in the first) is taken if at
    least ``share`` of the sequences contain it as a subsequence. Otherwise the routine's last access is the most common last access; it then grows one access
    to the front at a time: the access most often found right in front of the part matched so
    far, as long as the extended routine still matches (as a subsequence ending with the
    sequence's last access) the first send and at least ``share`` of the sequences.
    """
    seqs = [s for s in seqs if s][:first]
    need = max(2.0, share * len(seqs))
    # Sends that ran alone show the routine exactly: the most common sequence (seen twice at
    # least, found in the first send; of equally common ones the shortest), if enough others
    # contain it, is the routine (when interrupt service routines ran into most of the first
    # sends, votes would pick up their accesses).
    seen: dict = {}
    for keys in seqs:
        seen[tuple(keys)] = seen.get(tuple(keys), 0) + 1
    def contains(keys, sub):
        it = iter(keys)
        return all(any(k == x for k in it) for x in sub)

    twice = sorted((-n, len(k), k) for k, n in seen.items() if n >= 2 and contains(seqs[0], k))
    for _, _, k in twice:
        # (an interrupt routine's access may come after the send's last one, before the DMA)
        if sum(contains(keys, k) for keys in seqs) >= need:
            return list(k)
    sig: list = []
    while True:
        votes: dict = {}
        for keys in seqs:
            pos = _suffix_match(keys, sig)
            if pos > 0:
                votes[keys[pos - 1]] = votes.get(keys[pos - 1], 0) + 1
        if not votes:
            return sig
        best = max(votes.items(), key=lambda kv: kv[1])[0]
        n = sum(_suffix_match(keys, [best] + sig) >= 0 for keys in seqs)
        if n < need or _suffix_match(seqs[0], [best] + sig) < 0:
            return sig
        sig = [best] + sig


MAX_EMBEDDINGS = 4096
MAX_WINDOW = 32              # accesses searched for send routines at once


def _best_instance(idx: np.ndarray, free: list[int], keys: list, sig: list, starts: np.ndarray,
                   ends: np.ndarray, min_pace: float, max_idle: float = 2e6,
                   busy_before: tuple[np.ndarray, np.ndarray] | None = None,
                   step_idle: list[float] | None = None) -> list[int] | None:
    """Positions (into ``idx``) of the send routine's accesses among ``free``, or None.

    Every way to pick the routine's accesses in order (a subsequence of ``free`` with the
    signature's keys) is a candidate, unless two of its accesses follow closer than the CPU's
    pace (``min_pace``, ps from end to next start) or further apart than ``max_idle`` ps of bus
    idle time (``busy_before``: per record, busy ps before its start and before its end;
    ``step_idle[j]``: the limit between the routine's
    j-th and next access, if known). Of the candidates the one is taken that
    1. leaves the other accesses around it (the interrupt service routine) at the CPU's pace too;
    2. lets the two routines take turns where they overlap: each CPU has one register access
       outstanding at a time and the host bridge serves them in order, so while both run on a
       busy bus their accesses alternate;
    3. leaves the earlier of two interchangeable accesses to the routine already running (it
       was waiting for the bus before the other started);
    4. is the most compact (a routine runs at the CPU's pace), then the one ending last.
    """
    L = len(sig)
    if len(free) < L:
        return None
    # (send_routines passes lists: a window is a handful of accesses, and picking them out of
    # Python lists costs less than numpy indexing)
    rl = [idx[p] for p in free]
    fkeys = [keys[r] for r in rl]
    fs = [starts[r] for r in rl]
    fe = [ends[r] for r in rl]
    if busy_before is not None:
        bs = [busy_before[0][r] for r in rl]
        be = [busy_before[1][r] for r in rl]
    else:
        bs = be = [0.0] * len(free)
    cands: list[list[int]] = []

    def idle(a: int, b: int) -> float:
        return fs[b] - fe[a] - (bs[b] - be[a])

    limits = [max_idle] * L if step_idle is None else step_idle
    # sig[j] cannot sit before lowest[j]: sig[:j] must fit in front of it
    lowest = []
    q = 0
    for key in sig:
        while q < len(fkeys) and fkeys[q] != key:
            q += 1
        if q == len(fkeys):
            return None
        lowest.append(q)
        q += 1
    picked: list[int] = []      # positions in free, from the last access backwards

    def extend(j: int, hi: int):
        # place sig[j] before position hi
        if len(cands) >= MAX_EMBEDDINGS:
            return
        key = sig[j]
        if picked:
            nxt = picked[-1]
            sn, bn, lim = fs[nxt], bs[nxt], limits[j]
            for q in range(hi - 1, lowest[j] - 1, -1):
                if sn - fe[q] - (bn - be[q]) > lim:      # idle(q, nxt)
                    return            # earlier accesses are further still
                if sn - fe[q] < min_pace or fkeys[q] != key:
                    continue
                if j == 0:
                    cands.append([q] + picked[::-1])
                else:
                    picked.append(q)
                    extend(j - 1, q)
                    picked.pop()
        else:
            for q in range(hi - 1, lowest[j] - 1, -1):
                if fkeys[q] != key:
                    continue
                if j == 0:
                    cands.append([q])
                else:
                    picked.append(q)
                    extend(j - 1, q)
                    picked.pop()

    extend(L - 1, len(free))
    if not cands:
        return None
    if len(cands) == 1:
        # the common case (a send alone, or beside an interrupt routine it cannot be mixed
        # with): nothing to choose between
        return [free[q] for q in cands[0]]
    n = len(free)
    # the other routine is still running if its next access comes at the CPU's pace
    running = max(step_idle) if step_idle else max_idle
    best, best_score = None, None
    for c in cands:
        mine = set(c)
        lo_t, hi_t = fs[c[0]], fs[c[-1]]
        # the other accesses from the one before the candidate's first to the one after its last
        rest = [q for q in range(n) if q not in mine and lo_t <= fs[q] <= hi_t]
        before = [q for q in range(c[0] - 1, -1, -1) if q not in mine][:1]
        after = [q for q in range(c[-1] + 1, n) if q not in mine][:1]
        near = before + rest + after
        slow = sum(1 for a, b in zip(near[:-1], near[1:]) if fs[b] - fe[a] < min_pace)
        turns = 0
        if rest:
            # Where both run: from the first other access inside the span (or the candidate's
            # first, if the other routine was already running: its access before came at the
            # CPU's pace) to the last (or the candidate's last, if the other routine goes on).
            lo_q, hi_q = rest[0], rest[-1]
            if before and idle(before[0], rest[0]) <= running:
                lo_q = c[0]
            if after and idle(rest[-1], after[0]) <= running:
                hi_q = c[-1]
            seq = [q in mine for q in range(lo_q, hi_q + 1)]
            turns = sum(1 for a, b in zip(seq[:-1], seq[1:]) if a == b)
        # A routine already running was waiting for the bus before a new one started: of two
        # accesses nothing else tells apart, it had the earlier one (the newcomer starts late).
        newcomer = max(lo_t, fs[rest[0]]) if rest else lo_t
        score = (slow, turns, -newcomer, hi_t - lo_t, -hi_t)
        if best_score is None or score < best_score:
            best, best_score = c, score
    return [free[q] for q in best]


def match_sends(routines: np.ndarray, first_dma: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Setup group (index into ``routines``) per packet, -1 none.

    In ring order (the driver posts descriptors in order): each ``eligible`` packet takes the
    earliest unused send routine that ended before its first DMA; under a transmit backlog the
    send routine runs long before the NIC gets to the frame."""
    inst = np.flatnonzero(routines["setup"])
    setup_of = np.full(first_dma.size, -1, np.int64)
    inst_order = inst[np.argsort(routines["end_ps"][inst], kind="stable")]
    pos = 0
    for i in np.flatnonzero(eligible):
        if pos < inst_order.size and routines["end_ps"][inst_order[pos]] < first_dma[i]:
            setup_of[i] = inst_order[pos]
            pos += 1
    return setup_of


def send_routines(groups: np.ndarray, records: np.ndarray, classes: np.ndarray, ok: np.ndarray,
                  first_dma: np.ndarray, *, search_groups: np.ndarray | None = None,
                  busy: BusyTime | None = None, prompt_gap_ps: float = 2e6, have_ad: bool = True) -> np.ndarray | None:
    """Find the driver's send routine by its register accesses and give each send its own.

    Every send runs the same register accesses before the NIC's first DMA: the same command
    and address, without AD the same shape (see _access_keys). The signature of that routine is
    learnt (_learn_signature) from the accesses leading up to the first DMA of the packets
    ``ok``, preferring those whose last access came within ``prompt_gap_ps`` of the DMA, and
    only since the previous packet's first DMA; so is the CPU's pace in the sends that ran alone
    (the shortest end-to-start time between accesses, and per step the longest bus idle time,
    with ``busy``). Every search group is searched for it, repeatedly (an interrupt service
    routine may run just before, or interleaved on another CPU; two sends may share a group):
    of the ways to pick the routine's accesses, _best_instance takes the one that keeps both
    routines at the CPU's pace and lets them take turns. Each instance becomes a setup group of
    its own; the remaining accesses are grouped again by time (split where one is
    ``prompt_gap_ps``, the CSR gap, or more after the previous). ``search_groups``: the groups to search for instances, if not
    ``groups``: groups by bus idle time (csr_groups with ``busy``), as under a transmit backlog
    the send routine's accesses interleave with data DMA and wait behind long bursts; longer
    than MAX_WINDOW accesses, they are searched in pieces cut at their longest time gaps.
    Returns the groups sorted by start with 'setup' marking the send routines, or None without
    a signature.
    """
    csr_idx = np.flatnonzero(classes == CSR)
    if csr_idx.size < 2:
        return None
    accepted = records["termination"] != "retry"
    # (keys of register accesses only: nothing else is looked up)
    keys_all: list = [None] * len(records)
    retry_keys: list = [None] * len(records)
    for r, key in zip(csr_idx.tolist(), _access_keys(records, csr_idx, have_ad)):
        keys_all[r] = key
    # A retried attempt repeats an access to the same register (without AD: the next access).
    for r, key in zip(csr_idx.tolist(), _access_keys(records, csr_idx)):
        retry_keys[r] = key
    period_ps = float(groups["span_ps"][0] - (groups["end_ps"][0] - groups["start_ps"][0]))

    def members_of(gr):
        lo = np.searchsorted(csr_idx, gr["first_record"], side="left")
        hi = np.searchsorted(csr_idx, gr["last_record"], side="right")
        return [csr_idx[a:b] for a, b in zip(lo.tolist(), hi.tolist())]

    members = members_of(groups)
    # Learn from the accesses leading up to each send's first DMA, in the search group that
    # holds the last of them; prefer sends the NIC acted on at once (no transmit backlog).
    learn_groups = search_groups if search_groups is not None else groups
    learn_members = members_of(learn_groups) if search_groups is not None else members
    csr_end = records["end_ps"][csr_idx]
    k = np.searchsorted(csr_end, first_dma, side="left") - 1
    cand = ok & (k >= 0)
    last = np.where(k >= 0, csr_idx[np.maximum(k, 0)], -1)
    prompt = cand & (first_dma - records["end_ps"][np.maximum(last, 0)] <= prompt_gap_ps)
    use = prompt if prompt.sum() >= 2 else cand
    lasts = np.unique(last[use])
    if lasts.size < 2:
        return None
    holder = np.searchsorted(learn_groups["first_record"], lasts, side="right") - 1
    # ... since the previous packet's first DMA (a window may hold several sends).
    since: dict = {}
    for lr, t in zip(last[use].tolist(), np.r_[-np.inf, first_dma[:-1]][use].tolist()):
        since[lr] = min(since.get(lr, np.inf), t)
    starts, ends = records["start_ps"], records["end_ps"]
    # The accepted accesses of the holding window from the first one after ``since`` to the
    # send's last: one slice of the accepted accesses, found for all sends at once.
    csr_acc = csr_idx[accepted[csr_idx]]
    after = np.searchsorted(starts[csr_acc], np.array([since[lr] for lr in lasts.tolist()]), side="right")
    lo = np.maximum(np.searchsorted(csr_acc, learn_groups["first_record"][holder], side="left"), after)
    hi = np.searchsorted(csr_acc, np.minimum(lasts, learn_groups["last_record"][holder]), side="right")
    acc_l = csr_acc.tolist()
    learn_recs = [acc_l[a:b] for a, b in zip(lo.tolist(), hi.tolist())]
    learn = [[keys_all[r] for r in recs] for recs in learn_recs]
    sig = _learn_signature(learn)
    L = len(sig)
    if L == 0:
        return None
    # The CPU's pace: the shortest time from the end of one access to the start of the next
    # in sends that ran alone (exactly the routine's accesses), less one clock of arbitration.
    # No routine issues its accesses faster than that; -1 when no send ran alone.
    clean = [recs for recs, keys in zip(learn_recs, learn) if keys[-L:] == sig and len(keys) == L]
    paces = [starts[b] - ends[a] for recs in clean for a, b in zip(recs[:-1], recs[1:])]
    min_pace = float(min(paces)) - period_ps if paces else -1.0
    # ... and its pace step by step: the bus idle time between its j-th and next access in those
    # sends. Elsewhere the routine may wait for the bus, but not stand idle much longer than that
    # (a few clocks of arbitration, a quarter more for the CPU's own jitter).
    step_idle = None
    if clean and busy is not None:
        a_end = np.array([[ends[r] for r in recs[:-1]] for recs in clean], np.float64)
        b_start = np.array([[starts[r] for r in recs[1:]] for recs in clean], np.float64)
        idle_steps = b_start - a_end - busy.between(a_end, b_start)
        step_idle = (idle_steps.max(axis=0) * 1.25 + 4 * period_ps).tolist()
    if search_groups is not None:
        groups, members = search_groups, members_of(search_groups)
        # A window this long (a bus busy for long) is searched in pieces, cut where the time
        # between two accesses is longest (least likely inside one routine).
        windows = []
        todo = list(members)
        while todo:
            idx = todo.pop()
            if idx.size <= MAX_WINDOW:
                windows.append(idx)
                continue
            k = int(np.argmax(starts[idx[1:]] - ends[idx[:-1]])) + 1
            todo += [idx[:k], idx[k:]]
        members = sorted(windows, key=lambda w: int(w[0]))
    busy_before = None
    if busy is not None:
        busy_before = (np.zeros(len(records)), np.zeros(len(records)))
        busy_before[0][csr_idx] = busy.at(starts[csr_idx])
        busy_before[1][csr_idx] = busy.at(ends[csr_idx])
    acc = accepted.tolist()
    starts_l, ends_l = starts.tolist(), ends.tolist()
    if busy_before is not None:
        busy_before = (busy_before[0].tolist(), busy_before[1].tolist())
    parts: list[tuple[list[int], bool]] = []
    for idx in members:
        rows = idx.tolist()
        n = len(rows)
        label = [0] * n                             # 0 = other, k > 0 = k-th instance found
        free = [p for p in range(n) if acc[rows[p]]]
        n_free = len(free)
        n_inst = 0
        while len(free) >= L:
            hit = _best_instance(rows, free, keys_all, sig, starts_l, ends_l, min_pace,
                                 max_idle=prompt_gap_ps, step_idle=step_idle,
                                 busy_before=busy_before)
            if hit is None:
                break
            n_inst += 1
            for p in hit:
                label[p] = n_inst
            taken = set(hit)
            free = [p for p in free if p not in taken]
        if n_inst and n_free < n:
            # Retried attempts go with the accepted access they repeat (the next one with its key).
            pending: dict = {}
            for pos in range(n - 1, -1, -1):
                key = retry_keys[rows[pos]]
                if acc[rows[pos]]:
                    pending[key] = label[pos]
                else:
                    label[pos] = pending.get(key, 0)
        rest = [r for r, lab in zip(rows, label) if lab == 0]
        if rest:
            # what the send routine leaves is grouped again by time: an interrupt routine
            # before the send and the next one after it are two
            head = 0
            for j in range(1, len(rest)):
                if starts_l[rest[j]] - ends_l[rest[j - 1]] >= prompt_gap_ps:
                    parts.append((rest[head:j], False))
                    head = j
            parts.append((rest[head:], False))
        for k in range(n_inst, 0, -1):
            parts.append(([r for r, lab in zip(rows, label) if lab == k], True))
    sizes = np.array([len(part) for part, _ in parts], np.int64)
    flat = np.fromiter((r for part, _ in parts for r in part), np.int64, int(sizes.sum()))
    heads = np.r_[0, np.cumsum(sizes)[:-1]]
    out = np.zeros(len(parts), GROUP_DTYPE)
    if len(parts):
        out["first_record"] = flat[heads]
        out["last_record"] = flat[heads + sizes - 1]
        out["start_ps"] = np.minimum.reduceat(starts[flat], heads)
        out["end_ps"] = np.maximum.reduceat(ends[flat], heads)
        out["accesses"] = sizes
        out["retries"] = np.add.reduceat((records["termination"][flat] == "retry").astype(np.int64), heads)
    out["span_ps"] = out["end_ps"] - out["start_ps"] + period_ps
    is_setup = np.array([sf for _, sf in parts])
    order = np.argsort(out["start_ps"], kind="stable")
    out, is_setup = out[order], is_setup[order]
    # Every send routine is a setup group, even one whose frame the capture ended before.
    out["setup"] = is_setup
    return out


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

    sends_possible = True
    routines = None             # send routines found before classifying (no C/BE#)
    if records is not None and classes is not None:
        # Direction unknown (no C/BE#): the NIC fetches a descriptor right after the driver's
        # doorbell (its last CSR write), even when it reads the frame much later (backlog).
        unk = np.flatnonzero((transfers["kind"] != DATA) & (transfers["direction"] == UNKNOWN_DIR))
        csr_idx = np.flatnonzero(classes == CSR)
        if unk.size and csr_idx.size:
            csr_end = records["end_ps"][csr_idx]
            ts = transfers["start_ps"][unk]
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
            if after_csr.sum() >= 0.25 * data_idx.size:
                transfers["kind"][unk] = np.where(after_csr, DESCRIPTOR, STATUS)
                if plain_groups is not None and groups.size:
                    # Once the send routine is known by the shape of its accesses, the fetch is
                    # the first small transfer after a send's last access (the doorbell) whose
                    # NIC asked for the bus within descriptor_gap: the time the bus was busy in
                    # between only delayed its grant. An interrupt service routine may go on
                    # around it.
                    routines = send_routines(groups, records, classes, np.ones(P, bool), ds,
                                             search_groups=plain_groups,
                                             busy=busy, prompt_gap_ps=csr_gap_ps, have_ad=have_ad)
                    if routines is not None:
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
                        transfers["kind"][unk] = np.where(fetch, DESCRIPTOR, STATUS)
            else:
                # No doorbells followed by a fetch: a receive bus. Its CSR groups are the
                # driver's interrupt work, never a send's setup.
                sends_possible = False

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
            k = np.searchsorted(istart, last + irq_min_delay_ps, side="right")
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

"""DMA bursts and DMA transfers, from one bus's classified records.

The definitions (DMA burst, DMA transfer, data / descriptor fetch / status write-back) are in
pcitrace/analyse/packets.py, which puts CSR routines, DMA transfers and packets together.
"""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.classify import DMA, READ, UNKNOWN_DIR, WRITE
from pcitrace.analyse.occupancy import BusyTime

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
MIN_MMRBC = 512          # PCI-X: the smallest Maximum Memory Read Byte Count
RING_NEAR_BYTES = 4096
_TARGET_ENDED = ("retry", "disconnect_with_data", "disconnect_without_data", "split_response")


def _idle_between(a_end: np.ndarray, b_start: np.ndarray, period_ps: float, busy: BusyTime | None) -> np.ndarray:
    """Bus idle time from the end clock of one transaction to the start of another (ps)."""
    idle = (b_start - a_end - period_ps).astype(np.float64)
    if busy is not None and idle.size:
        idle -= busy.between(a_end + period_ps, b_start)
    return idle


def resumed(bursts: np.ndarray, period_ps: float, busy: BusyTime | None, gap_ps: float) -> np.ndarray:
    """Per burst, whether the next burst in its direction came within ``gap_ps`` of bus idle time."""
    out = np.zeros(bursts.size, bool)
    d = bursts["direction"]
    for dv in np.unique(d).tolist():
        sel = np.flatnonzero(d == dv)
        if sel.size > 1:
            out[sel[:-1]] = _idle_between(bursts["end_ps"][sel[:-1]], bursts["start_ps"][sel[1:]], period_ps,
                                          busy) <= gap_ps
    return out


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
                  busy: BusyTime | None = None, descriptor_bytes: int = 16, nic_burst: int = 0) -> np.ndarray:
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
    every small burst followed at once when no control shape is known). Where the NIC ends its
    own bursts at ``nic_burst`` bytes (checks.nic_ended_size), a burst of that size it ended
    itself leaves the buffer open as a cut one does.
    """
    g = _Grouping(rec, d, start, end, have_ad=have_ad, gap_ps=gap_ps, period_ps=period_ps,
                  max_control_bytes=max_control_bytes, nic_burst=nic_burst)
    if not have_ad:
        g.control, g.resumed = _control_shapes(rec, d, start, end, gap_ps=gap_ps, period_ps=period_ps,
                                               max_control_bytes=max_control_bytes, busy=busy,
                                               descriptor_bytes=descriptor_bytes)
    tid = np.empty(rec.size, np.int64)
    for i in range(rec.size):
        t = g.continued(i)
        if t < 0:
            t = g.n
            g.n += 1
        tid[i] = t
        g.note(i, t)
    return tid


class _Grouping:
    """The walk of _group_bursts: the bursts' columns as lists and what is open so far."""

    def __init__(self, rec: np.ndarray, d: np.ndarray, start: np.ndarray, end: np.ndarray, *, have_ad: bool,
                 gap_ps: float, period_ps: float, max_control_bytes: int, nic_burst: int):
        self.have_ad, self.gap_ps, self.period_ps = have_ad, gap_ps, period_ps
        self.max_control_bytes, self.nic_burst = max_control_bytes, nic_burst
        self.cmd, self.term = rec["command"].tolist(), rec["termination"].tolist()
        self.addr, self.nbytes, self.bcount = rec["address"].tolist(), rec["bytes"].tolist(), rec["byte_count"].tolist()
        self.req, self.tag = rec["requester"].tolist(), rec["tag"].tolist()
        self.shape = list(zip(d.tolist(), rec["data_phases"].tolist(), rec["target_waits"].tolist(),
                              rec["devsel"].tolist()))
        self.dirs, self.starts, self.ends = d.tolist(), start.tolist(), end.tolist()
        self.n = 0
        self.expect: dict = {}          # (direction, next address) -> transfer
        self.open_by_dir: dict = {}     # direction -> transfer left open by the target (no AD)
        self.last_read = -1
        self.pending_split: dict = {}   # (requester, tag) -> transfer of the split request
        self.last_end: dict = {}        # transfer -> end time of its last burst
        self.target_ended: dict = {}    # transfer -> how the target cut its last burst ("" = it did not)
        self.control: set = set()
        self.resumed = None
        # PCI-X: the NIC asks for min(rest of the buffer, its largest request) each time, so a
        # request for less than the largest one seen is the buffer's last; the largest is the
        # MMRBC (512 bytes or more) where buffers are longer than one request, else every
        # buffer fits one request and a full one says nothing
        split = rec["termination"] == "split_response"
        self.max_request = int(rec["byte_count"][split].max()) if split.any() else 0
        self.full_request: dict = {}    # transfer -> its last split request asked for the largest count

    def continued(self, i: int) -> int:
        """The transfer burst ``i`` continues, or -1."""
        if self.cmd[i] == "split_completion":
            # The completion names the request it answers by requester and tag (PCI-X).
            return self.pending_split.get((self.req[i], self.tag[i]), self.last_read) if self.tag[i] >= 0 \
                else self.last_read
        return self._by_address(i) if self.have_ad else self._by_open_buffer(i)

    def _by_address(self, i: int) -> int:
        t = self.expect.pop((self.dirs[i], self.addr[i]), -1)
        # Descriptor rings are contiguous too: a master-ended transfer is only continued
        # straight away (a master splitting a buffer at cache lines), not microseconds later.
        if t < 0:
            return t
        idle = self.starts[i] - self.last_end[t] - self.period_ps
        ended = self.target_ended[t]
        # A split request is the normal PCI-X read: the next request follows its
        # completions within about a microsecond when the NIC goes on with the buffer, or
        # later when its last request asked for the largest byte count (the buffer goes on).
        if ended == "split_response" and idle > max(self.gap_ps, SPLIT_GAP_PS) and not self.full_request.get(t):
            return -1
        if not ended and idle > self.gap_ps:
            return -1
        return t

    def _by_open_buffer(self, i: int) -> int:
        o = self.open_by_dir.get(self.dirs[i], -1)
        if o < 0:
            return -1
        small_own = self.nbytes[i] <= self.max_control_bytes and self.term[i] not in _TARGET_ENDED
        # the rest of a buffer the target cut: nothing goes on with it at once, or it does not
        # have the shape of the NIC's own small transfers
        if small_own and (not self.resumed[i] or (self.control and self.shape[i] not in self.control)):
            small_own = False
        return -1 if small_own else o

    def note(self, i: int, t: int) -> None:
        """Burst ``i`` went to transfer ``t``: what stays open after it."""
        self.last_end[t] = self.ends[i]
        if self.cmd[i] == "split_completion":
            return      # a completion answers a split request; whether the read goes on is the request's
        term, d = self.term[i], self.dirs[i]
        self.target_ended[t] = term if term in _TARGET_ENDED else ""
        if d == READ:
            self.last_read = t
        if term == "split_response" and self.tag[i] >= 0:
            self.pending_split[(self.req[i], self.tag[i])] = t
        if term == "split_response":
            self.full_request[t] = MIN_MMRBC <= self.max_request <= self.bcount[i]
        if self.have_ad:
            adv = self.bcount[i] if term == "split_response" and self.bcount[i] > 0 else self.nbytes[i]
            self.expect[(d, self.addr[i] + adv)] = t
            if len(self.expect) > 64:
                # Only recent transfers can continue; keep the table small.
                for key in list(self.expect)[: len(self.expect) - 64]:
                    del self.expect[key]
        elif term in _TARGET_ENDED or (self.nic_burst and self.nbytes[i] == self.nic_burst):
            self.open_by_dir[d] = t
        elif self.open_by_dir.get(d, -1) == t or self.nbytes[i] > self.max_control_bytes:
            self.open_by_dir.pop(d, None)


def dma_transfers(records: np.ndarray, classes: np.ndarray, bursts: np.ndarray, *, have_ad: bool,
                  gap_ps: float, period_ps: float, max_control_bytes: int,
                  descriptor_gap_ps: float, busy: BusyTime | None = None,
                  descriptor_bytes: int = 16, nic_burst: int = 0) -> np.ndarray:
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
                        descriptor_bytes=descriptor_bytes, nic_burst=nic_burst)
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

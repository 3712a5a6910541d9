"""The NIC / host / link model: a discrete-event simulation that yields bus timelines.

Two PCs (``a``, ``b``) each run an application, a driver (CSR groups), a NIC transmitter
(descriptor fetch, data DMA reads, status write-back), a NIC receiver (descriptor
prefetch, data DMA writes, status write-back) and interrupt coalescence. Their buses are
arbitrated first come, first served with at least one idle clock between transactions.
The link carries frames a -> b (and b -> a for answers and pause frames) with the wire
time of preamble + frame and the inter-frame gap.

The output is, per bus, the transactions granted on it (:class:`TxnRows`: one tuple per
transaction, :class:`Txn` objects on demand) with start clocks and lengths, plus the frames and
the per-packet bookkeeping the truth file reports. Turning a Txn into bus
signals is the bus renderer's job (:mod:`pcitrace.sim.bus`); the transaction lengths used
for arbitration come from the renderer too (``length`` callable), so the schedule and the
drawn signals cannot disagree.
"""

from __future__ import annotations

import array
import dataclasses
import heapq
import math
import struct
import zlib
from collections import deque
from collections.abc import Callable

import numpy as np

from pcitrace.sim.scenario import DEVSEL_CLOCKS, BusConfig, Scenario

PREAMBLE_BYTES = 8
IFG_BYTES = 12
ETH_OVERHEAD = 14 + 4          # Ethernet header + CRC
IP_UDP_OVERHEAD = 20 + 8
MIN_FRAME = 64
PAUSE_FRAME = 64
NEVER = 1 << 62                # a time no process reaches
ADB = 128                      # PCI-X allowable disconnect boundary

# Register offsets of an e1000-like NIC: the driver's accesses look like the real ones.
TX_CSR_WRITES = (0x3818, 0x3810, 0x00D0, 0x3828, 0x0400)     # TDT, TDH, IMS, TXDCTL, TCTL
TX_CSR_READS = (0x0008, 0x3810, 0x3818, 0x00C0)              # STATUS, TDH, TDT, ICR
IRQ_CSR_READS = (0x00C0, 0x0008, 0x3810, 0x2810)             # ICR, STATUS, TDH, RDH
IRQ_CSR_WRITES = (0x00D8, 0x2818, 0x00D0, 0x3818)            # IMC, RDT, IMS, TDT

_MAC = {"a": bytes.fromhex("00022b000001"), "b": bytes.fromhex("00022b000002")}
_IP = {"a": bytes([192, 168, 10, 1]), "b": bytes([192, 168, 10, 2])}
_HEADER_WORDS = struct.Struct(">10H")                    # the IPv4 header as its checksum adds it
_UDPMON_HEAD = (4).to_bytes(4, "little") + (152).to_bytes(4, "little")

# Host memory the driver gives the NIC, as offsets from host.memory_base (default 0x1E800000).
TX_RING = 0x000000
RX_RING = 0x100000
TX_BUF = 0x800000
RX_BUF = 0x1000000
RING = 256


@dataclasses.dataclass(slots=True)
class Txn:
    """One bus transaction as the model decides it (the renderer draws it).

    The model's hot call sites hand the bus rows instead (:class:`TxnRows`); they build a Txn
    once per shape (its proto) and pass the fields positionally, in this order: master, purpose,
    command, address, nbytes, termination, devsel, initial_waits, wait_every, width, read, pcix,
    tag, requester, byte_count, packet, pc, data, data_off."""

    master: str                 # host | nic | other
    purpose: str                # csr_read, csr_write, desc_fetch, data_read, data_completion, desc_completion,
                                # data_write, status_write, other
    command: str                # lists.py snake_case name
    address: int
    nbytes: int                 # bytes the transaction moves (0: retry / split response)
    termination: str = "normal"
    devsel: int = 2             # DEVSEL# clocks after the last header clock
    initial_waits: int = 0      # target waits before the first data phase, beyond DEVSEL#
    wait_every: int = 0         # one target wait after this many data phases (pci only)
    width: int = 64             # transfer width
    read: bool = False
    pcix: bool = False
    tag: int = -1
    requester: int = -1
    byte_count: int = -1
    packet: int = -1            # frame sequence number this moves, -1 none
    pc: str = "a"
    data: bytes = b""           # the buffer this transaction moves a part of ...
    data_off: int = 0           # ... starting at this offset (no copy per burst)
    req_clock: int = -1
    start: int = -1             # clock of the address phase
    clocks: int = 0             # address phase .. last clock with FRAME# or IRDY#
    # shape_key(self) when known (a TxnRows' transactions); None: worked out when needed.
    # Whoever changes a field it covers sets it back to None.
    kind: tuple | None = None


@dataclasses.dataclass(slots=True)
class Frame:
    seq: int
    link: str                   # "a_to_b" or "b_to_a"
    kind: str                   # data | pause
    frame_bytes: int            # Ethernet frame, header..CRC
    start_ps: int = 0           # frame-present asserted (preamble)
    end_ps: int = 0             # after the last CRC byte
    lost: bool = False
    payload: bytes = b""        # the frame without CRC (what the NIC moves)


def _indices() -> array.array:
    """A packet log's list of transaction indices (machine integers: flattened in one join)."""
    return array.array("q")


@dataclasses.dataclass
class PacketLog:
    seq: int
    src: str
    dst: str
    user_bytes: int
    frame_bytes: int
    send_app_ps: int = -1
    # indices into the granted transactions (TxnRows) of the src PC's bus (csr_txns, tx_dma,
    # tx_irq_csr) or of the dst PC's bus (rx_dma, rx_irq_csr)
    csr_txns: array.array = dataclasses.field(default_factory=_indices)
    tx_dma: array.array = dataclasses.field(default_factory=_indices)
    rx_dma: array.array = dataclasses.field(default_factory=_indices)
    tx_irq_csr: array.array = dataclasses.field(default_factory=_indices)
    rx_irq_csr: array.array = dataclasses.field(default_factory=_indices)
    frame: Frame | None = None
    lost: bool = False


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def csr_sequence(nic, path: str) -> list[tuple[bool, int]]:
    """(write, register offset) of each access of a send's (``path`` "send") or an interrupt
    routine's ("irq") CSR group, in order: a send reads first (the driver looks at the NIC's
    state), then writes; a routine follows ``irq_order``, ICR its first or last read."""
    if path == "send":
        nr, nw, rregs, wregs, order = nic.send_csr_reads, nic.send_csr_writes, TX_CSR_READS, TX_CSR_WRITES, \
            "reads_first"
    else:
        nr, nw, rregs, wregs, order = nic.irq_csr_reads, nic.irq_csr_writes, IRQ_CSR_READS, IRQ_CSR_WRITES, \
            nic.irq_order
    reads = [(False, rregs[i % len(rregs)]) for i in range(nr)]
    writes = [(True, wregs[i % len(wregs)]) for i in range(nw)]
    if path == "irq" and nic.icr_read == "last":
        reads = reads[1:] + reads[:1]
    if order == "writes_first":
        return writes + reads
    if order == "interleaved":
        both = [a for pair in zip(reads, writes) for a in pair]
        n = min(nr, nw)
        return both + reads[n:] + writes[n:]
    return reads + writes


def shape_key(t: Txn) -> tuple:
    """What the drawing of a transaction depends on besides its address and data: command,
    PCI-X, termination, DEVSEL#, waits, bytes, width, the address's offset in its word and
    whether it needs a dual address cycle."""
    return (t.command, t.pcix, t.termination, t.devsel, t.initial_waits, t.wait_every, t.nbytes,
            t.width, t.address % (t.width // 8), t.address >= 1 << 32)


def default_length(t: Txn) -> int:
    """Clocks from the address phase to the last clock with FRAME# or IRDY#.

    The model's own reckoning, used only when the renderer gives none: header clocks,
    DEVSEL#/turnaround, waits, data phases, and one more clock when the target ends
    the transaction with STOP# while FRAME# is still asserted.
    """
    header = 2 if t.pcix else 1
    first = max(t.devsel, 2 if (t.read and not t.pcix) else 1) + t.initial_waits
    if t.termination in ("retry", "split_response"):
        return header + first
    phases = max(1, _ceil_div(t.nbytes, t.width // 8))
    waits = (phases - 1) // t.wait_every if (t.wait_every and not t.pcix) else 0
    extra = 1 if t.termination == "disconnect_with_data" else 0
    return header + first + phases - 1 + waits + extra


# The model's hot call sites (CSR accesses, DMA bursts) hand the bus a row instead of a Txn: a
# tuple in ROW_FIELDS order. A Txn costs four times a tuple to build, and the renderer and the
# truth read its fields back column by column. What a transaction shares with the others of its
# call site and shape is one tuple, its ``proto`` (PROTO_FIELDS), made once and shared: the
# renderer and the truth work those fields out once per proto, not per transaction. ``kind`` is
# the shape key (shape_key): it stands for command, PCI-X, termination, DEVSEL#, waits, bytes and
# width; ``clocks`` the transaction's length.
PROTO_FIELDS = ("kind", "clocks", "master", "purpose", "read", "pc")
ROW_FIELDS = ("proto", "address", "data", "data_off", "packet", "tag", "requester", "byte_count")
ROW_WIDTH = len(ROW_FIELDS)


class TxnRows:
    """The transactions granted on one bus, in order: their start and request clocks and their
    rows (ROW_FIELDS). ``txn(i)`` / ``txns()`` give them as :class:`Txn` objects (the reference
    renderer, tests, the rare fault injections); :meth:`of` is the other way round."""

    __slots__ = ("starts", "reqs", "flat", "_txns")

    def __init__(self):
        # (machine integers: no int object per transaction to keep and read back; numpy takes
        # them as they are)
        self.starts = array.array("q")
        self.reqs = array.array("q")
        # the rows' fields one after the other (ROW_FIELDS, a row every ROW_WIDTH entries): a
        # column is then a strided slice of one list (no row tuple to fetch per transaction)
        self.flat: list = []
        self._txns: list[Txn] | None = None

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def rows(self) -> list[tuple]:
        """Every transaction's row (ROW_FIELDS), as tuples."""
        return list(zip(*[iter(self.flat)] * ROW_WIDTH))

    def txn(self, i: int) -> Txn:
        proto, address, data, data_off, packet, tag, requester, byte_count = \
            self.flat[ROW_WIDTH * i:ROW_WIDTH * (i + 1)]
        kind, clocks, master, purpose, read, pc = proto
        command, pcix, term, devsel, iwaits, wait_every, nbytes, width = kind[:8]
        return Txn(master, purpose, command, address, nbytes, term, devsel, iwaits, wait_every, width, read, pcix,
                   tag, requester, byte_count, packet, pc, data, data_off, self.reqs[i], self.starts[i], clocks,
                   kind=kind)

    def txns(self) -> list[Txn]:
        """Every transaction as a Txn (built once, then the same objects)."""
        if self._txns is None or len(self._txns) != len(self):
            self._txns = [self.txn(i) for i in range(len(self))]
        return self._txns

    @classmethod
    def of(cls, txns) -> "TxnRows":
        """Scheduled Txn objects (start and clocks set) as rows; equal protos share one tuple."""
        out = cls()
        protos: dict = {}
        for t in txns:
            out.starts.append(t.start)
            out.reqs.append(t.req_clock)
            out.flat.extend(_row(t, protos, t.clocks))
        return out


def _proto(t: Txn, clocks: int) -> tuple:
    return (t.kind if t.kind is not None else shape_key(t), clocks, t.master, t.purpose, t.read, t.pc)


def _row(t: Txn, protos: dict, clocks: int) -> tuple:
    """The row of ``t``, its proto the one in ``protos`` equal to its own (added if new)."""
    p = _proto(t, clocks)
    return (protos.setdefault(p, p), t.address, t.data, t.data_off, t.packet, t.tag, t.requester, t.byte_count)


# -- the event engine -------------------------------------------------------------------

class _Queue:
    def __init__(self):
        self.items: deque = deque()
        self.waiters: deque = deque()


class _Gap:
    """A heap entry's value for a generator that asked for a transaction and then a sleep
    ("rowgap"): at the transaction's end it is not resumed yet, only rescheduled ``gap`` later."""

    __slots__ = ("gap", "value")

    def __init__(self, gap: int, value):
        self.gap = gap
        self.value = value


class Engine:
    """A tiny generator-based discrete-event engine; times in integer picoseconds. The
    reference for the compiled engine (:data:`FastEngine`, pcitrace/sim/_engine.c), which the
    model runs when it was built: the same schedule, ties included (tests/sim/test_engine.py).

    A generator yields commands: ("txn", bus, Txn) asks for a transaction and resumes at its end
    with its index in the bus's rows; ("row", bus, row, log) does the same for a row and appends
    that index to the list ``log`` when it ends in time; ("rowgap", bus, row, log, gap) is
    ("row", ...) followed by ("sleep", gap) without resuming the generator in between (a DMA
    burst or CSR access and the pause after it: half the resumptions of a run); ("sleep", ps),
    ("until", t) and ("get", queue) wait."""

    def __init__(self):
        self.now = 0
        self._heap: list = []
        self._seq = 0
        self._until = -1            # run()'s horizon while it runs

    def at(self, t: int, gen, value=None):
        self._seq += 1
        heapq.heappush(self._heap, (int(t), self._seq, gen, value))

    def spawn(self, gen, t: int | None = None):
        self.at(self.now if t is None else t, gen)

    def put(self, q: _Queue, item):
        if q.waiters:
            self.at(self.now, q.waiters.popleft(), item)
        else:
            q.items.append(item)

    def pending(self) -> list[tuple[int, int]]:
        """(time, sequence number) of the entries not run yet, in the order they would run."""
        return sorted((t, seq) for t, seq, _, _ in self._heap)

    def run(self, until: int):
        """Resume the due generators in time order (ties in the order they were scheduled)
        until nothing is due at or before ``until``."""
        self._until = until
        heap = self._heap
        pop, push = heapq.heappop, heapq.heappush
        try:
            while heap and heap[0][0] <= until:
                now, _, gen, value = pop(heap)
                self.now = now          # the generators read self.now: kept equal to now
                if value.__class__ is _Gap:
                    # a "rowgap" transaction's end: now the sleep, as that op does below
                    t, value = now + value.gap, value.value
                    if t > until or (heap and heap[0][0] <= t):
                        self._seq += 1
                        push(heap, (t, self._seq, gen, value))
                        continue
                    now = self.now = t
                send = gen.send
                while True:
                    try:
                        cmd = send(value)
                    except StopIteration:
                        break
                    op = cmd[0]
                    if op == "rowgap" or op == "row":
                        # BusModel.grant, inlined: the commonest commands (tests/sim/test_model.py
                        # checks that the two give the same schedule)
                        bus = cmd[1]
                        row = cmd[2]
                        period = bus.period
                        req = -((bus.phase - now) // period)
                        if req < 0:
                            req = 0
                        start = req + 2         # REQ# -> GNT# -> address phase
                        if start < bus.free:
                            start = bus.free
                        end = start + row[0][1]
                        value = len(bus.starts)
                        if end > bus.limit:
                            bus.free = max(bus.free, bus.limit + 1)
                            t = NEVER
                        else:
                            bus.free = end + 1
                            bus.starts.append(start)
                            bus.reqs.append(req)
                            bus.flat.extend(row)
                            t = bus.phase + end * period
                        if t > until:
                            # not over in time: no log entry, and the generator never resumes
                            self._seq += 1
                            push(heap, (t, self._seq, gen, value))
                            break
                        # (logged as soon as granted: the generator resumes at its end, in time or never)
                        cmd[3].append(value)
                        if op == "rowgap":
                            # The steps of a "row" then a "sleep", each resuming at once when
                            # nothing else is due first and going through the heap otherwise (same
                            # pushes in the same order: the same schedule, ties included).
                            if not heap or heap[0][0] > t:
                                now = self.now = t
                                t = now + cmd[4]
                            else:
                                self._seq += 1
                                push(heap, (t, self._seq, gen, _Gap(cmd[4], value)))
                                break
                    elif op == "txn":
                        bus = cmd[1]
                        value = len(bus.starts)
                        t = bus.grant_txn(cmd[2], now)
                    elif op == "sleep":
                        t = now + max(0, int(cmd[1]))
                        value = None
                    elif op == "until":
                        t = max(now, int(cmd[1]))
                        value = None
                    elif op == "get":
                        q = cmd[1]
                        if q.items:
                            value = q.items.popleft()
                            continue
                        q.waiters.append(gen)
                        break
                    else:
                        raise ValueError(op)
                    # Nothing else is due before (or at) t: going through the heap would pop this
                    # very generator next, so resume it at once (ties keep their order: they go
                    # the heap way).
                    if t <= until and (not heap or heap[0][0] > t):
                        now = self.now = t
                        continue
                    self._seq += 1
                    push(heap, (t, self._seq, gen, value))
                    break
        finally:
            self._until = -1


try:
    from pcitrace.sim._engine import Engine as FastEngine
except ImportError:         # not built (no C compiler at install): Engine, the same schedule, slower
    FastEngine = None


class BusModel:
    """One PCI bus: clock, arbitration and the transactions granted on it."""

    def __init__(self, cfg: BusConfig, captured: bool, length: Callable[[Txn], int], limit_ps: int):
        self.cfg = cfg
        self.captured = captured
        self.period = cfg.period_ps
        self.phase = self.period // 2     # first rising edge half a period into the capture
        self.length = length
        self.free = 0                     # first clock the next transaction may start at
        self.txn_rows = TxnRows()
        # (its lists, for the engine's inlined grant)
        self.starts, self.reqs, self.flat = self.txn_rows.starts, self.txn_rows.reqs, self.txn_rows.flat
        self._protos: dict[tuple, tuple] = {}  # grant_txn's protos, one tuple per distinct one
        # Transactions must end (plus two idle clocks) inside the capture: none is truncated.
        self.limit = self.clock_at(limit_ps) - 3

    def clock_at(self, t_ps: int) -> int:
        return max(0, _ceil_div(t_ps - self.phase, self.period))

    def time_of(self, clock: int) -> int:
        return self.phase + clock * self.period

    @property
    def txns(self) -> list[Txn]:
        """The granted transactions as Txn objects (built on first use)."""
        return self.txn_rows.txns()

    def grant(self, row: tuple, now: int) -> int:
        """Schedule the transaction of ``row`` (ROW_FIELDS) requested at ``now``: the time it
        ends, NEVER when it does not fit in the capture."""
        req = -((self.phase - now) // self.period)        # clock_at(now), inlined: once per transaction
        if req < 0:
            req = 0
        # REQ# -> GNT# -> address phase: two clocks at least when the bus is free.
        start = req + 2
        if start < self.free:
            start = self.free
        end = start + row[0][1]
        if end > self.limit:
            # past the end of the capture: the master never gets its turn
            self.free = max(self.free, self.limit + 1)
            return NEVER
        # one idle clock after the last FRAME#/IRDY# clock before the next address phase
        self.free = end + 1
        rows = self.txn_rows
        rows.starts.append(start)
        rows.reqs.append(req)
        rows.flat.extend(row)
        return self.phase + end * self.period

    def grant_txn(self, txn: Txn, now: int) -> int:
        """grant() for a Txn object (the less frequent call sites: PCI-X reads and completions,
        other devices' traffic): its row, its length from the renderer unless set."""
        return self.grant(_row(txn, self._protos, txn.clocks or self.length(txn)), now)


# -- the model ----------------------------------------------------------------------------

@dataclasses.dataclass
class ModelResult:
    buses: dict[str, BusModel]          # captured buses by name
    frames: list[Frame]
    packets: list[PacketLog]
    pauses: list[tuple[int, int]]       # a's transmitter stopped [from, to) ps
    duration_ps: int
    # PC -> its interrupts in the order raised: [time ps, events (kind, PacketLog), the routine's
    # CSR group (transaction indices on the PC's bus) or None when it never ran]
    irqs: dict[str, list] = dataclasses.field(default_factory=dict)


class _PC:
    def __init__(self, name: str, bus: BusModel):
        self.name = name
        self.bus = bus
        self.tx_queue = _Queue()        # packets handed to the NIC by the driver
        self.tx_data_queue = _Queue()   # descriptors fetched, data not yet read
        self.rx_queue = _Queue()        # frames arrived from the wire
        self.irq_queue = _Queue()
        self.pending_events: list = []  # (kind, PacketLog) not yet signalled
        self.irq_timer_armed = False
        self.tx_inflight = 0            # frames DMA'd but not yet on the wire
        self.tx_fifo_free = _Queue()
        self.wire = _Queue()            # frames ready for the wire
        self.tx_count = 0
        self.rx_count = 0
        self.tx_ring_used = 0           # sends the driver handed over whose status was not written back
        self.tx_ring_free = _Queue()
        self.tx_desc_free = _Queue()    # tx_desc_every > 1: the data DMA took the last descriptor batch
        self.irqs: list[list] = []      # per interrupt raised: [time, events, its routine's CSR group]
        self.tag = 0
        self.reads = 0
        self.mem = bus.cfg.host.memory_base
        self.pcix = bus.cfg.kind == "pcix"
        self.csr_plans: dict = {}       # kind of CSR group -> its accesses (Model._csr_plan)
        self.read_clocks: dict = {}     # DMA read burst shape and purpose -> its proto
        self.write_clocks: dict = {}    # DMA write burst shape and purpose -> its proto
        self.read_plans: dict = {}      # DMA read -> its bursts (_plan)
        self.write_plans: dict = {}
        cfg = bus.cfg
        # what a burst's split and shape depend on of its address: its place in a cache line,
        # the read and write disconnect boundaries and a 64-bit word
        self.plan_modulus = math.lcm(cfg.cache_line, cfg.host.read_disconnect_bytes or 1,
                                     cfg.host.write_disconnect_bytes or 1, cfg.nic.max_burst_bytes or 1, 8)
        self.dma_gap = max(0, cfg.nic.dma_gap_clocks * bus.period)


def nic_burst_room(cfg: BusConfig, a: int, read: bool, waits: int) -> int:
    """Bytes the NIC moves at most in one burst from address ``a`` (``waits``: the target's
    wait clocks before the first data phase): up to the next multiple of max_burst_bytes, and
    within the clocks of the latency timer (conventional PCI) counted from the address phase."""
    nic = cfg.nic
    room = NEVER
    if nic.max_burst_bytes:
        room = nic.max_burst_bytes - a % nic.max_burst_bytes
    if nic.latency_timer_clocks and cfg.kind == "pci":
        wb = cfg.width // 8
        header = 1 + (a >= 1 << 32)
        first = max(2 if read else 1, 1 + waits)         # (the NIC's DMA: fast DEVSEL#)
        every = cfg.host.read_waits_every if read else 0
        left = nic.latency_timer_clocks - header - first + 1      # clocks for data phases and waits
        if every:       # P phases take P + (P - 1) // every clocks
            q, r = divmod(max(0, left - 1), every + 1)
            phases = 1 + q * every + min(r, every - 1)
        else:
            phases = max(1, left)
        room = min(room, phases * wb - a % wb)
    return room


def line_read(line: int, a: int, want: int) -> tuple[str, int]:
    """read_command "by_length": (command, bytes) of a cache-line-aligned read burst of at most
    ``want`` bytes from ``a``: up to the line's end with Memory Read Line, one whole line MRL,
    several whole lines Memory Read Multiple, less than a line Memory Read."""
    off = a % line
    if off:
        return "mem_read_line", min(want, line - off)
    if want >= 2 * line:
        return "mem_read_multiple", want - want % line
    if want >= line:
        return "mem_read_line", line
    return "mem_read", want


def _plan(cache: dict, make, pc: "_PC", addr: int, n: int, purpose: str) -> list[tuple]:
    """``make(pc, addr, n, purpose)``, remembered: a DMA's bursts follow from its purpose, length
    and the address's place in the buffers' boundaries (cache line, disconnect boundary, word,
    4 GiB), so buffers at the same place share one plan (a ring's buffers: all of them). A DMA
    that crosses 4 GiB is planned each time."""
    b = pc.plan_modulus
    key = (purpose, n, addr % b, addr >> 32, (addr + n) >> 32)
    if key[3] != key[4]:
        return make(pc, addr, n, purpose)
    plan = cache.get(key)
    if plan is None:
        plan = cache[key] = make(pc, addr, n, purpose)
    return plan


class Draws:
    """The model's random draws, the values ``numpy.random.default_rng(seed)`` gives, served from
    blocks of the PCG64 generator's raw 64-bit outputs.

    numpy's scalar calls cost microseconds each (``bytes(1400)`` about 12 us), a few per packet;
    here each is a slice of a bytes buffer. What numpy does, and so this class: a 32-bit draw
    (``integers(0, 2**32)``, the words of ``bytes(n)``) takes the low half of a 64-bit output and
    keeps the high half for the next 32-bit draw; a double (``random()``, ``uniform``) takes a
    whole 64-bit output, ``(x >> 11) * 2**-53``, and leaves a kept half where it is.
    tests/sim/test_model.py checks every call against the Generator."""

    BLOCK = 1 << 12             # 64-bit outputs drawn at a time

    def __init__(self, seed):
        self._bitgen = np.random.default_rng(seed).bit_generator
        self._raw = b""
        self._pos = 0           # byte offset of the next unused 64-bit output
        self._half = -1         # kept high half of the last split output, -1 none

    def _take(self, n: int) -> int:
        """Byte offset of the next n unused 64-bit outputs (drawing more when needed)."""
        p = self._pos
        if p + 8 * n > len(self._raw):
            more = self._bitgen.random_raw(max(self.BLOCK, n)).astype("<u8").tobytes()
            self._raw = self._raw[p:] + more
            p = 0
        self._pos = p + 8 * n
        return p

    def uint32(self) -> int:
        """``int(Generator.integers(0, 2**32))``."""
        h = self._half
        if h >= 0:
            self._half = -1
            return h
        p = self._take(1)
        v = int.from_bytes(self._raw[p:p + 8], "little")
        self._half = v >> 32
        return v & 0xFFFFFFFF

    def bytes(self, length: int) -> bytes:
        """``Generator.bytes(length)``: ceil(length / 4) 32-bit draws, little-endian."""
        words = (length + 3) // 4 if length > 0 else 1      # numpy draws one word for bytes(0) too
        head = b""
        if self._half >= 0:
            head = self._half.to_bytes(4, "little")
            self._half = -1
            words -= 1
        full = (words + 1) // 2
        p = self._take(full)
        out = head + self._raw[p:p + 4 * words]
        if words % 2:
            self._half = int.from_bytes(self._raw[p + 4 * words:p + 8 * full], "little")
        return out[:length]

    def random(self) -> float:
        """``Generator.random()``."""
        p = self._take(1)
        return (int.from_bytes(self._raw[p:p + 8], "little") >> 11) * (1.0 / 9007199254740992.0)

    def uniform(self, low: float, high: float) -> float:
        """``Generator.uniform(low, high)``: low + (high - low) * random()."""
        return low + (high - low) * self.random()


class NumpyDraws:
    """The reference for :class:`Draws`: the same calls on numpy's Generator itself (slow;
    tests run whole simulations with both and compare)."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def uint32(self) -> int:
        return int(self._rng.integers(0, 1 << 32))

    def bytes(self, length: int) -> bytes:
        return self._rng.bytes(length)

    def random(self) -> float:
        return float(self._rng.random())

    def uniform(self, low: float, high: float) -> float:
        return float(self._rng.uniform(low, high))


class Model:
    draws = Draws               # the random draws' source (NumpyDraws: the reference)
    engine = FastEngine or Engine   # the event engine (Engine: the reference)

    def __init__(self, sc: Scenario, length: Callable[[Txn], int] = default_length):
        self.sc = sc
        self.rng = self.draws(sc.seed)
        self.eng = self.engine()
        self.duration_ps = int(round(sc.duration_us * 1e6))
        by_pc = {b.pc: b for b in sc.buses}
        self.buses: dict[str, BusModel] = {}
        self.pcs: dict[str, _PC] = {}
        for pc in ("a", "b"):
            if pc in by_pc:
                bm = BusModel(by_pc[pc], True, length, self.duration_ps)
                self.buses[bm.cfg.name] = bm
            else:
                # A PC whose bus nobody probes still runs its NIC and driver: copy the
                # other PC's hardware so the end-to-end timing stays realistic.
                other = sc.buses[0]
                cfg = dataclasses.replace(other, name=f"pc_{pc}", pc=pc, other=[])
                bm = BusModel(cfg, False, length, self.duration_ps)
            self.pcs[pc] = _PC(pc, bm)
        self.frames: list[Frame] = []
        self.packets: list[PacketLog] = []
        self.pauses: list[tuple[int, int]] = []
        self.link_free = {"a_to_b": 0, "b_to_a": 0}
        self.lost = set(sc.link.lost)
        self.byte_ps = int(round(8000 / sc.link.rate_gbps))   # ps per byte on the wire

    # -- helpers ---------------------------------------------------------------------
    def us(self, x: float) -> int:
        return int(round(x * 1e6))

    def clocks(self, pc: _PC, n: int) -> int:
        return n * pc.bus.period

    def _txn(self, pc: _PC, **kw) -> Txn:
        # (PCI-X reads and completions: the hot call sites - CSR accesses, PCI DMA bursts - make
        # rows from planned protos)
        cfg = pc.bus.cfg
        kw.setdefault("width", cfg.width)
        kw.setdefault("pcix", cfg.kind == "pcix")
        kw.setdefault("pc", pc.name)
        return Txn(**kw)

    def _csr_group(self, pc: _PC, path: str, log: list):
        """The CSR group of a send (``path`` "send") or of an interrupt routine ("irq"): PIO
        accesses by the CPU to the NIC's BAR in the order :func:`csr_sequence` gives, each after
        the NIC's STOP# retries."""
        bus = pc.bus
        retry_gap = max(0, bus.cfg.host.retry_gap_clocks * bus.period)
        plan, retries = self._csr_plan(pc, path)
        last = len(plan) - 1
        for i, (write, addr, bc, proto, retry, gap) in enumerate(plan):
            value = pc.tx_count % RING if write else self.rng.uint32()
            for _ in range(retries):
                # (a retry moves nothing: its row is the plan's, shared)
                yield ("rowgap", bus, retry, log, retry_gap)
            row = (proto, addr, value.to_bytes(4, "little"), 0, -1, -1, -1, bc)
            # the gap before the next access without resuming here in between
            yield ("rowgap", bus, row, log, gap) if i < last else ("row", bus, row, log)

    def _csr_plan(self, pc: _PC, path: str) -> tuple[list[tuple], int]:
        """What each access of a CSR group is (write, address, PCI-X byte count, the access's
        proto, the row of a retry of it, the gap after it in ps) and the retries before each,
        worked out once per PC and path: the groups repeat all capture long."""
        got = pc.csr_plans.get(path)
        if got is not None:
            return got
        bus = pc.bus
        nic, host = bus.cfg.nic, bus.cfg.host
        pcix = pc.pcix
        devsel = DEVSEL_CLOCKS[nic.devsel]
        bc = 4 if pcix else -1
        term = "disconnect_with_data" if nic.csr_disconnect else "normal"
        gap = max(0, host.csr_gap_clocks * bus.period)
        posted = host.posted_write_gap_clocks * bus.period
        plan = []
        seq = csr_sequence(nic, path)
        for write, reg in seq:
            addr = nic.bar + reg
            if write:
                cmd, purpose, waits = "mem_write", "csr_write", nic.csr_write_waits
            else:
                cmd, purpose, waits = ("mem_read_dword" if pcix else "mem_read"), "csr_read", nic.csr_read_waits
            retry = Txn("host", purpose, cmd, addr, 0, "retry", devsel, 0, 0, 32, not write, pcix, -1, -1, bc, -1,
                        pc.name)
            access = Txn("host", purpose, cmd, addr, 4, term, devsel, waits, 0, 32, not write, pcix, -1, -1, bc,
                         -1, pc.name, bytes(4))
            # a posted write lets the CPU go on at once: the next access follows it closely
            after = posted if (posted and write) else gap
            plan.append((write, addr, bc, _proto(access, bus.length(access)),
                         _row(retry, {}, bus.length(retry)), after))
        retries = nic.csr_retries if nic.csr_retry_path in ("both", path) else 0
        got = pc.csr_plans[path] = (plan, retries)
        return got

    def _dma_read(self, pc: _PC, addr: int, payload: bytes, purpose: str, seq: int, log: list):
        """NIC bus-master read of ``payload`` from host memory at ``addr``."""
        cfg = pc.bus.cfg
        if cfg.kind == "pcix":
            yield from self._pcix_read(pc, addr, payload, purpose, seq, log)
            return
        lat = self.sc.faults.latency_every
        if lat and purpose == "data_read" and pc.bus.captured:
            plan = self._read_plan(pc, addr, len(payload), purpose)       # (its waits change by count)
        else:
            plan = _plan(pc.read_plans, self._read_plan, pc, addr, len(payload), purpose)
        bus, gap = pc.bus, pc.dma_gap
        last = len(plan) - 1
        for j, (pos, proto, _) in enumerate(plan):
            row = (proto, addr + pos, payload, pos, seq, -1, -1, -1)
            # the gap before the next burst without resuming here in between
            yield ("rowgap", bus, row, log, gap) if j < last else ("row", bus, row, log)

    def _read_plan(self, pc: _PC, addr: int, n: int, purpose: str) -> list[tuple]:
        """(offset, proto, -1) of every burst of a PCI DMA read of ``n`` bytes at ``addr``: the
        NIC's cache-line stops and the bridge's disconnects."""
        cfg = pc.bus.cfg
        host, nic = cfg.host, cfg.nic
        memo = pc.read_clocks
        lat = self.sc.faults.latency_every
        plan = []
        pos = 0
        while pos < n:
            a = addr + pos
            waits = host.read_initial_waits
            if lat and purpose == "data_read" and pc.bus.captured:
                pc.reads += 1
                if pc.reads % lat == 0:
                    waits = 20          # a violation: more than 16 clocks to the first data phase
            want = min(n - pos, nic_burst_room(cfg, a, True, waits))
            cmd = nic.read_command
            if cmd == "by_length":
                cmd, want = line_read(cfg.cache_line, a, want)
            if cmd in ("mem_read", "mem_read_line"):
                # MR / MRL: the NIC stops at the cache-line boundary (no prefetch beyond it)
                want = min(want, cfg.cache_line - (a % cfg.cache_line))
            take, term = want, "normal"
            if host.read_disconnect_bytes:
                room = host.read_disconnect_bytes - (a % host.read_disconnect_bytes)
                if room < want:
                    take, term = room, "disconnect_with_data"
            # protos (shape key, length, ...) remembered per burst shape and purpose, as for CSR
            # accesses (the rest is fixed per PC)
            key = (purpose, cmd, take, term, waits, a & 7, a >= 1 << 32)
            proto = memo.get(key)
            if proto is None:
                t = Txn("nic", purpose, cmd, a, take, term, 1, waits, host.read_waits_every,
                        cfg.width if take > 4 else 32, True, pc.pcix, -1, -1, -1, -1, pc.name)
                proto = memo[key] = _proto(t, pc.bus.length(t))
            plan.append((pos, proto, -1))
            pos += take
        return plan

    def _pcix_read(self, pc: _PC, addr: int, payload: bytes, purpose: str, seq: int, log: list):
        """PCI-X: Memory Read Block requests of at most MMRBC, each answered by a split
        response and, after the bridge's memory latency, split completions that may
        disconnect at an ADB."""
        cfg = pc.bus.cfg
        host, nic = cfg.host, cfg.nic
        n = len(payload)
        pos = 0
        done = _Queue()
        outstanding = 0
        requester = (1 << 8) | (2 << 3)          # bus 1, device 2, function 0
        while pos < n or outstanding:
            if pos < n and outstanding < nic.max_outstanding:
                a = addr + pos
                take = min(n - pos, cfg.mmrbc, nic_burst_room(cfg, a, True, 0))
                tag = pc.tag
                pc.tag = (pc.tag + 1) % 32
                t = self._txn(pc, master="nic", purpose=purpose, command="mem_read_block", address=a,
                              nbytes=0, termination="split_response", devsel=1, read=True, packet=seq,
                              tag=tag, requester=requester, byte_count=take)
                log.append((yield ("txn", pc.bus, t)))
                self.eng.spawn(self._split_completion(pc, a, payload[pos:pos + take], tag, requester,
                                                      purpose, seq, log, done),
                               self.eng.now + self.clocks(pc, host.split_latency_clocks))
                pos += take
                outstanding += 1
                yield ("sleep", self.clocks(pc, nic.dma_gap_clocks))
                continue
            yield ("get", done)
            outstanding -= 1

    def _split_completion(self, pc, addr, chunk, tag, requester, purpose, seq, log, done):
        cfg = pc.bus.cfg
        host = cfg.host
        pos, n = 0, len(chunk)
        while pos < n:
            take, term = n - pos, "normal"
            if host.completion_adb:
                limit = host.completion_adb * ADB
                room = limit - ((addr + pos) % limit)
                if room < take:
                    take, term = room, "disconnect_with_data"
            t = self._txn(pc, master="host", purpose="data_completion" if purpose == "data_read" else "desc_completion",
                          command="split_completion",
                          address=(tag << 24) | (requester << 8) | ((addr + pos) & 0x7F), nbytes=take, termination=term, devsel=1,
                          packet=seq, tag=tag, requester=requester, byte_count=n - pos,
                          data=chunk, data_off=pos)
            log.append((yield ("txn", pc.bus, t)))
            pos += take
            if pos < n:
                yield ("sleep", self.clocks(pc, 1))
        self.eng.put(done, True)

    def _dma_write(self, pc: _PC, addr: int, payload: bytes, purpose: str, seq: int, log: list):
        plan = _plan(pc.write_plans, self._write_plan, pc, addr, len(payload), purpose)
        bus, gap = pc.bus, pc.dma_gap
        last = len(plan) - 1
        for j, (pos, proto, bc) in enumerate(plan):
            if bc >= 0:             # PCI-X: a tag per burst, the sequence's bytes left
                row = (proto, addr + pos, payload, pos, seq, pc.tag, (1 << 8) | (2 << 3), bc)
                pc.tag = (pc.tag + 1) % 32
            else:
                row = (proto, addr + pos, payload, pos, seq, -1, -1, -1)
            yield ("rowgap", bus, row, log, gap) if j < last else ("row", bus, row, log)

    def _write_plan(self, pc: _PC, addr: int, n: int, purpose: str) -> list[tuple]:
        """(offset, proto, PCI-X byte count or -1) of every burst of a DMA write of ``n`` bytes at
        ``addr``: memory write and invalidate in whole lines, the bridge's disconnects, PCI-X
        write sequences of at most 4096 bytes."""
        cfg = pc.bus.cfg
        host, nic = cfg.host, cfg.nic
        pcix = cfg.kind == "pcix"
        memo = pc.write_clocks
        plan = []
        pos = 0
        while pos < n:
            a = addr + pos
            take, term = min(n - pos, nic_burst_room(cfg, a, False, host.write_initial_waits)), "normal"
            cmd = "mem_write_block" if pcix else nic.write_command
            if cmd == "mem_write_invalidate":
                whole = (take // cfg.cache_line) * cfg.cache_line
                if a % cfg.cache_line or whole == 0:
                    cmd = "mem_write"
                else:
                    take = whole
            if host.write_disconnect_bytes:
                room = host.write_disconnect_bytes - (a % host.write_disconnect_bytes)
                if room < take:
                    take, term = room, "disconnect_with_data"
            if pcix:
                # a PCI-X write sequence carries at most 4096 bytes; a disconnect continues it
                seq_left = 4096 - (pos % 4096)
                take = min(take, seq_left)
            key = (purpose, cmd, take, term, a & 7, a >= 1 << 32)
            proto = memo.get(key)
            if proto is None:
                t = Txn("nic", purpose, cmd, a, take, term, 1, host.write_initial_waits, 0,
                        cfg.width if take > 4 else 32, False, pc.pcix, pc=pc.name)
                proto = memo[key] = _proto(t, pc.bus.length(t))
            plan.append((pos, proto, min(n - pos, 4096 - (pos % 4096)) if pcix else -1))
            pos += take
        return plan

    # -- frames ----------------------------------------------------------------------
    def frame_payload(self, seq: int, user_bytes: int, src: str) -> bytes:
        """Ethernet/IPv4/UDP frame without CRC carrying a UDPmon data packet."""
        dst = "b" if src == "a" else "a"
        udp_len = user_bytes + 8
        ip_len = udp_len + 20
        iph = bytearray(b"\x45\x00" + ip_len.to_bytes(2, "big") + (seq & 0xFFFF).to_bytes(2, "big")
                        + b"\x40\x00\x40\x11\x00\x00" + _IP[src] + _IP[dst])
        s = sum(_HEADER_WORDS.unpack(iph))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        iph[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
        udph = b"\x13\x89\x13\x89" + udp_len.to_bytes(2, "big") + b"\x00\x00"     # ports 5001 -> 5001
        body = self.rng.bytes(user_bytes)
        head = _UDPMON_HEAD + seq.to_bytes(8, "little") + (int(self.eng.now // 100000)).to_bytes(8, "little")
        n = min(len(head), user_bytes)
        frame = _MAC[dst] + _MAC[src] + b"\x08\x00" + bytes(iph) + udph + head[:n] + body[n:]
        if len(frame) < MIN_FRAME - 4:
            frame += bytes(MIN_FRAME - 4 - len(frame))
        return frame

    # -- processes -------------------------------------------------------------------
    def app_stream(self):
        """a's application: a send every spacing_us (plus jitter). In request/response mode
        these are the requests; b answers each from its interrupt routine (isr)."""
        tr = self.sc.traffic
        t0 = self.us(tr.start_us)
        i = 0
        while tr.count == 0 or i < tr.count:
            t = t0 + self.us(i * tr.spacing_us)
            if tr.jitter_us:
                t += self.us(self.rng.uniform(0.0, tr.jitter_us))
            if t >= self.duration_ps:
                return
            yield ("until", t)
            yield from self.send(self.pcs["a"], tr.frame_bytes)
            i += 1

    def send(self, pc: _PC, user_bytes: int):
        """The driver's send: CSR setup group, then the NIC takes the packet."""
        seq = len(self.packets)
        log = PacketLog(seq, pc.name, "b" if pc.name == "a" else "a", user_bytes,
                        max(MIN_FRAME, user_bytes + IP_UDP_OVERHEAD + ETH_OVERHEAD))
        log.send_app_ps = self.eng.now
        self.packets.append(log)
        payload = self.frame_payload(seq, user_bytes, pc.name)
        nic = pc.bus.cfg.nic
        if nic.tx_ring:
            # the ring is full: the send waits for a status write-back to free a slot
            while pc.tx_ring_used >= nic.tx_ring:
                yield ("get", pc.tx_ring_free)
            pc.tx_ring_used += 1
        pc.tx_count += 1
        yield from self._csr_group(pc, "send", log.csr_txns)
        self.eng.at(self.eng.now + self.clocks(pc, nic.doorbell_clocks), self._kick(pc, (log, payload)))

    def _kick(self, pc, item):
        self.eng.put(pc.tx_queue, item)
        return
        yield

    def nic_tx_desc(self, pc: _PC):
        """NIC descriptor fetch: prompt after the doorbell (tail write), ahead of the data. With
        tx_desc_every > 1 the NIC fetches again only when its data DMA has taken the last batch,
        then the descriptors of up to tx_desc_every sends waiting by then in one read (logged
        with the first of them), never across the ring's end."""
        nic = pc.bus.cfg.nic
        idx = 0
        while True:
            batch = [(yield ("get", pc.tx_queue))]
            waiting = pc.tx_queue.items
            while waiting and len(batch) < nic.tx_desc_every and (idx + len(batch)) % RING:
                batch.append(waiting.popleft())
            if nic.desc_bytes:
                desc = b"".join(self._tx_descriptor(pc, idx + k, len(payload)) for k, (_, payload) in enumerate(batch))
                yield from self._dma_read(pc, pc.mem + TX_RING + (idx % RING) * 16, desc, "desc_fetch",
                                          batch[0][0].seq, batch[0][0].tx_dma)
            for log, payload in batch:
                self.eng.put(pc.tx_data_queue, (log, payload, idx))
                idx += 1
            if nic.tx_desc_every > 1:
                # a descriptor cache: the next fetch when the data DMA has taken this batch
                yield ("get", pc.tx_desc_free)

    def _tx_descriptor(self, pc: _PC, idx: int, nbytes: int) -> bytes:
        """Transmit descriptor ``idx`` (desc_bytes of it): buffer address, length, command."""
        desc = (pc.mem + TX_BUF + (idx % RING) * 2048).to_bytes(8, "little") \
            + nbytes.to_bytes(2, "little") + b"\x00\x0b\x00\x00\x00\x00"
        return (desc + bytes(pc.bus.cfg.nic.desc_bytes))[:pc.bus.cfg.nic.desc_bytes]

    def nic_tx(self, pc: _PC):
        """NIC transmit data DMA in read bursts; at most two frames in the FIFO waiting for
        the wire, so a busy link paces the DMA."""
        nic = pc.bus.cfg.nic
        while True:
            log, payload, idx = yield ("get", pc.tx_data_queue)
            if nic.tx_desc_every > 1 and not pc.tx_data_queue.items:
                self.eng.put(pc.tx_desc_free, True)
            while pc.tx_inflight >= 2:
                yield ("get", pc.tx_fifo_free)
            yield ("sleep", self.clocks(pc, nic.dma_gap_clocks))
            yield from self._dma_read(pc, pc.mem + TX_BUF + (idx % RING) * 2048, payload, "data_read",
                                      log.seq, log.tx_dma)
            pc.tx_inflight += 1
            self.eng.put(pc.wire, (log, payload, self.eng.now + self.us(nic.tx_latency_us), idx))

    def nic_wire(self, pc: _PC):
        """Transmitter MAC: puts DMA'd frames on the link, honouring pause frames."""
        direction = "a_to_b" if pc.name == "a" else "b_to_a"
        peer = self.pcs["b" if pc.name == "a" else "a"]
        while True:
            log, payload, ready, idx = yield ("get", pc.wire)
            start = max(ready, self.eng.now, self.link_free[direction])
            for p0, p1 in self.pauses:
                if pc.name == "a" and p0 <= start < p1:
                    start = p1
            yield ("until", start)
            frame = self._put_on_wire(direction, log.frame_bytes, payload, log.seq, "data")
            log.frame = frame
            lost = log.seq in self.lost or (self.sc.link.loss and self.rng.random() < self.sc.link.loss)
            frame.lost = log.lost = bool(lost)
            yield ("until", frame.end_ps)
            pc.tx_inflight -= 1
            self.eng.put(pc.tx_fifo_free, True)
            self.eng.spawn(self._tx_done(pc, log, idx))
            if not lost:
                arrive = frame.end_ps + self.us(self.sc.link.propagation_us)
                self.eng.at(arrive, self._kick_rx(peer, (log, payload)))

    def _put_on_wire(self, direction, frame_bytes, payload, seq, kind) -> Frame:
        start = max(self.eng.now, self.link_free[direction])
        # the MAC starts a frame on its byte clock
        start = -(-start // self.byte_ps) * self.byte_ps
        wire = (PREAMBLE_BYTES + frame_bytes) * self.byte_ps
        f = Frame(seq, direction, kind, frame_bytes, start, start + wire, payload=payload)
        self.link_free[direction] = f.end_ps + IFG_BYTES * self.byte_ps
        self.frames.append(f)
        return f

    def _kick_rx(self, pc, item):
        self.eng.put(pc.rx_queue, item)
        return
        yield

    def _tx_done(self, pc: _PC, log: PacketLog, idx: int):
        nic = pc.bus.cfg.nic
        if nic.status_bytes:
            status = (b"\x01" + bytes(nic.status_bytes))[:nic.status_bytes]
            yield from self._dma_write(pc, pc.mem + TX_RING + (idx % RING) * 16 + 12 - (nic.status_bytes > 4) * 12,
                                       status, "status_write", log.seq, log.tx_dma)
        if nic.tx_ring:
            pc.tx_ring_used -= 1
            self.eng.put(pc.tx_ring_free, True)
        yield from self._irq_event(pc, ("tx", log))

    def nic_rx(self, pc: _PC):
        nic = pc.bus.cfg.nic
        idx = 0
        while True:
            log, payload = yield ("get", pc.rx_queue)
            yield ("sleep", self.us(nic.rx_latency_us))
            if nic.desc_bytes and idx % nic.rx_desc_every == 0:
                n = nic.rx_desc_every
                descs = b"".join((pc.mem + RX_BUF + ((idx + k) % RING) * 2048).to_bytes(8, "little") + bytes(8)
                                 for k in range(n))
                yield from self._dma_read(pc, pc.mem + RX_RING + (idx % RING) * 16, descs, "desc_fetch",
                                          log.seq, log.rx_dma)
                yield ("sleep", self.clocks(pc, nic.dma_gap_clocks))
            # the NIC strips the CRC: memory gets the same bytes the sender's NIC read
            yield from self._dma_write(pc, pc.mem + RX_BUF + (idx % RING) * 2048, payload, "data_write",
                                       log.seq, log.rx_dma)
            if nic.status_bytes:
                yield ("sleep", self.clocks(pc, nic.dma_gap_clocks))
                status = (len(payload).to_bytes(2, "little") + b"\x00\x00\x03" + bytes(nic.status_bytes))
                yield from self._dma_write(pc, pc.mem + RX_RING + (idx % RING) * 16 + 8 * (nic.status_bytes <= 8),
                                           status[:nic.status_bytes], "status_write", log.seq, log.rx_dma)
            idx += 1
            pc.rx_count += 1
            self.eng.spawn(self._irq_event(pc, ("rx", log)))

    def _irq_event(self, pc: _PC, ev):
        nic = pc.bus.cfg.nic
        pc.pending_events.append(ev)
        if len(pc.pending_events) >= nic.coalesce_packets:
            self._raise_irq(pc)
        elif nic.coalesce_us and not pc.irq_timer_armed:
            pc.irq_timer_armed = True
            self.eng.at(self.eng.now + self.us(nic.coalesce_us), self._irq_timer(pc))
        return
        yield

    def _irq_timer(self, pc: _PC):
        if pc.irq_timer_armed:
            self._raise_irq(pc)
        return
        yield

    def _raise_irq(self, pc: _PC):
        pc.irq_timer_armed = False
        events, pc.pending_events = pc.pending_events, []
        if events:
            irq = [self.eng.now, events, None]      # (its routine's CSR group when it runs)
            pc.irqs.append(irq)
            self.eng.put(pc.irq_queue, irq)

    def isr(self, pc: _PC):
        """The driver's interrupt service: one CSR group per interrupt, then the stack."""
        host = pc.bus.cfg.host
        while True:
            irq = yield ("get", pc.irq_queue)
            t_irq, events = irq[0], irq[1]
            yield ("until", max(self.eng.now, t_irq + self.us(host.irq_latency_us)))
            group = irq[2] = _indices()
            yield from self._csr_group(pc, "irq", group)
            for kind, log in events:
                if kind == "tx":
                    log.tx_irq_csr = group
                else:
                    log.rx_irq_csr = group
                    if self.sc.traffic.pattern == "request_response" and pc.name == "b":
                        self.eng.spawn(self._respond(pc), self.eng.now + self.us(self.sc.traffic.response_delay_us))

    def _respond(self, pc: _PC):
        yield from self.send(pc, self.sc.traffic.response_bytes)

    def pause_source(self):
        """b's MAC sends a pause frame every pause_interval_us; a stops transmitting."""
        lk = self.sc.link
        t = self.us(lk.pause_interval_us)
        while t < self.duration_ps:
            yield ("until", t)
            # MAC control PAUSE: reserved multicast address, type 0x8808, opcode 1, quanta
            quanta = min(0xFFFF, int(lk.pause_us * 1e3 * lk.rate_gbps / 512))
            body = (bytes.fromhex("0180c2000001") + bytes.fromhex("00022b000002") + b"\x88\x08"
                    + b"\x00\x01" + quanta.to_bytes(2, "big"))
            body += bytes(PAUSE_FRAME - 4 - len(body))
            f = self._put_on_wire("b_to_a", PAUSE_FRAME, body, -1, "pause")
            arrive = f.end_ps + self.us(lk.propagation_us)
            self.pauses.append((arrive, arrive + self.us(lk.pause_us)))
            t += self.us(lk.pause_interval_us)

    def other_traffic(self, bus: BusModel, cfg, k: int):
        rng = np.random.default_rng([self.sc.seed, 1000 + k, zlib.crc32(bus.cfg.name.encode())])
        pcix = bus.cfg.kind == "pcix"
        read = "read" in cfg.command
        while True:
            gap = rng.exponential(1.0 / cfg.rate_per_us)
            yield ("sleep", self.us(gap))
            cmd = cfg.command
            if pcix:
                cmd = {"mem_read": "mem_read_dword", "mem_read_line": "mem_read_block",
                       "mem_read_multiple": "mem_read_block", "mem_write_invalidate": "mem_write_block"}.get(cmd, cmd)
            nbytes = cfg.bytes if not cmd.startswith("io") and cmd != "mem_read_dword" else 4
            t = Txn(master="other", purpose="other", command=cmd, address=cfg.address,
                    nbytes=nbytes, devsel=1, initial_waits=4 if read else 0, read=read, pcix=pcix,
                    width=bus.cfg.width if nbytes > 4 else 32, pc=bus.cfg.pc,
                    data=rng.bytes(nbytes), byte_count=nbytes if pcix else -1,
                    tag=0 if pcix else -1, requester=(2 << 8) if pcix else -1)
            yield ("txn", bus, t)

    def run(self) -> ModelResult:
        eng = self.eng
        for pc in self.pcs.values():
            eng.spawn(self.nic_tx_desc(pc))
            eng.spawn(self.nic_tx(pc))
            eng.spawn(self.nic_wire(pc))
            eng.spawn(self.nic_rx(pc))
            eng.spawn(self.isr(pc))
        eng.spawn(self.app_stream())
        if self.sc.link.pause_interval_us:
            eng.spawn(self.pause_source())
        for bus in self.buses.values():
            for k, o in enumerate(bus.cfg.other):
                if o.rate_per_us > 0:
                    eng.spawn(self.other_traffic(bus, o, k))
        eng.run(self.duration_ps)
        return ModelResult(self.buses, sorted(self.frames, key=lambda f: f.start_ps), self.packets,
                           self.pauses, self.duration_ps, {name: pc.irqs for name, pc in self.pcs.items()})


def run_model(sc: Scenario, length: Callable[[Txn], int] = default_length) -> ModelResult:
    return Model(sc, length).run()

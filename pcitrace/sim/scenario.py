"""Scenario files: what the simulator models, read from TOML and checked key by key.

A scenario describes two PCs (``a`` sends, ``b`` receives; in request/response mode ``b``
answers) joined back to back by an Ethernet link, the PCI / PCI-X bus of each PC that the
logic analyser watches, the NIC on it, the host bridge and driver behaviour, unrelated
traffic from other devices, and the UDP traffic. Every key has a default modelled on the
seed papers (Intel PRO/1000 XT on a SuperMicro 370DLE, 64-bit/66 MHz); a scenario only
states what differs. Times are in microseconds (``*_us``) or bus clocks (``*_clocks``).

Top level::

    name = "pro1000_66mhz"      # used in the truth file
    seed = 1                    # numpy Generator seed: same scenario + seed = same capture
    duration_us = 600           # capture length
    mode = "timing"             # "timing" (CLK channels, >= 4 samples per clock at a whole-Hz
                                # rate, e.g. 400 MHz for 66 MHz buses) or "state" (one per clock)
    ad = true                   # capture AD/C/BE#/PAR (false = control-only capture)
    gnt = true                  # capture the NIC's REQ#/GNT#
    inta = false                # capture each bus's INTA# (active low: the NIC asserts it when it
                                # raises an interrupt, the ICR read of the service routine releases
                                # it; the truth then lists the interrupts)

    [traffic]
    pattern = "stream"          # "stream" (a -> b) or "request_response" (a asks, b answers)
    frame_bytes = 1400          # UDP user data per frame (the seed papers' "packet length")
    response_bytes = 1400       # request_response: bytes of each answer
    spacing_us = 11.0           # time between sends by the application
    jitter_us = 0.2             # uniform software jitter added to every send time
    count = 0                   # frames to send (0 = as many as fit in duration_us)
    start_us = 2.0              # first send
    response_delay_us = 10.0    # request_response: b's software time from interrupt to answer

    [link]
    rate_gbps = 1               # 1 or 10
    propagation_us = 0.5        # PHY + cable: frame off a's wire -> in b's receive FIFO
    probe = true                # capture the link probe's lines (false: the buses only)
    sof = true                  # start-of-frame probe line besides frame-present
    reverse_probe = false       # also probe the b -> a direction (pause frames, answers)
    pause_interval_us = 0       # > 0: b sends a pause frame this often, a stops sending
    pause_us = 60               # how long each pause stops a's transmitter
    loss = 0.0                  # probability that b drops a frame (CRC error / no buffer)
    lost = []                   # sequence numbers of frames b drops, besides `loss`
    gmii = false                # also the GMII byte bus (RXD[7:0], RX_DV, 125 MHz RX_CLK) of
                                # each probed direction, so decoders can read the frames

    [[bus]]                     # one table per captured bus; its NIC belongs to PC `pc`
    name = "send"               # channel prefix and record `bus` field
    pc = "a"                    # "a" or "b"
    kind = "pci"                # "pci" or "pcix" (PCI-X mode 1)
    width = 64                  # 32 or 64
    clock_mhz = 66              # 33, 66, 100 or 133 (pcix: 66, 100, 133)
    cache_line = 64             # bytes; conventional-PCI bursts are whole lines
    mmrbc = 512                 # pcix: Maximum Memory Read Byte Count (512, 1024, 2048, 4096)

    [bus.host]                  # the host bridge / CPU side of this bus
    read_initial_waits = 9      # target wait clocks before the first data of a DMA read
    read_disconnect_bytes = 512 # bridge prefetch buffer: disconnect with data after this (0 = never)
    read_waits_every = 0        # pci: one target wait after this many data phases (0 = none)
    write_initial_waits = 1     # target waits before the first data of a DMA write
    write_disconnect_bytes = 0  # bridge posting buffer: disconnect with data after this
    split_latency_clocks = 30   # pcix: split response -> split completion
    completion_adb = 4          # pcix: completer disconnects every this many 128-byte ADBs (0 = never)
    csr_gap_clocks = 18         # clocks between the CPU's PIO accesses of one group
    irq_latency_us = 6.0        # interrupt -> first CSR access of the service routine
    retry_gap_clocks = 4        # clocks before the bridge repeats a retried access
    posted_write_gap_clocks = 0 # > 0: the bridge posts CSR writes: a write follows the access
                                # before it after this many clocks instead of csr_gap_clocks
    memory_base = 0x1e800000    # descriptor rings and buffers (>= 4 GiB: DMA uses dual address cycles)

    [bus.nic]
    bar = 0xfebc0000            # memory BAR base (128 KiB)
    devsel = "medium"           # DEVSEL# speed on CSR accesses: fast, medium, slow
    csr_read_waits = 6          # target waits on a CSR read
    csr_write_waits = 0         # target waits on a CSR write
    csr_retries = 0             # STOP# retries (STOP# without data) before each CSR access is accepted
                                # (seed: "many PCI STOP signals" on the SysKonnect, PRO/1000 XT, i860)
    csr_retry_path = "both"     # which CSR groups the NIC retries: "both", "send" or "irq"
    csr_disconnect = false      # pci: the accepted CSR access ends with STOP# and TRDY# (disconnect
                                # with data) instead of normally
    send_csr_reads = 2          # CSR accesses that start a send
    send_csr_writes = 3
    irq_csr_reads = 2           # CSR accesses of the interrupt service routine
    irq_csr_writes = 2
    irq_order = "reads_first"   # the routine's accesses: "reads_first", "writes_first" or
                                # "interleaved" (read, write, read, ...)
    icr_read = "first"          # where the routine reads ICR among its reads: "first" or "last"
    doorbell_clocks = 8         # last send CSR write -> NIC's REQ#
    desc_bytes = 16             # descriptor fetched per send (0 = none)
    tx_desc_every = 1           # transmit: fetch the descriptors of up to this many queued sends at once
    rx_desc_every = 4           # receive: fetch this many descriptors at once
    tx_ring = 0                 # transmit ring slots (0 = unlimited): a send waits for a free slot
                                # (freed by the frame's status write-back), so sends faster than the
                                # wire back up in the driver instead of queueing without end
    status_bytes = 16           # descriptor write-back per frame
    dma_gap_clocks = 2          # NIC's REQ# again after a disconnect / between bursts
    max_burst_bytes = 0         # the NIC ends its own bursts at every multiple of this address
                                # (0 = never; 256 and 512 as the seed papers' NICs do)
    latency_timer_clocks = 0    # pci: the NIC's latency timer (0 = off): a burst ends when it
                                # expires, the arbiter having removed GNT# for a waiting master
    read_command = "mem_read_multiple"   # pci: mem_read, mem_read_line, mem_read_multiple, or
                                # "by_length": cache-line-aligned bursts, a partial line with Memory
                                # Read Line, one line MRL, whole lines Memory Read Multiple
    write_command = "mem_write"          # pci: mem_write or mem_write_invalidate
    max_outstanding = 1         # pcix: split reads in flight
    tx_latency_us = 1.0         # end of the frame's DMA -> frame on the wire
    rx_latency_us = 0.6         # end of the frame on the wire -> receive DMA
    coalesce_packets = 1        # interrupt after this many frames (sent or received) ...
    coalesce_us = 0.0           # ... or this long after the first unsignalled one (0 = off): an
                                # absolute timer (seed: 64 x 1.024 us, ~70 us)

    [faults]                    # protocol violations (the truth lists the findings they cause)
    parity_errors = 0           # NIC data phases with a wrong PAR
    latency_every = 0           # every n-th DMA read: 20 wait clocks (> 16: initial latency)
    glitches = 0                # timing mode: a control line pulses for one sample mid-clock
    stray_irdy = 0              # IRDY# asserted on an idle clock, outside any transaction
    trdy_without_devsel = 0     # TRDY# on a CSR write's decode clock, before DEVSEL#

    [[bus.other]]               # unrelated traffic from another device on this bus
    rate_per_us = 0.02          # mean transactions per microsecond (Poisson)
    bytes = 256
    command = "mem_write"       # or mem_read / mem_read_multiple / ...
    address = 0xd0000000

Unknown keys and out-of-range values raise PcitraceError naming the key and the fix.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any

from pcitrace.errors import PcitraceError

PCI_READ_COMMANDS = ("mem_read", "mem_read_line", "mem_read_multiple")
PCI_WRITE_COMMANDS = ("mem_write", "mem_write_invalidate")
OTHER_COMMANDS = PCI_READ_COMMANDS + PCI_WRITE_COMMANDS + ("io_read", "io_write")
DEVSEL_CLOCKS = {"fast": 1, "medium": 2, "slow": 3}
CSR_RETRY_PATHS = ("both", "send", "irq")
IRQ_ORDERS = ("reads_first", "writes_first", "interleaved")
MAX_BURSTS = (0, 32, 64, 128, 256, 512, 1024, 2048, 4096)
MIN_LATENCY_TIMER = 16      # clocks: room for the header, the first data's latency and a few data phases
MAX_TIME_US = 1e15            # any *_us key: finite picoseconds (1e308 us made the model's time inf); past 2**63 ps the engine holds a time at its maximum, never due
MIN_RATE_PER_US = 1e-6       # other masters: one transaction a second on average is the least that is drawn


@dataclasses.dataclass
class HostConfig:
    read_initial_waits: int = 9
    read_disconnect_bytes: int = 512
    read_waits_every: int = 0
    write_initial_waits: int = 1
    write_disconnect_bytes: int = 0
    split_latency_clocks: int = 30
    completion_adb: int = 4
    csr_gap_clocks: int = 18
    irq_latency_us: float = 6.0
    retry_gap_clocks: int = 4
    posted_write_gap_clocks: int = 0
    memory_base: int = 0x1E800000


@dataclasses.dataclass
class NicConfig:
    bar: int = 0xFEBC0000
    devsel: str = "medium"
    csr_read_waits: int = 6
    csr_write_waits: int = 0
    csr_retries: int = 0
    csr_retry_path: str = "both"
    csr_disconnect: bool = False
    send_csr_reads: int = 2
    send_csr_writes: int = 3
    irq_csr_reads: int = 2
    irq_csr_writes: int = 2
    irq_order: str = "reads_first"
    icr_read: str = "first"
    doorbell_clocks: int = 8
    desc_bytes: int = 16
    tx_desc_every: int = 1
    rx_desc_every: int = 4
    tx_ring: int = 0
    status_bytes: int = 16
    dma_gap_clocks: int = 2
    max_burst_bytes: int = 0
    latency_timer_clocks: int = 0
    read_command: str = "mem_read_multiple"
    write_command: str = "mem_write"
    max_outstanding: int = 1
    tx_latency_us: float = 1.0
    rx_latency_us: float = 0.6
    coalesce_packets: int = 1
    coalesce_us: float = 0.0


@dataclasses.dataclass
class OtherConfig:
    rate_per_us: float = 0.02
    bytes: int = 256
    command: str = "mem_write"
    address: int = 0xD0000000


@dataclasses.dataclass
class BusConfig:
    name: str = "send"
    pc: str = "a"
    kind: str = "pci"
    width: int = 64
    clock_mhz: float = 66.0
    cache_line: int = 64
    mmrbc: int = 512
    host: HostConfig = dataclasses.field(default_factory=HostConfig)
    nic: NicConfig = dataclasses.field(default_factory=NicConfig)
    other: list[OtherConfig] = dataclasses.field(default_factory=list)

    @property
    def period_ps(self) -> int:
        # 66 MHz PCI is 66.67 MHz nominal (15 ns), 33 is 33.33 (30 ns), 133 is 133.33 (7.5 ns)
        return int(round(1e6 / _nominal_mhz(self.clock_mhz)))

    @property
    def clock_hz(self) -> float:
        return 1e12 / self.period_ps


@dataclasses.dataclass
class TrafficConfig:
    pattern: str = "stream"
    frame_bytes: int = 1400
    response_bytes: int = 1400
    spacing_us: float = 11.0
    jitter_us: float = 0.2
    count: int = 0
    start_us: float = 2.0
    response_delay_us: float = 10.0


@dataclasses.dataclass
class LinkConfig:
    rate_gbps: float = 1.0
    propagation_us: float = 0.5
    probe: bool = True
    sof: bool = True
    reverse_probe: bool = False
    pause_interval_us: float = 0.0
    pause_us: float = 60.0
    loss: float = 0.0
    lost: list[int] = dataclasses.field(default_factory=list)
    gmii: bool = False


@dataclasses.dataclass
class FaultConfig:
    parity_errors: int = 0
    latency_every: int = 0
    glitches: int = 0
    stray_irdy: int = 0
    trdy_without_devsel: int = 0

    @property
    def any(self) -> bool:
        return any(dataclasses.astuple(self))


@dataclasses.dataclass
class Scenario:
    name: str = "scenario"
    seed: int = 1
    duration_us: float = 600.0
    mode: str = "timing"
    ad: bool = True
    gnt: bool = True
    inta: bool = False
    traffic: TrafficConfig = dataclasses.field(default_factory=TrafficConfig)
    link: LinkConfig = dataclasses.field(default_factory=LinkConfig)
    buses: list[BusConfig] = dataclasses.field(default_factory=list)
    faults: FaultConfig = dataclasses.field(default_factory=FaultConfig)
    path: str | None = None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("path", None)
        return d


def _nominal_mhz(mhz: float) -> float:
    return {33: 100 / 3, 66: 200 / 3, 100: 100.0, 133: 400 / 3}.get(int(mhz), float(mhz))


# -- loading ------------------------------------------------------------------------------

class _Reader:
    """Takes typed values out of one TOML table, remembering which keys were used."""

    def __init__(self, table: dict, where: str, path: str | None):
        if not isinstance(table, dict):
            raise PcitraceError(f"[{where}] must be a table", path=path, where=where,
                                fix=f"write [{where}] as a TOML table of key = value lines")
        self.table, self.where, self.path, self.used = table, where, path, set()

    def _key(self, key):
        return f"{self.where}.{key}" if self.where else key

    def err(self, key, msg, fix):
        return PcitraceError(f"{self._key(key)} {msg}", path=self.path, where=self._key(key), fix=fix)

    def get(self, key, default, kind, *, lo=None, hi=None, choices=None):
        if kind is float and key.endswith("_us"):           # a time: its picoseconds must fit an int64
            hi = MAX_TIME_US if hi is None else min(hi, MAX_TIME_US)
        self.used.add(key)
        if key not in self.table:
            return default
        v = self.table[key]
        if kind is bool:
            if not isinstance(v, bool):
                raise self.err(key, f"is {v!r}, not true/false", f"write {key} = true or false")
            return v
        if kind is str:
            if not isinstance(v, str):
                raise self.err(key, f"is {v!r}, not a string", f'write {key} = "..."')
            if choices and v not in choices:
                raise self.err(key, f"is {v!r}", f"use one of {', '.join(map(str, choices))}")
            return v
        if kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise self.err(key, f"is {v!r}, not an integer", f"write {key} as a whole number")
        elif kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v):
                raise self.err(key, f"is {_short(v)}, not a finite number", f"write {key} as a number")
            v = float(v)
        if choices and v not in choices:
            raise self.err(key, f"is {v:g}" if isinstance(v, float) else f"is {v!r}",
                           f"use one of {', '.join(f'{c:g}' if isinstance(c, float) else str(c) for c in choices)}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = f"{_bound(lo, '-inf')} .. {_bound(hi, 'inf')}"
            raise self.err(key, f"= {v} is out of range", f"use a value in {rng}")
        return v

    def sub(self, key) -> dict:
        self.used.add(key)
        return self.table.get(key, {})

    def finish(self):
        extra = sorted(set(self.table) - self.used)
        if extra:
            raise self.err(extra[0], "is not a scenario key",
                           "remove it or check its spelling (the keys are listed in "
                           "pcitrace.sim.scenario's documentation)")


def _bound(v, none: str) -> str:
    return none if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _finite(v: int | float) -> bool:
    """True if v is a number a float holds (an int past 1.8e308 does not)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:20] + f"... ({len(text)} characters)"


def _fill(obj, r: _Reader, specs: dict[str, dict]):
    for f in dataclasses.fields(obj):
        if f.name not in specs:
            continue
        spec = dict(specs[f.name])
        kind = spec.pop("kind", type(getattr(obj, f.name)))
        setattr(obj, f.name, r.get(f.name, getattr(obj, f.name), kind, **spec))


def _check_nic(b: BusConfig, nr: _Reader) -> None:
    """What a NIC's settings need of its bus."""
    nic = b.nic
    if b.kind == "pcix":
        for key, off in (("csr_disconnect", False), ("latency_timer_clocks", 0), ("read_command", None)):
            v = getattr(nic, key)
            if (off is None and v == "by_length") or (off is not None and v != off):
                raise nr.err(key, f"= {v!r} is a conventional PCI setting", 'remove it for kind = "pcix"')
    if 0 < nic.latency_timer_clocks < MIN_LATENCY_TIMER:
        raise nr.err("latency_timer_clocks", f"= {nic.latency_timer_clocks} leaves no room for data",
                     f"use 0 (off) or at least {MIN_LATENCY_TIMER}")


def _parse_bus(bt, i: int, path: str | None, names: set) -> BusConfig:
    """One [[bus]] table (its name not one of ``names``, the buses' before it)."""
    where = f"bus[{i}]"
    br = _Reader(bt, where, path)
    b = BusConfig()
    _fill(b, br, {
        "name": {}, "pc": {"choices": ("a", "b")}, "kind": {"choices": ("pci", "pcix")},
        "width": {"choices": (32, 64)}, "clock_mhz": {"kind": float, "choices": (33.0, 66.0, 100.0, 133.0)},
        "cache_line": {"choices": (16, 32, 64, 128, 256)},
        "mmrbc": {"choices": (512, 1024, 2048, 4096)},
    })
    if not b.name.isidentifier():
        raise br.err("name", f"is {b.name!r}", "use letters, digits and _ (it prefixes channel names)")
    if b.name in names:
        raise br.err("name", f"{b.name!r} is used by two buses", "give every [[bus]] its own name")
    names.add(b.name)
    if b.kind == "pcix" and b.clock_mhz == 33.0:
        raise br.err("clock_mhz", "= 33 is not a PCI-X mode 1 clock", "use 66, 100 or 133 for kind = \"pcix\"")
    if b.kind == "pci" and b.clock_mhz > 66.0:
        raise br.err("clock_mhz", f"= {b.clock_mhz:g} is too fast for conventional PCI",
                     "use 33 or 66, or kind = \"pcix\"")
    hr = _Reader(br.sub("host"), f"{where}.host", path)
    _fill(b.host, hr, {
        "read_initial_waits": {"lo": 0, "hi": 64}, "read_disconnect_bytes": {"lo": 0},
        "read_waits_every": {"lo": 0}, "write_initial_waits": {"lo": 0, "hi": 64},
        "write_disconnect_bytes": {"lo": 0}, "split_latency_clocks": {"lo": 1, "hi": 100000},
        "completion_adb": {"lo": 0, "hi": 32}, "csr_gap_clocks": {"lo": 1, "hi": 100000},
        "irq_latency_us": {"lo": 0.0}, "retry_gap_clocks": {"lo": 1, "hi": 10000},
        "posted_write_gap_clocks": {"lo": 0, "hi": 100000},
        "memory_base": {"lo": 0, "hi": 2**64 - 2**26},
    })
    if b.host.memory_base % 4096:
        raise hr.err("memory_base", f"= {b.host.memory_base:#x} is not page aligned", "use a multiple of 0x1000")
    for key in ("read_disconnect_bytes", "write_disconnect_bytes"):
        v = getattr(b.host, key)
        if v and v % (b.width // 8):
            raise hr.err(key, f"= {v} is not a multiple of the bus width ({b.width // 8} bytes)",
                         f"use a multiple of {b.width // 8}, or 0")
    hr.finish()
    nr = _Reader(br.sub("nic"), f"{where}.nic", path)
    _fill(b.nic, nr, {
        "bar": {"lo": 0x1000, "hi": 2**32 - 0x20000}, "devsel": {"choices": tuple(DEVSEL_CLOCKS)},
        "csr_read_waits": {"lo": 0, "hi": 32}, "csr_write_waits": {"lo": 0, "hi": 32},
        "csr_retries": {"lo": 0, "hi": 64}, "csr_retry_path": {"choices": CSR_RETRY_PATHS},
        "csr_disconnect": {}, "irq_order": {"choices": IRQ_ORDERS}, "icr_read": {"choices": ("first", "last")},
        "tx_desc_every": {"lo": 1, "hi": 64}, "tx_ring": {"lo": 0, "hi": 4096},
        "max_burst_bytes": {"choices": MAX_BURSTS}, "latency_timer_clocks": {"lo": 0, "hi": 255},
        "send_csr_reads": {"lo": 0, "hi": 256}, "send_csr_writes": {"lo": 1, "hi": 256},
        "irq_csr_reads": {"lo": 0, "hi": 256}, "irq_csr_writes": {"lo": 0, "hi": 256},
        "doorbell_clocks": {"lo": 1, "hi": 100000}, "desc_bytes": {"lo": 0, "hi": 4096},
        "rx_desc_every": {"lo": 1, "hi": 256}, "status_bytes": {"lo": 0, "hi": 4096},
        "dma_gap_clocks": {"lo": 1, "hi": 10000},
        "read_command": {"choices": PCI_READ_COMMANDS + ("by_length",)}, "write_command": {"choices": PCI_WRITE_COMMANDS},
        "max_outstanding": {"lo": 1, "hi": 32}, "tx_latency_us": {"lo": 0.0}, "rx_latency_us": {"lo": 0.0},
        "coalesce_packets": {"lo": 1, "hi": 100000}, "coalesce_us": {"lo": 0.0},
    })
    if b.nic.bar % 0x20000:
        raise nr.err("bar", f"= {b.nic.bar:#x} is not aligned to the 128 KiB BAR size",
                     "use a multiple of 0x20000")
    for key in ("desc_bytes", "status_bytes"):
        if getattr(b.nic, key) % 4:
            raise nr.err(key, f"= {getattr(b.nic, key)} is not a multiple of 4", "use whole DWORDs")
    _check_nic(b, nr)
    nr.finish()
    br.used.add("other")
    others = bt.get("other", [])
    if not isinstance(others, list):
        raise br.err("other", "must be an array of tables", "write [[bus.other]] tables")
    for j, ot in enumerate(others):
        orr = _Reader(ot, f"{where}.other[{j}]", path)
        o = OtherConfig()
        _fill(o, orr, {"rate_per_us": {"lo": 0.0, "hi": 10.0}, "bytes": {"lo": 4, "hi": 4096},
                       "command": {"choices": OTHER_COMMANDS}, "address": {"lo": 0, "hi": 2**32 - 4096}})
        if 0 < o.rate_per_us < MIN_RATE_PER_US:     # a mean gap past any capture (1e-320 gave inf)
            raise orr.err("rate_per_us", f"= {o.rate_per_us:g} is too small to simulate",
                          f"use 0 for no traffic, or at least {MIN_RATE_PER_US:g}")
        if o.bytes % 4:
            raise orr.err("bytes", f"= {o.bytes} is not a multiple of 4", "use whole DWORDs")
        orr.finish()
        b.other.append(o)
    br.finish()
    return b


def parse_scenario(data: dict, path: str | None = None) -> Scenario:
    """Build and check a Scenario from a parsed TOML document."""
    r = _Reader(data, "", path)
    sc = Scenario(path=path)
    _fill(sc, r, {
        "name": {}, "seed": {"lo": 0, "hi": 2**63 - 1}, "duration_us": {"lo": 1.0, "hi": 1e6},
        "mode": {"choices": ("timing", "state")}, "ad": {}, "gnt": {}, "inta": {},
    })

    t = _Reader(r.sub("traffic"), "traffic", path)
    _fill(sc.traffic, t, {
        "pattern": {"choices": ("stream", "request_response")},
        "frame_bytes": {"lo": 18, "hi": 65000}, "response_bytes": {"lo": 18, "hi": 65000},
        "spacing_us": {"lo": 0.0, "hi": 1e6}, "jitter_us": {"lo": 0.0, "hi": 1e3},
        "count": {"lo": 0}, "start_us": {"lo": 0.0}, "response_delay_us": {"lo": 0.0},
    })
    t.finish()

    lk = _Reader(r.sub("link"), "link", path)
    _fill(sc.link, lk, {
        "rate_gbps": {"choices": (1.0, 10.0)}, "propagation_us": {"lo": 0.0, "hi": 1e3},
        "probe": {}, "sof": {}, "reverse_probe": {}, "pause_interval_us": {"lo": 0.0},
        "pause_us": {"lo": 0.0, "hi": 3355.0}, "loss": {"lo": 0.0, "hi": 1.0}, "gmii": {},
    })
    if sc.link.gmii and (sc.mode != "timing" or sc.link.rate_gbps != 1.0):
        raise lk.err("gmii", "needs a timing capture of a 1 Gbit/s link (125 MHz byte clock)",
                     'set mode = "timing" and rate_gbps = 1, or gmii = false')
    lk.used.add("lost")
    lost = lk.table.get("lost", [])
    if not isinstance(lost, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                             for x in lost):
        raise lk.err("lost", f"is {lost!r}", "write lost = [3, 17] (frame sequence numbers, >= 0)")
    sc.link.lost = list(lost)
    lk.finish()

    fr = _Reader(r.sub("faults"), "faults", path)
    _fill(sc.faults, fr, {"parity_errors": {"lo": 0, "hi": 1000}, "latency_every": {"lo": 0, "hi": 100000},
                          "glitches": {"lo": 0, "hi": 1000}, "stray_irdy": {"lo": 0, "hi": 1000},
                          "trdy_without_devsel": {"lo": 0, "hi": 1000}})
    fr.finish()
    if sc.faults.glitches and sc.mode != "timing":
        raise fr.err("glitches", "needs a timing capture (a glitch is shorter than a clock)",
                     'set mode = "timing" or glitches = 0')

    r.used.add("bus")
    buses = data.get("bus", [])
    if not isinstance(buses, list) or not buses:
        raise PcitraceError("the scenario has no [[bus]] table", path=path, where="bus",
                            fix="add at least one [[bus]] with name, pc, kind, width and clock_mhz")
    names = set()
    for i, bt in enumerate(buses):
        sc.buses.append(_parse_bus(bt, i, path, names))
    r.finish()
    if sc.mode == "state" and len({b.period_ps for b in sc.buses}) > 1:
        raise PcitraceError("state mode needs one clock for all buses, the scenario has "
                            + ", ".join(f"{b.name} {b.clock_mhz:g} MHz" for b in sc.buses),
                            path=path, where="mode", fix='use mode = "timing" or give every bus the same clock_mhz')
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario TOML file (see the module documentation)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PcitraceError(f"cannot read the scenario: {exc.strerror}", path=path,
                            fix="check the path") from None
    except UnicodeDecodeError as exc:
        raise PcitraceError(f"is not UTF-8 text ({exc.object[exc.start]:#04x} is no UTF-8 character)", path=path,
                            where=f"byte {exc.start}", fix="save the scenario as UTF-8 TOML") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PcitraceError(f"is not valid TOML: {exc}", path=path, fix="correct the TOML syntax") from None
    return parse_scenario(data, str(path))


def scenario_from_dict(data: dict[str, Any]) -> Scenario:
    return parse_scenario(data, None)


def simulate(scenario: Scenario):
    """Run ``scenario``: -> SimResult(capture, profile, truth) (see pcitrace.sim.output)."""
    from pcitrace.sim.output import simulate as _simulate
    return _simulate(scenario)


def write_outputs(result, path):
    """Write NAME.sr (or .vcd), NAME.profile.toml and NAME.truth.json beside each other."""
    from pcitrace.sim.output import write_outputs as _write
    return _write(result, path)

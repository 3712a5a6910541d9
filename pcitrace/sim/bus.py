"""Cycle-accurate rendering of conventional PCI and PCI-X mode 1 bus activity, with its truth.

A :class:`TxnSpec` says what one transaction should do on the bus (command, address, data,
DEVSEL# speed, wait states, termination, PCI-X attributes, arbitration, parity). :func:`render`
lays a sequence of them out clock by clock and returns the electrical level of every signal
per clock plus the transaction records (docs/records.md) that a correct decoder must produce.

The truth records are computed from the specs (what the bus was asked to do), never by reading
the rendered signals back: the simulator is the third, independent reading of docs/records.md,
so a decoder bug and a renderer bug cannot cancel out.

Speed: the only Python loop runs once per transaction and emits a handful of *runs* (a state
code held for n clocks; a run of back-to-back data phases is one run whose word index steps by
one per clock). The per-clock arrays are then built block by block of about ``CLOCK_BLOCK``
clocks with ``np.repeat`` and table look-ups, so that no temporary is larger than a block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from pcitrace.decode.facts import MAX_INITIAL_LATENCY, PCI_COMMANDS, PCIX_COMMANDS, PCIX_DWORD_COMMANDS
from pcitrace.decode.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE
from pcitrace.errors import PcitraceError

DEVSEL_CLOCKS = {"fast": 1, "medium": 2, "slow": 3, "subtractive": 4, "none": None}
# PCI-X decode speeds are counted the same way from the attribute phase.
DEVSEL_ALIASES = {"a": "fast", "b": "medium", "c": "slow", "decode_a": "fast", "decode_b": "medium",
                  "decode_c": "slow"}

# Terminations a spec may ask for; the last three are PCI-X flavours of disconnect_with_data.
SPEC_TERMINATIONS = ("normal", "retry", "disconnect_with_data", "disconnect_without_data", "abandoned",
                     "target_abort", "master_abort", "split_response", "disconnect_adb",
                     "single_phase_disconnect")
_RECORD_TERMINATION = {"abandoned": "normal",
                       "disconnect_adb": "disconnect_with_data",
                       "single_phase_disconnect": "disconnect_with_data"}

# Clocks from the last header clock to the master abort: the master gives the subtractive
# decoder its clock 4 and deasserts FRAME# on clock 5 (PCI 2.3 section 3.3.3.1).
MASTER_ABORT_CLOCKS = 5

# Per-clock state codes.  Columns: FRAME# IRDY# TRDY# STOP# levels, and whether DEVSEL# is
# forced deasserted (target abort / split response signalling).
(IDLE, HEAD, TWAIT, TWAIT_L, DATA, DATA_L, DSTOP, DSTOP_L, STOP, STOP_L, ABORT, ABORT_L, SPLIT_L,
 EARLY_DSTOP, EARLY_STOP) = range(15)
_CODE_TABLE = np.array([
    # F  I  T  S  nodevsel
    [1, 1, 1, 1, 1],   # IDLE
    [0, 1, 1, 1, 0],   # HEAD: address / attribute phase, initiator wait
    [0, 0, 1, 1, 0],   # TWAIT: target wait, more phases to come
    [1, 0, 1, 1, 0],   # TWAIT_L: target wait in the final phase (FRAME# already released)
    [0, 0, 0, 1, 0],   # DATA
    [1, 0, 0, 1, 0],   # DATA_L: final data phase
    [0, 0, 0, 0, 0],   # DSTOP: data phase with STOP# (disconnect with data)
    [1, 0, 0, 0, 0],   # DSTOP_L
    [0, 0, 1, 0, 0],   # STOP: retry / disconnect without data
    [1, 0, 1, 0, 0],   # STOP_L
    [0, 0, 1, 0, 1],   # ABORT: target abort (DEVSEL# released with STOP#)
    [1, 0, 1, 0, 1],   # ABORT_L
    [1, 0, 0, 1, 1],   # SPLIT_L: PCI-X split response (TRDY# with DEVSEL# released, no STOP#)
    [0, 1, 0, 0, 0],   # EARLY_DSTOP: TRDY#+STOP# while the initiator still waits (disconnect A/B)
    [0, 1, 1, 0, 0],   # EARLY_STOP: STOP# while the initiator still waits (retry / disconnect C)
], dtype=np.uint8)
_F, _I, _T, _S = (np.ascontiguousarray(_CODE_TABLE[:, k]) for k in range(4))
# FRAME# IRDY# TRDY# STOP# of each state code as bits 0-3 of one byte: the four lines come out of
# one repeat over the runs (a repeat costs per run; a shift and mask per clock is far cheaper)
_FITS = (_F | _I << 1 | _T << 2 | _S << 3).astype(np.uint8)
_NODEV = _CODE_TABLE[:, 4].astype(bool)
_NODEV_BUSY = _NODEV.copy()
_NODEV_BUSY[IDLE] = False
_IS_DATA = np.zeros(len(_CODE_TABLE), bool)
_IS_DATA[[DATA, DATA_L, DSTOP, DSTOP_L]] = True


_DEVSEL_NAMES = (None, "fast", "medium", "slow", "subtractive")

def is_read(command: int, mode: str = "pci") -> bool:
    """Whether the target drives AD in the data phases (so a turnaround clock comes first)."""
    command &= 0xF
    if mode == "pcix" and command == 0xC:       # split completion: the completer writes
        return False
    return command in (0x0, 0x2, 0x4, 0x6, 0x8, 0xA, 0xC, 0xE)


def command_table(mode: str) -> dict[int, tuple[str, str]]:
    return PCIX_COMMANDS if mode == "pcix" else PCI_COMMANDS


def _sparse(waits, n: int, what: str) -> dict[int, int]:
    """Per-slot wait counts from a sequence (index = slot) or a mapping slot -> count."""
    if not waits:
        return {}
    items = waits.items() if isinstance(waits, Mapping) else enumerate(waits)
    out = {}
    for k, v in items:
        k, v = int(k), int(v)
        if v < 0:
            raise PcitraceError(f"{what}: negative wait count {v} in phase {k}", fix="use counts >= 0")
        if k < 0 or k >= n:
            if v:
                raise PcitraceError(f"{what}: phase {k} does not exist (the transaction has {n})",
                                    fix="give waits only for the phases the transaction has")
            continue
        if v:
            out[k] = v
    return out


@dataclasses.dataclass
class TxnSpec:
    """One bus transaction as the bus should carry it.

    ``data`` are the words of the data phases that *complete* (a retry has none, a disconnect
    without data after 3 phases has 3). ``byte_enables`` are asserted-low C/BE# per phase
    (one int for all phases; None = all enabled). ``initiator_waits`` / ``target_waits`` are
    per *slot*: the completed phases plus, for retry / disconnect without data / target abort,
    the slot in which the target stops (a sequence indexed by slot or a mapping slot -> count).
    In each slot the initiator waits come first (IRDY# deasserted), then the target waits
    (IRDY# asserted); the first slot's target waits are raised to what DEVSEL# decoding and the
    read turnaround need, so ``target_waits={0: 0}`` means "as early as the rules allow".
    ``master_done``: FRAME# is already released when the stopping slot starts (the master
    wanted no more phases); default True for normal / split, False for target terminations.
    ``stop_early``: (conventional PCI, retry / disconnects) the target asserts STOP# (with TRDY#
    for a disconnect with data) during the last ``stop_early`` initiator wait clocks of the
    stopping slot; those clocks are termination clocks, not initiator waits.
    ``parity_error``: None, -1 (address phase) or a data phase index whose PAR is inverted;
    ``parity_lane="par64"`` inverts PAR64 instead (data phases of a 64-bit transfer only).
    ``idle_before``: idle clocks before the address phase; 0 = fast back-to-back.
    ``termination="abandoned"`` (a fault): the master never completes the phase after ``data``;
    it waits on the target (``target_waits`` of that slot, at least one clock) and then starts
    the next transaction at once, a ``frame_reasserted`` finding; the record says ``normal``.
    """

    command: int
    address: int = 0
    data: Sequence[int] | np.ndarray = ()
    byte_enables: Sequence[int] | np.ndarray | int | None = None
    dac: bool | None = None
    req64: bool = False
    ack64: bool | None = None
    devsel: str = "fast"
    initiator_waits: Sequence[int] | Mapping[int, int] = ()
    target_waits: Sequence[int] | Mapping[int, int] = ()
    termination: str = "normal"
    master_done: bool | None = None
    stop_phases: int = 2               # disconnect_adb: data phases carrying STOP# up to the ADB
    stop_early: int = 0                # retry / disconnects: STOP# (+TRDY#) this many clocks before IRDY#
    requester: int = 0                 # PCI-X: bus << 8 | device << 3 | function
    tag: int = 0
    byte_count: int | None = None      # PCI-X burst commands; None = bytes of the data
    relaxed_ordering: bool = False
    no_snoop: bool = False
    idle_before: int = 1
    master: int = 0
    parity_error: int | None = None
    parity_lane: str = "par"

    @property
    def is_dac(self) -> bool:
        return bool(self.dac) if self.dac is not None else self.address >= (1 << 32)

    @property
    def wide(self) -> bool:
        """64-bit transfer: REQ64# and ACK64# (never with a master abort)."""
        ack = self.req64 if self.ack64 is None else self.ack64
        return bool(self.req64 and ack and self.devsel_name != "none" and self.termination != "master_abort")

    @property
    def devsel_name(self) -> str:
        d = str(self.devsel).lower()
        return DEVSEL_ALIASES.get(d, d)


class Strings:
    """A text column as codes into a small table (``table[codes]``): a record's command,
    DEVSEL# speed and termination take a handful of values, which as fixed-width unicode
    cost 48-96 bytes a record."""

    def __init__(self, table, codes: np.ndarray):
        self.table = list(table)
        self.codes = np.asarray(codes, np.int64)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i) -> "Strings":
        return Strings(self.table, self.codes[i])

    def tolist(self) -> list[str]:
        t = self.table
        return [t[c] for c in self.codes.tolist()]

    def to_array(self, dtype) -> np.ndarray:
        return np.array(self.table, dtype).reshape(-1)[self.codes] if self.table else np.zeros(len(self), dtype)


class RecordColumns:
    """A bus's records column by column, without the RECORD_DTYPE rows (452 bytes each): field ->
    one array or one value for every record; a field never set is zero, as in a zeroed record
    array. ``rec[field] = value`` and ``rec[field]`` work as on the record array."""

    def __init__(self, n: int):
        self.n = n
        self.columns: dict[str, object] = {}

    def __len__(self) -> int:
        return self.n

    def __setitem__(self, field: str, value) -> None:
        RECORD_DTYPE[field]          # (an unknown field fails here, as on the array)
        self.columns[field] = value

    def __getitem__(self, field: str) -> np.ndarray:
        v = self.columns.get(field, 0)
        if isinstance(v, Strings):
            return v.to_array(RECORD_DTYPE[field])
        if isinstance(v, np.ndarray) and len(v) == self.n and v.dtype == RECORD_DTYPE[field]:
            return v
        out = np.empty(self.n, RECORD_DTYPE[field])
        out[...] = v
        return out

    def column(self, field: str):
        """The field over every record: an array of the record dtype's type, or Strings."""
        v = self.columns.get(field, 0)
        if isinstance(v, Strings):
            return v
        if isinstance(v, str):
            return Strings([v], np.zeros(self.n, np.int64))
        return self[field]

    def to_array(self) -> np.ndarray:
        out = np.zeros(self.n, RECORD_DTYPE)
        for field in self.columns:
            out[field] = self[field]
        return out


@dataclasses.dataclass
class RenderedBus:
    """Per-clock signal levels of one bus plus the truth about them."""

    signals: dict[str, np.ndarray]   # canonical name -> per-clock array (levels; ad/cbe_n vectors)
    records: np.ndarray              # RECORD_DTYPE (a lean rendering: RecordColumns)
    words: np.ndarray                # WORD_DTYPE
    findings: np.ndarray             # FINDING_DTYPE
    clock_hz: float
    mode: str = "pci"
    width: int = 32
    bus: str = "pci"
    masters: tuple[str, ...] = ("nic",)
    gnt_master: int | None = 0
    with_ad: bool = True
    start_clock: np.ndarray | None = None   # per transaction: address phase clock
    end_clock: np.ndarray | None = None     # per transaction: last clock
    # the renderer's own schedule, for crop(): per-clock state codes, per transaction the
    # header clocks and first DEVSEL# clock, and the (transaction, phase clock) of bad parity
    # (a lean rendering has no codes: it cannot be cropped)
    codes: np.ndarray | None = dataclasses.field(default=None, repr=False)
    header_clocks: np.ndarray | None = dataclasses.field(default=None, repr=False)
    devsel_clock: np.ndarray | None = dataclasses.field(default=None, repr=False)
    bad_parity: list = dataclasses.field(default_factory=list, repr=False)
    # render_txns: per transaction start / end clock as scheduled, master index, purpose,
    # packet, pcix, bytes moved, retried (the Txn fields the truth needs, from the renderer's
    # columns)
    txn_columns: dict | None = dataclasses.field(default=None, repr=False)

    @property
    def clocks(self) -> int:
        return len(self.signals["frame_n"])

    def times_ps(self) -> np.ndarray:
        return clock_times(self.clocks, self.clock_hz)


def clock_times(n: int, clock_hz: float, start: int = 0) -> np.ndarray:
    """Time of clock i = round(i * 1e12 / clock_hz) ps (the sample time of its rising edge)."""
    return np.rint(np.arange(start, start + n, dtype=np.float64) * (1e12 / clock_hz)).astype(np.int64)


# Clocks per block of the per-clock pass (_assemble): its temporaries - a block's runs, value
# indices, state bits, C/BE# nibbles - stay in the CPU cache instead of being tens of MB of
# fresh pages each (128 k clocks: 1 MB of AD; 2^15..2^18 measured alike).
CLOCK_BLOCK = 1 << 17


def _parity(ad: np.ndarray, cbe: np.ndarray, par: np.ndarray, par64: np.ndarray | None,
            t8: np.ndarray) -> None:
    """Even parity of each clock's AD[31:0] and C/BE#[3:0] into ``par`` (AD[63:32] and
    C/BE#[7:4] into ``par64``); ``t8``: uint8 scratch at least as long as ``ad``."""
    n = len(ad)
    halves = ad.view(np.uint32)               # (ad is contiguous uint64: little-endian halves)
    lo, hi = (0, 1) if np.little_endian else (1, 0)
    t = t8[:n]
    for out, half, nib in ((par, lo, False), (par64, hi, True)):
        if out is None:
            continue
        np.bitwise_count(halves[half::2], out=out)
        if nib:
            np.right_shift(cbe, 4, out=t)
        else:
            np.bitwise_and(cbe, 0xF, out=t)
        out ^= np.bitwise_count(t, out=t)
        out &= 1


def _hold(lines, a: int, b: int, v: int, val_ad: np.ndarray, val_be: np.ndarray, total: int) -> None:
    """Clocks a..b-1 of an idle bus showing value-table entry ``v``, into the per-clock ``lines``
    (AD, C/BE#, FRAME#, IRDY#, TRDY#, STOP#, PAR, PAR64, state codes; PAR64 / codes may be
    None); their parity goes on clocks a+1..b (the bus's last clock has none)."""
    ad, cbe, f_n, irdy_n, trdy_n, stop_n, par, par64, code = lines
    ad[a:b] = val_ad[v]
    cbe[a:b] = val_be[v]
    for line, table in ((f_n, _F), (irdy_n, _I), (trdy_n, _T), (stop_n, _S)):
        line[a:b] = table[IDLE]
    if code is not None:
        code[a:b] = IDLE
    p, p64 = np.empty(1, np.uint8), np.empty(1, np.uint8)
    _parity(val_ad[v:v + 1], val_be[v:v + 1], p, p64, np.empty(1, np.uint8))
    e = min(b + 1, total)
    par[a + 1:e] = p[0]
    if par64 is not None:
        par64[a + 1:e] = p64[0]


@dataclasses.dataclass
class _Shape:
    """The clock pattern of one kind of transaction, relative to its address phase.

    Runs of (state code, length, word source, word offset, word step); word source 0 = the
    transaction's header values, 1 = its data words, 2 = the value seen in a stop slot."""

    code: np.ndarray
    length: np.ndarray
    source: np.ndarray
    offset: np.ndarray
    step: np.ndarray
    end: int                 # last clock - address clock
    first_data: int | None   # first data phase clock - address clock
    devsel: int | None       # first DEVSEL# clock - address clock (None: master abort)
    iwaits: int
    twaits: int
    rec_iwaits: int = 0
    rec_devsel: str = ""
    rec_termination: str = ""


def _shape(where: str, pcix: bool, read: bool, term: str, n: int | None, P: int, nhdr: int,
           iw: dict[int, int], tw: dict[int, int], master_done: bool, q: int, stop_early: int = 0) -> _Shape:
    runs: list[tuple[int, int, int, int, int]] = [(HEAD, nhdr, 0, 0, 1)]
    H = nhdr - 1
    if n is None:
        end, first_data, tot_iw, tot_tw = _master_abort_runs(runs, H, iw.get(0, 0), master_done)
        devsel = None
    else:
        end, first_data, tot_iw, tot_tw = _claimed_runs(runs, H, _min_first(read, term, n, P, H), term, P, iw, tw,
                                                        master_done, q, stop_early)
        devsel = H + n
    r = np.array(runs, dtype=np.int64).reshape(-1, 5)
    return _Shape(r[:, 0].astype(np.uint8), r[:, 1], r[:, 2], r[:, 3], r[:, 4], end, first_data, devsel,
                  tot_iw, tot_tw)


def _stop_slot(term: str) -> bool:
    """Whether the target stops in a slot of its own after the completed phases."""
    return term in ("retry", "disconnect_without_data", "target_abort", "abandoned")


def _min_first(read: bool, term: str, n: int, P: int, H: int) -> int:
    """The earliest clock (from the address phase) of the first slot's completion, for a
    claimed transaction whose last header clock is ``H`` and whose DEVSEL# comes ``n`` clocks
    after it."""
    if term in ("target_abort", "split_response", "abandoned") and P == 0:
        return H + n + 1                 # DEVSEL# must have been seen before it is released
    if _stop_slot(term) and P == 0:
        return H + n
    return H + max(n, 2 if read else 1)  # reads: turnaround clock before TRDY#


def _master_abort_runs(runs: list, H: int, w0: int, master_done: bool) -> tuple[int, None, int, int]:
    """Append a master abort's runs after its header (``w0`` initiator waits in slot 0);
    returns (end, first data clock = None, initiator waits, target waits)."""
    # Master abort: IRDY# asserted after the initiator waits; FRAME# released on clock
    # H+5 (or with IRDY# if the master wanted one phase), IRDY# one clock later.
    cur = H + 1
    if w0:
        runs.append((HEAD, w0, 2, 0, 0))
    end = max(H + MASTER_ABORT_CLOCKS, cur + w0)
    nt = end - (cur + w0) + 1
    if master_done:
        runs.append((TWAIT_L, nt, 2, 0, 0))
    else:
        if nt > 1:
            runs.append((TWAIT, nt - 1, 2, 0, 0))
        runs.append((TWAIT_L, 1, 2, 0, 0))
    return end, None, w0, nt


def _slot_end_codes(k: int, P: int, last: bool, term: str, master_done: bool,
                    adb_from: int) -> tuple[int, int | None]:
    """State code of the clock that ends slot ``k`` (a data phase, or the target's stop), and
    of the clock after it when the master still has to release FRAME# (else None)."""
    if k < P:
        if k >= adb_from:
            return (DSTOP_L if last else DSTOP), None
        if last and term in ("disconnect_with_data", "single_phase_disconnect"):
            return (DSTOP_L, None) if master_done else (DSTOP, STOP_L)
        return (DATA_L if last else DATA), None
    if term == "target_abort":
        return (ABORT_L, None) if master_done else (ABORT, ABORT_L)
    if term == "split_response":
        return SPLIT_L, None
    # retry / disconnect without data
    return (STOP_L, None) if master_done else (STOP, STOP_L)


def _early_stop(term: str, stop_early: int, k: int, w_i: int, cur: int, min_first: int) -> int:
    """Initiator wait clocks of the stopping slot ``k`` during which the target already
    signals the stop (``stop_early``, conventional PCI retry / disconnects)."""
    if not stop_early or term not in ("disconnect_with_data", "retry", "disconnect_without_data"):
        return 0
    # The target signals the stop while IRDY# is still deasserted; the stop cannot come before
    # DEVSEL# (nor TRDY# before the read turnaround).
    return min(stop_early, w_i, max(0, cur + w_i - min_first) if k == 0 else w_i)


def _claimed_runs(runs: list, H: int, min_first: int, term: str, P: int, iw: dict[int, int],
                  tw: dict[int, int], master_done: bool, q: int,
                  stop_early: int) -> tuple[int, int | None, int, int]:
    """Append the runs of a claimed transaction's slots after its header; returns (end, first
    data clock, initiator waits, target waits), clocks from the address phase."""
    cur = H + 1
    slots = P + 1 if _stop_slot(term) else max(P, 1)
    tot_iw = tot_tw = 0
    first_data = None
    final = slots - 1
    adb_from = P - q if term == "disconnect_adb" else P + 1
    wait_slots = sorted(set(iw) | set(tw))
    k = 0
    while k < slots:
        last = k == final
        w_i = iw.get(k, 0)
        w_t = tw.get(k, 0)
        if k == 0:
            w_t = max(w_t, min_first - (cur + w_i))
        if not w_i and not w_t and k < P and not last and k < adb_from:
            # a stretch of wait-free data phases is one run
            j = min([x for x in wait_slots if x > k] + [P, final, adb_from])
            runs.append((DATA, j - k, 1, k, 1))
            if first_data is None:
                first_data = cur
            cur += j - k
            k = j
            continue
        src, off = (1, k) if k < P else (2, 0)
        early = _early_stop(term, stop_early, k, w_i, cur, min_first) if last else 0
        if early:
            w_t = 0           # TRDY#/STOP# are already out: no target wait after IRDY#
        if w_i - early:
            runs.append((HEAD, w_i - early, src, off, 0))
        if early:
            runs.append((EARLY_DSTOP if k < P else EARLY_STOP, early, src, off, 0))
            master_done = True    # FRAME# goes with IRDY# once STOP# has been seen
        if last and term == "abandoned":
            w_t = max(w_t, 1)     # the final phase waits on the target until the master leaves
        if w_t:
            runs.append((TWAIT_L if (last and master_done) else TWAIT, w_t, src, off, 0))
        cur += w_i + w_t
        tot_iw += w_i - early
        tot_tw += w_t
        if last and term == "abandoned":
            break
        if k < P and first_data is None:
            first_data = cur
        code, extra = _slot_end_codes(k, P, last, term, master_done, adb_from)
        runs.append((code, 1, src, off, 0))
        cur += 1
        if extra is not None:
            runs.append((extra, 1, 2, 0, 0))
            cur += 1
        k += 1
    return cur - 1, first_data, tot_iw, tot_tw


def _wait_key(w) -> tuple:
    """A hashable stand-in for a waits argument (equal waits written differently only cost a
    second shape computation)."""
    if isinstance(w, Mapping):
        return tuple(w.items())
    return ("seq",) + tuple(w)


def render(specs: Sequence[TxnSpec], *, mode: str = "pci", width: int = 32, clock_hz: float = 33e6,
           bus: str = "pci", masters: Sequence[str] = ("nic",), gnt_master: int | None = 0,
           with_ad: bool = True, tail: int = 2, total_clocks: int | None = None) -> RenderedBus:
    """Lay ``specs`` out on one bus, clock by clock.

    ``masters`` names the bus masters (``TxnSpec.master`` indexes it); each gets ``req_n:NAME``
    and ``gnt_n:NAME`` lines, and ``gnt_master`` (the NIC; None = GNT# not captured) also
    appears as ``req_n`` / ``gnt_n`` and decides the records' ``gnt`` field. ``with_ad``: the
    truth is that of a capture without AD, C/BE# and PAR (the signals are rendered anyway).
    ``tail`` idle clocks end the bus; ``total_clocks`` pads it further to that length.

    Transactions of the same shape (command direction, termination, DEVSEL#, phases, waits)
    share one precomputed clock pattern, so the per-transaction cost is a dictionary look-up.
    """
    masters = tuple(masters)
    _check_bus(mode, width, clock_hz, masters, gnt_master)
    nmasters = len(masters)
    pcix = mode == "pcix"

    shapes: dict[tuple, int] = {}
    shape_list: list[_Shape] = []
    h_ad: list[int] = [0]                      # header table; entry 0 = the bus before anything
    h_cbe: list[int] = [0xFF]
    data_parts: list = []
    be_parts: list = []
    t_shape: list[int] = []
    t_start: list[int] = []
    t_idle: list[int] = []
    t_hbase: list[int] = []
    t_pend: list[int] = []
    t_dbase: list[int] = []
    t_P: list[int] = []
    t_wide: list[bool] = []
    t_req64: list[bool] = []
    t_ack64: list[bool] = []
    t_master: list[int] = []
    t_cmd: list[int] = []
    t_addr: list[int] = []
    t_dac: list[bool] = []
    t_px: list[tuple] = []
    par_flips: list[tuple[int, int, str]] = []

    reads = [is_read(c, mode) for c in range(16)]
    prev_abandoned = False
    reasserted: list[int] = []
    clock = 0
    n_words = 0
    for t, s in enumerate(specs):
        cmd = _spec_command(t, s)
        n, term = _spec_devsel(t, s)
        data = s.data
        P = len(data)
        addr = s.address
        dac = s.dac if s.dac is not None else addr >= 0x100000000
        nhdr = (2 if dac else 1) + pcix
        read = reads[cmd]
        iw = s.initiator_waits
        tw = s.target_waits
        key = (read, term, n, P, nhdr, _wait_key(iw) if iw else (), _wait_key(tw) if tw else (),
               s.master_done, s.stop_phases, s.stop_early)
        si = shapes.get(key)
        if si is None:
            si = len(shape_list)
            shape_list.append(_make_shape(t, pcix, read, term, n, P, nhdr, s, with_ad))
            shapes[key] = si
        shp = shape_list[si]
        req64 = s.req64
        if req64 and width != 64:
            raise PcitraceError(f"transaction {t}: REQ64# on a 32-bit bus", fix="render with width=64 or drop req64")
        ack64 = (req64 if s.ack64 is None else bool(s.ack64)) and n is not None
        wide = bool(req64 and ack64)
        master = s.master
        if not 0 <= master < nmasters:
            raise PcitraceError(f"transaction {t}: master {master} is not one of {masters}", fix="index `masters`")

        idle = s.idle_before
        if idle < 0 or prev_abandoned:
            idle = 0
        if prev_abandoned:
            reasserted.append(t)
        prev_abandoned = term == "abandoned"
        if t == 0 and idle < 2:
            idle = 2          # a clock before the first address phase, in every capture mode
        A = clock + idle
        end = A + shp.end
        clock = end + 1

        hbase = len(h_ad)
        addr = _address_entries(t, s, cmd, addr, dac, width == 64 and req64, pcix, h_ad, h_cbe)
        byte_count = _attribute_entry(t, s, cmd, P, wide, h_ad, h_cbe) if pcix else -1
        pend = len(h_ad)      # the value on the bus in a stop slot: last data word or the address
        _stop_slot_entry(s, addr, wide, h_ad, h_cbe)
        if P:
            data_parts.append(data)
            be_parts.append(s.byte_enables)

        t_shape.append(si); t_start.append(A); t_idle.append(idle); t_hbase.append(hbase); t_pend.append(pend)
        t_dbase.append(n_words); t_P.append(P); t_wide.append(wide); t_req64.append(bool(req64))
        t_ack64.append(ack64); t_master.append(master)

        t_cmd.append(cmd); t_addr.append(addr); t_dac.append(dac)
        if pcix:
            t_px.append((int(s.tag) & 0x1F, int(s.requester) & 0xFFFF, byte_count, bool(s.relaxed_ordering),
                         bool(s.no_snoop) and cmd != 0xC))
        if s.parity_error is not None:
            par_flips.append(_parity_flip(t, s, A, P, n_words, wide))
        n_words += P

    return _assemble(shape_list, t_shape, t_start, t_idle, t_hbase, t_pend, t_dbase, t_P, t_wide, t_req64,
                     t_ack64, t_master, t_cmd, t_addr, t_dac, t_px, par_flips, reasserted, h_ad, h_cbe,
                     data_parts, be_parts, n_words, clock, mode=mode, width=width, clock_hz=clock_hz, bus=bus,
                     masters=masters, gnt_master=gnt_master, with_ad=with_ad, tail=tail,
                     total_clocks=total_clocks)


def _check_bus(mode: str, width: int, clock_hz: float, masters: tuple, gnt_master: int | None) -> None:
    """The bus arguments of :func:`render`, checked."""
    if mode not in ("pci", "pcix"):
        raise PcitraceError(f"bus mode {mode!r}", fix="use 'pci' or 'pcix'")
    if width not in (32, 64):
        raise PcitraceError(f"bus width {width}", fix="use 32 or 64")
    if not clock_hz or clock_hz <= 0:
        raise PcitraceError(f"clock {clock_hz!r} Hz", fix="give a positive bus clock frequency")
    nmasters = len(masters)
    if gnt_master is not None and not 0 <= gnt_master < nmasters:
        raise PcitraceError(f"gnt_master {gnt_master} is not one of the {nmasters} masters",
                            fix="index a master in `masters`")


def _spec_command(t: int, s: TxnSpec) -> int:
    """Transaction ``t``'s bus command as a plain int, checked."""
    cmd = s.command
    if cmd.__class__ is not int or not 0 <= cmd <= 0xF or cmd == 0xD:
        if isinstance(cmd, (int, np.integer)) and 0 <= int(cmd) <= 0xF and int(cmd) != 0xD:
            cmd = int(cmd)
        else:
            raise PcitraceError(f"transaction {t}: command {s.command!r} is not a bus command",
                                fix="use a C/BE# code 0x0-0xF other than 0xD (DAC is the `dac` flag)")
    return cmd


def _spec_devsel(t: int, s: TxnSpec) -> tuple[int | None, str]:
    """(clocks from the last header clock to DEVSEL#, None = nobody claims it; termination)."""
    term = s.termination
    dname = s.devsel
    n = DEVSEL_CLOCKS.get(dname, -1)
    if n == -1:
        dname = DEVSEL_ALIASES.get(str(dname).lower(), str(dname).lower())
        if dname not in DEVSEL_CLOCKS:
            raise PcitraceError(f"transaction {t}: DEVSEL# speed {s.devsel!r}",
                                fix=f"use one of {', '.join(DEVSEL_CLOCKS)}")
        n = DEVSEL_CLOCKS[dname]
    # Either half names a master abort: nobody claims the transaction.
    if term == "master_abort":
        n = None
    elif n is None and term == "normal":
        term = "master_abort"
    return n, term


def _address_entries(t: int, s: TxnSpec, cmd: int, addr: int, dac: bool, whole: bool, pcix: bool,
                     h_ad: list, h_cbe: list) -> int:
    """Append the address phase(s) to the header tables (``whole``: a 64-bit master puts a DAC's
    whole address and command out at once); returns the address the record gives."""
    if dac:
        if addr >> 64:
            raise PcitraceError(f"transaction {t}: address 0x{addr:x} is wider than 64 bits",
                                fix="give a 64-bit address")
        if whole:
            h_ad.append(addr); h_cbe.append(cmd << 4 | 0xD)
        else:
            h_ad.append(addr & 0xFFFFFFFF); h_cbe.append(0xFD)
        h_ad.append(addr >> 32); h_cbe.append(0xF0 | cmd)
        return addr
    if addr >> 32 or addr < 0:
        raise PcitraceError(f"transaction {t}: address 0x{addr:x} needs a dual address cycle",
                            fix="leave `dac` unset or True for addresses above 4 GiB")
    if pcix and cmd == 0xC:
        # Split Completion: the address phase names the sequence it completes
        # (lower address AD[6:0], requester AD[23:8], tag AD[28:24], RO AD[30]).
        addr = ((addr & 0x7F) | (int(s.requester) & 0xFFFF) << 8 | (int(s.tag) & 0x1F) << 24
                | int(bool(s.relaxed_ordering)) << 30)
    h_ad.append(addr); h_cbe.append(0xF0 | cmd)
    return addr


def _attribute_entry(t: int, s: TxnSpec, cmd: int, P: int, wide: bool, h_ad: list, h_cbe: list) -> int:
    """Append a PCI-X attribute phase to the header tables; returns the byte count."""
    if cmd in PCIX_DWORD_COMMANDS:
        attr_be = dword_attribute_be(s.byte_enables, P)
        bc_low, attr_cbe = 0, attr_be
        byte_count = 4 - bin(attr_be).count("1")
    else:
        bc = s.byte_count
        if bc is None:
            bc = max(1, min(4096, P * (8 if wide else 4)))
        bc = int(bc)
        if not 1 <= bc <= 4096:
            raise PcitraceError(f"transaction {t}: PCI-X byte count {bc}", fix="use 1..4096")
        bc_low, attr_cbe, byte_count = bc & 0xFF, (bc >> 8) & 0xF, bc
    if cmd == 0xC:   # the completer's attributes: byte count only (no message, no error)
        h_ad.append(bc_low)
    else:
        req = int(s.requester) & 0xFFFF
        h_ad.append(bc_low | (req & 0xFF) << 8 | (req >> 8) << 16 | (int(s.tag) & 0x1F) << 24
                    | int(bool(s.no_snoop)) << 29 | int(bool(s.relaxed_ordering)) << 30)
    h_cbe.append(0xF0 | attr_cbe)
    return byte_count


def _stop_slot_entry(s: TxnSpec, addr: int, wide: bool, h_ad: list, h_cbe: list) -> None:
    """Append what the bus shows in a stop slot: the last data word, or the address when no
    data phase completed."""
    data, be = s.data, s.byte_enables
    if not len(data):
        h_ad.append(addr & 0xFFFFFFFF)
        h_cbe.append(0xF0)
        return
    h_ad.append(int(data[-1]) if wide else int(data[-1]) & 0xFFFFFFFF)
    if be is None:
        h_cbe.append(0 if wide else 0xF0)
    elif isinstance(be, (int, np.integer)):
        h_cbe.append(int(be) & 0xFF if wide else (int(be) & 0xF) | 0xF0)
    else:
        h_cbe.append(int(be[-1]) & 0xFF if wide else (int(be[-1]) & 0xF) | 0xF0)


def _parity_flip(t: int, s: TxnSpec, A: int, P: int, n_words: int, wide: bool) -> tuple[int, int, str]:
    """(clock, or -1 - word index for a data phase; transaction; what) of the parity error
    ``s`` asks for; ``A``: its address clock, ``n_words``: the data words before it."""
    pe = int(s.parity_error)
    if pe < 0:
        if s.parity_lane != "par":
            raise PcitraceError(f"transaction {t}: PAR64 does not cover the address phase here",
                                fix="use parity_lane='par' for an address parity error")
        return A, t, "address phase"
    if pe >= P:
        raise PcitraceError(f"transaction {t}: parity error in data phase {pe} of {P}",
                            fix="name an existing data phase or -1 for the address phase")
    if s.parity_lane not in ("par", "par64") or (s.parity_lane == "par64" and not wide):
        raise PcitraceError(f"transaction {t}: parity lane {s.parity_lane!r}",
                            fix="use 'par', or 'par64' on a 64-bit transfer")
    lane = "64" if s.parity_lane == "par64" else ""
    return -1 - (n_words + pe), t, f"data phase {pe}{' (PAR64)' if lane else ''}"


def _assemble(shape_list, t_shape, t_start, t_idle, t_hbase, t_pend, t_dbase, t_P, t_wide, t_req64, t_ack64,
              t_master, t_cmd, t_addr, t_dac, t_px, par_flips, reasserted, h_ad, h_cbe, data_parts, be_parts,
              n_words, clock, *, mode, width, clock_hz, bus, masters, gnt_master, with_ad, tail,
              total_clocks, lean: bool = False, tables=None, t_bytes=None) -> RenderedBus:
    """The vectorised half of :func:`render`: per-clock signals and truth from the per-transaction
    columns (shape index, address clock, idle clocks, header / data word bases, ...) that its
    loop - or :func:`pcitrace.sim.specs.render_txns`, straight from the model - collected.
    ``t_P`` and ``t_start`` may be numpy arrays; the header tables ``h_ad`` / ``h_cbe`` start with
    the entry of the bus before anything (0 / 0xFF). ``lean``: what a capture needs only - no
    words table (``words`` is empty), REQ#/GNT# only of ``gnt_master`` (no ``req_n:NAME`` /
    ``gnt_n:NAME`` lines), and the records as :class:`RecordColumns` (the caller writes them
    into its merged record array): at tens of millions of clocks the rest is hundreds of MB.
    ``tables`` (render_txns): the value tables ``(AD, C/BE#)`` - the data words, then the header
    entries - built in place with the words as the bus carries them (a 32-bit transfer's
    AD[63:32] zero and C/BE#[7:4] high), instead of ``h_ad``/``h_cbe``/``data_parts``/``be_parts``;
    ``t_bytes``: the records' bytes, when the caller knows them."""
    ntx = len(t_start)
    total = clock + max(int(tail), 1)
    if total_clocks is not None:
        if total_clocks < total:
            raise PcitraceError(f"the activity needs {total} clocks but total_clocks is {total_clocks}",
                                fix="raise total_clocks or give fewer transactions")
        total = int(total_clocks)

    # -- runs of every transaction, from the shapes ---------------------------------------------
    i64 = np.int64
    t_shape_a = np.asarray(t_shape, i64)
    t_start_a = np.asarray(t_start, i64)
    t_P_a = np.asarray(t_P, i64)
    tab = _RunTables.of(shape_list)
    # A run's first word: source 0 = header entry -(hbase + off) - 1, 1 = data word dbase + off,
    # 2 = the stop slot's entry -pend - 1 (see _RunTables) - a per-transaction base by source.
    t_base = np.stack((-np.asarray(t_hbase, i64) - 1, np.asarray(t_dbase, i64), -np.asarray(t_pend, i64) - 1)) \
        if ntx else np.zeros((3, 0), i64)
    nd = n_words

    wide_t = np.asarray(t_wide, bool)
    wide_w = None          # per data word (no word -> transaction index array), when needed
    if tables is not None:
        val_ad, val_be = tables
        all_ad, all_be = val_ad[:nd], val_be[:nd]
    else:
        val_ad, val_be, all_ad, all_be, wide_w = _value_tables(h_ad, h_cbe, data_parts, be_parts, t_P_a, wide_t)
    # (a 32-bit bus: every transfer is 32 bits, so the data words need no masking; C/BE#[7:4]
    # is masked in the tables - all_be may be a view of them: the words and records read only
    # C/BE#[3:0] of a 32-bit transfer)
    if width == 32:
        val_ad &= np.uint64(0xFFFFFFFF)
        val_be &= 0xF

    # -- per-clock arrays ----------------------------------------------------------------------
    ad = np.empty(total, np.uint64)
    cbe = np.empty(total, np.uint8)
    f_n, irdy_n, trdy_n, stop_n, par = (np.empty(total, np.uint8) for _ in range(5))
    par64 = np.empty(total, np.uint8) if width == 64 else None
    par[0] = 0
    if par64 is not None:
        par64[0] = 0
    # the per-clock state codes only for crop(), which a lean rendering never meets; the data
    # clocks only for the words table and injected parity errors
    code = None if lean else np.empty(total, np.uint8)
    data_clocks = np.empty(nd, i64) if not lean or par_flips else None
    sig_out = (ad, cbe, f_n, irdy_n, trdy_n, stop_n, par, par64, code)
    nodev = _draw_clocks(sig_out, tab, t_base, t_shape_a, np.asarray(t_idle, i64), t_start_a, clock, total,
                         val_ad, val_be, nd, data_clocks)
    del val_ad, val_be

    # Per-transaction intervals become per-clock lines (_interval_line).
    t_end_a = t_start_a + tab.end[t_shape_a] if ntx else np.zeros(0, i64)
    t_dev_a = t_start_a + tab.devsel[t_shape_a] if ntx else np.zeros(0, i64)
    claimed = t_dev_a <= t_end_a
    # (lines combined in place: every per-clock temporary is tens of MB at 10 M clocks)
    devsel_n = _interval_line(t_dev_a[claimed], t_end_a[claimed], total)
    devsel_n[nodev] = 1
    del nodev
    sig: dict[str, np.ndarray] = {
        "frame_n": f_n, "irdy_n": irdy_n, "trdy_n": trdy_n, "stop_n": stop_n,
        "devsel_n": devsel_n,
        "ad": ad, "cbe_n": cbe,
    }
    sig["par"] = par
    if width == 64:
        sig["par64"] = par64
        r64 = np.asarray(t_req64, bool) if ntx else np.zeros(0, bool)
        a64 = np.asarray(t_ack64, bool) & claimed if ntx else np.zeros(0, bool)
        req64_n = _interval_line(t_start_a[r64], t_end_a[r64], total)
        req64_n |= f_n
        sig["req64_n"] = req64_n
        ack64_n = _interval_line(t_dev_a[a64], t_end_a[a64], total)
        ack64_n |= devsel_n              # ACK64# only while DEVSEL# is asserted
        sig["ack64_n"] = ack64_n
    _arbitration(sig, t_start_a, np.asarray(t_master, i64), masters, gnt_master, lean, total)

    # -- truth: times, words, bytes, findings -------------------------------------------------
    times = _clock_times(clock_hz)
    rec, late = _records(shape_list, t_shape_a, t_P_a, wide_t, np.asarray(t_master, i64), t_dbase, t_cmd, t_addr,
                         t_dac, t_px, par_flips, mode=mode, bus=bus, gnt_master=gnt_master, with_ad=with_ad,
                         lean=lean)
    rec["start_ps"] = times(t_start_a)
    rec["end_ps"] = times(t_end_a)
    lo_be = all_be & 0xF
    if wide_w is None and (not lean or (with_ad and t_bytes is None)):
        wide_w = np.repeat(wide_t, t_P_a)
    if with_ad and t_bytes is not None:
        rec["bytes"] = t_bytes
    elif with_ad:
        rec["bytes"] = _record_bytes(all_be, lo_be, wide_w, wide_t, t_P_a, np.asarray(t_dbase, i64))
    else:
        rec["bytes"] = t_P_a * (rec["width"] // 8)
    words = np.zeros(0 if lean else nd, WORD_DTYPE)
    if not lean:
        words["record"] = np.repeat(np.arange(ntx), t_P_a)
        words["time_ps"] = times(data_clocks)
        if with_ad:
            words["value"] = all_ad
            words["byte_enables"] = np.where(wide_w, all_be, lo_be)
        # (no AD / C/BE# captured: the words keep only their times, value and byte enables 0)
    findings, bad_parity = _findings(sig, late, reasserted, par_flips, t_start_a, data_clocks, times, bus, with_ad)
    nhdr_t = np.array([x.length[0] for x in shape_list], i64)[t_shape_a] if ntx else np.zeros(0, i64)
    return RenderedBus(sig, rec, words, findings, float(clock_hz), mode, width, bus, masters, gnt_master,
                       with_ad, t_start_a, t_end_a, code, nhdr_t, t_dev_a, bad_parity)


class _RunTables(NamedTuple):
    """Every shape's runs in one table per field, each shape's entries starting with the idle
    run before its transaction (length and word filled in per transaction), so that a block's
    run arrays are one gather from the tables each: no scatter of the body runs between the
    idle ones. A run's first word is a per-transaction base by source (header entry, data word,
    stop slot's entry) plus ``offset``; header words are at increasing header indices, stored
    as decreasing negative words, so their offsets and steps are negated here."""

    code: np.ndarray        # uint8 state codes
    length: np.ndarray      # intp
    source: np.ndarray      # intp: 0 header, 1 data, 2 stop slot
    offset: np.ndarray      # signed word offset of the run's first clock
    step: np.ndarray        # signed word step per clock
    start: np.ndarray       # per shape: its first entry (its idle run)
    nruns: np.ndarray       # per shape: its entries (with the idle run)
    end: np.ndarray         # per shape: last clock - address clock
    devsel: np.ndarray      # per shape: first DEVSEL# clock - address clock (unclaimed: 2^62)

    @classmethod
    def of(cls, shape_list: list[_Shape]) -> "_RunTables":
        i64, ip = np.int64, np.intp
        nruns = np.array([len(x.code) + 1 for x in shape_list], ip)
        start = np.concatenate(([0], np.cumsum(nruns))).astype(ip)

        def cat(attr, idle):
            return np.concatenate([a for x in shape_list for a in ((idle,), getattr(x, attr))]) if shape_list \
                else np.zeros(0, i64)

        code, length, src, off, step = (
            cat(a, v) for a, v in (("code", IDLE), ("length", 0), ("source", 1), ("offset", 0), ("step", 0)))
        src = src.astype(ip)
        return cls(code.astype(np.uint8), length.astype(ip), src,
                   np.where(src == 0, -off, off).astype(ip), np.where(src == 0, -step, step).astype(ip),
                   start, nruns, np.array([x.end for x in shape_list], i64),
                   np.array([x.devsel if x.devsel is not None else (1 << 62) for x in shape_list], i64))


def _value_tables(h_ad, h_cbe, data_parts, be_parts, t_P_a, wide_t):
    """render's value tables [data words..., header entries...] for AD and C/BE#, from its
    transactions' data and byte enables as given (a 32-bit transfer's AD[63:32] cleared and
    C/BE#[7:4] high); returns (AD table, C/BE# table, data words, their C/BE#, per word: 64-bit)."""
    all_ad = np.concatenate([np.asarray(d, dtype=np.uint64).reshape(-1) for d in data_parts]) \
        if data_parts else np.zeros(0, np.uint64)
    wide_w = np.repeat(wide_t, t_P_a)
    all_ad[~wide_w] &= np.uint64(0xFFFFFFFF)
    if any(b is not None for b in be_parts):
        zero = np.zeros(int(t_P_a.max()), np.uint8)
        parts = []
        for d, b in zip(data_parts, be_parts):
            if b is None:
                parts.append(zero[:len(d)])
            elif isinstance(b, (int, np.integer)):
                parts.append(np.full(len(d), int(b) & 0xFF, np.uint8))
            else:
                parts.append(b if isinstance(b, np.ndarray) else np.asarray(b, dtype=np.int64))
        lens = np.fromiter(map(len, parts), np.int64, len(parts))
        bad = np.flatnonzero(lens != t_P_a[t_P_a > 0])
        if len(bad):
            t = int(np.flatnonzero(t_P_a > 0)[bad[0]])
            raise PcitraceError(f"transaction {t}: {lens[bad[0]]} byte enables for {t_P_a[t]} data phases",
                                fix="give one C/BE# value per completed data phase")
        all_be = np.concatenate(parts).astype(np.uint8)
    else:
        all_be = np.zeros(len(all_ad), np.uint8)
    all_be[~wide_w] = (all_be[~wide_w] & 0x0F) | 0xF0     # a 32-bit transfer leaves C/BE#[7:4] high
    val_ad = np.concatenate((all_ad, np.array(h_ad, dtype=np.uint64)))
    val_be = np.concatenate((all_be, np.array(h_cbe, dtype=np.int64).astype(np.uint8)))
    return val_ad, val_be, all_ad, all_be, wide_w


def _blocks(t_from: np.ndarray, t_idle: np.ndarray, clock: int) -> list[tuple[int, int]]:
    """The transaction ranges [t0, t1) drawn as one block each: about CLOCK_BLOCK clocks
    (``t_from``: each transaction's first clock, its idle run's), and a transaction after a
    long quiet spell starts one (its idle run is held, see _draw_clocks)."""
    ntx = len(t_from)
    cuts = np.searchsorted(t_from, np.arange(CLOCK_BLOCK, clock, CLOCK_BLOCK, dtype=np.int64)) if ntx else []
    quiet = np.flatnonzero(t_idle > CLOCK_BLOCK) if ntx else []
    bounds = sorted(set([0, ntx, *np.asarray(cuts).tolist(), *np.asarray(quiet).tolist()]))
    return list(zip(bounds[:-1], bounds[1:])) or [(0, 0)]


def _draw_clocks(lines, tab: _RunTables, t_base, t_shape_a, t_idle_a, t_start_a, clock: int, total: int,
                 val_ad, val_be, nd: int, data_clocks) -> np.ndarray:
    """Draw every clock into the per-clock ``lines`` (as _hold); ``data_clocks`` (or None) gets
    each data word's clock. Returns the clocks where DEVSEL# is forced off.

    Block by block of transactions (about CLOCK_BLOCK clocks each; the last one with the
    tail): the block's runs from the shape tables, then its clocks - a value index per clock
    (each run's first value repeated, the data clocks stepping through the words - the k-th
    data clock of the bus carries word k - and multi-clock headers (DAC, PCI-X attribute)
    through theirs), AD and C/BE# gathered from the value tables, FRAME#..STOP# from one
    repeat of the packed state bits, PAR/PAR64 from the block's AD and C/BE#. Every
    temporary is a block long and stays in the CPU cache: whole-bus run arrays and their
    gathers were hundreds of MB of fresh pages at 10 M clocks."""
    ntx = len(t_start_a)
    t_from = t_start_a - t_idle_a            # each transaction's first clock (its idle run's)
    t_nb = tab.nruns[t_shape_a] if ntx else np.zeros(0, np.intp)
    nodev_parts = []                          # clocks where DEVSEL# is forced off
    carry = -1            # the word the bus shows before the block (before anything: header entry 0)
    w0 = 0
    t8 = np.empty(0, np.uint8)
    for t0, t1 in _blocks(t_from, t_idle_a, clock):
        last = t1 == ntx
        c0 = int(t_from[t0]) if t0 < ntx else clock
        c1 = int(t_from[t1]) if not last else total
        rc, rl, rw, rs, carry = _block_runs(tab, t_base, t_shape_a, t_idle_a, t_nb, t0, t1, last,
                                            total - clock, carry, nd)
        if c1 - c0 != int(rl.sum()):   # internal consistency of the run builder
            raise AssertionError(f"clocks {c0}..{c1} drawn in {int(rl.sum())} clocks")
        # A long quiet spell (the block's first run, or the tail) is one value held: drawn as
        # such, so that no block temporary grows with it.
        if rl[0] > CLOCK_BLOCK:
            _hold(lines, c0, c0 + int(rl[0]), int(rw[0]), val_ad, val_be, total)
            c0 += int(rl[0])
            rl[0] = 0
        if last and rl[-1] > CLOCK_BLOCK:
            _hold(lines, c1 - int(rl[-1]), c1, int(rw[-1]), val_ad, val_be, total)
            c1 -= int(rl[-1])
            rl[-1] = 0
        w0, t8 = _draw_runs(lines, rc, rl, rw, rs, c0, c1, total, val_ad, val_be, nd, w0, data_clocks,
                            nodev_parts, t8)
    if w0 != nd:   # internal consistency of the run builder
        raise AssertionError(f"{w0} data clocks for {nd} words")
    # claimed and DEVSEL# not forced off: the forcing states (target abort, split response) are
    # a few runs inside transactions (idle runs, which the table also marks, are never inside a
    # [DEVSEL#, end] interval), so their clocks are set, not the whole bus compared
    return np.concatenate(nodev_parts) if nodev_parts else np.zeros(0, np.int64)


def _block_runs(tab: _RunTables, t_base, t_shape_a, t_idle_a, t_nb, t0: int, t1: int, last: bool, tail: int,
                carry: int, nd: int):
    """The runs of transactions [t0, t1) (``last``: and the ``tail`` idle clocks after them):
    (state code, length, value-table index of the first clock, index step per clock) arrays,
    and the value index the bus shows after them. ``carry``: the one it shows before them."""
    ip = np.intp
    nb = t_nb[t0:t1]
    first = np.cumsum(nb) - nb                  # each transaction's idle run
    nr = int(nb.sum()) + last                   # (+ the tail)
    # run k of the block: shape table entry bi[k] of block transaction tb[k]
    tb = np.repeat(np.arange(t1 - t0, dtype=ip), nb)
    bi = np.repeat(tab.start[t_shape_a[t0:t1]] - first, nb)
    bi += np.arange(len(bi), dtype=ip)
    rc = np.empty(nr, np.uint8)
    rl = np.empty(nr, ip)
    rw = np.empty(nr, np.int64)
    rs = np.empty(nr, np.int64)
    k = len(bi)
    np.take(tab.code, bi, out=rc[:k], mode="clip")    # (mode='raise' would buffer out= arrays)
    np.take(tab.length, bi, out=rl[:k], mode="clip")
    rl[first] = t_idle_a[t0:t1]
    src = np.take(tab.source, bi)
    src *= t1 - t0
    src += tb
    np.take(t_base[:, t0:t1], src, out=rw[:k], mode="clip")
    del tb, src
    rw[:k] += tab.offset[bi]
    np.take(tab.step, bi, out=rs[:k], mode="clip")
    del bi
    if last:
        rc[-1], rl[-1], rw[-1], rs[-1] = IDLE, tail, 0, 0
    # idle runs hold whatever the previous run left on AD (the first one: what the previous
    # block left)
    prev_end = rl - 1
    prev_end *= rs
    prev_end += rw
    rw[first[1:]] = prev_end[first[1:] - 1]
    if last and nr > 1:
        rw[-1] = prev_end[-2]
    rw[0] = carry
    carry = int(prev_end[-1])                  # (a block ends with a transaction's last run)
    del prev_end
    # index into the value table [data words..., header entries...] (header words are stored
    # negative and step downwards, data words positive and step upwards)
    neg = rw < 0
    np.subtract(nd - 1, rw, out=rw, where=neg)
    np.negative(rs, out=rs, where=neg)
    return rc, rl, rw, rs, carry


def _draw_runs(lines, rc, rl, rw, rs, c0: int, c1: int, total: int, val_ad, val_be, nd: int, w0: int,
               data_clocks, nodev_parts: list, t8):
    """Clocks c0..c1-1 from their runs (as _block_runs gives them) into the per-clock ``lines``
    (as _hold); ``w0``: the data words drawn before. Appends the clocks where DEVSEL# is forced
    off to ``nodev_parts``; returns the data words drawn so far and the uint8 scratch ``t8``."""
    ad, cbe, f_n, irdy_n, trdy_n, stop_n, par, par64, code = lines
    run_at = np.cumsum(rl)                      # (block clocks)
    run_at -= rl
    if code is not None:
        code[c0:c1] = np.repeat(rc, rl)
    idx = np.repeat(rw, rl)
    d = np.flatnonzero(_IS_DATA[rc])
    if len(d):
        dl = rl[d]
        nw = int(dl.sum())
        loc = np.repeat(run_at[d] - (np.cumsum(dl) - dl), dl)
        loc += np.arange(nw)
        idx[loc] = np.arange(w0, w0 + nw)
        if data_clocks is not None:
            np.add(loc, c0, out=data_clocks[w0:w0 + nw])
        w0 += nw
    hs = np.flatnonzero((rs != 0) & (rw >= nd) & (rl > 1))
    if len(hs):
        hl = rl[hs]
        kk = np.arange(int(hl.sum())) - np.repeat(np.cumsum(hl) - hl, hl)    # clock within its run
        idx[np.repeat(run_at[hs], hl) + kk] = np.repeat(rw[hs], hl) + kk * np.repeat(rs[hs], hl)
    off = np.flatnonzero(_NODEV_BUSY[rc])
    if len(off):
        ol = rl[off]
        nc = np.repeat(run_at[off] - (np.cumsum(ol) - ol) + c0, ol)
        nc += np.arange(len(nc))
        nodev_parts.append(nc)
    a, c = ad[c0:c1], cbe[c0:c1]
    np.take(val_ad, idx, out=a, mode="clip")
    np.take(val_be, idx, out=c, mode="clip")
    del idx
    bits = np.repeat(_FITS[rc], rl)
    np.bitwise_and(bits, 1, out=f_n[c0:c1])
    o = np.right_shift(bits, 1, out=irdy_n[c0:c1])
    o &= 1
    o = np.right_shift(bits, 2, out=trdy_n[c0:c1])
    o &= 1
    np.right_shift(bits, 3, out=stop_n[c0:c1])      # (the top bit: nothing to mask)
    # PAR/PAR64 of clock c are on clock c + 1 (the bus's last clock has none)
    e = max(0, min(c1, total - 1) - c0)
    if len(t8) < e:
        t8 = np.empty(e, np.uint8)
    _parity(a[:e], c[:e], par[c0 + 1:c0 + 1 + e], None if par64 is None else par64[c0 + 1:c0 + 1 + e], t8)
    return w0, t8


def _interval_line(lo: np.ndarray, hi: np.ndarray, total: int) -> np.ndarray:
    """An asserted-low line of ``total`` clocks, 0 in the [lo, hi] intervals."""
    # Transactions never overlap, so the intervals are sorted and disjoint and the line is
    # alternating runs, one repeat (no edge array and running sum, no mask to invert afterwards).
    b = np.empty(2 * len(lo) + 2, np.int64)
    b[0], b[-1] = 0, total
    b[1:-1:2] = lo
    b[2:-1:2] = hi + 1
    levels = np.zeros(len(b) - 1, np.uint8)     # 1, 0, 1, 0, ... (np.resize: 100 times slower)
    levels[::2] = 1
    return np.repeat(levels, np.diff(b))


def _arbitration(sig: dict, t_start_a, t_master_a, masters, gnt_master, lean: bool, total: int) -> None:
    """REQ#/GNT# lines into ``sig``: every master's (``req_n:NAME`` / ``gnt_n:NAME``; lean: only
    ``gnt_master``'s) and ``gnt_master``'s as ``req_n`` / ``gnt_n``."""
    # Master j's GNT# runs from the clock after the previous address phase to its own address
    # phase (hidden arbitration), then parks; REQ# leads GNT# by one clock. Each line straight
    # from the transactions' masters (no per-clock owner array to compare).
    ntx = len(t_start_a)
    lines = [m for m in range(len(masters)) if not lean or m == gnt_master]
    last = int(t_start_a[-1]) if ntx else -1
    if ntx:
        # segments up to each address phase, then the parked rest of the bus
        seg = np.diff(np.concatenate(([0], t_start_a + 1, [total])))
        who = np.append(t_master_a, t_master_a[-1])
        # REQ# is GNT# one clock earlier up to the last address phase, then deasserted (nobody
        # requests after it): the same segments, the first one clock shorter, the last all 1
        rq_seg = seg.copy()
        rq_seg[0] -= 1
        rq_seg[-1] = total - last
    for m in lines:
        mname = masters[m]
        if ntx:
            v = (who != m).view(np.uint8)
            g = np.repeat(v, seg)
            v[-1] = 1
            rq = np.repeat(v, rq_seg)
        else:
            g = np.full(total, m != 0, np.uint8)      # the bus parks on master 0
            rq = np.ones(total, np.uint8)
        if not lean:
            sig[f"gnt_n:{mname}"] = g
            sig[f"req_n:{mname}"] = rq
        if m == gnt_master:
            sig["gnt_n"], sig["req_n"] = g, rq


def _clock_times(clock_hz: float):
    """Clock indices -> ps, rounded (as clock_times)."""
    period = 1e12 / clock_hz

    def times(idx):
        x = np.array(idx, dtype=np.float64)
        x *= period
        return np.rint(x, out=x).astype(np.int64)
    return times


def _records(shape_list, t_shape_a, t_P_a, wide_t, t_master_a, t_dbase, t_cmd, t_addr, t_dac, t_px, par_flips,
             *, mode, bus, gnt_master, with_ad, lean):
    """The records (RECORD_DTYPE, or RecordColumns when ``lean``) without times and bytes, and
    the (transaction, clocks from its address phase) of every first data phase later than
    MAX_INITIAL_LATENCY."""
    i64 = np.int64
    ntx = len(t_shape_a)
    rec = RecordColumns(ntx) if lean else np.zeros(ntx, RECORD_DTYPE)
    rec["bus"] = bus
    if not ntx:
        return rec, []
    table = command_table(mode)
    names = [table[c][0] for c in range(16)]
    sh_pick = lambda attr, dt: np.array([getattr(x, attr) for x in shape_list], dt)[t_shape_a]  # noqa: E731
    rec["clocks"] = sh_pick("end", i64) + 1
    rec["data_phases"] = t_P_a
    if lean:
        rec["devsel"] = Strings([x.rec_devsel for x in shape_list], t_shape_a)
        rec["termination"] = Strings([x.rec_termination for x in shape_list], t_shape_a)
    else:
        rec["devsel"] = sh_pick("rec_devsel", "U12")
        rec["termination"] = sh_pick("rec_termination", "U24")
    rec["initiator_waits"] = sh_pick("rec_iwaits", i64)
    rec["target_waits"] = sh_pick("twaits", i64)
    rec["width"] = np.where(wide_t, 64, 32)
    rec["gnt"] = -1 if gnt_master is None else (t_master_a == gnt_master)
    rec["data_index"] = np.asarray(t_dbase, i64)
    if with_ad:
        if lean:
            rec["command"] = Strings(names, t_cmd)
        else:
            rec["command"] = np.array(names, "U24")[np.asarray(t_cmd, i64)]
        rec["dac"] = t_dac
        rec["address"] = np.array(t_addr, dtype=np.uint64)
        if par_flips:
            bad = np.zeros(ntx, bool)
            bad[[t for _, t, _ in par_flips]] = True
            rec["parity_error"] = bad
    else:
        rec["command"] = "unknown"
    if mode == "pcix" and with_ad:
        # (render_txns passes the five columns; render's loop a row per transaction)
        cols = t_px if isinstance(t_px, tuple) else zip(*t_px)
        for fname, col in zip(("tag", "requester", "byte_count", "relaxed_ordering", "no_snoop"), cols):
            rec[fname] = col
    else:
        rec["tag"] = rec["requester"] = rec["byte_count"] = -1
    fd = np.array([x.first_data if x.first_data is not None else -1 for x in shape_list], i64)[t_shape_a]
    return rec, [(int(t), int(fd[t])) for t in np.flatnonzero(fd > MAX_INITIAL_LATENCY)]


def _record_bytes(all_be, lo_be, wide_w, wide_t, t_P_a, dbase) -> np.ndarray:
    """Bytes per record: its lanes (8 or 4 per data phase) less the disabled ones (asserted-low
    byte enables ``all_be`` per data word, ``lo_be`` their C/BE#[3:0]; ``dbase``: each record's
    first word)."""
    # Summed over the few words that disable any (no per-word int64 counts and running sum:
    # three arrays of 8 bytes a word, tens of MB at 10 M clocks). Exact integers.
    off_w = np.flatnonzero(np.where(wide_w, all_be, lo_be))
    dis = np.zeros(len(off_w) + 1, np.int64)
    np.cumsum(np.bitwise_count(np.where(wide_w[off_w], all_be[off_w], lo_be[off_w])), out=dis[1:])
    lanes = np.where(wide_t, 8, 4) if len(t_P_a) else np.zeros(0, np.int64)
    return t_P_a * lanes - (dis[np.searchsorted(off_w, dbase + t_P_a)] - dis[np.searchsorted(off_w, dbase)])


def _findings(sig, late, reasserted, par_flips, t_start_a, data_clocks, times, bus: str, with_ad: bool):
    """The findings (FINDING_DTYPE, sorted) of late first data phases, FRAME# reasserted and
    parity errors, whose PAR / PAR64 bits are flipped in ``sig`` here; and the (transaction,
    clock) of every bad parity."""
    flist = []
    for t, lat in late:
        flist.append((int(times(t_start_a[t] + lat)), bus, "initial_latency",
                      f"{lat} clocks from the address phase to the first data phase"))
    for t in reasserted:
        flist.append((int(times(t_start_a[t])), bus, "frame_reasserted",
                      "FRAME# asserted again while the final data phase was pending"))
    bad_parity = []
    for c, t, what in par_flips:
        if c < 0:
            c = int(data_clocks[-1 - c])
        bad_parity.append((t, c))
        lane = sig["par64"] if what.endswith("(PAR64)") else sig["par"]
        lane[c + 1] ^= 1          # PAR / PAR64 cover the previous clock's AD and C/BE#
        if with_ad:
            flist.append((int(times(c)), bus, "parity_error", f"{'PAR64' if what.endswith('(PAR64)') else 'PAR'} wrong for the {what}"))
    findings = np.array(sorted(flist), dtype=FINDING_DTYPE) if flist else np.zeros(0, FINDING_DTYPE)
    return findings, bad_parity


def crop(rb: RenderedBus, start: int = 0, stop: int | None = None) -> RenderedBus:
    """Clocks [start, stop) of a rendered bus as a capture of its own would show them: times
    restart at 0, a transaction already under way at ``start`` is not recorded, and one still
    busy on the last clock is ``truncated`` with what it did up to there (docs/records.md).

    ``start`` must not be a clock that merely looks like an address phase (FRAME# asserted,
    IRDY# not: a second DAC phase, an attribute phase or an initiator wait)."""
    if rb.codes is None:
        raise ValueError("crop needs a bus from render()")
    stop = rb.clocks if stop is None else min(int(stop), rb.clocks)
    start = int(start)
    if not 0 <= start < stop:
        raise PcitraceError(f"cannot crop clocks {start}..{stop} of {rb.clocks}", fix="give 0 <= start < stop")
    A_all, E_all = rb.start_clock, rb.end_clock
    code = rb.codes
    if _F[code[start]] == 0 and _I[code[start]] == 1 and start not in set(A_all.tolist()):
        raise PcitraceError(f"clock {start} looks like an address phase but is not one",
                            fix="crop at an address phase, an idle clock or a data/wait clock with IRDY#")
    keep = (A_all >= start) & (A_all < stop)
    idx = np.flatnonzero(keep)
    period = 1e12 / rb.clock_hz

    def tm(c):
        return np.rint((np.asarray(c, dtype=np.float64) - start) * period).astype(np.int64)

    rec = rb.records[idx].copy()
    words_parts = []
    word_rec = rb.words["record"]
    dpos = 0
    for j, t in enumerate(idx):
        A, E = int(A_all[t]), int(E_all[t])
        r = rec[j]
        w = rb.words[word_rec == t] if len(rb.words) else rb.words
        if E < stop - 1:         # an idle clock or a new address phase after it is in the capture
            r["start_ps"], r["end_ps"] = tm(A), tm(E)
        else:
            r["start_ps"], r["end_ps"] = tm(A), tm(stop - 1)
            w = _truncate(rb, t, r, w, stop)
        if rb.with_ad:
            r["parity_error"] = any(bt == t and c + 1 < stop for bt, c in rb.bad_parity)
        if A == start and r["gnt"] >= 0:
            r["gnt"] = 0            # no clock before the first one
        r["data_index"] = dpos
        dpos += int(r["data_phases"])
        if len(w):
            w = w.copy()
            w["record"] = j
            w["time_ps"] = tm(np.rint(w["time_ps"] / period).astype(np.int64))
            words_parts.append(w)
    words = np.concatenate(words_parts) if words_parts else np.zeros(0, WORD_DTYPE)
    findings = _cropped_findings(rb, start, stop, keep, tm)
    sig = {k: v[start:stop] for k, v in rb.signals.items()}
    return dataclasses.replace(rb, signals=sig, records=rec, words=words, findings=findings,
                               start_clock=A_all[idx] - start, end_clock=np.minimum(E_all[idx], stop - 1) - start,
                               codes=code[start:stop], header_clocks=rb.header_clocks[idx],
                               devsel_clock=rb.devsel_clock[idx] - start,
                               bad_parity=[(int(np.searchsorted(idx, t)), c - start) for t, c in rb.bad_parity
                                           if keep[t]])


def _truncate(rb: RenderedBus, t: int, r, w: np.ndarray, stop: int) -> np.ndarray:
    """Record ``r`` of transaction ``t``, still busy on clock stop - 1, rewritten as what a
    decoder sees of it up to there (``truncated``); returns its words ``w`` that completed."""
    A = int(rb.start_clock[t])
    code = rb.codes
    pcix = rb.mode == "pcix"
    last = stop - 1
    nh = int(rb.header_clocks[t]) if rb.with_ad else 1 + pcix
    H = min(A + nh - 1, last)
    cs = np.arange(H + 1, stop)
    cc = code[H + 1:stop]
    D = (cs >= rb.devsel_clock[t]) & ~_NODEV[cc]
    I, T, S = _I[cc] == 0, _T[cc] == 0, _S[cc] == 0
    dp = I & T & D
    term = S | (pcix & T & ~D & (cs > rb.devsel_clock[t]))
    r["clocks"] = stop - A
    r["termination"] = "truncated"
    r["data_phases"] = int(dp.sum())
    r["initiator_waits"] = int((~dp & ~term & ~I).sum())
    r["target_waits"] = int((~dp & ~term & I).sum())
    seen = np.flatnonzero(D)
    r["devsel"] = _DEVSEL_NAMES[min(int(cs[seen[0]]) - H, 4)] if len(seen) else "none"
    if r["width"] == 64 and not len(seen):
        r["width"] = 32
    w = w[:int(dp.sum())]
    if not rb.with_ad:
        r["bytes"] = r["data_phases"] * (r["width"] // 8)
        return w
    be = w["byte_enables"].astype(np.int64)
    lanes = 8 if r["width"] == 64 else 4
    r["bytes"] = int((lanes - np.bitwise_count(be & ((1 << lanes) - 1))).sum())
    if A + int(rb.header_clocks[t]) - 1 > last:      # the header is cut
        if r["dac"] and last == A:                   # only the DAC's first address phase is seen
            r["command"] = "dac"
            r["address"] = int(r["address"]) & 0xFFFFFFFF
        if pcix:
            r["tag"] = r["requester"] = r["byte_count"] = -1
            r["relaxed_ordering"] = r["no_snoop"] = False
    return w


def _cropped_findings(rb: RenderedBus, start: int, stop: int, keep: np.ndarray, tm) -> np.ndarray:
    """The findings on clocks [start, stop) that a capture of them shows (none of a
    transaction not recorded, no parity error whose PAR clock is cut), times by ``tm``."""
    period = 1e12 / rb.clock_hz
    A_all, E_all = rb.start_clock, rb.end_clock
    fl = []
    for f in rb.findings:
        c = int(np.rint(f["time_ps"] / period))
        if not start <= c < stop:
            continue
        if f["kind"] == "parity_error" and c + 1 >= stop:
            continue
        owner = np.flatnonzero((A_all <= c) & (E_all >= c))
        if len(owner) and not keep[owner[0]]:
            continue
        fl.append((int(tm(c)), f["bus"], f["kind"], f["message"]))
    return np.array(fl, FINDING_DTYPE) if fl else np.zeros(0, FINDING_DTYPE)


def _make_shape(t: int, pcix: bool, read: bool, term: str, n: int | None, P: int, nhdr: int,
                s: TxnSpec, with_ad: bool) -> _Shape:
    """Validate one transaction kind and compute its clock pattern."""
    where = f"transaction {t}"
    if term not in SPEC_TERMINATIONS:
        raise PcitraceError(f"{where}: termination {term!r}", fix=f"use one of {', '.join(SPEC_TERMINATIONS)}")
    if (n is None) != (term == "master_abort"):
        raise PcitraceError(f"{where}: devsel {s.devsel!r} with termination {term!r}",
                            fix="a master abort is exactly the transaction no target claims (devsel none)")
    if term in ("split_response", "disconnect_adb", "single_phase_disconnect") and not pcix:
        raise PcitraceError(f"{where}: {term} exists only in PCI-X mode", fix="render with mode='pcix'")
    if term in ("retry", "split_response", "master_abort") and P:
        raise PcitraceError(f"{where}: a {term} moves no data but {P} words are given",
                            fix="leave `data` empty")
    if term in ("normal", "disconnect_with_data", "disconnect_without_data", "disconnect_adb",
                "single_phase_disconnect") and P == 0:
        raise PcitraceError(f"{where}: {term} needs at least one completed data phase",
                            fix="give `data`, or use retry for a stop before any data")
    if term == "single_phase_disconnect" and P != 1:
        raise PcitraceError(f"{where}: a single data phase disconnect moves exactly one word",
                            fix="give one data word")
    stop_slot = _stop_slot(term)
    slots = P + 1 if stop_slot else max(P, 1)
    iw = _sparse(s.initiator_waits, slots, f"{where} initiator_waits")
    tw = _sparse(s.target_waits, slots, f"{where} target_waits")
    if pcix and iw:
        raise PcitraceError(f"{where}: PCI-X initiators insert no wait states",
                            fix="drop initiator_waits in PCI-X mode")
    q = 0
    if term == "disconnect_adb":
        q = max(1, min(int(s.stop_phases), P))
        for k in range(P - q + 1, P):   # STOP# stays asserted: no wait clocks between them
            iw.pop(k, None)
            tw.pop(k, None)
    if term in ("normal", "split_response", "disconnect_adb", "abandoned"):
        master_done = True
    else:
        master_done = bool(s.master_done)
    stop_early = max(0, int(s.stop_early))
    if stop_early and pcix:
        raise PcitraceError(f"{where}: stop_early needs initiator wait states, which PCI-X has not",
                            fix="drop stop_early in PCI-X mode")
    shp = _shape(where, pcix, read, term, n, P, nhdr, iw, tw, master_done, q, stop_early)
    # What the record says about this kind of transaction.
    dv = n
    shp.rec_iwaits = shp.iwaits
    if not with_ad and nhdr - pcix == 2:
        # Without C/BE# the second address phase of a DAC looks like an initiator wait clock
        # (PCI-X: it is taken for the attribute phase and the real one for the wait).
        shp.rec_iwaits += 1
        dv = None if n is None else n + 1
    shp.rec_devsel = "none" if dv is None else _DEVSEL_NAMES[min(dv, 4)]
    rt = _RECORD_TERMINATION.get(term, term)
    if rt in ("retry", "disconnect_without_data"):
        rt = "disconnect_without_data" if P else "retry"
    shp.rec_termination = rt
    return shp


# -- captures ------------------------------------------------------------------------------------

# Canonical signal -> capture channel base name (the names detect_profile recognises).
CHANNEL_NAMES = {
    "clk": "CLK", "frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
    "devsel_n": "DEVSEL#", "ad": "AD", "cbe_n": "C/BE#", "par": "PAR", "par64": "PAR64",
    "req64_n": "REQ64#", "ack64_n": "ACK64#", "req_n": "REQ#", "gnt_n": "GNT#",
}
_AD_SIGNALS = ("ad", "cbe_n", "par", "par64")


@dataclasses.dataclass
class CaptureTruth:
    """A capture of rendered buses, its profile and the truth re-timed to the capture's samples."""

    capture: object        # pcitrace.capture.model.Capture
    profile: object        # pcitrace.capture.profile.Profile
    records: np.ndarray
    words: np.ndarray
    findings: np.ndarray

    def __iter__(self):
        """Unpacks as (capture, profile, records, words)."""
        return iter((self.capture, self.profile, self.records, self.words))


def _bus_channels(rb: RenderedBus, prefix: str, with_ad: bool, bits: bool):
    """(channel arrays, widths, profile signal mapping) of one bus, per clock."""
    arrays: dict[str, np.ndarray] = {}
    widths: dict[str, int] = {}
    signals: dict[str, str | list[str]] = {}
    for canon, arr in rb.signals.items():
        if canon in _AD_SIGNALS and not with_ad:
            continue
        if ":" in canon:       # per-master REQ#/GNT# lines of the other masters
            base, master = canon.split(":", 1)
            if rb.gnt_master is not None and master == rb.masters[rb.gnt_master]:
                continue
            name = f"{prefix}{master}_{CHANNEL_NAMES[base]}"
            arrays[name] = arr
            continue
        name = prefix + CHANNEL_NAMES[canon]
        if canon in ("ad", "cbe_n"):
            w = rb.width if canon == "ad" else rb.width // 8
            if bits:
                names = [f"{name}{i}" for i in range(w)]
                for i, nm in enumerate(names):
                    arrays[nm] = ((arr >> np.asarray(i, arr.dtype)) & 1).astype(np.uint8)
                signals[canon] = names
                continue
            widths[name] = w
            arrays[name] = arr.astype(np.uint64)
        else:
            arrays[name] = arr
        signals[canon] = name
    return arrays, widths, signals


def to_capture(buses: RenderedBus | Sequence[RenderedBus], *, samples_per_clock: int | None = None,
               samplerate_hz: float | None = None, with_ad: bool | None = None,
               prefix: bool | None = None, bits: bool = False, bars: Sequence[tuple[int, int]] = (),
               glitches: Sequence[tuple[str, str, int]] = ()) -> CaptureTruth:
    """A Capture (plus its Profile and re-timed truth) of one or more rendered buses.

    State mode (default): one sample per clock; every bus must share one clock frequency.
    Timing mode (``samples_per_clock`` or ``samplerate_hz``): a ``CLK`` channel per bus, low for
    the first half period, then a rising edge for every clock (clock 0 included); the other
    signals change a quarter period after each rising edge (docs/records.md), so the edge sample
    shows the clock's values. The truth's times are those of the edge samples.
    ``with_ad`` False leaves AD, C/BE#, PAR, PAR64 out (default: as each bus was rendered).
    ``prefix``: channel names ``BUS.FRAME#`` (default when there is more than one bus).
    ``bits``: AD / C/BE# as one channel per line (``AD0``..) instead of vector channels.
    ``glitches``: (bus, canonical 1-bit signal, clock) - timing mode only: that line flips for
    one sample in the middle of the clock period (after the quarter-period change, before the
    next edge), a ``glitch`` finding at the time of that sample; the sampled values and so
    the records do not change.
    """
    from pcitrace.capture.model import Capture, TimeBase
    from pcitrace.capture.profile import BusProfile, NicIdentity, Profile

    if isinstance(buses, RenderedBus):
        buses = [buses]
    buses = list(buses)
    if not buses:
        raise PcitraceError("no buses to capture", fix="render at least one bus")
    names = [b.bus for b in buses]
    if len(set(names)) != len(names):
        raise PcitraceError(f"bus names {names} repeat", fix="give every rendered bus its own `bus` name")
    if prefix is None:
        prefix = len(buses) > 1
    timing = samples_per_clock is not None or samplerate_hz is not None
    if timing:
        samplerate_hz = _timing_rate(buses, samples_per_clock, samplerate_hz)
    elif len({b.clock_hz for b in buses}) > 1:
        raise PcitraceError("a state-mode capture has one clock; these buses run at "
                            f"{sorted({b.clock_hz for b in buses})} Hz",
                            fix="capture them in timing mode (samples_per_clock=...)")

    arrays: dict[str, np.ndarray] = {}
    widths: dict[str, int] = {}
    bus_profiles = []
    recs, words, finds = [], [], []
    # Timing mode: half a period of CLK low first, so that clock 0 is a rising edge too.
    lead = int(np.ceil(0.5 * samplerate_hz / min(b.clock_hz for b in buses))) if timing else 0
    n_samples = lead + max(int(np.ceil(b.clocks * samplerate_hz / b.clock_hz)) for b in buses) if timing \
        else max(b.clocks for b in buses)
    for b in buses:
        pre = f"{b.bus}." if prefix else ""
        wad = b.with_ad if with_ad is None else with_ad
        if wad and not b.with_ad:
            raise PcitraceError(f"bus {b.bus} was rendered with the truth of a capture without AD",
                                fix="render it with with_ad=True to capture AD")
        arr, wid, sigs = _bus_channels(b, pre, wad, bits)
        old_t = b.times_ps()
        if timing:
            arr, edge = _timing_samples(b, arr, lead, n_samples, samplerate_hz)
            arr[pre + "CLK"] = _timing_clk(b, lead, n_samples, samplerate_hz)
            sigs["clk"] = pre + "CLK"
            new_t = np.rint(edge * (1e12 / samplerate_hz)).astype(np.int64)
            gl = _glitch(b, glitches, sigs, arr, wid, edge, samplerate_hz)
        else:
            if any(g[0] == b.bus for g in glitches):
                raise PcitraceError("glitches exist only in timing captures", fix="give samples_per_clock")
            gl = []
            arr = {k: (np.concatenate((v, np.full(n_samples - len(v), v[-1], v.dtype)))
                       if len(v) < n_samples else v) for k, v in arr.items()}
            new_t = old_t
        arrays.update(arr)
        widths.update(wid)
        nic = NicIdentity(gnt="gnt_n" if "gnt_n" in sigs else None,
                          req="req_n" if "req_n" in sigs else None, bars=list(bars))
        bus_profiles.append(BusProfile(b.bus, b.mode, sigs, set(), b.width, b.clock_hz, nic))
        r, w, f = _retimed_truth(b, old_t, new_t, wad)
        if gl:
            f = np.concatenate((f, np.array(gl, FINDING_DTYPE)))
        recs.append(r)
        words.append(w)
        finds.append(f)
    records, words_all, findings = merge_truth(recs, words, finds)
    if timing:
        tb = TimeBase.timing(samplerate_hz)
    else:
        tb = TimeBase.state(buses[0].clock_hz)
    cap = Capture.from_arrays(arrays, tb, widths, metadata={"generator": "pcitrace.sim"})
    return CaptureTruth(cap, Profile(bus_profiles, source="memory"), records, words_all, findings)


def _timing_rate(buses: list[RenderedBus], samples_per_clock: int | None, samplerate_hz: float | None) -> float:
    """The sample rate of a timing capture of ``buses`` (``samples_per_clock`` of the fastest
    bus unless ``samplerate_hz`` is given), checked: at least 4 samples per clock of each."""
    if samplerate_hz is None:
        fmax = max(b.clock_hz for b in buses)
        samplerate_hz = fmax * int(samples_per_clock)
    slowest = min(samplerate_hz / b.clock_hz for b in buses)
    if slowest < 4:
        raise PcitraceError(f"{samplerate_hz / 1e6:g} MHz sampling gives {slowest:.2f} samples per "
                            "bus clock", fix="sample at least 4 times per clock (quarter-period edges)")
    return samplerate_hz


def _timing_samples(b: RenderedBus, arr: dict, lead: int, n_samples: int,
                    samplerate_hz: float) -> tuple[dict, np.ndarray]:
    """Bus ``b``'s per-clock channel arrays as ``n_samples`` timing samples (each clock's value
    from a quarter period after its rising edge, the first edge at sample ``lead``); and the
    sample of each clock's rising edge."""
    ratio = b.clock_hz / samplerate_hz
    N = samplerate_hz / b.clock_hz
    if abs(N - round(N)) < 1e-9:
        # whole samples per clock: each clock's value starts ceil(N/4) samples after
        # its edge (clock 0's from the start), built by repetition without an index array
        N = int(round(N))
        c4 = -(-N // 4)
        C = b.clocks
        head = lead + c4
        tail_n = n_samples - head - (C - 1) * N

        def spread(v):
            out = np.empty(n_samples, v.dtype)
            out[:head] = v[0]
            out[head:head + (C - 1) * N] = np.repeat(v[1:], N)
            out[n_samples - tail_n:] = v[-1]
            return out

        arr = {k: spread(v) for k, v in arr.items()}
    else:
        x = (np.arange(n_samples, dtype=np.float64) - lead) * ratio
        clk_of = np.clip(np.floor(x - 0.25).astype(np.int64) + 1, 0, b.clocks - 1)
        arr = {k: v[clk_of] for k, v in arr.items()}
    edge = lead + np.ceil(np.arange(b.clocks, dtype=np.float64) / ratio - 1e-9).astype(np.int64)
    return arr, edge


def _timing_clk(b: RenderedBus, lead: int, n_samples: int, samplerate_hz: float) -> np.ndarray:
    """Bus ``b``'s CLK channel: low before sample ``lead``, then high for the first half of
    every clock period."""
    N = samplerate_hz / b.clock_hz
    if abs(N - round(N)) < 1e-9:
        N = int(round(N))
        clk = np.zeros(n_samples, np.uint8)
        body = clk[lead:lead + b.clocks * N].reshape(b.clocks, N)
        body[:, :-(-N // 2)] = 1
        return clk
    x = (np.arange(n_samples, dtype=np.float64) - lead) * (b.clock_hz / samplerate_hz)
    return (((x - np.floor(x)) < 0.5) & (x >= 0)).astype(np.uint8)


def _glitch(b: RenderedBus, glitches, sigs: dict, arr: dict, widths: dict, edge: np.ndarray,
            samplerate_hz: float) -> list[tuple]:
    """Flip one sample mid-period of each line ``glitches`` names on bus ``b`` (in ``arr``);
    returns their ``glitch`` findings."""
    ratio = b.clock_hz / samplerate_hz
    gl = []
    for gbus, canon, c in glitches:
        if gbus != b.bus:
            continue
        name = sigs.get(canon)
        if not isinstance(name, str) or name not in arr or name in widths:
            raise PcitraceError(f"cannot glitch {canon!r} on bus {b.bus}",
                                fix="glitch a captured 1-bit control line")
        if not 0 <= c < b.clocks - 1:
            raise PcitraceError(f"glitch clock {c} outside bus {b.bus}", fix="pick a clock inside the bus")
        s = int(edge[c] + np.floor(0.5 / ratio))
        if not (edge[c] + 0.25 / ratio + 1 <= s < edge[c + 1]):
            raise PcitraceError("too few samples per clock for a glitch", fix="sample at 6+ per clock")
        arr[name][s] ^= 1
        gl.append((int(np.rint(s * 1e12 / samplerate_hz)), b.bus, "glitch",
                   f"{CHANNEL_NAMES[canon]} changed twice within one clock"))
    return gl


def _retimed_truth(b: RenderedBus, old_t: np.ndarray, new_t: np.ndarray, wad: bool):
    """Bus ``b``'s records, words and findings (copies) at the capture's times ``new_t`` of its
    clocks (``old_t``); ``wad`` False: as a capture without AD, C/BE# and PAR tells them."""
    r = b.records.copy()
    w = b.words.copy()
    f = b.findings.copy()
    r["start_ps"] = new_t[np.searchsorted(old_t, r["start_ps"])]
    r["end_ps"] = new_t[np.searchsorted(old_t, r["end_ps"])]
    w["time_ps"] = new_t[np.searchsorted(old_t, w["time_ps"])]
    f["time_ps"] = new_t[np.clip(np.searchsorted(old_t, f["time_ps"]), 0, len(new_t) - 1)]
    if wad:
        return r, w, f
    r["command"] = "unknown"
    r["address"] = 0
    r["dac"] = False
    r["parity_error"] = False
    r["tag"] = r["requester"] = r["byte_count"] = -1
    r["relaxed_ordering"] = r["no_snoop"] = False
    r["bytes"] = r["data_phases"] * (r["width"] // 8)
    w = w.copy()
    w["value"] = 0          # the words keep only their times
    w["byte_enables"] = 0
    f = f[f["kind"] != "parity_error"]
    if b.with_ad and np.any(b.records["dac"]):
        raise PcitraceError(f"bus {b.bus}: the truth of DAC transactions without AD differs",
                            fix="render the bus with with_ad=False")
    return r, w, f


def dword_attribute_be(be, phases: int) -> int:
    """C/BE#[3:0] of a PCI-X DWORD command's attribute phase: the (first) data phase's byte
    enables as the spec gives them (one value, a list per phase, or none = all enabled)."""
    if be is None:
        return 0
    if isinstance(be, (int, np.integer)):
        return int(be) & 0xF
    return int(be[0]) & 0xF if phases else 0


def merge_truth(records: Sequence[np.ndarray], words: Sequence[np.ndarray],
                findings: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Records of several buses in one array sorted by start_ps, words re-indexed to match;
    ``data_index`` = the index of the record's first word in the merged word array. The truth
    is merged exactly as the decoders merge their buses (pcitrace.decode.merge_buses)."""
    from pcitrace.decode import merge_buses

    findings = list(findings) or [np.zeros(0, FINDING_DTYPE)] * len(records)
    return merge_buses(zip(records, words, findings))

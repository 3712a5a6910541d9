"""The fast PCI / PCI-X transaction engine: docs/records.md applied to whole arrays of clocks.

Input is one array per canonical signal with one entry per bus clock (what
``pcitrace.capture.clocked.bus_clocks`` yields): 1-bit signals as uint8 electrical levels,
``ad`` / ``cbe_n`` as uint64. Nothing here loops over clocks. The five control lines are packed
into one code per clock and the clocks into *runs* of one code (a 64-phase burst is one run);
address phases are FRAME# edges between runs, each transaction's end is the next idle-or-address
run (``np.searchsorted``), and every per-transaction count (data phases, waits, termination
clocks) is a difference of per-run prefix sums taken at the transaction's bounds. Only AD and
C/BE# (data words, bytes, parity) are looked at clock by clock, on the data phases alone.

Streaming: :func:`decode_clocks` takes one chunk and a :class:`Carry`; the transaction still
open at the end of a chunk (and the clock before it, which start detection and ``gnt`` need)
is carried and decoded again, complete, with the next chunk. The last call passes
``final=True`` (an empty chunk is fine) so the open transaction is flushed as ``truncated``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from pcitrace.capture.clocked import rising_edges
from pcitrace.capture.model import SampleTimes
from pcitrace.buses.pci import CONTROL_CODE
from pcitrace.decode import facts
from pcitrace.decode.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE
from pcitrace.errors import PcitraceError

REQUIRED = ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n")
OPTIONAL = ("ad", "cbe_n", "par", "par64", "req64_n", "ack64_n", "gnt_n")
# "code": the five REQUIRED lines as one control code per clock (bus_clocks(control_code=True))
USED = REQUIRED + OPTIONAL + ("code",)

M32 = np.uint64(0xFFFFFFFF)

_PCI_NAMES = np.array([facts.PCI_COMMANDS[c][0] for c in range(16)])
_PCIX_NAMES = np.array([facts.PCIX_COMMANDS[c][0] for c in range(16)])
_DEVSEL = np.array(facts.DEVSEL_SPEEDS)   # fast, medium, slow, subtractive, none
_TERM = {name: i for i, name in enumerate(facts.TERMINATIONS)}
_TERM_NAMES = np.array(facts.TERMINATIONS)
_DWORD = np.array(sorted(facts.PCIX_DWORD_COMMANDS), dtype=np.uint64)
# the same tables in the record's own string dtypes (a gather then needs no conversion)
_PCI_NAMES_U = _PCI_NAMES.astype(RECORD_DTYPE["command"])
_PCIX_NAMES_U = _PCIX_NAMES.astype(RECORD_DTYPE["command"])
_DEVSEL_U = _DEVSEL.astype(RECORD_DTYPE["devsel"])
_TERM_U = _TERM_NAMES.astype(RECORD_DTYPE["termination"])


@dataclasses.dataclass
class Carry:
    """Bus state handed from one chunk to the next (opaque to callers)."""

    sig: dict[str, np.ndarray]
    times_ps: np.ndarray
    clock0: int                 # bus clock index of sig[...][0]
    context: bool               # sig[...][0] was already decoded: it only serves as "previous clock"
    leading: bool = True        # still inside the partial transaction the capture began in
    orphan: bool = False        # the last decoded clock was IRDY# without a transaction
    ctx_busy: bool = False      # the context clock belongs to a transaction
    records: int = 0            # records emitted so far (words index records by this count)
    words: int = 0              # data phases so far (the next record's data_index)
    open: bool = False          # sig holds a transaction whose end has not been seen yet
    pending: list = dataclasses.field(default_factory=list)   # later chunks of it: (sig, times)


class _Findings:
    def __init__(self, bus: str):
        self.bus = bus
        self.parts: list[tuple[np.ndarray, str, list[str]]] = []

    def add(self, times: np.ndarray, kind: str, messages: list[str]) -> None:
        if len(times):
            self.parts.append((np.asarray(times, np.int64), kind, messages))

    def array(self) -> np.ndarray:
        total = sum(len(t) for t, _, _ in self.parts)
        out = np.zeros(total, FINDING_DTYPE)
        i = 0
        for t, kind, msgs in self.parts:
            out["time_ps"][i:i + len(t)] = t
            out["kind"][i:i + len(t)] = kind
            out["message"][i:i + len(t)] = [m[:160] for m in msgs]
            i += len(t)
        out["bus"] = self.bus
        return out[np.argsort(out["time_ps"], kind="stable")]


def _join(carry: Carry | None, sig: Mapping[str, np.ndarray], times_ps: np.ndarray):
    keys = [k for k in USED if k in sig]
    missing = [] if "code" in sig else [k for k in REQUIRED if k not in sig]
    if missing:
        raise PcitraceError(f"the bus has no {', '.join(missing)} signal; the PCI decoder needs "
                            f"FRAME#, IRDY#, TRDY#, STOP# and DEVSEL#",
                            fix="map those signals in the channel profile")
    if carry is None or len(carry.times_ps) == 0:
        buf = {k: np.asarray(sig[k]) for k in keys}
        return buf, _times(times_ps)
    if set(carry.sig) != set(keys):
        raise ValueError("chunks of one bus must carry the same signals")
    parts = [(carry.sig, carry.times_ps)] + carry.pending + [(sig, times_ps)]
    buf = {k: np.concatenate([np.asarray(p[k], carry.sig[k].dtype) for p, _ in parts]) for k in keys}
    ts = [t for _, t in parts]
    if all(isinstance(t, SampleTimes) for t in ts) and all(b.follows(a) for a, b in zip(ts, ts[1:])):
        return buf, ts[0].joined(ts[-1])
    return buf, np.concatenate([np.asarray(t, np.int64) for t in ts])


def _times(t):
    """Times as given: an int64 array, or a SampleTimes left to compute only what is read."""
    return t if isinstance(t, SampleTimes) else np.asarray(t, np.int64)


def _times_into(out: np.ndarray, times, idx: np.ndarray) -> None:
    """out[...] = times[idx] for ascending idx, without a temporary where times are computed."""
    if isinstance(times, SampleTimes):
        times.take(idx, out=out, ascending=True)
    else:
        np.take(times, idx, out=out)


def _own(t):
    """A copy of times that is to outlive its chunk (a SampleTimes holds no samples)."""
    return t if isinstance(t, SampleTimes) else t.copy()


def _still_open(carry: Carry, sig: Mapping[str, np.ndarray]) -> bool:
    """True when a chunk neither idles the bus nor starts a transaction: the carried open
    transaction goes on through all of it (so the chunk can wait, unjoined, in the carry; a
    transaction held open for many chunks then costs linear, not quadratic, time)."""
    f, i = _frame_irdy(sig)                             # asserted
    if not len(f):
        return True
    if not np.all(f | i):                               # an idle clock (both deasserted)
        return False
    last = _frame_irdy(carry.pending[-1][0] if carry.pending else carry.sig)[0][-1]
    if not last and f[0]:
        return False
    return not np.any(f[1:] > f[:-1])                   # no FRAME# assertion


def _frame_irdy(sig) -> tuple[np.ndarray, np.ndarray]:
    """FRAME# and IRDY# asserted, per clock, from the lines or the control code."""
    if "code" in sig:
        c = np.asarray(sig["code"])
        return (c & np.uint8(_F)) != 0, (c & np.uint8(_I)) != 0
    return np.asarray(sig["frame_n"]) == 0, np.asarray(sig["irdy_n"]) == 0


# Control code of one clock: bit set = line asserted (the weights are the pci bus kind's).
_WEIGHT = dict(CONTROL_CODE)
_F, _I, _T, _S, _D = (_WEIGHT[s] for s in ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n"))


# Classes of a control code (docs/records.md, "Data phases and waits" and "Termination"),
# as bit tests on a code array.
def _cls_dp(c): return (c & (_I | _T | _D)) == (_I | _T | _D)                    # noqa: E704
def _cls_s(c): return (c & _S) != 0                                              # noqa: E704
def _cls_i(c): return (c & _I) != 0                                              # noqa: E704


_CLASSES = {
    "dp": _cls_dp,                                                   # data phase completes
    "so": lambda c: _cls_s(c) & ~_cls_dp(c),                         # STOP# clock, not a phase
    "iw": lambda c: ~_cls_s(c) & ~_cls_i(c),                         # initiator wait (PCI rule)
    "d": lambda c: (c & _D) != 0,
    "sd": lambda c: (c & (_S | _D)) == (_S | _D),
    "snd": lambda c: (c & (_S | _D)) == _S,
    "dps": lambda c: (c & (_I | _T | _D | _S)) == (_I | _T | _D | _S),
    "tnd": lambda c: (c & (_T | _D)) == _T,                          # TRDY# without DEVSEL#
    "tndns": lambda c: (c & (_T | _D | _S)) == _T,                   # PCI-X split clock without S
    "tndnsni": lambda c: (c & (_T | _D | _S | _I)) == _T,            # ... that was an initiator wait
}


# The same classes as look-up tables over the 32 codes, plus a code 32 in no class (the
# position R after the last run): one gather per array of runs.
_CLASS_LUT = {name: np.append(f(np.arange(32, dtype=np.uint8)), False) for name, f in _CLASSES.items()}
_CLASS_LUT["s"] = np.append(_cls_s(np.arange(32, dtype=np.uint8)), False)
# classes of STOP# clocks: counted over the (few) runs with STOP# asserted
_STOP_CLASSES = {name for name, lut in _CLASS_LUT.items() if not (lut & ~_CLASS_LUT["s"]).any()}


_PACK = 21

# Record fields that default to -1, side by side in the record: filled as one (n, 4) view
_MINUS_ONE = ("gnt", "tag", "requester", "byte_count")
assert all(RECORD_DTYPE.fields[f][0] == np.int64 and RECORD_DTYPE.fields[f][1] == RECORD_DTYPE.fields["gnt"][1] + 8 * i
           for i, f in enumerate(_MINUS_ONE)), "record layout changed: fill the -1 fields one by one"


class _Runs:
    """The clocks as runs of one control code: counts and "first clock of a class at or after
    x" are answered from per-run prefix sums, so the cost follows the bus activity, not the
    clock count (a 64-phase burst is one run)."""

    def __init__(self, code: np.ndarray, p0: int):
        n = len(code)
        chg = code[1:] != code[:-1]
        if p0 == 1 and n > 1:
            chg[0] = True               # the context clock is a run of its own
        cut = np.flatnonzero(chg)
        self.rs_ext = np.empty(len(cut) + 2, np.int64)      # run starts, then [R] = n
        self.rs_ext[0], self.rs_ext[-1] = 0, n
        np.add(cut, 1, out=self.rs_ext[1:-1])
        self.rs = self.rs_ext[:-1]
        self.n, self.R = n, len(self.rs)
        self.rc_ext = np.empty(self.R + 1, np.uint8)         # codes, then 32 at R
        np.take(code, self.rs, out=self.rc_ext[:-1])
        self.rc_ext[-1] = 32
        self.rc = self.rc_ext[:-1]
        self.hist = np.bincount(self.rc, minlength=33)
        self.idt = np.int32 if n < 2**31 - 1 else np.int64
        self.rl = np.empty(self.R, self.idt)
        np.subtract(self.rs_ext[1:], self.rs, out=self.rl, casting="unsafe")
        self._on: dict[str, np.ndarray] = {}
        self._cum: dict = {}                                 # per run (and packed tables)
        self._sparse: dict[str, np.ndarray] = {}             # per run of the class's family
        self._pos: dict[str, np.ndarray] = {}

    def on(self, name: str) -> np.ndarray:
        """Per run (plus a False at R): is the run's code of the class."""
        if name not in self._on:
            self._on[name] = _CLASS_LUT[name][self.rc_ext]
        return self._on[name]

    def flag(self, name: str, r) -> np.ndarray:
        """Is run r (R allowed) of the class: for a few runs, without a pass over all."""
        return _CLASS_LUT[name][self.rc_ext[r]]

    def runs_in(self, name: str) -> int:
        """How many runs are of the class."""
        return int(self.hist[_CLASS_LUT[name]].sum())

    def cum(self, name: str) -> np.ndarray:
        """Clocks of the class before each run (int32: a chunk holds far fewer than 2**31)."""
        if name not in self._cum:
            c = np.zeros(self.R + 1, self.idt)
            np.cumsum(self.rl * self.on(name)[:-1], dtype=self.idt, out=c[1:])
            self._cum[name] = c
        return self._cum[name]

    def step_to(self, x: np.ndarray, r: np.ndarray, steps: int) -> np.ndarray:
        """Run index of clock x (R when x = n), given a run r at most ``steps`` runs before it."""
        for _ in range(steps):
            r = r + ((r < self.R) & (x >= self.rs_ext[np.minimum(r + 1, self.R)]))
        return r

    def run_of(self, x: int) -> int:
        return self.R if x >= self.n else int(np.searchsorted(self.rs, x, side="right")) - 1

    def at(self, x, rx):
        """A position for upto/count: (run, offset into the run); offset None = run start."""
        return rx, x - self.rs_ext[rx]

    def upto(self, name: str, p):
        """Clocks of the class in [0, x) for the position p = at(x, run of x)."""
        rx, off = p
        base = "s" if name in _STOP_CLASSES else name
        if self.runs_in(name) == 0:
            c = np.zeros(np.shape(rx), np.int64)
        elif self.runs_in(base) * 16 < self.R:
            # a sparse class (STOP# clocks, say): prefix sums over the few runs that can be of
            # it and a binary search per query, instead of passes over every run
            pos = self.positions(base)
            if name not in self._sparse:
                c = np.zeros(len(pos), np.int64)
                b = pos[:-1]
                np.cumsum(self.rl[b] * self.flag(name, b), out=c[1:])
                self._sparse[name] = c
            c = self._sparse[name][np.searchsorted(pos, rx)]
        else:
            c = self.cum(name)[rx]
        return c if off is None else c + off * self.flag(name, rx)

    def positions(self, name: str) -> np.ndarray:
        """The runs of the class, then R."""
        if name not in self._pos:
            self._pos[name] = np.append(np.flatnonzero(self.on(name)[:-1]), self.R)
        return self._pos[name]

    def counts(self, names: tuple[str, ...], a, b) -> list[np.ndarray]:
        """``count`` for up to three classes at once: their per-run clock counts are packed
        into one int64 (21 bits each; a chunk holds fewer clocks), so one prefix sum over the
        runs serves all of them."""
        if self.n >= 1 << _PACK or len(names) > 3:
            return [self.count(name, a, b) for name in names]
        if names not in self._cum:
            w = np.zeros(33, np.int64)
            for i, name in enumerate(names):
                w |= _CLASS_LUT[name].astype(np.int64) << (_PACK * i)
            c = np.zeros(self.R + 1, np.int64)
            np.cumsum(self.rl * w[self.rc], out=c[1:])
            self._cum[names] = (w, c)
        w, c = self._cum[names]

        def upto(p):
            rx, off = p
            return c[rx] if off is None else c[rx] + off * w[self.rc_ext[rx]]
        ua, ub = upto(a), upto(b)
        mask = (1 << _PACK) - 1
        return [np.maximum(((ub >> (_PACK * i)) & mask) - ((ua >> (_PACK * i)) & mask), 0)
                for i in range(len(names))]

    def count(self, name: str, a, b):
        """Clocks of the class in [a, b) (0 when empty); a, b positions from at()."""
        return np.maximum(self.upto(name, b) - self.upto(name, a), 0)

    def first(self, name: str, x, rx):
        """(clock, run) of the first clock >= x of the class (n, R when none)."""
        here = self.flag(name, rx)
        if self.runs_in(name) == 0:
            nxt = np.full(np.shape(rx), self.R)
        else:
            # usually one of the next runs (DEVSEL# a clock or two late): a search only for
            # the rest
            nxt = np.full(np.shape(rx), -1)
            for step in (1, 2, 3):
                cand = np.minimum(rx + step, self.R)
                hit = (nxt < 0) & self.flag(name, cand)
                nxt[hit] = cand[hit]
            rest = np.flatnonzero(nxt < 0)
            if len(rest):
                pos = self.positions(name)
                nxt[rest] = pos[np.minimum(np.searchsorted(pos, rx[rest] + 1), len(pos) - 1)]
        r = np.where(here, rx, nxt)
        return np.where(here, x, self.rs_ext[r]), r


class _Chunk(NamedTuple):
    """The clocks one call decodes (after the carried ones): lines, times, control code, runs."""

    buf: dict[str, np.ndarray]      # the lines, joined with the carried clocks'
    times: np.ndarray | SampleTimes
    n: int
    p0: int                         # 1: clock 0 is the context clock (decoded before)
    code: np.ndarray                # control code per clock
    runs: _Runs
    pcix: bool
    ad: np.ndarray | None           # buf's AD and C/BE# (None when not captured)
    cbe: np.ndarray | None


class _Txns(NamedTuple):
    """Where the transactions are; s..truncated: those decoded in this call, in order."""

    sr: np.ndarray          # run of each address phase
    s: np.ndarray           # address phase (clock)
    e: np.ndarray           # last clock
    j: np.ndarray           # closing bound: clock (n when not seen) ...
    rj: np.ndarray          # ... and its run (R)
    truncated: np.ndarray   # no closing bound seen
    bounds: np.ndarray      # clocks of every idle or address-phase run
    idle_run: np.ndarray    # per run: FRAME# and IRDY# deasserted
    busy_run: np.ndarray    # per run: inside any transaction (the context run: as carried)
    in_txn: np.ndarray      # per run: inside a transaction decoded in this call
    limit: int              # clocks decoded in this call: [p0, limit)
    r_limit: int            # runs that start before limit


class _Header(NamedTuple):
    """Per transaction: DAC, command, the header clocks and where the data clocks begin."""

    dac: np.ndarray
    dac2: np.ndarray        # second address phase reached
    H: np.ndarray           # last header clock
    cmd_code: np.ndarray    # -1 without C/BE#
    lo: np.ndarray          # first data clock (data clocks: lo..e)
    rlo: np.ndarray         # its run
    plo: tuple              # its position (runs.at)
    attr: np.ndarray        # PCI-X attribute phase clock ...
    attr_ok: np.ndarray     # ... reached (always False in PCI)


class _Devsel(NamedTuple):
    """Per transaction: the target's first DEVSEL# and the width it agreed to."""

    fd: np.ndarray          # first DEVSEL# clock after H (-1 when none)
    rfd: np.ndarray         # its run
    has_d: np.ndarray
    code: np.ndarray        # index into the DEVSEL speeds (4: none)
    fd1: np.ndarray         # clocks after the first DEVSEL#: [fd1, j) ...
    pfd1: tuple             # ... fd1's position
    w64: np.ndarray
    width: np.ndarray


class _Counts(NamedTuple):
    data_phases: np.ndarray
    stop_clocks: np.ndarray
    initiator_waits: np.ndarray
    target_waits: np.ndarray


class _Words(NamedTuple):
    """The data phases (one word each) of the decoded transactions, in clock order."""

    excl: np.ndarray        # per transaction: index of its first word (words before it)
    idx: np.ndarray         # clock of each word
    txn: np.ndarray         # transaction of each word
    has_words: np.ndarray
    first_word: np.ndarray  # excl of the transactions that have words
    any_wide: bool          # some word is 64 bits wide ...
    wide: np.ndarray | None  # ... then per word (when AD or C/BE# is captured)
    ad: np.ndarray | None   # AD and C/BE# on each word's clock
    cbe: np.ndarray | None
    hdr_clk: list           # header clocks (address, second address, attribute phase)


class _Parity(NamedTuple):
    any: np.ndarray         # per transaction: a parity error
    hdr: list               # per transaction: bad address, second address, attribute phase
    wbad32: np.ndarray      # per word: bad PAR ...
    wbad64: np.ndarray | None  # ... and PAR64
    sec: np.ndarray         # clocks of the second address and attribute phases
    at: np.ndarray


_DSI = ("dp", "so", "iw")
M4 = np.uint64(0xF)


def decode_clocks(sig: Mapping[str, np.ndarray], times_ps: np.ndarray | SampleTimes, *, mode: str = "pci",
                  width: int = 32, bus: str = "pci", carry: Carry | None = None,
                  final: bool = True, ad_bits: int = 64, cbe_bits: int = 8,
                  alloc=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, Carry]:
    """Decode one chunk of bus clocks.

    ``times_ps``: the clocks' times, an int64 array or a SampleTimes (read only where needed).
    Returns (records, words, findings, carry). ``words['record']`` counts records from the
    first chunk of this bus. With ``final=False`` the transaction open at the end of the chunk
    is kept in the returned carry; with ``final=True`` it is emitted as ``truncated``.
    ``ad_bits`` / ``cbe_bits``: how many AD / C/BE# lines the capture has (a 32-bit probe on a
    64-bit bus gives 32-bit words and counts the upper byte lanes as enabled).
    ``alloc(dtype, n)`` -> a zero-filled array for the records / words (default: a new one),
    so a collector can have them written straight into its own buffer. Fields that are 0 in
    this chunk are then not written at all.
    """
    if alloc is None:
        def alloc(dtype, m): return np.zeros(m, dtype)                      # noqa: E306,E704
    if mode not in ("pci", "pcix"):
        raise PcitraceError(f"unknown bus mode {mode!r}", fix="use mode 'pci' or 'pcix' in the profile")
    if (carry is not None and carry.open and not final and len(carry.times_ps) > 3
            and _still_open(carry, sig)):
        if len(times_ps):
            carry.pending.append(({k: np.asarray(v) for k, v in sig.items() if k in carry.sig},
                                  _times(times_ps)))
        return (np.zeros(0, RECORD_DTYPE), np.zeros(0, WORD_DTYPE), np.zeros(0, FINDING_DTYPE), carry)
    prior = carry if carry is not None else Carry({}, np.zeros(0, np.int64), 0, False)
    buf, times = _join(carry, sig, times_ps)
    n = len(times)
    findings = _Findings(bus)
    if n == 0:
        empty = Carry({k: v[:0] for k, v in buf.items()}, times[:0], prior.clock0, False, prior.leading,
                      prior.orphan, False, prior.records, prior.words)
        return np.zeros(0, RECORD_DTYPE), np.zeros(0, WORD_DTYPE), findings.array(), empty

    p0 = 1 if prior.context else 0
    code = _control_code(buf)
    ck = _Chunk(buf, times, n, p0, code, _Runs(code, p0), mode == "pcix", buf.get("ad"), buf.get("cbe_n"))
    tx = _transactions(ck, final, prior.ctx_busy)
    hd = _header(ck, tx)
    dv = _devsel(ck, tx, hd, width)
    cn = _counts(ck, tx, hd, dv)
    term = _termination(ck, tx, hd, dv)
    wd = _data_words(ck, tx, hd, dv, cn.data_phases)
    pa = _parity(ck, tx, hd, wd, ad_bits, cbe_bits)
    rec = _records(ck, tx, hd, dv, cn, term, wd, pa, alloc=alloc, bus=bus, word_base=prior.words,
                   nbytes=_byte_counts(ck, dv, cn, wd, cbe_bits))
    words = _word_records(ck, wd, prior.records, alloc, ad_bits, cbe_bits)

    where = _describer(rec, ck.ad is not None)
    _devsel_findings(findings, ck, tx, hd, dv, where)
    if ck.cbe is not None:
        _cbe_wait_findings(findings, ck, tx, hd, wd, cbe_bits >= 8, where)
    _timing_findings(findings, ck, tx, hd, dv, wd, where)
    leading, r_from = _irdy_findings(findings, ck, tx, prior.leading, prior.orphan)
    if pa is not None and pa.any.any():
        _parity_findings(findings, pa.hdr, pa.wbad32, pa.wbad64, tx.s, pa.sec, pa.at, wd.idx, wd.txn,
                         wd.excl, times, where)
    new = _next_carry(ck, tx, prior, final=final, leading=leading, r_from=r_from,
                      words=prior.words + int(cn.data_phases.sum()))
    return rec, words, findings.array(), new


def _control_code(buf: Mapping[str, np.ndarray]) -> np.ndarray:
    """5-bit control code per clock (levels are 0/1; asserted = 0), unless the capture
    layer made it (read-only here)."""
    if "code" in buf:
        return buf["code"]
    # (numpy vectorises uint8 multiply-add; uint8 left shifts run several times slower)
    code = buf["frame_n"].astype(np.uint8, copy=True)
    for name, weight in (("irdy_n", _I), ("trdy_n", _T), ("stop_n", _S), ("devsel_n", _D)):
        code += buf[name].astype(np.uint8, copy=False) * np.uint8(weight)
    code ^= np.uint8(31)
    return code


def _transactions(ck: _Chunk, final: bool, ctx_busy: bool) -> _Txns:
    """Address phases and transaction bounds (all at run starts): an address phase is FRAME#
    asserted after a run without it, a transaction ends before the next idle or address run.
    Without ``final`` the last transaction is decoded only once its end is in hand."""
    runs, n, p0 = ck.runs, ck.n, ck.p0
    rs, rc, R = runs.rs, runs.rc, runs.R
    rF = (rc & _F) != 0
    start_run = np.zeros(R, bool)
    np.greater(rF[1:], rF[:-1], out=start_run[1:])          # FRAME# asserted after a run without
    start_run[0] = bool(rF[0] and not (rc[0] & _I)) if p0 == 0 else False
    idle_run = (rc & (_F | _I)) == 0
    start_r = np.flatnonzero(start_run)
    starts_all = rs[start_r]
    bound_r = np.flatnonzero(idle_run | start_run)
    bounds = rs[bound_r]
    k = np.searchsorted(bound_r, start_r, side="right")
    has_j = k < len(bound_r)
    kc = np.minimum(k, max(len(bound_r) - 1, 0))
    j_all = np.where(has_j, bounds[kc] if len(bounds) else 0, n)
    rj_all = np.where(has_j, bound_r[kc] if len(bound_r) else 0, R)
    if final:
        nproc = len(starts_all)
    else:
        # A transaction is final once its closing clock and its header clocks are in hand;
        # only the last one can lack them.
        ok = has_j & (starts_all + 2 < n)
        nproc = len(starts_all) if ok.all() else int(np.argmin(ok))
    # Decoded clocks this call: [p0, limit); the carried transaction's clocks wait.
    limit = int(starts_all[nproc]) if nproc < len(starts_all) else n
    busy_run = _spans(R, start_r, rj_all)
    r_limit = int(np.searchsorted(rs, limit))
    in_txn = busy_run.copy()
    in_txn[r_limit:] = False
    if p0 == 1:
        busy_run[0] |= ctx_busy
    s = starts_all[:nproc]
    return _Txns(start_r[:nproc], s, j_all[:nproc] - 1, j_all[:nproc], rj_all[:nproc], ~has_j[:nproc],
                 bounds, idle_run, busy_run, in_txn, limit, r_limit)


def _header(ck: _Chunk, tx: _Txns) -> _Header:
    """DAC, command, PCI-X attribute phase. Header clocks (second DAC phase, attribute phase)
    count only while the transaction lasts: a transaction that ends first keeps the command
    `dac` and a 32-bit address."""
    s, e, cbe = tx.s, tx.e, ck.cbe
    if cbe is not None:
        dac = (cbe[s] & M4) == 0xD
    else:
        dac = np.zeros(len(s), bool)
    dac2 = dac & (s + 1 <= e)
    nh = dac.astype(np.int64) + (1 if ck.pcix else 0)
    H = np.minimum(s + nh, e)
    if cbe is not None:
        cmd_code = (cbe[np.where(dac2, s + 1, s)] & M4).astype(np.int64)
    else:
        cmd_code = np.full(len(s), -1, np.int64)
    lo = H + 1
    rlo = ck.runs.step_to(lo, tx.sr, 3)
    attr = s + dac + 1
    attr_ok = (attr <= e) if ck.pcix else np.zeros(len(s), bool)
    return _Header(dac, dac2, H, cmd_code, lo, rlo, ck.runs.at(lo, rlo), attr, attr_ok)


def _devsel(ck: _Chunk, tx: _Txns, hd: _Header, width: int) -> _Devsel:
    """The first DEVSEL# after the header (its speed) and the transfer's width."""
    runs, buf, s = ck.runs, ck.buf, tx.s
    fd, rfd = runs.first("d", hd.lo, hd.rlo)
    has_d = fd <= tx.e
    fd = np.where(has_d, fd, -1)
    code = np.where(has_d, np.clip(fd - hd.H, 1, 4) - 1, 4)
    fd1 = np.where(has_d, fd + 1, tx.j)
    rfd1 = np.where(has_d, runs.step_to(fd1, rfd, 1), tx.rj)
    if "req64_n" in buf and "ack64_n" in buf:
        w64 = (buf["req64_n"][s] == 0) & has_d & (buf["ack64_n"][np.maximum(fd, 0)] == 0)
        rec_width = np.where(w64, 64, 32)
    else:
        rec_width = np.full(len(s), int(width), np.int64)
        w64 = rec_width == 64
    return _Devsel(fd, rfd, has_d, code, fd1, runs.at(fd1, rfd1), w64, rec_width)


def _counts(ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel) -> _Counts:
    """Data phases, STOP# clocks and waits of each transaction: prefix sums over the runs."""
    runs, Pj = ck.runs, (tx.rj, None)
    data_phases, stop_clocks, initiator_waits = runs.counts(_DSI, hd.plo, Pj)
    if ck.pcix:
        # PCI-X Split Response: TRDY# with DEVSEL# deasserted after the target had claimed the
        # transaction (PCI-X 1.0b 2.10.2); that clock ends the transaction like a STOP# clock.
        stop_clocks = stop_clocks + runs.count("tndns", dv.pfd1, Pj)
        initiator_waits = initiator_waits - runs.count("tndnsni", dv.pfd1, Pj)
    target_waits = (tx.e - hd.H) - data_phases - stop_clocks - initiator_waits
    return _Counts(data_phases, stop_clocks, initiator_waits, target_waits)


def _termination(ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel) -> np.ndarray:
    """Each transaction's termination (an index into facts.TERMINATIONS; first match wins)."""
    runs, rs, s = ck.runs, ck.runs.rs, tx.s
    term = np.full(len(s), _TERM["normal"], np.int64)
    has_k, with_data, abort = (np.zeros(len(s), bool) for _ in range(3))
    before_k = np.zeros(len(s), np.int64)
    if runs.runs_in("s") and len(s):
        # Every class looked at here has STOP# asserted, and STOP# runs are few: each is
        # handed to the transaction it lies in, rather than a prefix sum over all runs per class.
        r = runs.positions("s")[:-1]
        t = np.searchsorted(tx.sr, r, side="right") - 1
        keep = t >= 0
        r, t = r[keep], t[keep]
        keep = r < tx.rj[t]                             # before the transaction's closing bound
        r, t = r[keep], t[keep]
        r_end = np.minimum(runs.rs_ext[r + 1], tx.j[t])
        a = np.maximum(rs[r], hd.lo[t])                 # the run's clocks in [lo, j)
        sd = runs.flag("sd", r) & (r_end > a)
        has_k[t[sd]] = True
        with_data[t[runs.flag("dps", r) & (r_end > a)]] = True   # a data phase completed with STOP#
        abort[t[runs.flag("snd", r) & (r_end > np.maximum(rs[r], dv.fd1[t]))]] = True
        # the first STOP# with DEVSEL#: the first such run of each transaction (runs in order)
        tk, ak, rk = t[sd], a[sd], r[sd]
        first = np.flatnonzero(np.concatenate(([True], tk[1:] != tk[:-1]))) if len(tk) else tk
        ik = tk[first]
        before_k[ik] = runs.counts(_DSI, (hd.rlo[ik], hd.plo[1][ik]), runs.at(ak[first], rk[first]))[0]
    term = np.where(has_k & (before_k == 0), _TERM["retry"], term)
    term = np.where(has_k & (before_k > 0), _TERM["disconnect_without_data"], term)
    term = np.where(has_k & with_data, _TERM["disconnect_with_data"], term)
    term = np.where(abort, _TERM["target_abort"], term)
    if ck.pcix:
        term = np.where(runs.count("tnd", dv.pfd1, (tx.rj, None)) > 0, _TERM["split_response"], term)
    term = np.where(~dv.has_d, _TERM["master_abort"], term)
    return np.where(tx.truncated, _TERM["truncated"], term)


def _data_words(ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel, data_phases: np.ndarray) -> _Words:
    """One data word per completed data phase, also without AD and C/BE# (value and byte
    enables 0): its time is what a control-only capture's first-word and per-phase timing
    figures come from. Only here are AD and C/BE# looked at clock by clock."""
    s, runs = tx.s, ck.runs
    excl = np.zeros(len(s), np.int64)
    if len(s) > 1:
        np.cumsum(data_phases[:-1], out=excl[1:])
    # Data clocks: lo..e of each decoded transaction. A transaction spans whole runs from
    # its address phase to its closing bound, so this is decided run by run and spread to
    # clocks once; only the header clocks s..H (at most three) are then taken out.
    hdr_clk = [s] + [(s + i)[hd.H >= s + i] for i in (1, 2)]
    w_idx = _clocks_of(np.flatnonzero(tx.in_txn & runs.on("dp")[:-1]), runs.rs, runs.rl)
    for h in hdr_clk:
        # a header clock is never a data phase, whatever the lines show (rare: only
        # illegal activity has IRDY#, TRDY# and DEVSEL# on an address or attribute phase)
        h = h[_CLASS_LUT["dp"][ck.code[h]]]
        if len(h):
            w_idx = w_idx[~np.isin(w_idx, h)]
    w_txn = np.repeat(np.arange(len(s)), data_phases)
    has_words = data_phases > 0
    any_wide = bool((dv.w64 & has_words).any())
    ad, cbe = ck.ad, ck.cbe
    # per-word width only matters when some word is 64 bits wide
    wide = dv.w64[w_txn] if any_wide and (ad is not None or cbe is not None) else None
    return _Words(excl, w_idx, w_txn, has_words, excl[has_words], any_wide, wide,
                  ad[w_idx] if ad is not None else None, cbe[w_idx] if cbe is not None else None, hdr_clk)


def _per_txn_sum(wd: _Words, x: np.ndarray) -> np.ndarray:
    """Per transaction: the sum of a per-word value over its words."""
    out = np.zeros(len(wd.has_words), np.int64)
    if len(wd.first_word):
        out[wd.has_words] = np.add.reduceat(x, wd.first_word)
    return out


def _byte_counts(ck: _Chunk, dv: _Devsel, cn: _Counts, wd: _Words, cbe_bits: int) -> np.ndarray:
    """Bytes each transaction moved: enabled byte lanes of its words (without C/BE#: all)."""
    if wd.cbe is None:
        return cn.data_phases * (dv.width // 8)
    wbytes = 4 - np.bitwise_count(wd.cbe & M4).astype(np.int64)      # deasserted lanes 0-3
    if wd.any_wide:
        upper = (4 - np.bitwise_count((wd.cbe >> np.uint64(4)) & M4).astype(np.int64)) if cbe_bits >= 8 else 4
        wbytes += np.where(wd.wide, upper, 0)
    return _per_txn_sum(wd, wbytes)


def _parity(ck: _Chunk, tx: _Txns, hd: _Header, wd: _Words, ad_bits: int, cbe_bits: int) -> _Parity | None:
    """Checked phases: the address phase(s), the PCI-X attribute phase and every data phase,
    each against PAR on the next clock (PAR64 too on data phases of a 64-bit transfer).
    None when AD, C/BE# or PAR is not captured."""
    if ck.ad is None or ck.cbe is None or "par" not in ck.buf:
        return None
    s, n, buf = tx.s, ck.n, ck.buf
    par64 = buf["par64"] if ("par64" in buf and ad_bits >= 64 and cbe_bits >= 8) else None
    sec = np.minimum(s + 1, n - 1)
    at = np.minimum(hd.attr, n - 1)
    hdr = [_bad_parity(ck, s), hd.dac2 & _bad_parity(ck, sec), hd.attr_ok & _bad_parity(ck, at)]
    wbad32 = _bad_parity(ck, wd.idx, wd.ad, wd.cbe)
    wbad = wbad32
    wbad64 = None
    if par64 is not None and wd.any_wide:
        wbad64 = wd.wide & _bad_parity(ck, wd.idx, wd.ad, wd.cbe, hi=True)
        wbad = wbad | wbad64
    errors = hdr[0] | hdr[1] | hdr[2] | (_per_txn_sum(wd, wbad.astype(np.int64)) > 0)
    return _Parity(errors, hdr, wbad32, wbad64, sec, at)


def _bad_parity(ck: _Chunk, p: np.ndarray, a: np.ndarray | None = None, c: np.ndarray | None = None,
                hi: bool = False) -> np.ndarray:
    """Per clock p: PAR (``hi``: PAR64) on the next clock disagrees with AD and C/BE# at p
    (their lower or upper halves; ``a`` / ``c``: those values when already gathered).
    False on the last clock, which has no next one."""
    n = ck.n
    a = ck.ad[p] if a is None else a
    c = ck.cbe[p] if c is None else c
    nxt = np.minimum(p + 1, n - 1)
    if hi:
        ones = np.bitwise_count(a >> np.uint64(32)) + np.bitwise_count((c >> np.uint64(4)) & M4)
        pv = ck.buf["par64"][nxt]
    else:
        ones = np.bitwise_count(a & M32) + np.bitwise_count(c & M4)
        pv = ck.buf["par"][nxt]
    return ((ones & 1).astype(bool) ^ (pv != 0)) & (p + 1 < n)


def _records(ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel, cn: _Counts, term: np.ndarray,
             wd: _Words, pa: _Parity | None, *, alloc, bus: str, word_base: int,
             nbytes: np.ndarray) -> np.ndarray:
    """The decoded transactions' records (fields that stay 0 are not written)."""
    s, e, n, ad, times = tx.s, tx.e, ck.n, ck.ad, ck.times
    rec = alloc(RECORD_DTYPE, len(s))
    _put_text(rec, "bus", bus)
    _times_into(rec["start_ps"], times, s)
    _times_into(rec["end_ps"], times, e)
    rec["clocks"] = e - s + 1
    if ck.cbe is not None:
        rec["command"] = (_PCIX_NAMES_U if ck.pcix else _PCI_NAMES_U)[hd.cmd_code]
    else:
        _put_text(rec, "command", facts.COMMAND_UNKNOWN)
    rec["dac"] = hd.dac
    if ad is not None:
        a0 = ad[s] & M32
        a1 = ad[np.minimum(s + 1, n - 1)] & M32
        rec["address"] = a0 | np.where(hd.dac2, a1 << np.uint64(32), np.uint64(0))
    rec["data_phases"] = cn.data_phases
    rec["bytes"] = nbytes
    rec["devsel"] = _DEVSEL_U[dv.code]
    rec["termination"] = _TERM_U[term]
    rec["initiator_waits"] = cn.initiator_waits
    rec["target_waits"] = cn.target_waits
    rec["parity_error"] = pa.any if pa is not None else np.zeros(len(s), bool)
    rec["width"] = dv.width
    # gnt, tag, requester, byte_count: -1 (not captured / not PCI-X) unless set below
    if len(rec):
        np.ndarray((len(rec), len(_MINUS_ONE)), np.int64, buffer=rec, offset=RECORD_DTYPE.fields["gnt"][1],
                   strides=(RECORD_DTYPE.itemsize, 8))[...] = -1
    if "gnt_n" in ck.buf:
        prev = np.maximum(s - 1, 0)
        rec["gnt"] = (s >= 1) & (ck.buf["gnt_n"][prev] == 0)
    if ck.pcix and ad is not None and ck.cbe is not None:
        _pcix_attributes(rec, ck, s, hd)
    rec["data_index"] = word_base + wd.excl
    return rec


def _pcix_attributes(rec: np.ndarray, ck: _Chunk, s: np.ndarray, hd: _Header) -> None:
    """The PCI-X attribute phase's fields: byte count, tag, requester, no-snoop, RO."""
    ad, cbe, attr_ok = ck.ad, ck.cbe, hd.attr_ok
    Ac = np.minimum(hd.attr, ck.n - 1)
    ad_a = ad[Ac]
    cbe_a = cbe[Ac] & M4
    dword = np.isin(hd.cmd_code.astype(np.uint64), _DWORD)
    burst_bc = ((ad_a & np.uint64(0xFF)) | (cbe_a << np.uint64(8))).astype(np.int64)
    burst_bc = np.where(burst_bc == 0, 4096, burst_bc)
    dword_bc = 4 - np.bitwise_count(cbe_a).astype(np.int64)
    # A Split Completion names the sequence it completes in its address phase (requester,
    # tag, RO); its attribute phase carries the completer's ID and the byte count.
    sc = hd.cmd_code == 0xC
    src = np.where(sc, ad[s], ad_a)
    rec["byte_count"] = np.where(attr_ok, np.where(dword, dword_bc, burst_bc), -1)
    rec["tag"] = np.where(attr_ok, ((src >> np.uint64(24)) & np.uint64(0x1F)).astype(np.int64), -1)
    rec["requester"] = np.where(attr_ok, ((src >> np.uint64(8)) & np.uint64(0xFFFF)).astype(np.int64), -1)
    rec["no_snoop"] = attr_ok & ~sc & ((ad_a >> np.uint64(29)) & np.uint64(1)).astype(bool)
    rec["relaxed_ordering"] = attr_ok & ((src >> np.uint64(30)) & np.uint64(1)).astype(bool)


def _word_records(ck: _Chunk, wd: _Words, rec_base: int, alloc, ad_bits: int, cbe_bits: int) -> np.ndarray:
    """The data words: record (counted from the bus's first chunk), time, value, byte enables."""
    words = alloc(WORD_DTYPE, len(wd.idx))
    np.add(wd.txn, rec_base, out=words["record"])
    _times_into(words["time_ps"], ck.times, wd.idx)
    if wd.ad is not None:
        if wd.any_wide and ad_bits >= 64:
            words["value"] = wd.ad & np.where(wd.wide, np.uint64(0xFFFFFFFFFFFFFFFF), M32)
        else:
            words["value"] = wd.ad & M32
    if wd.cbe is not None:
        if wd.any_wide and cbe_bits >= 8:
            words["byte_enables"] = wd.cbe & np.where(wd.wide, np.uint64(0xFF), M4)
        else:
            words["byte_enables"] = wd.cbe & M4
    return words


def _describer(rec: np.ndarray, has_ad: bool):
    """where(t) -> the findings' words for records t: "command at 0xaddress"."""
    def where(t) -> list[str]:
        return [f"{rec['command'][i]} at 0x{int(rec['address'][i]):x}" if has_ad else f"{rec['command'][i]}"
                for i in t]
    return where


def _devsel_findings(findings: _Findings, ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel, where) -> None:
    """TRDY# / STOP# without DEVSEL#: before the first DEVSEL# (after it, TRDY# alone is a
    PCI-X split response and STOP# alone a target abort); in PCI TRDY# anywhere."""
    runs = ck.runs
    upto_d = np.where(dv.has_d, dv.fd, tx.j)
    rupto_d = np.where(dv.has_d, dv.rfd, tx.rj)
    lim, rlim = (upto_d, rupto_d) if ck.pcix else (tx.j, tx.rj)
    for kind, lut, b1, rb1, what in (("trdy_without_devsel", "tnd", lim, rlim, "TRDY#"),
                                     ("stop_without_devsel", "snd", upto_d, rupto_d, "STOP#")):
        if not runs.runs_in(lut):                    # the usual case: no such clock at all
            continue
        cnt = runs.count(lut, hd.plo, runs.at(b1, rb1))
        t = np.flatnonzero(cnt > 0)
        x, _ = runs.first(lut, hd.lo[t], hd.rlo[t])
        findings.add(ck.times[x], kind, [f"{what} asserted without DEVSEL# on {int(c)} clock(s) of {w}"
                                         for c, w in zip(cnt[t], where(t))])


def _cbe_wait_findings(findings: _Findings, ck: _Chunk, tx: _Txns, hd: _Header, wd: _Words,
                       wide_be: bool, where) -> None:
    """C/BE# must hold still while IRDY# is asserted within one data phase."""
    code, cbe, n = ck.code, ck.cbe, ck.n
    bmask = np.uint64(0xFF if wide_be else 0xF)
    I = (code & np.uint8(_I)) != 0
    dp_clk = (code & np.uint8(_I | _T | _D)) == (_I | _T | _D)
    region = np.repeat(tx.in_txn, ck.runs.rl)
    for h in wd.hdr_clk:
        region[h] = False
    pending = I & ~(dp_clk | ((code & np.uint8(_S)) != 0))
    changed = np.zeros(n, bool)
    changed[1:] = pending[:-1] & I[1:] & (((cbe[1:] ^ cbe[:-1]) & bmask) != 0)
    lo = hd.lo
    changed[lo[lo < n]] = False                  # the clock before lo is a header clock
    x = np.flatnonzero(changed & region)
    t = np.searchsorted(tx.s, x, side="right") - 1
    findings.add(ck.times[x], "byte_enables_changed_in_wait",
                 [f"C/BE# changed from {int(cbe[i - 1] & bmask):X} to {int(cbe[i] & bmask):X} "
                  f"during a wait state of {w}" for i, w in zip(x, where(t))])


def _timing_findings(findings: _Findings, ck: _Chunk, tx: _Txns, hd: _Header, dv: _Devsel, wd: _Words,
                     where) -> None:
    """A late first data phase, a late DEVSEL#, FRAME# asserted again too early."""
    s, e, n, times, H = tx.s, tx.e, ck.n, ck.times, hd.H
    fdp = np.full(len(s), n, np.int64)            # first data phase: the first word's clock
    fdp[wd.has_words] = wd.idx[wd.first_word]
    late = (fdp <= e) & (fdp - s > facts.MAX_INITIAL_LATENCY)
    findings.add(times[fdp[late]], "initial_latency",
                 [f"first data phase {int(fdp[i] - s[i])} clocks after the address phase of {w}"
                  for i, w in zip(np.flatnonzero(late), where(np.flatnonzero(late)))])
    # DEVSEL# after the subtractive decode slot: the master has aborted by then. Without C/BE#
    # a DAC is not recognised and its second address phase counts as one of the n clocks.
    dv_limit = facts.MAX_DEVSEL_CLOCKS + (0 if ck.cbe is not None else 1)
    fd = dv.fd
    dl = np.flatnonzero(dv.has_d & (fd - H > dv_limit))
    if len(dl):
        hname = np.where(ck.pcix, "attribute phase",
                         np.where(hd.dac2[dl], "second address phase", "address phase"))
        findings.add(times[fd[dl]], "devsel_late",
                     [f"DEVSEL# first asserted {int(fd[i] - H[i])} clocks after the {h} of {w}: "
                      f"later than subtractive decode ({dv_limit}), when the master aborts"
                      for i, h, w in zip(dl, hname, where(dl))])
    pc = ck.code[np.maximum(s - 1, 0)]
    # without DEVSEL# the master ended its own transaction (master abort): nothing was pending
    pend = (s >= 1) & ((pc & (_I | _F | _T | _S | _D)) == (_I | _D))
    findings.add(times[s[pend]], "frame_reasserted",
                 [f"FRAME# asserted again while the final data phase was pending: {w}"
                  for w in where(np.flatnonzero(pend))])


def _irdy_findings(findings: _Findings, ck: _Chunk, tx: _Txns, leading: bool,
                   orphan_prev: bool) -> tuple[bool, int]:
    """IRDY# outside any transaction, once per run of such clocks; not in the partial
    transaction the capture began in (clocks before its first idle clock or address phase).
    Transactions span whole runs, so this is decided run by run. Returns ``leading`` after
    this chunk and the first run looked at."""
    p0, limit, rs = ck.p0, tx.limit, ck.runs.rs
    lead_end = p0
    if leading:
        b = tx.bounds[tx.bounds >= p0]
        if len(b):
            lead_end = min(int(b[0]), limit)
            leading = False
        else:
            lead_end = limit
    # (run starts are sorted: the clock window is a window of runs)
    r_from = int(np.searchsorted(rs, max(lead_end, p0)))
    orphan_r = np.flatnonzero(~(tx.idle_run[r_from:tx.r_limit] | tx.busy_run[r_from:tx.r_limit])) + r_from
    first_orphan = orphan_r[np.concatenate(([True], np.diff(orphan_r) > 1))] if len(orphan_r) else orphan_r
    if p0 == 1 and orphan_prev and ck.runs.R > 1:
        first_orphan = first_orphan[first_orphan != 1]
    x = rs[first_orphan]
    findings.add(ck.times[x], "irdy_without_transaction",
                 ["IRDY# asserted with no transaction (FRAME# not asserted before it)"] * len(x))
    return leading, r_from


def _next_carry(ck: _Chunk, tx: _Txns, prior: Carry, *, final: bool, leading: bool, r_from: int,
                words: int) -> Carry:
    """What the next chunk needs: the open transaction's clocks and the clock before them."""
    buf, times, n, limit = ck.buf, ck.times, ck.n, tx.limit
    records = prior.records + len(tx.s)
    if final:
        return Carry({k: v[:0] for k, v in buf.items()}, times[:0], prior.clock0 + n, False, leading,
                     False, False, records, words)
    if limit == n:        # nothing open: keep the last clock as "previous clock"
        c0, ctx = n - 1, True
    elif limit == 0:      # the open transaction starts on the capture's first clock
        c0, ctx = 0, False
    else:
        c0, ctx = limit - 1, True
    if limit - 1 >= ck.p0:
        rl_ = ck.runs.run_of(limit - 1)
        last_orphan = bool(r_from <= rl_ < tx.r_limit and not tx.idle_run[rl_] and not tx.busy_run[rl_])
        c0_busy = bool(tx.busy_run[ck.runs.run_of(c0)])
    else:
        last_orphan = prior.orphan
        c0_busy = bool(tx.busy_run[0]) if n else False
    return Carry({k: v[c0:].copy() for k, v in buf.items()}, _own(times[c0:]), prior.clock0 + c0,
                 ctx, leading, last_orphan, c0_busy, records, words, open=limit < n)


def _put_text(rec: np.ndarray, name: str, text: str) -> None:
    """The same text in a string field of every (zero-filled) record: only its characters
    are written (a UCS4 field is zero-padded code points), not the whole field's width."""
    if not len(rec) or not text:
        return
    dt, off = RECORD_DTYPE.fields[name][:2]
    text = text[:dt.itemsize // 4]
    cps = np.array([text], f"U{len(text)}").view(np.uint32)
    np.ndarray((len(rec), len(cps)), np.uint32, buffer=rec, offset=off,
               strides=(RECORD_DTYPE.itemsize, 4))[...] = cps


_ARANGE = np.arange(0, dtype=np.int64)
_ARANGE_KEEP = 1 << 21        # the running count kept between calls: 16 MiB at most


def _clocks_of(r: np.ndarray, rs: np.ndarray, rl: np.ndarray) -> np.ndarray:
    """The clocks of runs r (sorted), in order: each run's start repeated over its length
    plus a running count (two passes over the output, where spreading a per-clock mask and
    searching it would take two over every clock)."""
    global _ARANGE
    lens = rl[r]
    total = int(lens.sum())
    if total > len(_ARANGE):
        if total > _ARANGE_KEEP:          # (a transaction open over many chunks) not kept
            count = np.arange(total, dtype=np.int64)
        else:
            _ARANGE = np.arange(min(max(total, 2 * len(_ARANGE)), _ARANGE_KEEP), dtype=np.int64)
            _ARANGE.flags.writeable = False
    shift = rs[r]
    if len(r) > 1:
        shift[1:] -= np.cumsum(lens[:-1], dtype=np.int64)
    out = np.repeat(shift, lens)
    out += _ARANGE[:total] if total <= len(_ARANGE) else count
    return out


def _spans(R: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per run: inside one of the spans [a[i], b[i]) (sorted, disjoint, none empty)."""
    edges = np.empty(2 * len(a) + 2, np.int64)
    edges[0], edges[-1] = 0, R
    edges[1:-1:2] = a
    edges[2:-1:2] = b
    inside = np.zeros(len(edges) - 1, bool)
    inside[1::2] = True
    return np.repeat(inside, np.diff(edges))


def _parity_findings(findings, hdr, wbad32, wbad64, s, sec, at, w_idx, w_txn, excl, times, where_txt):
    """One finding per phase with wrong parity (they are rare: a loop over them costs nothing)."""
    xs, msgs = [], []
    for bad, clk, what in ((hdr[0], s, "address phase"), (hdr[1], sec, "second address phase"),
                           (hdr[2], at, "attribute phase")):
        for i in np.flatnonzero(bad):
            xs.append(clk[i])
            msgs.append(f"PAR parity error on the {what} of {where_txt([i])[0]}")
    b64 = wbad64 if wbad64 is not None else np.zeros(len(w_idx), bool)
    for k in np.flatnonzero(wbad32 | b64):
        which = " and ".join(w for w, on in (("PAR", wbad32[k]), ("PAR64", b64[k])) if on)
        t = w_txn[k]
        xs.append(w_idx[k])
        msgs.append(f"{which} parity error on data phase {k - excl[t] + 1} of {where_txt([t])[0]}")
    findings.add(times[np.asarray(xs, np.int64)], "parity_error", msgs)


_CONTROL_NAMES = {"frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
                  "devsel_n": "DEVSEL#"}


class GlitchScan:
    """`glitch` findings of a timing-mode capture, fed block by block in sample order: a
    control line that changes two or more times between one CLK rising edge (exclusive)
    and the next (inclusive), reported at the line's second-to-last edge in that period
    (where its last pulse began), as the reference decoder does. Edges before the first
    clock count towards it; edges after the last do not. The state carried per line is a
    count and two edges. ``feed`` takes sample numbers only (the clock's rising edges and
    each line's changes), so it serves a pass of its own over the lines (:func:`glitches`)
    as well as the changes a packed capture finds while it reads a bus's clocks."""

    def __init__(self, bus_name: str, lines: list[str], timebase):
        self.lines = list(lines)
        self.timebase = timebase
        self.findings = _Findings(bus_name)
        self.pend = {s: 0 for s in lines}                # edges since the last clock
        self.last2 = {s: [-1, -1] for s in lines}        # (second-to-last, last) edge sample

    def feed(self, clocks: np.ndarray, edges: Mapping[str, np.ndarray]) -> None:
        for s in self.lines:
            e = edges[s]
            if not len(clocks):
                self._remember(s, e)
                self.pend[s] += len(e)
                continue
            # each edge belongs to the first clock at or after it (len(clocks): after the
            # last one); edges are fewer than clocks, so they are the ones searched for
            owner = np.searchsorted(clocks, e, side="left")
            count = np.bincount(owner, minlength=len(clocks) + 1)
            tail = int(count[-1])
            count = count[:-1]
            count[0] += self.pend[s]
            for i in np.flatnonzero(count >= 2):               # glitches are rare
                upto = int(np.searchsorted(owner, i, side="right"))   # edges up to clock i
                new_here = upto - int(np.searchsorted(owner, i, side="left"))
                if new_here >= 2:
                    at = e[upto - 2]
                elif new_here == 1:
                    at = self.last2[s][1]
                else:
                    at = self.last2[s][0]
                self.findings.add(self.timebase.times_at(np.array([at])), "glitch",
                                  [f"{_CONTROL_NAMES[s]} changed {int(count[i])} times within one clock period"])
            self.pend[s] = tail
            self._remember(s, e)

    def _remember(self, s: str, e: np.ndarray) -> None:
        for x in e[-2:]:
            self.last2[s] = [self.last2[s][1], int(x)]

    def array(self) -> np.ndarray:
        return self.findings.array()


def glitch_lines(bus) -> list[str]:
    """The control lines a bus's glitch scan watches (none without a clock)."""
    return [s for s in _CONTROL_NAMES if s in bus.signals] if bus.clock is not None else []


def glitches(capture, bus, chunk_samples: int = 1 << 22) -> np.ndarray:
    """`glitch` findings (see :class:`GlitchScan`) from a pass of their own over the raw
    samples of the clock and the control lines."""
    clk = bus.clock
    lines = glitch_lines(bus)
    scan = GlitchScan(bus.name, lines, capture.timebase)
    if not lines:
        return scan.array()
    chans = {s: bus.channels_of(s)[0] for s in lines}
    prev_vals: dict[str, int] | None = None
    for ch in capture.iter_chunks([clk] + list(dict.fromkeys(chans.values())), chunk_samples=chunk_samples):
        c = ch.data[clk]
        if not len(c):
            continue
        first = prev_vals is None
        clocks = rising_edges(c, None if first else prev_vals[clk]) + ch.start
        edges = {}
        for s in lines:
            v = ch.data[chans[s]]
            vv = v if first else np.concatenate(([prev_vals[chans[s]]], v))
            edges[s] = np.flatnonzero(vv[1:] != vv[:-1]) + (1 if first else 0) + ch.start
        scan.feed(clocks, edges)
        prev_vals = {k: int(v[-1]) for k, v in ch.data.items()}
    return scan.array()

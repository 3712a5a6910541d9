"""The fast PCI / PCI-X transaction engine: docs/records.md applied to whole arrays of clocks.

Input is one array per canonical signal with one entry per bus clock (what
``pcitrace.capture.profile.bus_clocks`` yields): 1-bit signals as uint8 electrical levels,
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


# Control code of one clock: bit set = line asserted.
_F, _I, _T, _S, _D = 1, 2, 4, 8, 16
assert dict(CONTROL_CODE) == {"frame_n": _F, "irdy_n": _I, "trdy_n": _T, "stop_n": _S, "devsel_n": _D}


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
    buf, times = _join(carry, sig, times_ps)
    n = len(times)
    p0 = 1 if carry is not None and carry.context else 0
    clock0 = carry.clock0 if carry is not None else 0
    leading = carry.leading if carry is not None else True
    orphan_prev = carry.orphan if carry is not None else False
    ctx_busy = carry.ctx_busy if carry is not None else False
    rec_base = carry.records if carry is not None else 0
    word_base = carry.words if carry is not None else 0
    findings = _Findings(bus)
    if n == 0:
        empty = Carry({k: v[:0] for k, v in buf.items()}, times[:0], clock0, False, leading,
                      orphan_prev, False, rec_base, word_base)
        return np.zeros(0, RECORD_DTYPE), np.zeros(0, WORD_DTYPE), findings.array(), empty

    # 5-bit control code per clock (levels are 0/1; asserted = 0), unless the capture
    # layer made it (read-only here)
    # (numpy vectorises uint8 multiply-add; uint8 left shifts run several times slower)
    if "code" in buf:
        code = buf["code"]
    else:
        code = buf["frame_n"].astype(np.uint8, copy=True)
        for name, weight in (("irdy_n", _I), ("trdy_n", _T), ("stop_n", _S), ("devsel_n", _D)):
            code += buf[name].astype(np.uint8, copy=False) * np.uint8(weight)
        code ^= np.uint8(31)
    has_ad, has_cbe = "ad" in buf, "cbe_n" in buf
    ad = buf.get("ad")
    cbe = buf.get("cbe_n")
    pcix = mode == "pcix"
    runs = _Runs(code, p0)
    rs, rc, R = runs.rs, runs.rc, runs.R

    # --- address phases and transaction bounds (all at run starts) -------------------------
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
    end_all = j_all - 1
    if final:
        nproc = len(starts_all)
    else:
        # A transaction is final once its closing clock and its header clocks are in hand;
        # only the last one can lack them.
        ok = has_j & (starts_all + 2 < n)
        nproc = len(starts_all) if ok.all() else int(np.argmin(ok))
    s = starts_all[:nproc]
    e = end_all[:nproc]
    j, rj = j_all[:nproc], rj_all[:nproc]
    truncated = ~has_j[:nproc]
    # Decoded clocks this call: [p0, limit); the carried transaction's clocks wait.
    limit = int(starts_all[nproc]) if nproc < len(starts_all) else n

    # --- header: DAC, command, PCI-X attributes ---------------------------------------------
    # Header clocks (second DAC phase, attribute phase) count only while the transaction lasts:
    # a transaction that ends first keeps the command `dac` and a 32-bit address.
    m4 = np.uint64(0xF)
    if has_cbe:
        dac = (cbe[s] & m4) == 0xD
    else:
        dac = np.zeros(len(s), bool)
    dac2 = dac & (s + 1 <= e)                          # second address phase reached
    nh = dac.astype(np.int64) + (1 if pcix else 0)
    H = np.minimum(s + nh, e)                          # last header clock
    if has_cbe:
        cmd_code = (cbe[np.where(dac2, s + 1, s)] & m4).astype(np.int64)
    else:
        cmd_code = np.full(len(s), -1, np.int64)
    lo = H + 1   # data clocks: lo..e (j = e + 1)
    rlo = runs.step_to(lo, start_r[:nproc], 3)

    # --- devsel, width ------------------------------------------------------------------------
    fd, rfd = runs.first("d", lo, rlo)                 # first DEVSEL# after H
    has_d = fd <= e
    fd = np.where(has_d, fd, -1)
    devsel_code = np.where(has_d, np.clip(fd - H, 1, 4) - 1, 4)
    # clocks after the first DEVSEL#: [fd1, j)
    fd1 = np.where(has_d, fd + 1, j)
    rfd1 = np.where(has_d, runs.step_to(fd1, rfd, 1), rj)

    if "req64_n" in buf and "ack64_n" in buf:
        w64 = (buf["req64_n"][s] == 0) & has_d & (buf["ack64_n"][np.maximum(fd, 0)] == 0)
        rec_width = np.where(w64, 64, 32)
    else:
        rec_width = np.full(len(s), int(width), np.int64)
        w64 = rec_width == 64

    # --- counts ---------------------------------------------------------------------------------
    Plo, Pj, Pfd1 = runs.at(lo, rlo), (rj, None), runs.at(fd1, rfd1)
    DSI = ("dp", "so", "iw")
    data_phases, stop_clocks, initiator_waits = runs.counts(DSI, Plo, Pj)
    if pcix:
        # PCI-X Split Response: TRDY# with DEVSEL# deasserted after the target had claimed the
        # transaction (PCI-X 1.0b 2.10.2); that clock ends the transaction like a STOP# clock.
        stop_clocks = stop_clocks + runs.count("tndns", Pfd1, Pj)
        initiator_waits = initiator_waits - runs.count("tndnsni", Pfd1, Pj)
    target_waits = (e - H) - data_phases - stop_clocks - initiator_waits

    # --- termination (first match wins) -----------------------------------------------------
    term = np.full(len(s), _TERM["normal"], np.int64)
    has_k, with_data, abort = (np.zeros(len(s), bool) for _ in range(3))
    before_k = np.zeros(len(s), np.int64)
    if runs.runs_in("s") and len(s):
        # Every class looked at here has STOP# asserted, and STOP# runs are few: each is
        # handed to the transaction it lies in, rather than a prefix sum over all runs per class.
        r = runs.positions("s")[:-1]
        t = np.searchsorted(start_r[:nproc], r, side="right") - 1
        keep = t >= 0
        r, t = r[keep], t[keep]
        keep = r < rj[t]                                # before the transaction's closing bound
        r, t = r[keep], t[keep]
        r_end = np.minimum(runs.rs_ext[r + 1], j[t])
        a = np.maximum(rs[r], lo[t])                    # the run's clocks in [lo, j)
        sd = runs.flag("sd", r) & (r_end > a)
        has_k[t[sd]] = True
        with_data[t[runs.flag("dps", r) & (r_end > a)]] = True   # a data phase completed with STOP#
        abort[t[runs.flag("snd", r) & (r_end > np.maximum(rs[r], fd1[t]))]] = True
        # the first STOP# with DEVSEL#: the first such run of each transaction (runs in order)
        tk, ak, rk = t[sd], a[sd], r[sd]
        first = np.flatnonzero(np.concatenate(([True], tk[1:] != tk[:-1]))) if len(tk) else tk
        ik = tk[first]
        before_k[ik] = runs.counts(DSI, (rlo[ik], Plo[1][ik]), runs.at(ak[first], rk[first]))[0]
    term = np.where(has_k & (before_k == 0), _TERM["retry"], term)
    term = np.where(has_k & (before_k > 0), _TERM["disconnect_without_data"], term)
    term = np.where(has_k & with_data, _TERM["disconnect_with_data"], term)
    term = np.where(abort, _TERM["target_abort"], term)
    if pcix:
        term = np.where(runs.count("tnd", Pfd1, Pj) > 0, _TERM["split_response"], term)
    term = np.where(~has_d, _TERM["master_abort"], term)
    term = np.where(truncated, _TERM["truncated"], term)

    # --- per-clock work on the data lines ----------------------------------------------------
    # One data word per completed data phase, also without AD and C/BE# (value and byte
    # enables 0): its time is what a control-only capture's first-word and per-phase timing
    # figures come from.
    excl = np.zeros(len(s), np.int64)
    if len(s) > 1:
        np.cumsum(data_phases[:-1], out=excl[1:])
    # Data clocks: lo..e of each decoded transaction. A transaction spans whole runs from
    # its address phase to its closing bound, so this is decided run by run and spread to
    # clocks once; only the header clocks s..H (at most three) are then taken out.
    busy_run = _spans(R, start_r, rj_all)         # runs inside any transaction
    r_limit = int(np.searchsorted(rs, limit))      # runs that start before limit
    in_txn = busy_run.copy()                       # ... inside one decoded in this call
    in_txn[r_limit:] = False
    hdr_clk = [s] + [(s + i)[H >= s + i] for i in (1, 2)]

    def spread(run_mask: np.ndarray) -> np.ndarray:
        clk = np.repeat(run_mask, runs.rl)
        for h in hdr_clk:
            clk[h] = False
        return clk

    w_idx = _clocks_of(np.flatnonzero(in_txn & runs.on("dp")[:-1]), rs, runs.rl)
    for h in hdr_clk:
        # a header clock is never a data phase, whatever the lines show (rare: only
        # illegal activity has IRDY#, TRDY# and DEVSEL# on an address or attribute phase)
        h = h[_CLASS_LUT["dp"][code[h]]]
        if len(h):
            w_idx = w_idx[~np.isin(w_idx, h)]
    w_txn = np.repeat(np.arange(len(s)), data_phases)
    has_words = data_phases > 0
    any_wide = bool((w64 & has_words).any())
    # per-word width only matters when some word is 64 bits wide
    wide = w64[w_txn] if any_wide and (has_ad or has_cbe) else None
    first_word = excl[has_words]

    def per_txn_sum(x: np.ndarray) -> np.ndarray:
        out = np.zeros(len(s), np.int64)
        if len(first_word):
            out[has_words] = np.add.reduceat(x, first_word)
        return out

    wide_be = cbe_bits >= 8
    wa = ad[w_idx] if has_ad else None
    wc = cbe[w_idx] if has_cbe else None
    if has_cbe:
        lo_off = np.bitwise_count(wc & m4)                       # deasserted lanes 0-3
        wbytes = 4 - lo_off.astype(np.int64)
        if any_wide:
            upper = (4 - np.bitwise_count((wc >> np.uint64(4)) & m4).astype(np.int64)) if wide_be else 4
            wbytes += np.where(wide, upper, 0)
        nbytes = per_txn_sum(wbytes)
    else:
        nbytes = data_phases * (rec_width // 8)

    # --- parity ------------------------------------------------------------------------------
    # Checked phases: the address phase(s), the PCI-X attribute phase and every data phase,
    # each against PAR on the next clock (PAR64 too on data phases of a 64-bit transfer).
    attr = s + dac + 1
    attr_ok = (attr <= e) if pcix else np.zeros(len(s), bool)
    parity = np.zeros(len(s), bool)
    wbad32 = wbad64 = None
    par_ok = has_ad and has_cbe and "par" in buf
    if par_ok:
        par = buf["par"]
        par64 = buf["par64"] if ("par64" in buf and ad_bits >= 64 and wide_be) else None

        def bad_at(p: np.ndarray, a: np.ndarray | None = None, c: np.ndarray | None = None,
                   hi: bool = False) -> np.ndarray:
            a = ad[p] if a is None else a
            c = cbe[p] if c is None else c
            nxt = np.minimum(p + 1, n - 1)
            if hi:
                ones = np.bitwise_count(a >> np.uint64(32)) + np.bitwise_count((c >> np.uint64(4)) & m4)
                pv = par64[nxt]
            else:
                ones = np.bitwise_count(a & M32) + np.bitwise_count(c & m4)
                pv = par[nxt]
            return ((ones & 1).astype(bool) ^ (pv != 0)) & (p + 1 < n)

        sec = np.minimum(s + 1, n - 1)
        at = np.minimum(attr, n - 1)
        hdr = [bad_at(s), dac2 & bad_at(sec), attr_ok & bad_at(at)]
        wbad32 = bad_at(w_idx, wa, wc)
        wbad = wbad32
        if par64 is not None and any_wide:
            wbad64 = wide & bad_at(w_idx, wa, wc, hi=True)
            wbad = wbad | wbad64
        parity = hdr[0] | hdr[1] | hdr[2] | (per_txn_sum(wbad.astype(np.int64)) > 0)

    # --- records -----------------------------------------------------------------------------
    rec = alloc(RECORD_DTYPE, len(s))
    _put_text(rec, "bus", bus)
    _times_into(rec["start_ps"], times, s)
    _times_into(rec["end_ps"], times, e)
    rec["clocks"] = e - s + 1
    if has_cbe:
        rec["command"] = (_PCIX_NAMES_U if pcix else _PCI_NAMES_U)[cmd_code]
    else:
        _put_text(rec, "command", facts.COMMAND_UNKNOWN)
    rec["dac"] = dac
    if has_ad:
        a0 = ad[s] & M32
        a1 = ad[np.minimum(s + 1, n - 1)] & M32
        rec["address"] = a0 | np.where(dac2, a1 << np.uint64(32), np.uint64(0))
    rec["data_phases"] = data_phases
    rec["bytes"] = nbytes
    rec["devsel"] = _DEVSEL_U[devsel_code]
    rec["termination"] = _TERM_U[term]
    rec["initiator_waits"] = initiator_waits
    rec["target_waits"] = target_waits
    rec["parity_error"] = parity
    rec["width"] = rec_width
    # gnt, tag, requester, byte_count: -1 (not captured / not PCI-X) unless set below
    if len(rec):
        np.ndarray((len(rec), len(_MINUS_ONE)), np.int64, buffer=rec, offset=RECORD_DTYPE.fields["gnt"][1],
                   strides=(RECORD_DTYPE.itemsize, 8))[...] = -1
    if "gnt_n" in buf:
        prev = np.maximum(s - 1, 0)
        rec["gnt"] = (s >= 1) & (buf["gnt_n"][prev] == 0)
    if pcix and has_ad and has_cbe:
        Ac = np.minimum(attr, n - 1)
        ad_a = ad[Ac]
        cbe_a = cbe[Ac] & m4
        dword = np.isin(cmd_code.astype(np.uint64), _DWORD)
        burst_bc = ((ad_a & np.uint64(0xFF)) | (cbe_a << np.uint64(8))).astype(np.int64)
        burst_bc = np.where(burst_bc == 0, 4096, burst_bc)
        dword_bc = 4 - np.bitwise_count(cbe_a).astype(np.int64)
        # A Split Completion names the sequence it completes in its address phase (requester,
        # tag, RO); its attribute phase carries the completer's ID and the byte count.
        sc = cmd_code == 0xC
        src = np.where(sc, ad[s], ad_a)
        rec["byte_count"] = np.where(attr_ok, np.where(dword, dword_bc, burst_bc), -1)
        rec["tag"] = np.where(attr_ok, ((src >> np.uint64(24)) & np.uint64(0x1F)).astype(np.int64), -1)
        rec["requester"] = np.where(attr_ok, ((src >> np.uint64(8)) & np.uint64(0xFFFF)).astype(np.int64), -1)
        rec["no_snoop"] = attr_ok & ~sc & ((ad_a >> np.uint64(29)) & np.uint64(1)).astype(bool)
        rec["relaxed_ordering"] = attr_ok & ((src >> np.uint64(30)) & np.uint64(1)).astype(bool)
    rec["data_index"] = word_base + excl
    word_base_next = word_base + int(data_phases.sum())

    # --- data words --------------------------------------------------------------------------
    words = alloc(WORD_DTYPE, len(w_idx))
    np.add(w_txn, rec_base, out=words["record"])
    _times_into(words["time_ps"], times, w_idx)
    if has_ad:
        if any_wide and ad_bits >= 64:
            words["value"] = wa & np.where(wide, np.uint64(0xFFFFFFFFFFFFFFFF), M32)
        else:
            words["value"] = wa & M32
    if has_cbe:
        if any_wide and wide_be:
            words["byte_enables"] = wc & np.where(wide, np.uint64(0xFF), m4)
        else:
            words["byte_enables"] = wc & m4

    # --- findings ----------------------------------------------------------------------------
    def where_txt(t) -> list[str]:
        return [f"{rec['command'][i]} at 0x{int(rec['address'][i]):x}" if has_ad else f"{rec['command'][i]}"
                for i in t]

    # TRDY# / STOP# without DEVSEL#: before the first DEVSEL# (after it, TRDY# alone is a
    # PCI-X split response and STOP# alone a target abort); in PCI TRDY# anywhere.
    upto_d = np.where(has_d, fd, j)
    rupto_d = np.where(has_d, rfd, rj)
    lim, rlim = (upto_d, rupto_d) if pcix else (j, rj)
    for kind, lut, b1, rb1, what in (("trdy_without_devsel", "tnd", lim, rlim, "TRDY#"),
                                     ("stop_without_devsel", "snd", upto_d, rupto_d, "STOP#")):
        if not runs.runs_in(lut):                    # the usual case: no such clock at all
            continue
        cnt = runs.count(lut, Plo, runs.at(b1, rb1))
        t = np.flatnonzero(cnt > 0)
        x, _ = runs.first(lut, lo[t], rlo[t])
        findings.add(times[x], kind, [f"{what} asserted without DEVSEL# on {int(c)} clock(s) of {w}"
                                      for c, w in zip(cnt[t], where_txt(t))])
    if has_cbe:
        # C/BE# must hold still while IRDY# is asserted within one data phase
        bmask = np.uint64(0xFF if wide_be else 0xF)
        I = (code & np.uint8(_I)) != 0
        dp_clk = (code & np.uint8(_I | _T | _D)) == (_I | _T | _D)
        region = spread(in_txn)
        pending = I & ~(dp_clk | ((code & np.uint8(_S)) != 0))
        changed = np.zeros(n, bool)
        changed[1:] = pending[:-1] & I[1:] & (((cbe[1:] ^ cbe[:-1]) & bmask) != 0)
        changed[lo[lo < n]] = False                  # the clock before lo is a header clock
        x = np.flatnonzero(changed & region)
        t = np.searchsorted(s, x, side="right") - 1
        findings.add(times[x], "byte_enables_changed_in_wait",
                     [f"C/BE# changed from {int(cbe[i - 1] & bmask):X} to {int(cbe[i] & bmask):X} "
                      f"during a wait state of {w}" for i, w in zip(x, where_txt(t))])
    fdp = np.full(len(s), n, np.int64)            # first data phase: the first word's clock
    fdp[has_words] = w_idx[first_word]
    late = (fdp <= e) & (fdp - s > facts.MAX_INITIAL_LATENCY)
    findings.add(times[fdp[late]], "initial_latency",
                 [f"first data phase {int(fdp[i] - s[i])} clocks after the address phase of {w}"
                  for i, w in zip(np.flatnonzero(late), where_txt(np.flatnonzero(late)))])
    # DEVSEL# after the subtractive decode slot: the master has aborted by then. Without C/BE#
    # a DAC is not recognised and its second address phase counts as one of the n clocks.
    dv_limit = facts.MAX_DEVSEL_CLOCKS + (0 if has_cbe else 1)
    dl = np.flatnonzero(has_d & (fd - H > dv_limit))
    if len(dl):
        hname = np.where(pcix, "attribute phase", np.where(dac2[dl], "second address phase", "address phase"))
        findings.add(times[fd[dl]], "devsel_late",
                     [f"DEVSEL# first asserted {int(fd[i] - H[i])} clocks after the {h} of {w}: "
                      f"later than subtractive decode ({dv_limit}), when the master aborts"
                      for i, h, w in zip(dl, hname, where_txt(dl))])
    sp = np.maximum(s - 1, 0)
    pc = code[sp]
    # without DEVSEL# the master ended its own transaction (master abort): nothing was pending
    pend = (s >= 1) & ((pc & (_I | _F | _T | _S | _D)) == (_I | _D))
    findings.add(times[s[pend]], "frame_reasserted",
                 [f"FRAME# asserted again while the final data phase was pending: {w}"
                  for w in where_txt(np.flatnonzero(pend))])
    # IRDY# outside any transaction, once per run of such clocks; not in the partial
    # transaction the capture began in (clocks before its first idle clock or address phase).
    # Transactions span whole runs, so this is decided run by run.
    if p0 == 1:
        busy_run[0] |= ctx_busy
    lead_end = p0
    if leading:
        b = bounds[bounds >= p0]
        if len(b):
            lead_end = min(int(b[0]), limit)
            leading = False
        else:
            lead_end = limit
    # (run starts are sorted: the clock window is a window of runs)
    r_from = int(np.searchsorted(rs, max(lead_end, p0)))
    orphan_r = np.flatnonzero(~(idle_run[r_from:r_limit] | busy_run[r_from:r_limit])) + r_from
    first_orphan = orphan_r[np.concatenate(([True], np.diff(orphan_r) > 1))] if len(orphan_r) else orphan_r
    if p0 == 1 and orphan_prev and R > 1:
        first_orphan = first_orphan[first_orphan != 1]
    x = rs[first_orphan]
    findings.add(times[x], "irdy_without_transaction",
                 ["IRDY# asserted with no transaction (FRAME# not asserted before it)"] * len(x))
    if par_ok and parity.any():
        _parity_findings(findings, hdr, wbad32, wbad64, s, sec, at, w_idx, w_txn, excl, times, where_txt)

    # --- carry ---------------------------------------------------------------------------------
    if final:
        new = Carry({k: v[:0] for k, v in buf.items()}, times[:0], clock0 + n, False, leading,
                    False, False, rec_base + len(s), word_base_next)
    else:
        if limit == n:        # nothing open: keep the last clock as "previous clock"
            c0, ctx = n - 1, True
        elif limit == 0:      # the open transaction starts on the capture's first clock
            c0, ctx = 0, False
        else:
            c0, ctx = limit - 1, True
        if limit - 1 >= p0:
            rl_ = runs.run_of(limit - 1)
            last_orphan = bool(r_from <= rl_ < r_limit and not idle_run[rl_] and not busy_run[rl_])
            c0_busy = bool(busy_run[runs.run_of(c0)])
        else:
            last_orphan = orphan_prev
            c0_busy = bool(busy_run[0]) if n else False
        new = Carry({k: v[c0:].copy() for k, v in buf.items()}, _own(times[c0:]), clock0 + c0,
                    ctx, leading, last_orphan, c0_busy, rec_base + len(s), word_base_next,
                    open=limit < n)
    return rec, words, findings.array(), new


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

"""The fast PCI / PCI-X transaction engine: docs/records.md applied to whole arrays of clocks.

Input is one array per canonical signal with one entry per bus clock (what
``pcitrace.capture.profile.bus_clocks`` yields): 1-bit signals as uint8 electrical levels,
``ad`` / ``cbe_n`` as uint64. Nothing here loops over clocks: address phases are the FRAME#
edges found with ``np.flatnonzero``, each transaction's end is the next idle-or-address clock
found with ``np.searchsorted``, and every per-transaction count (data phases, bytes, waits,
parity) is a difference of cumulative sums taken at the transaction's bounds.

Streaming: :func:`decode_clocks` takes one chunk and a :class:`Carry`; the transaction still
open at the end of a chunk (and the clock before it, which start detection and ``gnt`` need)
is carried and decoded again, complete, with the next chunk. The last call passes
``final=True`` (an empty chunk is fine) so the open transaction is flushed as ``truncated``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from pcitrace.decode import facts
from pcitrace.decode.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE
from pcitrace.errors import PcitraceError

REQUIRED = ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n")
OPTIONAL = ("ad", "cbe_n", "par", "par64", "req64_n", "ack64_n", "gnt_n")
USED = REQUIRED + OPTIONAL

M32 = np.uint64(0xFFFFFFFF)

_PCI_NAMES = np.array([facts.PCI_COMMANDS[c][0] for c in range(16)])
_PCIX_NAMES = np.array([facts.PCIX_COMMANDS[c][0] for c in range(16)])
_DEVSEL = np.array(facts.DEVSEL_SPEEDS)   # fast, medium, slow, subtractive, none
_TERM = {name: i for i, name in enumerate(facts.TERMINATIONS)}
_TERM_NAMES = np.array(facts.TERMINATIONS)
_DWORD = np.array(sorted(facts.PCIX_DWORD_COMMANDS), dtype=np.uint64)


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


def _odd(x: np.ndarray) -> np.ndarray:
    return (np.bitwise_count(x) & 1).astype(bool)


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
    missing = [k for k in REQUIRED if k not in sig]
    if missing:
        raise PcitraceError(f"the bus has no {', '.join(missing)} signal; the PCI decoder needs "
                            f"FRAME#, IRDY#, TRDY#, STOP# and DEVSEL#",
                            fix="map those signals in the channel profile")
    if carry is None or len(carry.times_ps) == 0:
        buf = {k: np.asarray(sig[k]) for k in keys}
        return buf, np.asarray(times_ps, np.int64)
    if set(carry.sig) != set(keys):
        raise ValueError("chunks of one bus must carry the same signals")
    buf = {k: np.concatenate([carry.sig[k], np.asarray(sig[k], carry.sig[k].dtype)]) for k in keys}
    return buf, np.concatenate([carry.times_ps, np.asarray(times_ps, np.int64)])


# Control code of one clock: bit set = line asserted.
_F, _I, _T, _S, _D = 1, 2, 4, 8, 16
_CODES = np.arange(32)


def _lut(pred) -> np.ndarray:
    c = _CODES
    return pred(c & _F != 0, c & _I != 0, c & _T != 0, c & _S != 0, c & _D != 0).astype(bool)


# Per-code classes (docs/records.md, "Data phases and waits" and "Termination").
_IS_DP = _lut(lambda F, I, T, S, D: I & T & D)
_IS_SO = _lut(lambda F, I, T, S, D: ~(I & T & D) & S)                 # STOP# clock, not a phase
_IS_IW = _lut(lambda F, I, T, S, D: ~(I & T & D) & ~S & ~I)           # initiator wait (PCI)
_IS_TND = _lut(lambda F, I, T, S, D: T & ~D)                          # TRDY# without DEVSEL#
_IS_TNDNS = _lut(lambda F, I, T, S, D: T & ~D & ~S)                   # PCI-X split clock, not S
_IS_TNDNSNI = _lut(lambda F, I, T, S, D: T & ~D & ~S & ~I)            # ... that was an initiator wait
_IS_SND = _lut(lambda F, I, T, S, D: S & ~D)
_IS_SD = _lut(lambda F, I, T, S, D: S & D)
_IS_DPS = _lut(lambda F, I, T, S, D: I & T & D & S)
_IS_D = _lut(lambda F, I, T, S, D: D)


class _Runs:
    """The clocks as runs of one control code: counts and "first clock with X at or after x"
    are answered from per-run prefix sums, so the cost follows the bus activity, not the clock
    count (a 64-phase burst is one run)."""

    def __init__(self, code: np.ndarray, p0: int):
        n = len(code)
        chg = code[1:] != code[:-1]
        if p0 == 1 and n > 1:
            chg[0] = True               # the context clock is a run of its own
        self.rs = np.concatenate(([0], np.flatnonzero(chg) + 1))
        self.rc = code[self.rs]
        self.re = np.append(self.rs[1:], n)
        self.rl = self.re - self.rs
        self.n, self.R = n, len(self.rs)
        self._cum: dict[int, np.ndarray] = {}
        self._next: dict[int, np.ndarray] = {}

    def run_of(self, x: np.ndarray) -> np.ndarray:
        """Run index containing clock x (R for x >= n)."""
        r = np.searchsorted(self.rs, x, side="right") - 1
        return np.where(x >= self.n, self.R, r)

    def _c(self, lut: np.ndarray):
        key = id(lut)
        if key not in self._cum:
            on = lut[self.rc]
            c = np.zeros(self.R + 1, np.int64)
            np.cumsum(self.rl * on, out=c[1:])
            self._cum[key] = (c, np.append(on, False))
        return self._cum[key]

    def upto(self, lut, x, rx):
        """Clocks of class ``lut`` in [0, x); rx = run_of(x)."""
        c, on = self._c(lut)
        rxc = np.minimum(rx, self.R - 1)
        part = np.where((rx < self.R) & on[rx], x - self.rs[rxc], 0)
        return c[rx] + part

    def count(self, lut, a, ra, b1, rb1):
        """Clocks of class ``lut`` in [a, b1) (0 when empty)."""
        return np.maximum(self.upto(lut, b1, rb1) - self.upto(lut, a, ra), 0)

    def first(self, lut, x, rx):
        """(clock, run) of the first clock >= x of class ``lut`` (n, R when none)."""
        key = id(lut)
        if key not in self._next:
            on = lut[self.rc]
            idx = np.where(on, np.arange(self.R), self.R)
            nxt = np.minimum.accumulate(idx[::-1])[::-1]
            self._next[key] = np.append(nxt, self.R)
        nxt = self._next[key]
        c, on = self._c(lut)
        here = (rx < self.R) & on[np.minimum(rx, self.R)]
        r = np.where(here, rx, nxt[np.minimum(rx + 1, self.R)])
        pos = np.where(here, x, np.append(self.rs, self.n)[r])
        return pos, r

    def next_run(self, x, rx):
        """run_of(x + 1) given rx = run_of(x), x < n."""
        return np.where(x + 1 >= np.append(self.re, self.n)[rx], rx + 1, rx)


def decode_clocks(sig: Mapping[str, np.ndarray], times_ps: np.ndarray, *, mode: str = "pci",
                  width: int = 32, bus: str = "pci", carry: Carry | None = None,
                  final: bool = True, ad_bits: int = 64,
                  cbe_bits: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray, Carry]:
    """Decode one chunk of bus clocks.

    Returns (records, words, findings, carry). ``words['record']`` counts records from the
    first chunk of this bus. With ``final=False`` the transaction open at the end of the chunk
    is kept in the returned carry; with ``final=True`` it is emitted as ``truncated``.
    ``ad_bits`` / ``cbe_bits``: how many AD / C/BE# lines the capture has (a 32-bit probe on a
    64-bit bus gives 32-bit words and counts the upper byte lanes as enabled).
    """
    if mode not in ("pci", "pcix"):
        raise PcitraceError(f"unknown bus mode {mode!r}", fix="use mode 'pci' or 'pcix' in the profile")
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

    # 5-bit control code per clock (levels are 0/1; asserted = 0)
    code = buf["frame_n"].astype(np.uint8, copy=True)
    for name, shift in (("irdy_n", 1), ("trdy_n", 2), ("stop_n", 3), ("devsel_n", 4)):
        code |= buf[name].astype(np.uint8, copy=False) << np.uint8(shift)
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
    start_run[1:] = rF[1:] & ~rF[:-1]
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
        command = (_PCIX_NAMES if pcix else _PCI_NAMES)[cmd_code]
    else:
        cmd_code = np.full(len(s), -1, np.int64)
        command = np.full(len(s), facts.COMMAND_UNKNOWN)
    lo = H + 1   # data clocks: lo..e (j = e + 1)
    rlo = runs.run_of(lo)

    # --- devsel, width ------------------------------------------------------------------------
    fd, rfd = runs.first(_IS_D, lo, rlo)              # first DEVSEL# after H
    has_d = fd <= e
    fd = np.where(has_d, fd, -1)
    devsel_code = np.where(has_d, np.clip(fd - H, 1, 4) - 1, 4)
    # clocks after the first DEVSEL#: [fd1, j)
    fd1 = np.where(has_d, fd + 1, j)
    rfd1 = np.where(has_d, runs.next_run(np.maximum(fd, 0), np.minimum(rfd, R - 1)), rj)

    if "req64_n" in buf and "ack64_n" in buf:
        w64 = (buf["req64_n"][s] == 0) & has_d & (buf["ack64_n"][np.maximum(fd, 0)] == 0)
        rec_width = np.where(w64, 64, 32)
    else:
        rec_width = np.full(len(s), int(width), np.int64)
        w64 = rec_width == 64

    # --- counts ---------------------------------------------------------------------------------
    data_phases = runs.count(_IS_DP, lo, rlo, j, rj)
    stop_clocks = runs.count(_IS_SO, lo, rlo, j, rj)
    initiator_waits = runs.count(_IS_IW, lo, rlo, j, rj)
    if pcix:
        # PCI-X Split Response: TRDY# with DEVSEL# deasserted after the target had claimed the
        # transaction (PCI-X 1.0b 2.10.2); that clock ends the transaction like a STOP# clock.
        stop_clocks = stop_clocks + runs.count(_IS_TNDNS, fd1, rfd1, j, rj)
        initiator_waits = initiator_waits - runs.count(_IS_TNDNSNI, fd1, rfd1, j, rj)
    target_waits = (e - H) - data_phases - stop_clocks - initiator_waits

    # --- termination (first match wins) -----------------------------------------------------
    term = np.full(len(s), _TERM["normal"], np.int64)
    kk, rkk = runs.first(_IS_SD, lo, rlo)             # first STOP# with DEVSEL#
    has_k = kk <= e
    before_k = runs.count(_IS_DP, lo, rlo, kk, rkk)
    with_data = runs.count(_IS_DPS, lo, rlo, j, rj) > 0   # a data phase completed with STOP#
    term = np.where(has_k & (before_k == 0), _TERM["retry"], term)
    term = np.where(has_k & (before_k > 0), _TERM["disconnect_without_data"], term)
    term = np.where(has_k & with_data, _TERM["disconnect_with_data"], term)
    term = np.where(runs.count(_IS_SND, fd1, rfd1, j, rj) > 0, _TERM["target_abort"], term)
    if pcix:
        term = np.where(runs.count(_IS_TND, fd1, rfd1, j, rj) > 0, _TERM["split_response"], term)
    term = np.where(~has_d, _TERM["master_abort"], term)
    term = np.where(truncated, _TERM["truncated"], term)

    # --- per-clock work on the data lines ----------------------------------------------------
    keep = lo <= e
    delta = np.zeros(n + 1, np.int8)
    delta[lo[keep]] = 1
    delta[e[keep] + 1] -= 1
    # Data words exist only when AD or C/BE# is captured (a control-only capture has nothing
    # to put in them); `data_index` counts data phases either way.
    need_clocks = has_ad or has_cbe
    if need_clocks:
        region = np.cumsum(delta[:-1], dtype=np.int8).view(bool)
        dp_clk = (code & np.uint8(_I | _T | _D)) == (_I | _T | _D)
        w_idx = np.flatnonzero(dp_clk & region)
    else:
        region = None
        w_idx = np.zeros(0, np.int64)
    w_txn = np.repeat(np.arange(len(s)), data_phases) if need_clocks else np.zeros(0, np.int64)
    wide = w64[w_txn]

    wide_be = cbe_bits >= 8
    if has_cbe:
        wc = cbe[w_idx]
        wbytes = 4 - np.bitwise_count(wc & m4).astype(np.int64)
        upper = (4 - np.bitwise_count((wc >> np.uint64(4)) & m4).astype(np.int64)) if wide_be else 4
        wbytes = wbytes + np.where(wide, upper, 0)
        nbytes = np.bincount(w_txn, weights=wbytes, minlength=len(s)).astype(np.int64)
    else:
        nbytes = data_phases * (rec_width // 8)

    # --- parity ------------------------------------------------------------------------------
    # Checked phases: the address phase(s), the PCI-X attribute phase and every data phase,
    # each against PAR on the next clock (PAR64 too on data phases of a 64-bit transfer).
    attr = s + dac + 1
    attr_ok = (attr <= e) if pcix else np.zeros(len(s), bool)
    parity = np.zeros(len(s), bool)
    bad32 = bad64 = None
    if has_ad and has_cbe and "par" in buf:
        bad32 = np.zeros(n, bool)
        bad32[:-1] = _odd(ad[:-1] & M32) ^ _odd(cbe[:-1] & m4) ^ (buf["par"][1:] != 0)
        if "par64" in buf and ad_bits >= 64 and wide_be:
            bad64 = np.zeros(n, bool)
            bad64[:-1] = (_odd(ad[:-1] >> np.uint64(32)) ^ _odd((cbe[:-1] >> np.uint64(4)) & m4)
                          ^ (buf["par64"][1:] != 0))
        hdr_bad = (bad32[s] | (dac2 & bad32[np.minimum(s + 1, n - 1)])
                   | (attr_ok & bad32[np.minimum(attr, n - 1)]))
        wbad = bad32[w_idx]
        if bad64 is not None:
            wbad = wbad | (wide & bad64[w_idx])
        parity = hdr_bad | (np.bincount(w_txn, weights=wbad, minlength=len(s)) > 0)

    # --- records -----------------------------------------------------------------------------
    rec = np.zeros(len(s), RECORD_DTYPE)
    rec["bus"] = bus
    rec["start_ps"] = times[s]
    rec["end_ps"] = times[e]
    rec["clocks"] = e - s + 1
    rec["command"] = command
    rec["dac"] = dac
    if has_ad:
        a0 = ad[s] & M32
        a1 = ad[np.minimum(s + 1, n - 1)] & M32
        rec["address"] = a0 | np.where(dac2, a1 << np.uint64(32), np.uint64(0))
    rec["data_phases"] = data_phases
    rec["bytes"] = nbytes
    rec["devsel"] = _DEVSEL[devsel_code]
    rec["termination"] = _TERM_NAMES[term]
    rec["initiator_waits"] = initiator_waits
    rec["target_waits"] = target_waits
    rec["parity_error"] = parity
    rec["width"] = rec_width
    if "gnt_n" in buf:
        prev = np.maximum(s - 1, 0)
        rec["gnt"] = np.where(s >= 1, buf["gnt_n"][prev] == 0, False).astype(np.int64)
    else:
        rec["gnt"] = -1
    rec["tag"] = rec["requester"] = rec["byte_count"] = -1
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
    excl = np.zeros(len(s), np.int64)
    if len(s) > 1:
        np.cumsum(data_phases[:-1], out=excl[1:])
    rec["data_index"] = word_base + excl
    word_base_next = word_base + int(data_phases.sum())

    # --- data words --------------------------------------------------------------------------
    words = np.zeros(len(w_idx), WORD_DTYPE)
    words["record"] = rec_base + w_txn
    words["time_ps"] = times[w_idx]
    if has_ad:
        words["value"] = np.where(wide & (ad_bits >= 64), ad[w_idx], ad[w_idx] & M32)
    if has_cbe:
        words["byte_enables"] = np.where(wide & wide_be, cbe[w_idx] & np.uint64(0xFF), cbe[w_idx] & m4)

    # --- findings ----------------------------------------------------------------------------
    def where_txt(t) -> list[str]:
        return [f"{command[i]} at 0x{int(rec['address'][i]):x}" if has_ad else f"{command[i]}"
                for i in t]

    # TRDY# / STOP# without DEVSEL#: before the first DEVSEL# (after it, TRDY# alone is a
    # PCI-X split response and STOP# alone a target abort); in PCI TRDY# anywhere.
    upto_d = np.where(has_d, fd, j)
    rupto_d = np.where(has_d, rfd, rj)
    lim, rlim = (upto_d, rupto_d) if pcix else (j, rj)
    for kind, lut, b1, rb1, what in (("trdy_without_devsel", _IS_TND, lim, rlim, "TRDY#"),
                                     ("stop_without_devsel", _IS_SND, upto_d, rupto_d, "STOP#")):
        cnt = runs.count(lut, lo, rlo, b1, rb1)
        t = np.flatnonzero(cnt > 0)
        x, _ = runs.first(lut, lo[t], rlo[t])
        findings.add(times[x], kind, [f"{what} asserted without DEVSEL# on {int(c)} clock(s) of {w}"
                                      for c, w in zip(cnt[t], where_txt(t))])
    if has_cbe:
        # C/BE# must hold still while IRDY# is asserted within one data phase
        bmask = np.uint64(0xFF if wide_be else 0xF)
        I = (code & np.uint8(_I)) != 0
        pending = I & ~(dp_clk | ((code & np.uint8(_S)) != 0))
        changed = np.zeros(n, bool)
        changed[1:] = pending[:-1] & I[1:] & (((cbe[1:] ^ cbe[:-1]) & bmask) != 0)
        changed[lo[lo < n]] = False                  # the clock before lo is a header clock
        x = np.flatnonzero(changed & region)
        t = np.searchsorted(s, x, side="right") - 1
        findings.add(times[x], "byte_enables_changed_in_wait",
                     [f"C/BE# changed from {int(cbe[i - 1] & bmask):X} to {int(cbe[i] & bmask):X} "
                      f"during a wait state of {w}" for i, w in zip(x, where_txt(t))])
    fdp, _ = runs.first(_IS_DP, lo, rlo)
    late = (fdp <= e) & (fdp - s > facts.MAX_INITIAL_LATENCY)
    findings.add(times[fdp[late]], "initial_latency",
                 [f"first data phase {int(fdp[i] - s[i])} clocks after the address phase of {w}"
                  for i, w in zip(np.flatnonzero(late), where_txt(np.flatnonzero(late)))])
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
    bdelta = np.zeros(R + 1, np.int32)
    bdelta[start_r] += 1          # each index list is free of repeats
    bdelta[rj_all] -= 1
    busy_run = np.cumsum(bdelta[:-1]) > 0
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
    orphan_run = ~idle_run & ~busy_run & (rs >= max(lead_end, p0)) & (rs < limit)
    first_orphan = orphan_run.copy()
    first_orphan[1:] &= ~orphan_run[:-1]
    if p0 == 1 and orphan_prev and R > 1:
        first_orphan[1] = False
    x = rs[first_orphan]
    findings.add(times[x], "irdy_without_transaction",
                 ["IRDY# asserted with no transaction (FRAME# not asserted before it)"] * len(x))
    if bad32 is not None:
        _parity_findings(findings, bad32, bad64, s, dac2, attr, attr_ok, w_idx, w_txn, wide, times, where_txt)

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
            rl_ = int(runs.run_of(np.array([limit - 1]))[0])
            last_orphan = bool(orphan_run[rl_])
            c0_busy = bool(busy_run[int(runs.run_of(np.array([c0]))[0])])
        else:
            last_orphan = orphan_prev
            c0_busy = bool(busy_run[0]) if n else False
        new = Carry({k: v[c0:].copy() for k, v in buf.items()}, times[c0:].copy(), clock0 + c0,
                    ctx, leading, last_orphan, c0_busy, rec_base + len(s), word_base_next)
    return rec, words, findings.array(), new


def _parity_findings(findings, bad32, bad64, s, dac2, attr, attr_ok, w_idx, w_txn, wide, times, where_txt):
    """One finding per phase with wrong parity (they are rare: a loop over them costs nothing)."""
    n = len(bad32)
    xs, msgs = [], []
    sec = np.minimum(s + 1, n - 1)
    at = np.minimum(attr, n - 1)
    for i in np.flatnonzero(bad32[s]):
        xs.append(s[i]); msgs.append(f"PAR parity error on the address phase of {where_txt([i])[0]}")
    for i in np.flatnonzero(dac2 & bad32[sec]):
        xs.append(sec[i]); msgs.append(f"PAR parity error on the second address phase of {where_txt([i])[0]}")
    for i in np.flatnonzero(attr_ok & bad32[at]):
        xs.append(at[i]); msgs.append(f"PAR parity error on the attribute phase of {where_txt([i])[0]}")
    b32 = bad32[w_idx]
    b64 = bad64[w_idx] & wide if bad64 is not None else np.zeros(len(w_idx), bool)
    hit = b32 | b64
    if hit.any():
        first = np.searchsorted(w_txn, w_txn, side="left")   # word index of each record's first
        number = np.arange(len(w_idx)) - first + 1
        for k in np.flatnonzero(hit):
            which = " and ".join(w for w, on in (("PAR", b32[k]), ("PAR64", b64[k])) if on)
            xs.append(w_idx[k])
            msgs.append(f"{which} parity error on data phase {number[k]} of {where_txt([w_txn[k]])[0]}")
    findings.add(times[np.asarray(xs, np.int64)], "parity_error", msgs)


def decode_stream(chunks: Iterable, *, mode: str = "pci", width: int = 32,
                  bus: str = "pci") -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Decode an iterable of chunks (objects with ``times_ps`` and ``sig``, e.g. BusChunk),
    yielding (records, words, findings) per chunk; the last yield flushes the open transaction."""
    carry = None
    sig0 = None
    for ch in chunks:
        sig0 = ch.sig
        rec, words, fnd, carry = decode_clocks(ch.sig, ch.times_ps, mode=mode, width=width, bus=bus,
                                              carry=carry, final=False)
        yield rec, words, fnd
    if carry is not None:
        empty = {k: np.asarray(v)[:0] for k, v in sig0.items()}
        rec, words, fnd, carry = decode_clocks(empty, np.zeros(0, np.int64), mode=mode, width=width,
                                              bus=bus, carry=carry, final=True)
        yield rec, words, fnd

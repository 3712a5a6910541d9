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
    words: int = 0


def _csum(x: np.ndarray) -> np.ndarray:
    c = np.zeros(len(x) + 1, np.int64)
    np.cumsum(x, out=c[1:])
    return c


def _span(c: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sum of the counted array over clocks lo..hi inclusive (0 where hi < lo)."""
    n = len(c) - 1
    hi1 = np.clip(hi + 1, 0, n)
    lo = np.minimum(np.clip(lo, 0, n), hi1)
    return c[hi1] - c[lo]


def _first_after(pos: np.ndarray, after: np.ndarray, upto: np.ndarray) -> np.ndarray:
    """For each i: first element of sorted ``pos`` that is > after[i] and <= upto[i], else -1."""
    if len(pos) == 0:
        return np.full(len(after), -1, np.int64)
    k = np.searchsorted(pos, after, side="right")
    cand = pos[np.minimum(k, len(pos) - 1)]
    return np.where((k < len(pos)) & (cand <= upto), cand, -1)


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


def decode_clocks(sig: Mapping[str, np.ndarray], times_ps: np.ndarray, *, mode: str = "pci",
                  width: int = 32, bus: str = "pci", carry: Carry | None = None,
                  final: bool = True, ad_bits: int = 64, cbe_bits: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray, Carry]:
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

    F = buf["frame_n"] == 0
    I = buf["irdy_n"] == 0
    T = buf["trdy_n"] == 0
    S = buf["stop_n"] == 0
    D = buf["devsel_n"] == 0
    has_ad, has_cbe = "ad" in buf, "cbe_n" in buf
    ad = buf.get("ad")
    cbe = buf.get("cbe_n")
    pcix = mode == "pcix"

    # --- address phases and transaction bounds -------------------------------------------
    start = np.empty(n, bool)
    start[1:] = F[1:] & ~F[:-1]
    start[0] = (F[0] & ~I[0]) if p0 == 0 else False
    idle = ~(F | I)
    starts_all = np.flatnonzero(start)
    bounds = np.flatnonzero(idle | start)
    k = np.searchsorted(bounds, starts_all, side="right")
    has_j = k < len(bounds)
    j = bounds[np.minimum(k, len(bounds) - 1)] if len(bounds) else np.zeros(len(k), np.int64)
    j = np.where(has_j, j, n)
    end_all = j - 1
    if final:
        nproc = len(starts_all)
    else:
        # A transaction is final once its closing clock and its header clocks are in hand;
        # only the last one can lack them.
        ok = has_j & (starts_all + 2 < n)
        nproc = len(starts_all) if ok.all() else int(np.argmin(ok))
    s = starts_all[:nproc]
    e = end_all[:nproc]
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
    lo = H + 1   # data clocks: lo..e
    region = _region(n, lo, e)

    # --- devsel, width ------------------------------------------------------------------------
    d_pos = np.flatnonzero(D)
    fd = _first_after(d_pos, H, e)                    # first DEVSEL# after H
    has_d = fd >= 0
    devsel_code = np.where(has_d, np.clip(fd - H, 1, 4) - 1, 4)
    after_d = _region(n, fd + 1, np.where(has_d, e, -1))   # clocks after the first DEVSEL#

    # width: REQ64# at the address phase and ACK64# with the first DEVSEL#
    if "req64_n" in buf and "ack64_n" in buf:
        w64 = (buf["req64_n"][s] == 0) & has_d & (buf["ack64_n"][np.maximum(fd, 0)] == 0)
        rec_width = np.where(w64, 64, 32)
    else:
        rec_width = np.full(len(s), int(width), np.int64)
        w64 = rec_width == 64

    # --- per-clock classes and their cumulative sums -----------------------------------------
    dp = I & T & D
    s_nod = S & ~D
    # PCI-X Split Response: TRDY# with DEVSEL# deasserted after the target had claimed the
    # transaction (PCI-X 1.0b 2.10.2); that clock ends the transaction like a STOP# clock.
    split_clk = (T & ~D & after_d) if pcix else np.zeros(n, bool)
    stop_clk = ~dp & (S | split_clk)
    c_dp = _csum(dp)
    c_stop = _csum(stop_clk)
    c_iw = _csum(~(dp | stop_clk | I))
    data_phases = _span(c_dp, lo, e)
    initiator_waits = _span(c_iw, lo, e)
    target_waits = (e - H) - data_phases - _span(c_stop, lo, e) - initiator_waits

    wide_be = cbe_bits >= 8
    if has_cbe:
        lo_be = 4 - np.bitwise_count(cbe & m4).astype(np.int64)
        hi_be = (4 - np.bitwise_count((cbe >> np.uint64(4)) & m4).astype(np.int64)) if wide_be else 4
        c_b32 = _csum(np.where(dp, lo_be, 0))
        c_b64 = _csum(np.where(dp, lo_be + hi_be, 0))
        nbytes = np.where(w64, _span(c_b64, lo, e), _span(c_b32, lo, e))
    else:
        nbytes = data_phases * (rec_width // 8)

    # --- termination (first match wins) -----------------------------------------------------
    term = np.full(len(s), _TERM["normal"], np.int64)
    kk = _first_after(np.flatnonzero(S & D), H, e)    # first STOP# with DEVSEL#
    has_k = kk >= 0
    before_k = _span(c_dp, lo, np.maximum(kk, 0) - 1)
    with_data = _span(_csum(dp & S), lo, e) > 0        # a data phase completed with STOP#
    term = np.where(has_k & (before_k == 0), _TERM["retry"], term)
    term = np.where(has_k & (before_k > 0), _TERM["disconnect_without_data"], term)
    term = np.where(has_k & with_data, _TERM["disconnect_with_data"], term)
    abort = _span(_csum(s_nod & after_d), lo, e) > 0
    term = np.where(abort, _TERM["target_abort"], term)
    if pcix:
        term = np.where(_span(_csum(split_clk), lo, e) > 0, _TERM["split_response"], term)
    term = np.where(~has_d, _TERM["master_abort"], term)
    term = np.where(truncated, _TERM["truncated"], term)

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
        parity = hdr_bad | (_span(_csum(bad32 & dp), lo, e) > 0)
        if bad64 is not None:
            parity |= w64 & (_span(_csum(bad64 & dp), lo, e) > 0)

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

    # --- data words --------------------------------------------------------------------------
    w_idx = np.flatnonzero(dp & region)
    w_txn = np.searchsorted(s, w_idx, side="right") - 1
    words = np.zeros(len(w_idx), WORD_DTYPE)
    words["record"] = rec_base + w_txn
    words["time_ps"] = times[w_idx]
    wide = w64[w_txn]
    if has_ad:
        words["value"] = np.where(wide & (ad_bits >= 64), ad[w_idx], ad[w_idx] & M32)
    if has_cbe:
        words["byte_enables"] = np.where(wide & wide_be, cbe[w_idx] & np.uint64(0xFF), cbe[w_idx] & m4)

    # --- findings ----------------------------------------------------------------------------
    def first_per_txn(mask: np.ndarray):
        x = np.flatnonzero(mask & region)
        if not len(x):
            return x, x, x
        t = np.searchsorted(s, x, side="right") - 1
        cnt = np.bincount(t, minlength=len(s))
        tu, first = np.unique(t, return_index=True)
        return x[first], tu, cnt[tu]

    def where_txt(t) -> list[str]:
        return [f"{command[i]} at 0x{int(rec['address'][i]):x}" if has_ad else f"{command[i]}"
                for i in t]

    x, t, cnt = first_per_txn(T & ~D & ~split_clk)
    findings.add(times[x], "trdy_without_devsel",
                 [f"TRDY# asserted without DEVSEL# on {c} clock(s) of {w}" for c, w in zip(cnt, where_txt(t))])
    x, t, cnt = first_per_txn(s_nod & ~after_d)
    findings.add(times[x], "stop_without_devsel",
                 [f"STOP# asserted without DEVSEL# on {c} clock(s) of {w}" for c, w in zip(cnt, where_txt(t))])
    if has_cbe:
        # C/BE# must hold still while IRDY# is asserted within one data phase
        bmask = np.uint64(0xFF if wide_be else 0xF)
        pending = I & ~(dp | S)
        changed = np.zeros(n, bool)
        changed[1:] = pending[:-1] & I[1:] & (((cbe[1:] ^ cbe[:-1]) & bmask) != 0)
        changed[lo[lo < n]] = False                  # the clock before lo is a header clock
        x = np.flatnonzero(changed & region)
        t = np.searchsorted(s, x, side="right") - 1
        findings.add(times[x], "byte_enables_changed_in_wait",
                     [f"C/BE# changed from {int(cbe[i - 1] & bmask):X} to {int(cbe[i] & bmask):X} "
                      f"during a wait state of {w}" for i, w in zip(x, where_txt(t))])
    dp_pos = np.flatnonzero(dp)
    fdp = _first_after(dp_pos, H, e)
    late = (fdp >= 0) & (fdp - s > facts.MAX_INITIAL_LATENCY)
    findings.add(times[fdp[late]], "initial_latency",
                 [f"first data phase {int(fdp[i] - s[i])} clocks after the address phase of {w}"
                  for i, w in zip(np.flatnonzero(late), where_txt(np.flatnonzero(late)))])
    # transaction membership of every clock (the carried one included) for the bus-level checks
    busy = _region(n, starts_all, np.where(has_j, end_all, n - 1))
    if p0 == 1:
        busy[0] |= ctx_busy
    sp = np.maximum(s - 1, 0)
    pend = (s >= 1) & I[sp] & ~F[sp] & ~T[sp] & ~S[sp]
    findings.add(times[s[pend]], "frame_reasserted",
                 [f"FRAME# asserted again while the final data phase was pending: {w}"
                  for w in where_txt(np.flatnonzero(pend))])
    # IRDY# outside any transaction, once per run; not in the partial transaction the capture
    # began in (bus clocks before its first idle clock or address phase)
    lead_end = p0
    if leading:
        b = bounds[bounds >= p0]
        if len(b):
            lead_end = min(int(b[0]), limit)
            leading = False
        else:
            lead_end = limit
    orphan = ~idle & ~busy
    orphan[:lead_end] = False
    orphan[:p0] = False
    orphan[limit:] = False
    run = orphan.copy()
    run[1:] &= ~orphan[:-1]
    if p0 == 1 and orphan_prev and n > 1:
        run[1] = False
    x = np.flatnonzero(run)
    findings.add(times[x], "irdy_without_transaction",
                 ["IRDY# asserted with no transaction (FRAME# not asserted before it)"] * len(x))
    if bad32 is not None:
        _parity_findings(findings, bad32, bad64, s, dac2, attr, attr_ok, region, dp, w64, times, where_txt)

    # --- carry ---------------------------------------------------------------------------------
    if final:
        new = Carry({k: v[:0] for k, v in buf.items()}, times[:0], clock0 + n, False, leading,
                    False, False, rec_base + len(s), word_base + len(w_idx))
    else:
        if limit == n:        # nothing open: keep the last clock as "previous clock"
            c0, ctx = n - 1, True
        elif limit == 0:      # the open transaction starts on the capture's first clock
            c0, ctx = 0, False
        else:
            c0, ctx = limit - 1, True
        last_orphan = bool(orphan[limit - 1]) if limit - 1 >= p0 else orphan_prev
        new = Carry({k: v[c0:].copy() for k, v in buf.items()}, times[c0:].copy(), clock0 + c0,
                    ctx, leading, last_orphan, bool(busy[c0]), rec_base + len(s), word_base + len(w_idx))
    return rec, words, findings.array(), new


def _region(n: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Boolean mask of the clocks lo[i]..hi[i] (inclusive; disjoint spans)."""
    keep = (lo <= hi) & (lo < n)
    delta = np.zeros(n + 1, np.int32)
    np.add.at(delta, lo[keep], 1)
    np.add.at(delta, np.minimum(hi[keep], n - 1) + 1, -1)
    return np.cumsum(delta[:-1]) > 0


def _parity_findings(findings, bad32, bad64, s, dac2, attr, attr_ok, region, dp, w64, times, where_txt):
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
    x = np.flatnonzero(dp & region)
    t = np.searchsorted(s, x, side="right") - 1
    b32 = bad32[x]
    b64 = bad64[x] & w64[t] if bad64 is not None else np.zeros(len(x), bool)
    hit = b32 | b64
    if hit.any():
        # data phase number within its transaction
        first = np.searchsorted(x, x[np.searchsorted(t, t, side="left")])
        number = np.arange(len(x)) - first + 1
        for j in np.flatnonzero(hit):
            which = " and ".join(w for w, on in (("PAR", b32[j]), ("PAR64", b64[j])) if on)
            xs.append(x[j]); msgs.append(f"{which} parity error on data phase {number[j]} of {where_txt([t[j]])[0]}")
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

"""From the model's transactions (:class:`pcitrace.sim.model.Txn`) to the renderer's TxnSpec.

The model schedules the bus, so it must know how many clocks the renderer will draw for each
transaction; :func:`spec_clocks` follows the renderer's layout rules (pcitrace.sim.bus) and
:func:`to_specs` checks afterwards that the drawn start/end clocks are the scheduled ones.
"""

from __future__ import annotations

import numpy as np

from pcitrace.decode.facts import command_code
from pcitrace.errors import PcitraceError
from pcitrace.sim.bus import TxnSpec, is_read
from pcitrace.sim.model import Txn

MASTERS = ("nic", "host", "other")
MASTER_INDEX = {m: i for i, m in enumerate(MASTERS)}
DEVSEL_NAMES = {1: "fast", 2: "medium", 3: "slow"}


_CODES: dict[tuple[str, bool], int] = {}


def _code(t: Txn) -> int:
    key = (t.command, t.pcix)
    code = _CODES.get(key)
    if code is None:
        code = _CODES[key] = command_code(t.command, "pcix" if t.pcix else "pci")
    return code


def _first_offset(t: Txn, code: int) -> tuple[int, int]:
    """(header clocks, clocks from the last header clock to the first data / stop clock)."""
    header = (2 if t.pcix else 1) + (t.address >= 1 << 32)     # + the DAC's second address phase
    read = is_read(code, "pcix" if t.pcix else "pci")
    if t.termination == "split_response":
        decode = t.devsel + 1
    elif t.termination == "retry":
        decode = t.devsel
    else:
        decode = max(t.devsel, 2 if read else 1)
    return header, max(decode, 1 + t.initial_waits)


def phases(t: Txn) -> int:
    if t.termination in ("retry", "split_response"):
        return 0
    wb = t.width // 8
    first = t.address % wb
    return max(1, -(-(first + t.nbytes) // wb))


_CLOCKS: dict[tuple, int] = {}


def spec_clocks(t: Txn) -> int:
    """Clocks the renderer draws for ``t``, address phase to the last FRAME#/IRDY# clock."""
    # Transactions repeat a few shapes (CSR accesses, bursts of a buffer): remember them.
    key = (t.command, t.pcix, t.termination, t.devsel, t.initial_waits, t.wait_every, t.nbytes,
           t.width, t.address % (t.width // 8), t.address >= 1 << 32)
    n = _CLOCKS.get(key)
    if n is None:
        n = _CLOCKS[key] = _spec_clocks(t)
    return n


def _spec_clocks(t: Txn) -> int:
    code = _code(t)
    header, first = _first_offset(t, code)
    if t.termination == "retry":
        return header + first + 1            # STOP# clock, then FRAME# released with IRDY#
    if t.termination == "split_response":
        return header + first
    p = phases(t)
    waits = 0
    if t.wait_every and not t.pcix:
        waits = (p - 1) // t.wait_every
    extra = 1 if (t.termination == "disconnect_with_data" and not t.pcix) else 0
    return header + first + (p - 1) + waits + extra


def _words(t: Txn, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Data words and asserted-low byte enables of the completed phases."""
    wb = t.width // 8
    p = phases(t)
    off = t.address % wb
    if p == 1 and t.nbytes and off + t.nbytes <= wb:
        # one data phase (CSR accesses, short writes): plain ints, no numpy
        chunk = bytes(t.data[t.data_off:t.data_off + t.nbytes]) if t.data else bytes(t.nbytes)
        word = int.from_bytes(chunk, "little") << (8 * off)
        be = (~(((1 << len(chunk)) - 1) << off)) & ((1 << wb) - 1)
        return [word], [be]
    if cache is not None and t.data and t.address % wb == 0 and t.data_off % wb == 0:
        # Bursts of one buffer share its word array (a view per burst, no copy).
        key = (id(t.data), wb)
        full = cache.get(key)
        if full is None:
            raw = bytes(t.data) + bytes(-len(t.data) % 8)
            full = np.frombuffer(raw, "<u8") if wb == 8 else np.frombuffer(raw, "<u4").astype(np.uint64)
            cache[key] = full
        o = t.data_off // wb
        words = full[o:o + p]
        if len(words) == p:
            rem = t.nbytes % wb
            bkey = ("be", p, rem, wb)
            be = cache.get(bkey)
            if be is None:       # shared between bursts of one shape; the renderer copies it
                be = np.zeros(p, np.uint8)
                if rem:
                    be[-1] = (~((1 << rem) - 1)) & ((1 << wb) - 1)
                cache[bkey] = be
            return words, be
    buf = bytearray(p * wb)
    data = t.data[t.data_off:t.data_off + t.nbytes] if t.data else bytes(t.nbytes)
    buf[off:off + len(data)] = data
    en = np.zeros(p * wb, bool)
    en[off:off + t.nbytes] = True
    if wb == 8:
        words = np.frombuffer(bytes(buf), "<u8").copy()
    else:
        words = np.frombuffer(bytes(buf), "<u4").astype(np.uint64)
    en = en.reshape(p, wb)
    be = (~(en * (1 << np.arange(wb))).sum(axis=1)) & ((1 << wb) - 1)
    return words, be.astype(np.uint8)


_SHAPES: dict[tuple, tuple[int, dict]] = {}


def _shape(t: Txn) -> tuple[int, dict]:
    """(command code, target_waits) of a transaction shape; shared, never modified."""
    key = (t.command, t.pcix, t.termination, t.devsel, t.initial_waits, t.wait_every, t.nbytes,
           t.width, t.address % (t.width // 8), t.address >= 1 << 32)
    got = _SHAPES.get(key)
    if got is None:
        code = _code(t)
        _, first = _first_offset(t, code)
        tw = {0: first - 1}
        if t.wait_every and not t.pcix and t.termination not in ("retry", "split_response"):
            for k in range(t.wait_every, phases(t), t.wait_every):
                tw[k] = 1
        got = _SHAPES[key] = (code, tw)
    return got


def to_spec(t: Txn, prev_end: int, cache: dict | None = None) -> TxnSpec:
    code, tw = _shape(t)
    idle = t.start - prev_end - 1
    wide = t.width == 64
    term = t.termination
    if t.pcix and term == "disconnect_with_data":
        term = "disconnect_adb"
    kw = dict(command=code, address=t.address & ~(t.width // 8 - 1) if t.nbytes else t.address,
              devsel=DEVSEL_NAMES[t.devsel], termination=term, idle_before=idle,
              master=MASTER_INDEX[t.master], req64=wide)
    if t.pcix:
        kw.update(requester=max(t.requester, 0), tag=max(t.tag, 0))
        if t.byte_count > 0:
            kw["byte_count"] = t.byte_count
    kw["target_waits"] = tw
    if term in ("retry", "split_response"):
        if t.pcix and code in (0x2, 0x3, 0x6, 0xA, 0xB):
            kw["byte_enables"] = 0x0
        return TxnSpec(**kw)
    words, be = _words(t, cache)
    kw["data"] = words
    kw["byte_enables"] = be
    if term == "disconnect_adb":
        kw["stop_phases"] = 1
    return TxnSpec(**kw)


def to_specs(txns: list[Txn]) -> list[TxnSpec]:
    out = []
    prev_end = -1
    cache: dict = {}
    for t in txns:
        out.append(to_spec(t, prev_end, cache))
        prev_end = t.start + t.clocks - 1
    return out


class _Irregular(Exception):
    """A transaction the column builder does not cover: render through TxnSpecs instead."""


def render_txns(txns: list[Txn], parity: dict[int, int] | None = None, *, mode: str, width: int,
                clock_hz: float, bus: str, gnt_master: int | None, with_ad: bool, tail: int,
                total_clocks: int | None):
    """``render(to_specs(txns), masters=MASTERS, ...)`` without a TxnSpec per transaction.

    The model's transactions repeat a few shapes, so everything that follows from the shape
    (command code, data phases, byte enables, header clocks, the renderer's clock pattern) is
    worked out once per shape - through :func:`to_spec` and the renderer's own shape builder,
    so the rules live in one place - and the loop per transaction only stamps its start
    clock, address and data into the renderer's columns. ``parity``: transaction index ->
    data phase whose PAR is inverted (what ``TxnSpec.parity_error`` does). The result is that
    of the TxnSpec path (tests/sim/test_specs.py compares them); a transaction this builder
    does not cover sends the whole bus down that path.
    """
    from pcitrace.sim import bus as B

    kw = dict(mode=mode, width=width, clock_hz=clock_hz, bus=bus, gnt_master=gnt_master, with_ad=with_ad,
              tail=tail, total_clocks=total_clocks)
    if mode in ("pci", "pcix") and width in (32, 64):
        try:
            return _render_columns(txns, parity or {}, **kw)
        except _Irregular:
            pass
    specs = to_specs(txns)
    for i, pe in (parity or {}).items():
        specs[i].parity_error = pe
    return B.render(specs, masters=MASTERS, **kw)


def _render_columns(txns, parity, *, mode, width, clock_hz, bus, gnt_master, with_ad, tail, total_clocks):
    from pcitrace.sim import bus as B

    pcix = mode == "pcix"
    u64 = np.uint64
    shapes: dict[tuple, int] = {}            # the renderer's shape key -> index in shape_list
    shape_list: list = []
    kinds: dict[tuple, tuple] = {}           # the model's shape key -> what follows from it
    kind_be: list[np.ndarray] = []           # per kind: the byte enables of its data phases
    bufs: dict = {}                          # id(buffer), bytes per word -> its words
    h_ad: list[int] = [0]
    h_cbe: list[int] = [0xFF]
    s_pos: list[int] = []                    # single data phase transactions: word index, value
    s_val: list[int] = []
    m_pos: list[int] = []                    # bursts: first word index, words
    m_parts: list[np.ndarray] = []
    t_kind: list[int] = []
    t_start: list[int] = []
    t_idle: list[int] = []
    t_hbase: list[int] = []
    t_pend: list[int] = []
    t_master: list[int] = []
    t_addr: list[int] = []
    t_px: list[tuple] = []
    par_flips: list = []
    ad_append, cbe_append = h_ad.append, h_cbe.append
    reads = [B.is_read(c, mode) for c in range(16)]
    clock = 0
    n_words = 0
    prev_end = -1
    for i, t in enumerate(txns):
        wb = t.width // 8
        a = t.address
        key = (t.command, t.pcix, t.termination, t.devsel, t.initial_waits, t.wait_every, t.nbytes,
               t.width, a % wb, a >= 1 << 32)
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = _kind(t, prev_end, len(kinds), pcix, width, with_ad, reads, shapes, shape_list,
                                      kind_be, i)
        ki, cmd, P, dac, wide, single, aligned, shp_end, attr, pend_cbe, _ = kind
        start = t.start
        idle = start - prev_end - 1
        prev_end = start + t.clocks - 1
        if idle < 0:
            idle = 0
        if i == 0 and idle < 2:
            idle = 2          # as render(): a clock before the first address phase
        A = clock + idle
        clock = A + shp_end + 1
        if t.nbytes:
            a &= ~(wb - 1)
        if P:
            d = t.data
            if single:
                if d:
                    chunk = d[t.data_off:t.data_off + t.nbytes]
                    if len(chunk) != t.nbytes:
                        raise _Irregular
                    s_val.append(int.from_bytes(chunk, "little") << (single - 1))
                else:
                    s_val.append(0)
                s_pos.append(n_words)
            else:
                w = None
                if aligned and d and t.data_off % wb == 0:
                    full = bufs.get((id(d), wb))
                    if full is None:
                        # the buffer's whole words, without a copy (a copy of every frame is
                        # hundreds of MB in a long capture); a burst reaching into a partial
                        # last word takes the general path below
                        full = np.frombuffer(d, "<u8", len(d) // 8) if wb == 8 else \
                            np.frombuffer(d, "<u4", len(d) // 4).astype(u64)
                        bufs[(id(d), wb)] = full
                    o = t.data_off // wb
                    w = full[o:o + P]
                if w is None or len(w) != P:
                    w = np.asarray(_words(t)[0], u64)
                m_parts.append(w)
                m_pos.append(n_words)

        hbase = len(h_ad)
        if dac:
            if a >> 64:
                raise PcitraceError(f"transaction {i}: address 0x{a:x} is wider than 64 bits",
                                    fix="give a 64-bit address")
            if width == 64 and wide:
                ad_append(a); cbe_append(cmd << 4 | 0xD)
            else:
                ad_append(a & 0xFFFFFFFF); cbe_append(0xFD)
            ad_append(a >> 32); cbe_append(0xF0 | cmd)
        else:
            if pcix and cmd == 0xC:
                a = (a & 0x7F) | (max(t.requester, 0) & 0xFFFF) << 8 | (max(t.tag, 0) & 0x1F) << 24
            ad_append(a); cbe_append(0xF0 | cmd)
        if pcix:
            req, tag = max(t.requester, 0) & 0xFFFF, max(t.tag, 0) & 0x1F
            if attr is not None:           # DWORD commands: the byte enables go in the attribute
                bc_low, attr_cbe, byte_count = attr
            else:
                bc = t.byte_count if t.byte_count > 0 else max(1, min(4096, P * (8 if wide else 4)))
                if not 1 <= bc <= 4096:
                    raise PcitraceError(f"transaction {i}: PCI-X byte count {bc}", fix="use 1..4096")
                bc_low, attr_cbe, byte_count = bc & 0xFF, (bc >> 8) & 0xF, bc
            ad_append(bc_low if cmd == 0xC else bc_low | (req & 0xFF) << 8 | (req >> 8) << 16 | tag << 24)
            cbe_append(0xF0 | attr_cbe)
            t_px.append((tag, req, byte_count, False, False))
        t_pend.append(len(h_ad))
        # a stop slot shows the last data word (filled in below, once the words are arrays)
        ad_append(0 if P else a & 0xFFFFFFFF)
        cbe_append(pend_cbe)
        t_kind.append(ki); t_start.append(A); t_idle.append(idle); t_hbase.append(hbase)
        t_master.append(MASTER_INDEX[t.master]); t_addr.append(a)
        if parity:
            pe = parity.get(i)
            if pe is not None:
                if not 0 <= pe < P:
                    raise PcitraceError(f"transaction {i}: parity error in data phase {pe} of {P}",
                                        fix="name an existing data phase")
                par_flips.append((-1 - (n_words + pe), i, f"data phase {pe}"))
        n_words += P

    # -- columns per transaction from its kind ----------------------------------------------------
    i64 = np.int64
    nk = len(kinds)
    kt = list(kinds.values())
    kind_a = np.asarray(t_kind, i64)
    # (kinds are numbered in insertion order, so kt[k] is kind k)
    col = lambda k, dt: np.array([x[k] for x in kt], dt)[kind_a] if nk else np.zeros(0, dt)  # noqa: E731
    t_shape = col(10, i64)
    t_cmd = col(1, i64)
    t_P = col(2, i64)
    t_dac = col(3, bool)
    t_wide = col(4, bool)
    t_dbase = np.concatenate(([0], np.cumsum(t_P)[:-1])) if len(t_P) else np.zeros(0, i64)
    nd = n_words
    all_ad = np.zeros(nd, u64)
    if s_pos:
        all_ad[np.asarray(s_pos, i64)] = np.array(s_val, dtype=u64)
    if m_parts:
        lens = np.fromiter(map(len, m_parts), i64, len(m_parts))
        before = np.concatenate(([0], np.cumsum(lens)[:-1]))
        all_ad[np.repeat(np.asarray(m_pos, i64) - before, lens) + np.arange(int(lens.sum()))] = \
            np.concatenate(m_parts)
    if nd:
        be_off = np.concatenate(([0], np.cumsum([len(b) for b in kind_be])[:-1])).astype(i64)
        be_flat = np.concatenate(kind_be).astype(np.uint8)
        all_be = be_flat[np.repeat(be_off[kind_a] - t_dbase, t_P) + np.arange(nd)]
    else:
        all_be = np.zeros(0, np.uint8)
    ad_a = np.array(h_ad, dtype=u64)
    has = t_P > 0
    if nd:
        last = all_ad[(t_dbase + t_P - 1)[has]]
        ad_a[np.asarray(t_pend, i64)[has]] = np.where(t_wide[has], last, last & u64(0xFFFFFFFF))
    return B._assemble(shape_list, t_shape, t_start, t_idle, t_hbase, t_pend, t_dbase, t_P, t_wide, t_wide,
                       t_wide, t_master, t_cmd, t_addr, t_dac, t_px, par_flips, [], ad_a, h_cbe,
                       all_ad, all_be, n_words, clock, mode=mode, width=width, clock_hz=clock_hz, bus=bus,
                       masters=MASTERS, gnt_master=gnt_master, with_ad=with_ad, tail=tail,
                       total_clocks=total_clocks)


def _kind(t: Txn, prev_end: int, ki: int, pcix: bool, width: int, with_ad: bool, reads, shapes, shape_list,
          kind_be, i: int) -> tuple:
    """What follows from a transaction's shape, worked out through to_spec and the renderer."""
    from pcitrace.sim import bus as B

    s = to_spec(t, prev_end)
    cmd = s.command
    term = s.termination
    n = B.DEVSEL_CLOCKS[s.devsel]
    P = len(s.data)
    dac = s.address >= 0x100000000
    nhdr = (2 if dac else 1) + pcix
    read = reads[cmd]
    rkey = (read, term, n, P, nhdr, (), B._wait_key(s.target_waits) if s.target_waits else (),
            s.master_done, s.stop_phases, s.stop_early)
    si = shapes.get(rkey)
    if si is None:
        si = len(shape_list)
        shape_list.append(B._make_shape(i, pcix, read, term, n, P, nhdr, s, with_ad))
        shapes[rkey] = si
    wide = bool(s.req64)
    if wide and width != 64:
        raise PcitraceError(f"transaction {i}: REQ64# on a 32-bit bus", fix="render with width=64 or drop req64")
    wb = t.width // 8
    off = t.address % wb
    be = s.byte_enables
    single = 0
    if P:
        if P == 1 and t.nbytes and off + t.nbytes <= wb:
            single = 8 * off + 1             # 1 + the shift of the word (nonzero at offset 0 too)
        be_arr = np.asarray(be, dtype=np.int64).astype(np.uint8)
        if len(be_arr) != P:
            raise _Irregular
        kind_be.append(be_arr)
        be_last = int(be_arr[-1])
        pend_cbe = be_last & 0xFF if wide else (be_last & 0xF) | 0xF0
    else:
        kind_be.append(np.zeros(0, np.uint8))
        pend_cbe = 0xF0
    attr = None
    if pcix and cmd in B.PCIX_DWORD_COMMANDS:
        attr_be = B.dword_attribute_be(be, P)
        attr = (0, attr_be, 4 - bin(attr_be).count("1"))
    return (ki, cmd, P, dac, wide, single, off == 0, shape_list[si].end, attr, pend_cbe, si)

"""From the model's transactions (:class:`pcitrace.sim.model.Txn`) to the renderer's TxnSpec.

The model schedules the bus, so it must know how many clocks the renderer will draw for each
transaction; :func:`spec_clocks` follows the renderer's layout rules (pcitrace.sim.bus) and
:func:`to_specs` checks afterwards that the drawn start/end clocks are the scheduled ones.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator

import numpy as np

from pcitrace.decode.facts import command_code
from pcitrace.errors import PcitraceError
from pcitrace.sim.bus import TxnSpec, is_read
from pcitrace.sim.model import ROW_FIELDS, ROW_WIDTH, Txn, TxnRows, shape_key

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
    key = shape_key(t)
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


def first_occurrence_groups(keys: np.ndarray, few: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(group of every key, numbered in order of first occurrence; index of each group's first
    key). A bus's transactions come in a few tens of kinds: then one comparison pass per group
    finds it (no sort of every key); beyond ``few`` groups np.unique does the rest."""
    n = len(keys)
    group = np.full(n, -1, np.intp)
    firsts: list[int] = []
    at = 0
    while at < n and len(firsts) < few:
        firsts.append(at)
        np.copyto(group, len(firsts) - 1, where=keys == keys[at])
        left = group[at:] < 0
        nxt = int(np.argmax(left))
        if not left[nxt]:
            return group, np.array(firsts, np.intp)
        at += nxt
    if at >= n:
        return group, np.array(firsts, np.intp)
    # many kinds: the rest grouped by sorting, numbered after the ones found so far
    rest = np.flatnonzero(group < 0)
    _, first, inv = np.unique(keys[rest], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.intp)
    rank[order] = np.arange(len(firsts), len(firsts) + len(order))
    group[rest] = rank[inv.reshape(-1)]
    return group, np.concatenate((np.array(firsts, np.intp), rest[first[order]]))


class _Irregular(Exception):
    """A transaction the column builder does not cover: render through TxnSpecs instead."""


def render_txns(txns: list[Txn] | TxnRows, parity: dict[int, int] | None = None, *, mode: str, width: int,
                clock_hz: float, bus: str, gnt_master: int | None, with_ad: bool, tail: int,
                total_clocks: int | None, lean: bool = False):
    """``render(to_specs(txns), masters=MASTERS, ...)`` without a TxnSpec per transaction.

    ``txns``: scheduled Txn objects, or a bus's :class:`~pcitrace.sim.model.TxnRows` (what the
    model grants: no Txn object per transaction at all).

    The model's transactions repeat a few shapes, so everything that follows from the shape
    (command code, data phases, byte enables, header clocks, the renderer's clock pattern) is
    worked out once per shape - through :func:`to_spec` and the renderer's own shape builder,
    so the rules live in one place - and the loop per transaction only stamps its start
    clock, address and data into the renderer's columns. ``parity``: transaction index ->
    data phase whose PAR is inverted (what ``TxnSpec.parity_error`` does). The result is that
    of the TxnSpec path (tests/sim/test_specs.py compares them); a transaction this builder
    does not cover sends the whole bus down that path. ``lean``: as :func:`pcitrace.sim.bus._assemble`
    (no words table, no other masters' REQ#/GNT#; the TxnSpec path ignores it).
    """
    from pcitrace.sim import bus as B

    kw = dict(mode=mode, width=width, clock_hz=clock_hz, bus=bus, gnt_master=gnt_master, with_ad=with_ad,
              tail=tail, total_clocks=total_clocks)
    rows = txns if isinstance(txns, TxnRows) else TxnRows.of(txns)
    if mode in ("pci", "pcix") and width in (32, 64):
        try:
            return _render_columns(rows, parity or {}, lean=lean, **kw)
        except _Irregular:
            pass
    specs = to_specs(txns.txns() if isinstance(txns, TxnRows) else txns)
    for i, pe in (parity or {}).items():
        specs[i].parity_error = pe
    return B.render(specs, masters=MASTERS, **kw)


_FIELD = {name: j for j, name in enumerate(ROW_FIELDS)}


def txn_column(rows: TxnRows, name: str) -> list:
    """One field (ROW_FIELDS) over every transaction: a strided slice of the rows' flat list."""
    return rows.flat[_FIELD[name]::ROW_WIDTH]


def _render_columns(rows: TxnRows, parity, *, mode, width, clock_hz, bus, gnt_master, with_ad, tail, total_clocks,
                    lean):
    """The renderer's per-transaction columns, column-wise: the rows transposed (C loops), then
    numpy. What depends on the transaction's shape comes from its kind (worked out once, through
    to_spec and the renderer)."""
    from pcitrace.sim import bus as B

    pcix = mode == "pcix"
    u64, i64 = np.uint64, np.int64
    n = len(rows)
    if n == 0:
        raise _Irregular            # nothing to speed up: the TxnSpec path draws the idle bus
    col_of = lambda name: txn_column(rows, name)      # noqa: E731
    # (numeric columns by np.fromiter: np.array first works out the tuple's shape and type)
    try:
        addr = np.fromiter(col_of("address"), u64, n)      # negative or beyond 64 bits: the TxnSpec path says so
    except OverflowError:
        raise _Irregular from None

    kinds = _Kinds.of(rows, mode, width, with_ad)
    kind_a, kt = kinds.kind_a, kinds.kt
    wb = kinds.width[kind_a] // 8
    col = lambda k, dt: np.array([x[k] for x in kt], dt)[kind_a]   # noqa: E731
    t_shape = col(10, i64)
    t_cmd = col(1, i64)
    t_P = col(2, i64)
    t_dac = col(3, bool)
    t_wide = col(4, bool)
    k_single = col(5, i64)
    k_aligned = col(6, bool)
    t_shend = col(7, i64)
    pend_cbe = col(9, np.uint8)
    starts, ends, idle, t_start, clock = _clocks(rows, kinds.clocks[kind_a], t_shend)

    # -- the value tables: data words, then header entries (the renderer's own layout, filled in
    # place: no copy of the words into it) -------------------------------------------------------------
    t_dbase = np.cumsum(t_P) - t_P
    nd = int(t_P.sum())
    nh = 1 + t_dac + pcix + 1
    t_hbase = 1 + np.cumsum(nh) - nh
    t_pend = t_hbase + nh - 1
    nh_all = 1 + int(nh.sum())
    val_ad = np.empty(nd + nh_all, u64)
    val_be = np.empty(nd + nh_all, np.uint8)
    all_ad, ad_a = val_ad[:nd], val_ad[nd:]          # (every data word is written)
    all_be, cbe_a = val_be[:nd], val_be[nd:]
    nbytes = kinds.nbytes[kind_a]
    datas = col_of("data")
    offs = np.fromiter(col_of("data_off"), i64, n)
    _data_words(rows, datas, offs, nbytes, wb, t_P, t_dbase, k_single, k_aligned, all_ad)
    del datas
    t_bytes = _byte_enables(all_be, kinds.be, kt, kind_a, t_dbase)

    # -- header tables: address (and DAC high half), PCI-X attribute, the stop slot's value ----------------
    a = np.where(nbytes > 0, addr & ~(wb - 1).astype(u64), addr)
    if pcix:
        req = np.array([max(r, 0) for r in col_of("requester")], i64) & 0xFFFF
        tag = np.array([max(x, 0) for x in col_of("tag")], i64) & 0x1F
        comp = (t_cmd == 0xC) & ~t_dac
        a = np.where(comp, (a & u64(0x7F)) | (req.astype(u64) << u64(8)) | (tag.astype(u64) << u64(24)), a)
    ad_a[:] = 0
    cbe_a[:] = 0xFF
    _address_entries(ad_a, cbe_a, a, t_cmd, t_dac, t_wide, t_hbase, width)
    t_px = None
    if pcix:
        byte_count = _attribute_entries(ad_a, cbe_a, kt, kind_a, np.fromiter(col_of("byte_count"), i64, n), req, tag,
                                        t_cmd, t_P, t_wide, t_hbase + 1 + t_dac)
        false = np.zeros(n, bool)
        t_px = (tag, req, byte_count, false, false)
    has = t_P > 0
    # a stop slot shows the last data word, or the address when no data phase completed
    last = all_ad[(t_dbase + t_P - 1)[has]]
    ad_a[t_pend[has]] = np.where(t_wide[has], last, last & u64(0xFFFFFFFF))
    ad_a[t_pend[~has]] = a[~has] & u64(0xFFFFFFFF)
    cbe_a[t_pend] = pend_cbe

    par_flips = _parity_flips(parity, t_P, t_dbase)
    t_master = kinds.master[kind_a]
    purpose, packet = B.Strings(kinds.purpose, kind_a), np.fromiter(col_of("packet"), i64, n)
    rb = B._assemble(kinds.shape_list, t_shape, t_start, idle, t_hbase, t_pend, t_dbase, t_P, t_wide, t_wide,
                       t_wide, t_master, t_cmd, a, t_dac, t_px, par_flips, [], None, None,
                       None, None, nd, clock, mode=mode, width=width, clock_hz=clock_hz, bus=bus,
                       masters=MASTERS, gnt_master=gnt_master, with_ad=with_ad, tail=tail,
                       total_clocks=total_clocks, lean=lean, tables=(val_ad, val_be), t_bytes=t_bytes)
    del val_ad, val_be, all_ad, all_be, ad_a, cbe_a
    # what the truth needs of the transactions besides the records: no second pass over them
    rb.txn_columns = {"start": starts, "end": ends, "master": t_master, "purpose": purpose,
                      "packet": packet, "pcix": kinds.pcix[kind_a], "nbytes": nbytes,
                      "retry": kinds.retry[kind_a]}
    return rb


@dataclasses.dataclass
class _Kinds:
    """A bus's transactions by kind (the identity of their model proto: equal protos in distinct
    tuples are two kinds of the same shape, the same drawing), numbered in order of first
    occurrence, and what follows from each kind: the renderer's shapes, per kind its _kind
    tuple and the byte enables of its data phases, and the proto's fields."""

    kind_a: np.ndarray       # per transaction: its kind
    kt: list                 # per kind: _kind()'s tuple
    shape_list: list         # the renderer's shapes (kt[k][10] indexes it)
    be: list                 # per kind: the byte enables of its data phases
    width: np.ndarray        # per kind: transfer width, bits
    nbytes: np.ndarray
    pcix: np.ndarray
    retry: np.ndarray
    clocks: np.ndarray
    master: np.ndarray       # MASTER_INDEX
    purpose: list

    @classmethod
    def of(cls, rows: TxnRows, mode: str, width: int, with_ad: bool) -> "_Kinds":
        from pcitrace.sim import bus as B

        n = len(rows)
        i64 = np.int64
        # the identities as numbers, grouped by numpy (no dict entry per transaction)
        kind_a, first = first_occurrence_groups(np.fromiter(map(id, txn_column(rows, "proto")), i64, n))
        first = first.tolist()                   # per kind: its first transaction
        # what the proto covers, per kind from its first transaction
        k_first = [rows.txn(i) for i in first]
        k_width = np.array([t.width for t in k_first], i64)
        if not np.all((k_width == 32) | (k_width == 64)):
            raise _Irregular
        shapes: dict[tuple, int] = {}            # the renderer's shape key -> index in shape_list
        shape_list: list = []
        kt: list[tuple] = []
        kind_be: list[np.ndarray] = []
        reads = [B.is_read(c, mode) for c in range(16)]
        for i in first:
            kt.append(_kind(rows.txn(i), -1, len(kt), mode == "pcix", width, with_ad, reads, shapes, shape_list,
                            kind_be, i))
        return cls(kind_a, kt, shape_list, kind_be, k_width,
                   np.array([t.nbytes for t in k_first], i64),
                   np.array([bool(t.pcix) for t in k_first], bool),
                   np.array([t.termination == "retry" for t in k_first], bool),
                   np.array([t.clocks for t in k_first], i64),
                   np.array([MASTER_INDEX[t.master] for t in k_first], i64),
                   [t.purpose for t in k_first])


def _clocks(rows: TxnRows, t_clocks: np.ndarray, t_shend: np.ndarray):
    """(scheduled start and end clocks, idle clocks before each transaction, the renderer's
    address clocks, clocks drawn) from the rows' starts, each transaction's clocks and its
    shape's span (last clock - address clock)."""
    i64 = np.int64
    starts = np.frombuffer(rows.starts, i64).copy()      # (a copy: the rows stay appendable)
    ends = starts + t_clocks - 1
    idle = np.empty(len(starts), i64)
    idle[0] = starts[0]
    idle[1:] = starts[1:] - ends[:-1] - 1
    np.maximum(idle, 0, out=idle)
    if idle[0] < 2:
        idle[0] = 2          # as render(): a clock before the first address phase
    step = idle + t_shend + 1
    t_start = np.cumsum(step) - t_shend - 1        # sum of the idles up to i + the spans before i
    return starts, ends, idle, t_start, int(t_start[-1] + t_shend[-1] + 1)


def _byte_enables(all_be: np.ndarray, kind_be: list, kt: list, kind_a: np.ndarray, t_dbase: np.ndarray) -> np.ndarray:
    """Write every data phase's byte enables into ``all_be``; returns the records' bytes."""
    # Most phases enable every lane (0); each kind's other ones are written at its
    # transactions' phases. And the records' bytes by kind: its lanes less the disabled ones.
    all_be[:] = 0
    k_bytes = np.zeros(len(kind_be), np.int64)
    for k, be in enumerate(kind_be):
        wide_k = kt[k][4]
        k_bytes[k] = len(be) * (8 if wide_k else 4) - int(np.bitwise_count(be & (0xFF if wide_k else 0x0F)).sum())
        nz = np.flatnonzero(be)
        if len(nz):
            at = t_dbase[kind_a == k]
            all_be[(at[:, None] + nz).reshape(-1)] = np.tile(be[nz], len(at))
    return k_bytes[kind_a]


def _address_entries(ad_a, cbe_a, a, t_cmd, t_dac, t_wide, t_hbase, width: int) -> None:
    """The address phases (a DAC's two) into the header tables ``ad_a`` / ``cbe_a``."""
    u64 = np.uint64
    cmd8 = t_cmd.astype(np.uint8)
    lo = ~t_dac
    ad_a[t_hbase[lo]] = a[lo]
    cbe_a[t_hbase[lo]] = 0xF0 | cmd8[lo]
    if t_dac.any():
        d = t_dac
        whole = d & t_wide & (width == 64)
        ad_a[t_hbase[d]] = np.where(whole[d], a[d], a[d] & u64(0xFFFFFFFF))
        cbe_a[t_hbase[d]] = np.where(whole[d], cmd8[d] << 4 | 0xD, 0xFD)
        ad_a[t_hbase[d] + 1] = a[d] >> u64(32)
        cbe_a[t_hbase[d] + 1] = 0xF0 | cmd8[d]


def _attribute_entries(ad_a, cbe_a, kt, kind_a, bcs, req, tag, t_cmd, t_P, t_wide, at) -> np.ndarray:
    """The PCI-X attribute phases (at header entries ``at``) into the header tables; returns the
    byte counts (``bcs``: the rows' byte counts, <= 0: the data's)."""
    attr = [x[8] for x in kt]
    k_attr = np.array([x is not None for x in attr], bool)[kind_a]
    k_attr_cbe = np.array([x[1] if x else 0 for x in attr], np.int64)[kind_a]
    k_attr_bc = np.array([x[2] if x else 0 for x in attr], np.int64)[kind_a]
    bc = np.where(bcs > 0, bcs, np.maximum(1, np.minimum(4096, t_P * np.where(t_wide, 8, 4))))
    if np.any(~k_attr & ((bc < 1) | (bc > 4096))):
        raise _Irregular            # the TxnSpec path names the transaction and the fix
    bc_low = np.where(k_attr, 0, bc & 0xFF)
    attr_cbe = np.where(k_attr, k_attr_cbe, (bc >> 8) & 0xF)
    ad_a[at] = np.where(t_cmd == 0xC, bc_low,
                        bc_low | (req & 0xFF) << 8 | (req >> 8) << 16 | tag << 24).astype(np.uint64)
    cbe_a[at] = (0xF0 | attr_cbe).astype(np.uint8)
    return np.where(k_attr, k_attr_bc, bc)


def _parity_flips(parity: dict[int, int], t_P: np.ndarray, t_dbase: np.ndarray) -> list:
    """The renderer's parity flips (-1 - word index, transaction, what) of ``parity``
    (transaction -> data phase)."""
    par_flips: list = []
    for i, pe in sorted(parity.items()):
        P = int(t_P[i])
        if not 0 <= pe < P:
            raise PcitraceError(f"transaction {i}: parity error in data phase {pe} of {P}",
                                fix="name an existing data phase")
        par_flips.append((-1 - (int(t_dbase[i]) + pe), i, f"data phase {pe}"))
    return par_flips


_PADS = {w: [bytes(-r % w) for r in range(w)] for w in (4, 8)}     # by length mod w


def _pick(seq, idx: list) -> tuple:
    """seq[i] for every i in idx, in one C loop."""
    if len(idx) == 1:
        return (seq[idx[0]],)
    return operator.itemgetter(*idx)(seq) if idx else ()


def _data_words(rows, datas, offs, nbytes, wb, t_P, t_dbase, k_single, k_aligned, all_ad) -> None:
    """Fill ``all_ad`` with every transaction's data words (a function of its own: its
    temporaries - the burst pool and buffer lists, tens of MB at tens of millions of clocks -
    are gone before the renderer assembles the bus).

    The bursts' words in one gather from the pool of their buffers, by each word's place in the
    pool as a running sum (a burst's words are consecutive there, so the index steps by one
    except where a burst starts) - no word index pair per word and scatter: at 10 M clocks each
    index array was 20 MB; then the single-phase words (CSR accesses) and the rare irregular
    bursts written over their places."""
    u64, i64 = np.uint64, np.int64
    nd = len(all_ad)
    if not nd:
        return
    first = np.zeros(len(t_P), i64)            # per transaction: where its first word is in the pool
    pools: list[np.ndarray] = []
    burst = np.flatnonzero((t_P > 0) & (k_single == 0))
    if len(burst):
        # Bursts read their buffer's words (a frame, shared by its bursts) from one pool of every
        # buffer, zero-padded to whole words: an aligned burst takes its words as they are there,
        # as to_spec does (the buffer's bytes past the burst stay in its last word, under
        # disabled byte lanes); an unaligned one goes through _words itself.
        bl = burst.tolist()
        bwb = wb[burst]
        bd = _pick(datas, bl)
        # A buffer by its identity and word width (the identities as numbers, sorted by numpy: no
        # dict entry per burst); the pool holds the buffers in the order of their keys. (The
        # bursts keep their buffers alive, so no two share an identity.)
        keys = np.fromiter(map(id, bd), i64, len(bd))
        if not (bwb == bwb[0]).all():
            keys = keys * 2 + (bwb == 8)
        _, ufirst, src = np.unique(keys, return_index=True, return_inverse=True)
        src = src.reshape(-1)
        del keys
        uniq = _pick(bd, ufirst.tolist())
        uwb = bwb[ufirst]
        blen = np.fromiter(map(len, uniq), i64, len(uniq))
        nwords = -(-blen // uwb)
        for w in (8, 4):
            sel = _pick(uniq, np.flatnonzero(uwb == w).tolist())
            if sel:
                # each buffer then the zeros to its next whole word, in one join (no padded copy
                # of every buffer first)
                pads = map(_PADS[w].__getitem__, map(operator.mod, map(len, sel), itertools.repeat(w)))
                raw = b"".join(itertools.chain.from_iterable(zip(sel, pads)))
                pools.append(np.frombuffer(raw, "<u8") if w == 8 else np.frombuffer(raw, "<u4").astype(u64))
        order = np.concatenate([np.flatnonzero(uwb == 8), np.flatnonzero(uwb == 4)])
        ubase = np.empty(len(uniq), i64)
        ubase[order] = np.cumsum(nwords[order]) - nwords[order]
        P_b = t_P[burst]
        off_b = offs[burst]
        o_b = off_b // bwb
        L = blen[src]
        have = k_aligned[burst] & (off_b % bwb == 0) & (L > 0) & (o_b + P_b <= nwords[src])
        first[burst[have]] = ubase[src[have]] + o_b[have]
        irregular = [bl[j] for j in np.flatnonzero(~have).tolist()]
    else:
        irregular = []
    single = np.flatnonzero((t_P > 0) & (k_single > 0))
    if len(single):
        sl = single.tolist()
        ds = _pick(datas, sl)
        n_s = nbytes[single]
        lens = np.fromiter(map(len, ds), i64, len(ds))
        if (lens == n_s).all() and not offs[single].any() and (n_s == n_s[0]).all() and n_s[0] in (1, 2, 4, 8):
            # the usual case (CSR accesses): each buffer is exactly its word's bytes
            vals = np.frombuffer(b"".join(ds), f"<u{n_s[0]}").astype(u64)
        else:
            o_l, n_l = offs[single].tolist(), n_s.tolist()
            chunks = [d[o:o + m] if d else None for d, o, m in zip(ds, o_l, n_l)]
            if any(c is not None and len(c) != m for c, m in zip(chunks, n_l)):
                raise _Irregular
            vals = np.array([int.from_bytes(c, "little") if c is not None else 0 for c in chunks], u64)
        vals <<= (k_single[single] - 1).astype(u64)
    pool = np.concatenate(pools) if len(pools) > 1 else pools[0] if pools else np.zeros(0, u64)
    del pools
    if len(pool):        # (else no burst takes its words from the pool)
        # (the single words and irregular bursts take pool word 0 here and are written below)
        tx = np.flatnonzero(t_P > 0)
        f = first[tx]
        idx = np.ones(nd, np.intp)
        # a transaction's first word jumps from where the previous one's last word was
        jump = f.copy()
        jump[1:] -= f[:-1] + t_P[tx[:-1]] - 1
        idx[t_dbase[tx]] = jump
        del f, jump
        np.cumsum(idx, out=idx)
        np.take(pool, idx, out=all_ad, mode="clip")      # (mode='raise' would buffer the out= array)
        del idx
    del pool
    if len(single):
        all_ad[t_dbase[single]] = vals
    for i in irregular:
        w = np.asarray(_words(rows.txn(i))[0], u64)
        all_ad[t_dbase[i]:t_dbase[i] + len(w)] = w


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
        if not wide:
            be_arr = (be_arr & 0x0F) | 0xF0        # as the bus carries it: C/BE#[7:4] high
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

"""From the model's transactions (:class:`pcitrace.sim.model.Txn`) to the renderer's TxnSpec.

The model schedules the bus, so it must know how many clocks the renderer will draw for each
transaction; :func:`spec_clocks` follows the renderer's layout rules (pcitrace.sim.bus) and
:func:`to_specs` checks afterwards that the drawn start/end clocks are the scheduled ones.
"""

from __future__ import annotations

import numpy as np

from pcitrace.decode.facts import command_code
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

"""VCD captures: a reader on pywellen and a writer that sigrok-cli 0.7.2 and GTKWave open.

Reading
-------
pywellen parses the file; pcitrace adds what it lacks: gzip'd files (inflated to a temporary
file first), a check that every value change names a declared identifier (pywellen drops the
others silently), the x/z rule below and numpy change lists.

A VCD capture is *event timed*: sample i is the state of every signal from the i-th distinct
change time until the next one (``TimeBase.events``). ``clocked_view`` turns it into one sample
per rising clock edge. A VCD written by pcitrace carries a ``$comment pcitrace {...} $end``
with the original time base, so .sr -> VCD -> .sr gives back the same samples; its fields are
typed and ranged by ``capture.meta``.

Bad and cut files: every size the file states is bounded before anything is allocated (a $var
wider than ``meta.MAX_VECTOR_BITS``, times past int64 picoseconds: the error naming them), and
pywellen's messages become one line. A dump cut inside its last line (a value change, or a
``#time`` that reads earlier than the one before) is read up to that line, and a VCD pcitrace
wrote that stops before its declared last sample keeps the samples before its last timestamp;
``metadata["warnings"]`` says where the data stops.

Unknown values (the documented rule)
------------------------------------
- x or z on an *active-low* 1-bit line reads 1 (deasserted): a floating PCI control line is
  held high by its pull-up, and an unknown one must not invent bus activity. Active-low means
  the name is a PCI control signal (FRAME, IRDY, TRDY, STOP, DEVSEL, REQ, GNT, PERR, SERR,
  INTA, RST, REQ64, ACK64 under any usual spelling) or carries an active-low mark
  (``#``, ``_n``, ``_l``, ``/`` prefix).
- x or z anywhere else (other lines, every bit of a vector) reads 0.
- A signal with no value before its first change reads as unknown until then.
- ``metadata["unknown_counts"][channel] = {"x": n, "z": m}`` counts the value changes that
  held an x / a z (changes of a vector with any such bit), for every channel that had any.

Writing
-------
Scalars only (vector ``X`` of width n -> ``X0``..``X{n-1}``): sigrok-cli 0.7.2's VCD import
drops vectors. The timescale is the coarsest that represents every sample time exactly
(1 ps otherwise), values are written at each change, and a final timestamp one sample after
the last closes the capture so its length survives.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import mmap
import os
import re
import sys
import shutil
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.meta import MAX_ABS_START_PS, MAX_SAMPLES, MAX_VECTOR_BITS, OwnMeta, parse_own_meta
from pcitrace.capture.model import Capture, ChannelInfo, Chunk, TimeBase
from pcitrace.errors import PcitraceError

PCITRACE_COMMENT = "pcitrace"
SAMPLE_CLOCK_VAR = "__pcitrace_sample"   # marks non-uniform state samples in written VCDs

_UNIT_PS = {"s": 10**12, "ms": 10**9, "us": 10**6, "ns": 10**3, "ps": 1, "fs": 10**-3}

# 1-bit values as pywellen reports them -> code: 0, 1, 2 = x, 3 = z.
_BIT_CODE = {0: 0, 1: 1, "0": 0, "1": 1, "x": 2, "X": 2, "z": 3, "Z": 3, "u": 2, "U": 2,
             "w": 2, "W": 2, "-": 2, "h": 1, "H": 1, "l": 0, "L": 0}

_LOW_MARK = re.compile(r"(^[/!~])|(#$)|(_[nNlLbB]$)|(#\s*[\[(]\d+[\])]$)")


def is_active_low(name: str) -> bool:
    """Whether a 1-bit channel name denotes an active-low line (see the module rule)."""
    from pcitrace.capture.profile import VECTOR_SIGNALS, _classify, _split_prefix
    base = _split_prefix(name)[1]
    canon, _, rng = _classify(base)
    if canon is not None and canon.endswith("_n") and canon not in VECTOR_SIGNALS:
        return True
    return bool(_LOW_MARK.search(base.strip()))


# -- reading -------------------------------------------------------------------------------

@contextlib.contextmanager
def _plain_vcd(path: str) -> Iterator[str]:
    """The path of an uncompressed copy (gzip'd input is inflated to a temporary file)."""
    if not path.lower().endswith(".gz"):
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="pcitrace-", suffix=".vcd")
    try:
        with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
            shutil.copyfileobj(src, out, 4 << 20)
    except (OSError, EOFError, zlib.error) as exc:
        os.unlink(tmp)
        raise PcitraceError(f"cannot decompress the gzip'd VCD ({exc})", path=path,
                            where="gzip stream",
                            fix="the file is truncated or not gzip; re-copy it or gunzip it "
                                "and open the .vcd") from None
    try:
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _header_text(path: str, limit: int = 64 << 20) -> tuple[str, int]:
    """The declaration section up to $enddefinitions, and the byte offset after it."""
    with open(path, "rb") as f:
        buf = b""
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            buf += block
            i = buf.find(b"$enddefinitions")
            if i >= 0:
                j = buf.find(b"$end", i + len(b"$enddefinitions"))
                if j >= 0:
                    return buf[:j + 4].decode("utf-8", "replace"), j + 4
            if len(buf) > limit:
                break
    raise PcitraceError("no $enddefinitions in the header", path=path, where="VCD header",
                        fix="the file is truncated or not a VCD")


class _End(NamedTuple):
    """Where the dump ends: its last ``#time`` and, for a dump cut inside a line, where."""

    tick: int | None         # the last complete timestamp (timescale ticks)
    cut: int | None          # byte offset of a cut last line (None: the file ends cleanly)
    stops: str | None        # the cut, in words


def _dump_end(path: str, body_start: int) -> _End:
    """The last ``#time`` of the file, and whether its last line was cut.

    A last line without a newline that is not a whole timestamp (or one before the previous
    timestamp, as ``#12`` cut from ``#1234``) nor a ``$`` keyword was cut short: it is left out,
    and ``stops`` says where the data stops.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start = max(body_start, size - (64 << 10))
        f.seek(start)
        tail = f.read()
    head, _, last = tail.rpartition(b"\n") if not tail.endswith(b"\n") else (tail, b"", b"")
    found = re.findall(rb"(?:^|\s)#(\d+)", head)
    tick = int(found[-1]) if found else None
    partial = last.strip()
    if not partial or re.fullmatch(rb"\$\w+|\$end", partial):
        return _End(tick, None, None)
    m = re.fullmatch(rb"#(\d+)", partial)
    if m and (tick is None or int(m.group(1)) >= tick):
        return _End(int(m.group(1)), None, f"the VCD ends without a newline after #{m.group(1).decode()} "
                                           f"(byte {size}): it may have been cut there")
    cut = size - len(last)
    after = f"after timestamp #{tick}" if tick is not None else "before the first timestamp"
    return _End(tick, cut, f"the VCD ends in the middle of a line at byte {size} "
                           f"({partial[:40].decode('utf-8', 'replace')!r}); read up to byte {cut}, {after}")


@contextlib.contextmanager
def _cut_at(path: str, cut: int | None) -> Iterator[str]:
    """``path``, or a temporary copy of its first ``cut`` bytes."""
    if cut is None:
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="pcitrace-", suffix=".vcd")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            left = cut
            while left:
                block = src.read(min(left, 4 << 20))
                if not block:
                    break
                out.write(block)
                left -= len(block)
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _end_ps(tick: int | None, tick_ps: float, path) -> int | None:
    """The last timestamp in ps; raises when it is past what int64 picoseconds hold."""
    if tick is None:
        return None
    ps = tick * int(tick_ps) if float(tick_ps).is_integer() else int(round(tick * tick_ps))
    if ps > MAX_ABS_START_PS:
        raise PcitraceError(f"timestamp #{tick} is {ps} ps, past the {MAX_ABS_START_PS} ps pcitrace "
                            "holds", path=path, where=f"#{tick}",
                            fix="the VCD is corrupt, or its timescale is wrong; regenerate it")
    return ps


# What pywellen may take for the value changes of vectors wider than pcitrace keeps (64 bits).
MAX_WIDE_BYTES = 512 << 20


def _check_widths(header: str, plain: str, body_start: int, path) -> None:
    """Raises when a $var declares more bits than pcitrace reads, or when vectors wider than
    64 bits change often enough that pywellen, holding every change at its full width (2 bits
    a bit with x/z), would pass MAX_WIDE_BYTES: before it allocates any of it."""
    widths = [(m.group(2), int(m.group(1)))
              for m in re.finditer(r"\$var\s+\S+\s+(\d+)\s+\S+\s+(\S+)", header)]
    for name, width in widths:
        if width > MAX_VECTOR_BITS:
            raise PcitraceError(f"$var {name} declares {width} bits, more than the "
                                f"{MAX_VECTOR_BITS} pcitrace reads", path=path, where=f"$var {name}",
                                fix="leave that signal out of the dump, or correct its width")
    name, width = max(widths, key=lambda nw: nw[1], default=("", 0))
    if width <= 64:
        return
    changes = _vector_changes(plain, body_start, path)
    if changes * width // 4 > MAX_WIDE_BYTES:
        raise PcitraceError(f"$var {name} declares {width} bits and the dump holds {changes} vector "
                            f"value changes: up to {changes * width // 4 >> 20} MB, more than the "
                            f"{MAX_WIDE_BYTES >> 20} MB pcitrace reads vectors wider than 64 bits into",
                            path=path, where=f"$var {name}",
                            fix="leave the wide signals out of the dump (pcitrace keeps 64 bits of a vector)")


def _vector_changes(plain: str, body_start: int, path) -> int:
    """How many lines of the body are vector value changes (start with b or B)."""
    def count(buf: np.ndarray, body_start: int) -> int:
        first = buf[np.flatnonzero(buf[body_start:-1] == 10) + body_start + 1]
        return int(np.count_nonzero((first == 98) | (first == 66)))
    return _scan_body(plain, body_start, count, 0, path)


def _scan_body(plain: str, body_start: int, scan, empty, path):
    """``scan(bytes as uint8, body_start)`` over the file mapped read-only; ``empty`` for a file
    with no body."""
    try:
        with open(plain, "rb") as f:
            if os.fstat(f.fileno()).st_size <= body_start:
                return empty
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:          # ENOMEM under an address-space limit, a file system without mmap
        raise PcitraceError(f"cannot map the VCD into memory ({exc.strerror or exc})", path=path,
                            where="value changes",
                            fix="free memory or raise the address-space limit (ulimit -v)") from None
    with mm:
        buf = np.frombuffer(mm, dtype=np.uint8)
        try:
            return scan(buf, body_start)
        finally:
            del buf


def _check_names(names: list[str], path) -> None:
    """Raises on a channel name holding a control character: pywellen reads a $var that lacks
    its $end up to the next one, so its name runs over the following lines."""
    for nm in names:
        if not nm.isprintable():
            what = "a line break" if "\n" in nm else "a control character"
            first = repr(nm.splitlines()[0][:40])
            raise PcitraceError(f"the name of $var {first} holds {what} ({nm[:60]!r})", path=path,
                                where=f"$var {first}",
                                fix="end each $var declaration with $end; regenerate the VCD")


def _one_line(text: str) -> str:
    """A message on one line (pywellen's run over several)."""
    return " ".join(text.split())


def _pcitrace_comment(header: str, path) -> OwnMeta | None:
    """pcitrace's own metadata from the header's ``$comment pcitrace {...} $end``, typed and
    ranged (None: no such comment, a plain dump)."""
    for m in re.finditer(r"\$comment\s+(.*?)\s*\$end", header, re.S):
        body = m.group(1)
        if body.startswith(PCITRACE_COMMENT + " "):
            try:
                obj = json.loads(body[len(PCITRACE_COMMENT) + 1:])
            except ValueError as exc:
                raise PcitraceError(f"its JSON does not parse ({_one_line(str(exc))})", path=path,
                                    where="$comment pcitrace",
                                    fix="delete the comment or re-export the capture with pcitrace") from None
            return parse_own_meta(obj, path, "$comment pcitrace")
    return None


def _body_ids(plain: str, body_start: int, path) -> set[bytes]:
    """Distinct identifier codes used by value changes after the header (vectorised scan).

    Assumes one change per line, as VCD writers emit them; a change sharing a line with
    something else is still parsed by pywellen, just not checked here.
    """
    return _scan_body(plain, body_start, _scan_ids, set(), path)


_SCALAR_FIRST = np.zeros(256, dtype=bool)
_SCALAR_FIRST[np.frombuffer(b"01xXzZuUwWhHlL-", dtype=np.uint8)] = True
_VECTOR_FIRST = np.zeros(256, dtype=bool)
_VECTOR_FIRST[np.frombuffer(b"bBrR", dtype=np.uint8)] = True


def _scan_ids(buf: np.ndarray, body_start: int) -> set[bytes]:
    size = len(buf)
    nl = np.flatnonzero(buf[body_start:] == 10)
    nl += body_start
    starts = np.empty(len(nl) + 1, dtype=np.int64)
    starts[0] = body_start
    starts[1:] = nl + 1
    ends = np.empty(len(nl) + 1, dtype=np.int64)
    ends[:-1] = nl
    ends[-1] = size
    del nl
    if starts[-1] >= size:
        starts, ends = starts[:-1], ends[:-1]
    first = buf[np.minimum(starts, size - 1)]
    sc = _SCALAR_FIRST[first]
    vc = _VECTOR_FIRST[first]
    del first
    id_start = starts[sc] + 1
    id_end = ends[sc]
    if vc.any():
        vs, ve = starts[vc], ends[vc]
        # identifier = after the last blank; ids are short, look back a few bytes at a time
        sp = np.full(len(ve), -1, dtype=np.int64)
        e_trim = ve.copy()
        cr = buf[np.maximum(e_trim - 1, 0)] == 13
        e_trim -= cr
        for k in range(1, 65):
            todo = sp < 0
            if not todo.any():
                break
            pos = e_trim[todo] - 1 - k
            ok = pos > vs[todo]
            c = buf[np.maximum(pos, 0)]
            hit = ok & ((c == 32) | (c == 9))
            idx = np.flatnonzero(todo)
            sp[idx[hit]] = pos[hit]
            sp[idx[~ok]] = vs[todo][~ok]   # no blank: the whole line (reported as is)
        id_start = np.concatenate((id_start, sp + 1))
        id_end = np.concatenate((id_end, e_trim))
    # trailing CR / blanks on scalar lines
    for _ in range(3):
        last = buf[np.maximum(id_end - 1, 0)]
        trim = ((last == 13) | (last == 32) | (last == 9)) & (id_end > id_start)
        if not trim.any():
            break
        id_end = id_end - trim
    out: set[bytes] = set()
    lens = id_end - id_start
    for L in np.unique(lens).tolist():
        sel = id_start[lens == L]
        if L <= 0:
            out.add(b"")
            continue
        if L > 8:
            for s in np.unique(sel).tolist()[:100000]:
                out.add(bytes(buf[s:s + L]))
            continue
        key = np.zeros(len(sel), dtype=np.uint64)
        for j in range(L):
            key |= buf[sel + j].astype(np.uint64) << np.uint64(8 * j)
        for u in np.unique(key).tolist():
            out.add(int(u).to_bytes(8, "little")[:L])
    return out


class VcdCapture(Capture):
    """A VCD capture held as per-channel change lists.

    ``change_times(name)`` gives (ps, values) with the initial value first. The sample grid
    of an event-timed capture (every distinct change time) and the per-channel sample
    indices are built on first use, since the clocked view needs neither.
    """

    def __init__(self, channels, times: dict, values: dict, metadata, path,
                 unknown_masks: dict | None = None, *,
                 grid_rate: float | None = None, mode: str = "timing", start_ps: int = 0,
                 num_samples: int | None = None, sample_times: np.ndarray | None = None):
        self._times = times      # name -> int64 ps of each change (first = initial value)
        self._values = values    # name -> uint8 / uint64
        self._unknown = unknown_masks or {}   # name -> uint8 per change (1 x, 2 z), if any
        self._idx: dict[str, np.ndarray] = {}
        self._grid_rate = grid_rate
        self._mode = mode
        self._start_ps = start_ps
        self._sample_times = sample_times
        self._num = num_samples
        self._tb = None
        super().__init__(channels, None, -1, self._source, metadata, path)

    # Capture.__init__ assigns these; the event grid behind them is computed on first use.
    @property
    def timebase(self) -> TimeBase:
        if self._tb is None:
            if self._grid_rate is not None:
                self._tb = (TimeBase.state(clock_hz=self._grid_rate, start_ps=self._start_ps)
                            if self._mode == "state"
                            else TimeBase.timing(self._grid_rate, start_ps=self._start_ps))
            else:
                grid = self._grid()
                self._tb = (TimeBase.state(timestamps_ps=grid) if self._mode == "state"
                            else TimeBase.events(grid))
        return self._tb

    @timebase.setter
    def timebase(self, value):
        if value is not None:
            self._tb = value

    @property
    def num_samples(self) -> int:
        if self._num is None:
            self._num = len(self._grid())
        return self._num

    @num_samples.setter
    def num_samples(self, value):
        if value is not None and value >= 0:
            self._num = int(value)

    def _grid(self) -> np.ndarray:
        if self._sample_times is None:
            allt = np.concatenate(list(self._times.values())) if self._times else \
                np.zeros(1, np.int64)
            allt.sort(kind="stable")   # merges the per-signal sorted runs
            keep = np.empty(len(allt), dtype=bool)
            keep[:1] = True
            np.not_equal(allt[1:], allt[:-1], out=keep[1:])
            self._sample_times = allt[keep]
        return self._sample_times

    def changes(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(sample indices, values) where ``name`` takes a new value; starts at sample 0."""
        self.channel(name)
        idx = self._idx.get(name)
        if idx is None:
            t = self._times[name]
            if self._grid_rate is None:
                idx = np.searchsorted(self._grid(), t, side="right") - 1
            else:
                idx = np.rint((t - self._start_ps) * (self._grid_rate / 1e12)).astype(np.int64)
            np.clip(idx, 0, max(0, self.num_samples - 1), out=idx)
            idx[0] = 0
            self._idx[name] = idx
        return idx, self._values[name]

    def unknown_mask(self, name: str) -> np.ndarray | None:
        """Per change of ``name`` (as in change_times): 1 held an x, 2 a z, 3 both; 0 known.

        None when the channel never held an unknown value."""
        self.channel(name)
        return self._unknown.get(name)

    def change_times(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(ps times, values) of ``name``'s changes; the first entry is its initial value."""
        self.channel(name)
        return self._times[name], self._values[name]

    def _source(self, names: Sequence[str], start: int, stop: int, chunk: int) -> Iterator[Chunk]:
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            want = np.arange(s, e, dtype=np.int64)
            data = {}
            for nm in names:
                idx, vals = self.changes(nm)
                data[nm] = vals[np.searchsorted(idx, want, side="right") - 1]
            yield Chunk(s, data)

    @property
    def duration_ps(self) -> int:
        """From the first change to the closing timestamp (or the last change)."""
        if self._grid_rate is not None:
            return super().duration_ps
        ends = [int(t[-1]) for t in self._times.values() if len(t)]
        starts = [int(t[0]) for t in self._times.values() if len(t)]
        if not ends:
            return 0
        end = max(max(ends), int(self.metadata.get("end_ps", 0)))
        return end - min(starts)


def _channel_names(vars_, strip_scope: str | None) -> list[str]:
    names = [v.name for v in vars_]
    if strip_scope is not None:
        out = []
        for v in vars_:
            fn = v.full_name
            out.append(fn[len(strip_scope) + 1:] if fn.startswith(strip_scope + ".") else fn)
        return out
    if len(set(names)) == len(names):
        return names
    # Same leaf name in several scopes: full names, minus a scope common to all.
    full = [v.full_name for v in vars_]
    tops = {f.split(".", 1)[0] for f in full}
    if len(tops) == 1 and all("." in f for f in full):
        full = [f.split(".", 1)[1] for f in full]
    return full


def _convert_bits(vals: np.ndarray, name: str, active_low: bool, path
                  ) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    try:
        codes = vals.astype(np.uint8)          # all 0/1 ints: one C loop
        if len(codes) and codes.max() > 1:
            raise ValueError("not a bit")
    except (ValueError, TypeError, OverflowError):
        codes = None
    try:
        if codes is None:
            codes = np.fromiter(map(_BIT_CODE.__getitem__, vals), dtype=np.uint8,
                                count=len(vals))
    except KeyError as exc:
        raise PcitraceError(f"value {exc.args[0]!r} of 1-bit signal {name!r} is not 0/1/x/z",
                            path=path, where=f"signal {name}",
                            fix="the VCD is corrupt; regenerate it") from None
    nx = int(np.count_nonzero(codes == 2))
    nz = int(np.count_nonzero(codes == 3))
    unknown = None
    if nx or nz:
        unknown = np.where(codes >= 2, codes - 1, 0).astype(np.uint8)   # 1 = x, 2 = z
        codes[unknown > 0] = 1 if active_low else 0
    return codes, nx, nz, unknown


_VEC_TRANS = str.maketrans({"x": "0", "X": "0", "z": "0", "Z": "0", "u": "0", "U": "0",
                            "w": "0", "W": "0", "-": "0", "h": "1", "H": "1", "l": "0",
                            "L": "0"})
_U64 = (1 << 64) - 1


def _parse_vector_str(s: str) -> tuple[int, bool, bool]:
    t = s.strip().translate(_VEC_TRANS)
    try:
        v = int(t, 2) if t else 0
    except ValueError:
        return -1, False, False
    low = s.lower()
    return v & _U64, any(c in low for c in "xuw-"), "z" in low


def _convert_vector(vals: np.ndarray, name: str, path
                    ) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    strs = Counter(filter(str.__instancecheck__, vals))
    nx = nz = 0
    unknown = None
    if strs:
        table = {}
        flagged = {}
        for s, cnt in strs.items():
            v, hx, hz = _parse_vector_str(s)
            if v < 0:
                raise PcitraceError(f"value {s!r} of vector {name!r} is not binary",
                                    path=path, where=f"signal {name}",
                                    fix="the VCD is corrupt; regenerate it")
            table[s] = v
            nx += cnt * hx
            nz += cnt * hz
            if hx or hz:
                flagged[s] = (1 if hx else 0) | (2 if hz else 0)
        if flagged:
            unknown = np.fromiter(map(flagged.get, vals, repeat(0)), dtype=np.uint8,
                                  count=len(vals))
        # ints map to themselves (default), strings to their value under the rule
        vals = np.fromiter(map(table.get, vals, vals), dtype=object, count=len(vals))
    try:
        return vals.astype(np.uint64), nx, nz, unknown
    except OverflowError:   # wider than 64 bits: keep the low 64
        return np.array([v & _U64 for v in vals.tolist()], dtype=np.uint64), nx, nz, unknown


def _wellen_error(path, exc, where):
    said = _one_line(str(exc)) or type(exc).__name__
    return PcitraceError(f"not a readable VCD ({said})", path=path, where=where,
                         fix="check that the file is a complete VCD; regenerate it if it was cut short")


_PAIR = np.dtype([("t", "<i8"), ("v", "O")])


def _dense_ids(declared: set[str]) -> bool:
    """Whether the ids are the usual sequence '!', '"', ... (at most 94 of them).

    wellen indexes such ids arithmetically; a change naming any other id then falls outside
    its table and pywellen raises, so the file needs no separate identifier scan.
    """
    return len(declared) <= 94 and declared == {chr(33 + i) for i in range(len(declared))}


def _find_undeclared(path: str, body_start: int, declared: set[str]) -> tuple[int, str, str] | None:
    """(line, text, id) of the first change naming an undeclared id (error path, slow)."""
    with open(path, "rb") as f:
        lineno = f.read(body_start).count(b"\n") + 1
        for raw in f:
            s = raw.strip().decode("utf-8", "replace")
            if s:
                c = s[0]
                ident = None
                if c in "01xXzZuUwWhHlL-":
                    ident = s[1:].strip()
                elif c in "bBrR" and len(s.split()) > 1:
                    ident = s.split()[-1]
                if ident is not None and ident not in declared:
                    return lineno, s, ident
            lineno += raw.count(b"\n")
    return None


@contextlib.contextmanager
def _rust_panics_quiet(path: str):
    """Keep pywellen's own output off the terminal's data stream; its problems become errors.

    fd 1 and fd 2 go to temporary files while pywellen parses. A Rust panic's backtrace stays
    there (the error says it in a line). pywellen prints "time decreased ... Skipping!" to
    stdout and drops those changes: that is a corrupt dump, raised here, never a silent gap in
    the data (and never text in the middle of a JSON or CSV written to stdout). Anything else
    it printed is passed on to stderr.
    """
    try:
        sys.stdout.flush()
        saved = [os.dup(1), os.dup(2)]
    except (OSError, ValueError):
        yield
        return
    failed = False
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            yield
        except BaseException:
            failed = True
            raise
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        out.seek(0)
        err.seek(0)
        said = out.read() + err.read()
    if failed:
        return
    m = re.search(rb"time decreased[^\n]*", said, re.I)
    if m:
        raise PcitraceError("time goes backwards in the value changes", path=path,
                            where=m.group(0).decode("utf-8", "replace").strip()[:120],
                            fix="the VCD is corrupt; timestamps must increase")
    if said:
        os.write(2, said)


def read_vcd(path) -> Capture:
    """Open a .vcd or .vcd.gz file (see the module doc for the x/z rule and time bases)."""
    path = os.fspath(path)
    with _plain_vcd(path) as plain:
        header, body_start = _header_text(plain)
        own = _pcitrace_comment(header, path)
        _check_widths(header, plain, body_start, path)
        end = _dump_end(plain, body_start)
        with _cut_at(plain, end.cut) as whole:
            declared = set(re.findall(r"\$var\s+\S+\s+\d+\s+(\S+)\s+", header))
            _check_identifiers(whole, body_start, declared, path)
            wave = _load_wave(whole, path, lambda: _undeclared_error(whole, body_start, declared, path))
    end_ps = _end_ps(end.tick, wave.tick_ps, path)
    tick_ps, usable, keys, raw = wave.tick_ps, wave.usable, wave.keys, wave.raw
    names = _channel_names(usable, PCITRACE_COMMENT if own is not None else None)
    _check_names(names, path)
    nchanges = sum(len(t) for t, _ in raw.values())
    own = own or OwnMeta()
    grid = _vcd_grid(own, names, keys, raw, tick_ps, end_ps, path)
    times, values, masks, unknown, chans = _vcd_channels(names, usable, keys, raw, tick_ps,
                                                         own.sample_clock, path)
    raw.clear()
    # every channel gets an entry at the capture's first time: unknown until its first change
    first_t = grid.t0 if grid.t0 is not None else min((int(t[0]) for t in times.values() if len(t)),
                                                      default=0)
    if grid.sample_times is not None and len(grid.sample_times):
        first_t = int(grid.sample_times[0])
    _start_unknown(times, values, masks, unknown, first_t)

    metadata = {k: v for k, v in own.metadata.items() if k not in _READER_FACTS}
    metadata.update({"format": "vcd", "timescale_ps": tick_ps, "changes": int(nchanges),
                     "unknown_counts": unknown})
    if end_ps is not None and end_ps > max((int(t[-1]) for t in times.values() if len(t)), default=end_ps):
        metadata["end_ps"] = end_ps     # a closing timestamp after the last change
    if wave.skipped:
        metadata["skipped_vars"] = wave.skipped
    stops = [x for x in (end.stops, grid.stops) if x]
    if stops:
        metadata["warnings"] = ["; ".join(stops)]      # shown by info, decode and report, as for .sr
    return VcdCapture(chans, times, values, metadata, path, masks, grid_rate=grid.rate, mode=grid.mode,
                      start_ps=grid.start_ps, num_samples=grid.num_samples,
                      sample_times=grid.sample_times)


# What the reader works out itself; a pcitrace comment's metadata does not replace it.
_READER_FACTS = ("format", "timescale_ps", "changes", "unknown_counts", "skipped_vars", "warnings")


def _check_identifiers(plain: str, body_start: int, declared: set[str], path) -> None:
    """Raises when a value change names an identifier no $var declares (pywellen would drop it)."""
    if _dense_ids(declared):
        return
    used = _body_ids(plain, body_start, path)
    if any(u.decode("utf-8", "replace") not in declared for u in used):
        raise _undeclared_error(plain, body_start, declared, path) or PcitraceError(
            "a value change names an undeclared identifier", path=path,
            where="value changes", fix="the VCD is corrupt; regenerate it")


def _undeclared_error(plain: str, body_start: int, declared: set[str], path) -> PcitraceError | None:
    """The error naming the first value change whose identifier no $var declares (None: none)."""
    bad = _find_undeclared(plain, body_start, declared)
    if bad is None:
        return None
    lineno, text, ident = bad
    return PcitraceError(f"value change {text!r} names identifier {ident!r}, which no "
                         "$var declares", path=path, where=f"line {lineno}",
                         fix="the VCD is corrupt; regenerate it or declare the signal "
                             "in the header")


class _Wave(NamedTuple):
    """The value changes pywellen read, per signal, not yet converted."""

    tick_ps: float                  # one timestamp unit in ps
    usable: list                    # the vars of bit signals (not real or string)
    keys: list[str]                 # each usable var's signal (aliased vars share one)
    raw: dict[str, tuple[np.ndarray, np.ndarray]]   # signal -> (ticks, values as Python objects)
    skipped: list[str]              # names of the real and string vars


def _load_wave(plain: str, path, undeclared) -> _Wave:
    """Every bit signal's value changes, through pywellen. ``undeclared()``: the error to
    raise when a signal cannot be read because of an undeclared identifier (else None)."""
    import pywellen

    gc_was = gc.isenabled()
    gc.disable()   # millions of small objects come and go below; none form cycles
    try:
        with _rust_panics_quiet(path):
            try:
                wave = pywellen.Waveform(plain)
                vars_ = list(wave.all_vars())
            except BaseException as exc:  # pywellen raises RuntimeError or pyo3 panics
                if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
                    raise
                raise _wellen_error(path, exc, "VCD header") from None
            ts = wave.timescale
            unit_ps = _UNIT_PS.get(str(ts.unit).strip()) if ts is not None else 1
            if unit_ps is None:
                raise PcitraceError(f"unsupported timescale unit {ts.unit!r}", path=path,
                                    where="$timescale", fix="use s, ms, us, ns, ps or fs")
            tick_ps = (ts.factor if ts is not None else 1) * unit_ps
            usable = [v for v in vars_ if not (v.is_real or v.is_string)]
            skipped = [v.full_name for v in vars_ if v.is_real or v.is_string]
            # Aliased vars (one id code, several names) share one signal.
            raw: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            keys = []
            for v in usable:
                key = str(v.signal_ref)
                keys.append(key)
                if key in raw:
                    continue
                try:
                    sig = v.signal
                    # (time, value) pairs straight into numpy: values stay Python
                    # objects (ints, or strings holding x/z) until the rule maps them
                    pairs = np.fromiter(sig, dtype=_PAIR, count=len(sig))
                except OverflowError:       # the time field: past int64
                    raise PcitraceError(f"a timestamp of signal {v.full_name!r} is past "
                                        f"{2**63 - 1}", path=path, where=f"signal {v.full_name}",
                                        fix="the VCD is corrupt; timestamps must fit in 63 bits") from None
                except BaseException as exc:
                    if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
                        raise
                    raise (undeclared() or _wellen_error(path, exc, "value changes")) from None
                raw[key] = (pairs["t"].copy(), pairs["v"])
                del pairs
    finally:
        if gc_was:
            gc.enable()
    return _Wave(tick_ps, usable, keys, raw, skipped)


def _ticks_to_ps(t: np.ndarray, tick_ps: float) -> np.ndarray:
    """VCD timestamps in ps (fs timescales round to whole ps)."""
    if tick_ps == 1:
        return t
    if float(tick_ps).is_integer():
        return t * int(tick_ps)
    return np.rint(t * tick_ps).astype(np.int64)


class _Grid(NamedTuple):
    """The sample grid a VCD pcitrace wrote declares (none: a plain dump, timing mode)."""

    rate: float | None                  # samples per second of a uniform grid
    mode: str                           # "timing" or "state"
    start_ps: int
    sample_times: np.ndarray | None     # non-uniform state samples (the sample-clock var)
    t0: int | None                      # the grid's first time
    num_samples: int | None             # of a uniform grid: declared, or as far as the dump goes
    stops: str | None                   # the dump stops before the declared last sample: where


def _vcd_grid(own: OwnMeta, names: list[str], keys: list[str], raw: dict, tick_ps: float,
              end_ps: int | None, path) -> _Grid:
    """The grid pcitrace's comment declares. A dump that stops before its declared last sample
    keeps the samples up to where it stops (``stops`` says where)."""
    rate = own.samplerate_hz
    if rate is None and own.mode == "state" and not own.sample_clock:
        rate = own.clock_hz
    sample_times = None
    if own.sample_clock:
        for nm, k in zip(names, keys):
            if nm == SAMPLE_CLOCK_VAR:
                sample_times = np.unique(_ticks_to_ps(raw[k][0], tick_ps))
    if rate is None:
        return _Grid(None, own.mode, own.start_ps, sample_times, None, None, None)
    num, stops = _grid_samples(own.num_samples, own.start_ps, rate, end_ps, path)
    return _Grid(rate, own.mode, own.start_ps, sample_times, own.start_ps, num, stops)


def _grid_samples(declared: int | None, start_ps: int, rate: float, end_ps: int | None, path
                  ) -> tuple[int, str | None]:
    """(samples, where the dump stops short or None) of a uniform grid: the declared count, or
    the samples up to the dump's last time when it stops more than a sample before the last one
    (a VCD pcitrace writes closes one sample after its last) or declares none."""
    if end_ps is None:
        return (declared if declared is not None else 1), None
    # the samples before the last timestamp (its own changes may be cut off)
    covered = max(1, int(np.ceil((end_ps - start_ps) * rate / 1e12 - 1e-6)))
    if declared is not None and covered >= declared - 1:
        return declared, None
    if covered > MAX_SAMPLES:
        raise PcitraceError(f"its grid of {rate:g} Hz from {start_ps} ps to {end_ps} ps holds "
                            f"{covered} samples, more than {MAX_SAMPLES}", path=path,
                            where="$comment pcitrace",
                            fix="correct samplerate_hz / clock_hz, or re-export the capture with pcitrace")
    if declared is None:
        return covered, None
    return covered, (f"the dump stops at {end_ps} ps, sample {covered - 1} of the {declared} its "
                     "pcitrace comment declares")


def _vcd_channels(names: list[str], usable: list, keys: list[str], raw: dict, tick_ps: float,
                  sample_clock: bool, path):
    """Per channel: change times (ps), values by the x/z rule, x/z masks, x/z counts; and the
    channel list. Vars aliasing one signal with the same width and polarity convert once."""
    times: dict[str, np.ndarray] = {}
    values: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}      # per change: 1 held an x, 2 a z, 3 both
    unknown: dict[str, dict[str, int]] = {}
    done: dict[tuple, tuple] = {}
    chans = []
    for nm, v, key in zip(names, usable, keys):
        if nm == SAMPLE_CLOCK_VAR and sample_clock:
            continue
        w = max(1, int(v.bitwidth or 1))
        low = w == 1 and is_active_low(nm)
        ck = (key, w, low)
        if ck not in done:
            t, vals = raw[key]
            t = _ticks_to_ps(t, tick_ps)
            if len(t) > 1 and np.any(t[1:] < t[:-1]):
                raise PcitraceError(f"time goes backwards in signal {nm!r}", path=path,
                                    where=f"signal {nm}",
                                    fix="the VCD is corrupt; timestamps must increase")
            if w == 1:
                conv, nx, nz, unk = _convert_bits(vals, nm, low, path)
            else:
                conv, nx, nz, unk = _convert_vector(vals, nm, path)
            done[ck] = (t, conv, nx, nz, unk)
        t, conv, nx, nz, unk = done[ck]
        times[nm], values[nm] = t, conv
        if unk is not None:
            masks[nm] = unk
        if nx or nz:
            unknown[nm] = {"x": nx, "z": nz}
        chans.append(ChannelInfo(nm, w))
    return times, values, masks, unknown, chans


def _start_unknown(times: dict, values: dict, masks: dict, unknown: dict, first_t: int) -> None:
    """A channel whose first change comes after first_t gets one there: an x (its idle level:
    1 for an active-low line, else 0), counted in ``unknown`` and marked in ``masks``."""
    for nm in list(times):
        t, conv = times[nm], values[nm]
        if len(t) == 0 or t[0] > first_t:
            low = conv.dtype == np.uint8 and is_active_low(nm)
            times[nm] = np.concatenate(([first_t], t)).astype(np.int64)
            values[nm] = np.concatenate((np.array([1 if low else 0], dtype=conv.dtype), conv))
            m = masks.get(nm)
            masks[nm] = np.concatenate(([1], m if m is not None else np.zeros(len(t), np.uint8))
                                       ).astype(np.uint8)
            u = unknown.setdefault(nm, {"x": 0, "z": 0})
            u["x"] += 1


# -- writing -------------------------------------------------------------------------------

def _ident(i: int) -> str:
    chars = []
    i += 1
    while i:
        i -= 1
        chars.append(chr(33 + i % 94))
        i //= 94
    return "".join(chars)


_TIMESCALES = [(10**15, "1 s"), (10**14, "100 ms"), (10**13, "10 ms"), (10**12, "1 ms"),
               (10**11, "100 us"), (10**10, "10 us"), (10**9, "1 us"), (10**8, "100 ns"),
               (10**7, "10 ns"), (10**6, "1 ns"), (10**5, "100 ps"), (10**4, "10 ps"),
               (10**3, "1 ps")]


def _choose_timescale(tb: TimeBase, start_ps: int) -> tuple[int, str]:
    """(timescale in fs, text): the coarsest unit giving exact sample times (>= 1 ps)."""
    if tb.timestamps_ps is not None:
        ts = np.asarray(tb.timestamps_ps, dtype=np.int64)
        for fs, text in _TIMESCALES:
            if fs < 1000:
                break
            if len(ts) == 0 or not np.any(ts % (fs // 1000)):
                return fs, text
        return 1000, "1 ps"
    period_fs = 1e15 / tb.rate_hz
    for fs, text in _TIMESCALES:
        k = period_fs / fs
        if abs(k - round(k)) < 1e-9 * max(1.0, k) and round(k) >= 1 and start_ps * 1000 % fs == 0:
            return fs, text
    return 1000, "1 ps"


def write_vcd(capture: Capture, path, *, chunk_samples: int | None = None) -> None:
    """Write a scalar-only VCD (atomic). Streams ``chunk_samples`` at a time (default: about
    16 M line-samples per chunk, so wide captures stay within a few tens of MB)."""
    from pcitrace.capture.sr import bit_channels

    lines = bit_channels(capture)
    tb = capture.timebase
    start_ps = int(tb.start_ps)
    sample_clock = tb.mode == "state" and tb.timestamps_ps is not None
    ts_fs, ts_text = _choose_timescale(tb, start_ps)
    ts_ps = ts_fs / 1000
    extra = _vcd_comment(capture)
    for nm, _, _ in lines:
        if any(c.isspace() for c in nm) or not nm:
            raise PcitraceError(f"channel name {nm!r} contains white space, which VCD cannot "
                                "hold", path=capture.path,
                                fix="rename the channel (e.g. with a profile) before writing VCD")
    out_vars = [nm for nm, _, _ in lines] + ([SAMPLE_CLOCK_VAR] if sample_clock else [])
    idents = [_ident(i) for i in range(len(out_vars))]
    head = _vcd_header(out_vars, idents, extra, ts_text)
    nvar = len(out_vars)
    tokens = np.array([f"{b}{ident}" for b in "01" for ident in idents], dtype=object)
    sources = list(dict.fromkeys(src for _, src, _ in lines))

    def tick_of(sample_idx: np.ndarray) -> np.ndarray:
        t = tb.times_at(sample_idx)
        return np.rint(t / ts_ps).astype(np.int64) if ts_ps != 1 else t

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(head) + "\n")
        prev = None
        last_tick = None
        if chunk_samples is None:
            chunk_samples = max(4096, (16 << 20) // max(1, nvar))
        for ch in capture.iter_chunks(sources, chunk_samples=chunk_samples):
            cols = _line_columns(ch, lines, sample_clock)
            events = _value_changes(cols, prev, ch.start)
            prev = cols[:, -1].copy()
            if events is None:
                continue
            samp, var, first = events
            ticks = tick_of(samp[first] + ch.start)
            if last_tick is not None and ticks[0] <= last_tick:
                raise PcitraceError("two samples fall on the same VCD time", path=capture.path,
                                    fix="the capture's timestamps are not increasing")
            last_tick = int(ticks[-1])
            f.write("\n".join(_change_text(tokens[cols[var, samp].astype(np.int64) * nvar + var],
                                           first, ticks)))
            f.write("\n")
        # closing timestamp one sample after the last, so the length survives
        if capture.num_samples:
            f.write(f"#{_closing_tick(tb, capture.num_samples, ts_ps, tick_of, last_tick)}\n")


def _vcd_comment(capture: Capture) -> dict:
    """What the pcitrace comment of a written VCD holds: mode, sample count and grid, vector
    widths, and the capture's metadata (when it is JSON)."""
    tb = capture.timebase
    uniform = tb.timestamps_ps is None
    extra = {"mode": tb.mode, "num_samples": capture.num_samples, "start_ps": int(tb.start_ps),
             "vectors": {c.name: c.width for c in capture.channels if c.width > 1}}
    if uniform and tb.mode == "timing":
        extra["samplerate_hz"] = tb.samplerate_hz
    elif uniform:
        extra["clock_hz"] = tb.clock_hz
    if tb.mode == "state" and not uniform:
        extra["sample_clock"] = True
    meta = {k: v for k, v in capture.metadata.items()
            if k not in ("format", "unknown_counts", "changes", "timescale_ps", "unitsize",
                         "sr_version", "chunk_members", "warnings")}
    try:
        json.dumps(meta)
        extra["metadata"] = meta
    except (TypeError, ValueError):
        pass
    return extra


def _vcd_header(names: list[str], idents: list[str], extra: dict, ts_text: str) -> list[str]:
    """The header's lines; scopes from dotted prefixes ("send.FRAME#" -> scope send, var FRAME#)."""
    head = ["$date", "\tpcitrace", "$end", "$version", "\tpcitrace", "$end",
            f"$comment {PCITRACE_COMMENT} {json.dumps(extra, sort_keys=True)} $end",
            f"$timescale {ts_text} $end", f"$scope module {PCITRACE_COMMENT} $end"]
    cur: list[str] = []
    for nm, ident in zip(names, idents):
        parts = nm.split(".")
        scope, leaf = parts[:-1], parts[-1]
        if any(not p for p in parts):
            scope, leaf = [], nm
        k = 0
        while k < min(len(cur), len(scope)) and cur[k] == scope[k]:
            k += 1
        head += ["$upscope $end"] * (len(cur) - k)
        head += [f"$scope module {s} $end" for s in scope[k:]]
        cur = scope
        head.append(f"$var wire 1 {ident} {leaf} $end")
    head += ["$upscope $end"] * len(cur)
    head += ["$upscope $end", "$enddefinitions $end"]
    return head


def _line_columns(ch: Chunk, lines, sample_clock: bool) -> np.ndarray:
    """One row of bits per written line (then the sample clock's toggling row) for a chunk."""
    n = ch.length
    nvar = len(lines) + (1 if sample_clock else 0)
    cols = np.empty((nvar, n), dtype=np.uint8)
    for k, (_, src, bit) in enumerate(lines):
        a = ch.data[src]
        cols[k] = (a >> a.dtype.type(bit)) & a.dtype.type(1) if bit else a & a.dtype.type(1)
    if sample_clock:
        cols[nvar - 1] = (np.arange(ch.start, ch.start + n) & 1).astype(np.uint8)
    return cols


def _value_changes(cols: np.ndarray, prev: np.ndarray | None, start: int):
    """The changes in time order (sample-major, variable-minor): (sample, var, first change of
    its sample); every line changes on the first sample (prev None). None when nothing changes."""
    nvar, n = cols.shape
    changed = np.empty((nvar, n), dtype=bool)
    changed[:, 0] = True if prev is None else cols[:, 0] != prev
    changed[:, 1:] = cols[:, 1:] != cols[:, :-1]
    samp, var = np.nonzero(changed.T)
    if len(samp) == 0:
        return None
    first = np.ones(len(samp), dtype=bool)
    first[1:] = samp[1:] != samp[:-1]
    return samp, var, first


def _change_text(tok: np.ndarray, first: np.ndarray, ticks: np.ndarray) -> list[str]:
    """The body's lines: "#tick" before the first change of each sample, then the changes."""
    out = np.empty(len(tok) + len(ticks), dtype=object)
    pos_ts = np.flatnonzero(first) + np.arange(len(ticks))
    mask = np.ones(len(out), dtype=bool)
    mask[pos_ts] = False
    out[pos_ts] = ["#" + s for s in map(str, ticks.tolist())]
    out[mask] = tok
    return out.tolist()


def _closing_tick(tb: TimeBase, n: int, ts_ps: float, tick_of, last_tick: int | None) -> int:
    """The closing timestamp: one sample after the last (after the last change at least)."""
    if tb.timestamps_ps is not None:
        ts = tb.timestamps_ps
        step = int(np.median(np.diff(ts))) if len(ts) > 1 else 1
        end_ps = int(ts[-1]) + max(1, step)
        end_tick = int(round(end_ps / ts_ps))
    else:
        end_tick = int(tick_of(np.array([n]))[0])
    if last_tick is not None and end_tick <= last_tick:
        end_tick = last_tick + 1
    return end_tick

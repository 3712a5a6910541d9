"""The capture model: the one place that knows about samples, clocks and time bases.

A Capture is a set of named channels (1-bit lines and vectors), a time base and metadata.
Its data is reached in chunks, so a capture larger than memory streams.

Value conventions (every reader, writer and decoder relies on them):
- A 1-bit channel's chunk array is ``uint8`` holding the *electrical level* 0 or 1
  (for an active-low PCI signal 0 means asserted). Polarity inversion from a probe is
  undone by the profile layer, not here.
- A vector channel's chunk array is ``uint64`` (bit i = line i), whatever its width.
- Unknown levels (VCD ``x``/``z``) never reach the arrays: the VCD reader maps them by its
  documented rule (pcitrace.capture.vcd) and counts them in
  ``metadata["unknown_counts"] = {channel: {"x": n, "z": m}}``; a clocked view adds
  ``metadata["unknown_at_clock"]`` (the same, for the sampled values only).

Time bases:
- timing mode: ``samplerate_hz``; sample i is at i / samplerate (plus ``start_ps``).
  An event-timed capture (a VCD) is timing mode with ``timestamps_ps`` instead: sample i is
  the state from ``timestamps_ps[i]`` until the next change.
- state mode: one sample per bus clock, either uniform (``clock_hz``) or with explicit
  per-sample timestamps (``timestamps_ps``, int64, e.g. the clocked view of a VCD).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

import numpy as np

from pcitrace.errors import PcitraceError

DEFAULT_CHUNK = 1 << 20

Mode = Literal["timing", "state"]


@dataclasses.dataclass(frozen=True)
class ChannelInfo:
    name: str
    width: int = 1

    @property
    def is_vector(self) -> bool:
        return self.width > 1


@dataclasses.dataclass(frozen=True)
class TimeBase:
    """Maps sample indices to picoseconds."""

    mode: Mode
    samplerate_hz: float | None = None   # timing mode
    clock_hz: float | None = None        # state mode with a uniform clock
    timestamps_ps: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    start_ps: int = 0

    def __post_init__(self):
        if self.mode == "timing" and not self.samplerate_hz and self.timestamps_ps is None:
            raise ValueError("a timing-mode time base needs samplerate_hz or timestamps_ps")
        if self.mode == "state" and not self.clock_hz and self.timestamps_ps is None:
            raise ValueError("a state-mode time base needs clock_hz or timestamps_ps")

    @classmethod
    def timing(cls, samplerate_hz: float, start_ps: int = 0) -> "TimeBase":
        return cls("timing", samplerate_hz=float(samplerate_hz), start_ps=start_ps)

    @classmethod
    def events(cls, timestamps_ps: np.ndarray) -> "TimeBase":
        """Timing mode sampled at change instants (VCD): sample i holds from timestamps[i]."""
        return cls("timing", timestamps_ps=np.asarray(timestamps_ps, dtype=np.int64))

    @property
    def event_timed(self) -> bool:
        return self.mode == "timing" and self.timestamps_ps is not None

    @classmethod
    def state(cls, clock_hz: float | None = None, timestamps_ps: np.ndarray | None = None,
              start_ps: int = 0) -> "TimeBase":
        if timestamps_ps is not None:
            timestamps_ps = np.asarray(timestamps_ps, dtype=np.int64)
        return cls("state", clock_hz=float(clock_hz) if clock_hz else None,
                   timestamps_ps=timestamps_ps, start_ps=start_ps)

    @property
    def rate_hz(self) -> float | None:
        """Samples per second if uniform (sample rate or clock), else None."""
        return self.samplerate_hz if self.mode == "timing" else self.clock_hz

    def times_ps(self, start: int, stop: int) -> np.ndarray:
        """int64 picosecond times of samples [start, stop)."""
        if self.timestamps_ps is not None:
            view = self.timestamps_ps[start:stop]
            view.flags.writeable = False      # a window on the time base itself, not a copy
            return view
        t = np.arange(start, stop, dtype=np.float64)
        return self._scaled(t)

    def _scaled(self, t: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        # in place: a chunk's times are megabytes, and every temporary is a pass over them
        t *= 1e12 / self.rate_hz
        np.rint(t, out=t)
        if out is None:
            out = t.astype(np.int64)
        else:
            np.copyto(out, t, casting="unsafe")     # whole numbers: the cast is exact
        if self.start_ps:
            out += self.start_ps
        return out

    def times_at(self, indices: np.ndarray) -> np.ndarray:
        """int64 picosecond times of arbitrary sample indices (same rounding as times_ps)."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.timestamps_ps is not None:
            return self.timestamps_ps[indices]
        return self._scaled(indices.astype(np.float64))

    def time_ps(self, index: int) -> int:
        if self.timestamps_ps is not None:
            return int(self.timestamps_ps[index])
        return int(round(index * 1e12 / self.rate_hz)) + self.start_ps

    def lazy_times(self, start: int, stop: int) -> "np.ndarray | SampleTimes":
        """The times of samples [start, stop): a SampleTimes where they follow from a uniform
        rate (computed only where read), else the timestamps themselves."""
        if self.timestamps_ps is not None:
            return self.times_ps(start, stop)
        return SampleTimes(self, start, stop)


class SampleTimes:
    """The times of samples [start, stop) of a uniform-rate time base, computed only at the
    samples asked for. A decoder reads the times of a small share of the clocks (transaction
    bounds, data phases); writing eight bytes for every clock of a chunk first costs more
    than the decoding around it. Answers the reads a decoder makes of an int64 array:
    ``len``, ``take``, an int or a slice, and ``np.asarray`` (every time, same rounding
    as :meth:`TimeBase.times_ps`)."""

    __slots__ = ("timebase", "start", "stop")
    dtype = np.dtype(np.int64)

    def __init__(self, timebase: TimeBase, start: int, stop: int):
        self.timebase, self.start, self.stop = timebase, int(start), max(int(start), int(stop))

    def __len__(self) -> int:
        return self.stop - self.start

    def __repr__(self) -> str:
        return f"SampleTimes(samples {self.start}..{self.stop})"

    def take(self, indices, out: np.ndarray | None = None, ascending: bool = False) -> np.ndarray:
        """The times of ``indices`` (0 = this range's first sample), into ``out`` if given (any
        int64 array of their shape, a record field say). ``ascending``: the caller knows the
        indices are sorted, so only the ends are checked."""
        idx = np.asarray(indices)
        if idx.dtype == bool:                 # a mask, as an array would read it
            if idx.shape != (len(self),):
                raise IndexError(f"a mask of {idx.shape} for {len(self)} samples")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False)
        if idx.size:
            lo, hi = (idx.flat[0], idx.flat[-1]) if ascending else (idx.min(), idx.max())
            if lo < 0 or hi >= len(self):
                raise IndexError(f"sample index out of range for {len(self)} samples")
        # the sample numbers as floats in one pass (exact: far below 2**53), as times_ps has them
        return self.timebase._scaled(np.add(idx, float(self.start), dtype=np.float64), out)

    def __getitem__(self, key):
        if isinstance(key, slice):
            a, b, step = key.indices(len(self))
            if step != 1:
                return np.asarray(self)[key]
            return SampleTimes(self.timebase, self.start + a, self.start + b)
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= i < len(self):
                raise IndexError(f"sample index {int(key)} out of range for {len(self)} samples")
            return int(self.timebase.times_at(np.array([self.start + i]))[0])
        return self.take(key)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.timebase.times_ps(self.start, self.stop)
        return out if dtype is None else out.astype(dtype, copy=False)

    def follows(self, other) -> bool:
        """True when these times go on where ``other`` (a SampleTimes) stops."""
        return (isinstance(other, SampleTimes) and other.timebase is self.timebase
                and other.stop == self.start)

    def joined(self, later: "SampleTimes") -> "SampleTimes":
        return SampleTimes(self.timebase, self.start, later.stop)


@dataclasses.dataclass
class Chunk:
    """Samples [start, start + length) of the requested channels."""

    start: int
    data: dict[str, np.ndarray]

    @property
    def length(self) -> int:
        return len(next(iter(self.data.values()))) if self.data else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]


@dataclasses.dataclass(frozen=True)
class LineCode:
    """A field made of several 1-bit channels: per sample, the uint8 sum of ``weights[i]``
    over the lines ``channels[i]`` that are at level ``levels[i]`` (an active-low control
    line counted while 0, say). Weights are distinct powers of two below 256 (so the sum is
    a bit set). A decoder that reads the lines only through such a code has a reader that
    keeps samples packed (.sr) give it in one table look-up per sample byte, instead of
    unpacking every line and combining them."""

    channels: tuple[str, ...]
    weights: tuple[int, ...]
    levels: tuple[int, ...]

    def of_lines(self, lines: Sequence[np.ndarray]) -> np.ndarray:
        """The code from the lines' uint8 levels (the generic path; same values)."""
        out = np.zeros(len(lines[0]) if lines else 0, np.uint8)
        for a, w, lv in zip(lines, self.weights, self.levels):
            hit = np.asarray(a, np.uint8) if lv else (np.asarray(a, np.uint8) ^ np.uint8(1))
            out += hit * np.uint8(w)
        return out


class SharedReads:
    """Capture.shared_reads() of a capture that has nothing to share (a context manager)."""

    def __enter__(self) -> "SharedReads":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def seal(self) -> None:
        pass

    def close(self) -> None:
        pass


class Broadcast:
    """One iterator read by several consumers (``branch()``), each getting every item in
    order; an item is kept until every consumer has it. Before ``seal()`` items are kept for
    consumers that may still join, up to ``max_items``; one that joins after an item was
    dropped reads everything from an iterator of its own (``fresh()``). When more than
    ``max_items`` are held (one consumer far behind the others), the one furthest behind is
    cut loose to an iterator of its own, skipping what it already had: slower for it, but
    memory stays bounded. An error of the shared iterator reaches every consumer."""

    def __init__(self, it: Iterator, fresh: Callable[[], Iterator], max_items: int = 64):
        import collections

        self._it, self._fresh, self._max = it, fresh, max(1, int(max_items))
        self._buf = collections.deque()
        self._base = 0                      # index of _buf[0]
        self._pos: list[float] = []         # next index of each consumer (inf: gone)
        self._loose: set[int] = set()       # consumers cut loose
        self._sealed = False
        self._end: int | None = None        # items in all, once the iterator is done
        self._error: BaseException | None = None

    def seal(self) -> None:
        self._sealed = True
        self._trim()

    def _trim(self, force: bool = False) -> None:
        """Drop what no reader that has started still needs: once sealed, or (``force``)
        when too much is held before it."""
        if not (self._sealed or force) or not self._pos:
            return
        low = min(self._pos)
        while self._buf and self._base < low:
            self._buf.popleft()
            self._base += 1

    def branch(self) -> Iterator:
        if self._base > 0:                  # joined too late to share: a reader of its own
            return self._fresh()
        k = len(self._pos)
        self._pos.append(0)
        return self._consume(k)

    def _fill(self) -> bool:
        """One more item into the buffer; False at the end."""
        if self._error is not None:
            raise self._error
        if self._end is not None:
            return False
        try:
            self._buf.append(next(self._it))
        except StopIteration:
            self._end = self._base + len(self._buf)
            return False
        except BaseException as exc:
            self._error = exc
            raise
        while len(self._buf) > self._max:
            # the reader that asked is the one furthest ahead: the laggards go (also before
            # the seal: a reader that has not started yet then gets a reader of its own)
            behind = min(range(len(self._pos)), key=lambda c: self._pos[c])
            if self._pos[behind] >= self._base + len(self._buf) - 1:
                self._trim(force=True)
                break
            self._loose.add(behind)
            self._pos[behind] = float("inf")
            self._trim(force=True)
        return True

    def _consume(self, k: int) -> Iterator:
        i = 0                               # the next item this consumer takes
        try:
            while True:
                if k in self._loose:
                    for j, item in enumerate(self._fresh()):
                        if j >= i:
                            yield item
                    return
                while i - self._base >= len(self._buf):
                    if not self._fill():
                        return
                    if k in self._loose:
                        break
                if k in self._loose:
                    continue
                item = self._buf[i - self._base]
                i += 1
                self._pos[k] = i
                self._trim()
                yield item
        finally:
            self._pos[k] = float("inf")     # finished or abandoned: nobody waits for it
            self._trim()


# Keys of a field chunk's extras (Capture.iter_fields): the clock's edge sample numbers,
# and where a LineCode asked for with changes= changed (sample numbers, and the code's bits
# that flipped there)
EDGES = "@edges"
CHANGES = "@changes"
FLIPS = "@flips"

# A chunk source yields chunks of the named channels covering [start, stop).
ChunkSource = Callable[[Sequence[str], int, int, int], Iterator[Chunk]]
# A field source (optional, see Capture.iter_fields) yields chunks of assembled fields.
FieldSource = Callable[[Mapping[str, "str | Sequence[str]"], int, int, int], Iterator[Chunk]]


class Capture:
    """Named channels + time base + metadata, with chunked access to the samples.

    Readers build a Capture from a ``source`` callable
    ``source(names, start, stop, chunk_samples) -> Iterator[Chunk]``; in-memory captures
    (simulator output, tests) use :meth:`from_arrays`.
    """

    def __init__(self, channels: Sequence[ChannelInfo], timebase: TimeBase, num_samples: int,
                 source: ChunkSource, metadata: dict | None = None, path: str | None = None,
                 field_source: FieldSource | None = None, shared_reads=None):
        self.channels = list(channels)
        self._field_source = field_source
        self._shared_reads = shared_reads
        self.timebase = timebase
        self.num_samples = int(num_samples)
        self._source = source
        self.metadata = dict(metadata or {})
        self.path = path
        self._by_name = {c.name: c for c in self.channels}
        if len(self._by_name) != len(self.channels):
            dup = sorted({c.name for c in self.channels if
                          sum(d.name == c.name for d in self.channels) > 1})
            raise PcitraceError(f"duplicate channel names {dup}", path=path,
                                fix="rename the channels so each name is unique")

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], timebase: TimeBase,
                    widths: dict[str, int] | None = None, metadata: dict | None = None,
                    path: str | None = None) -> "Capture":
        """An in-memory capture. 1-bit arrays become uint8. A vector stays in the unsigned
        type it comes in where that holds its width (an 8-bit C/BE# as uint8: an eighth of the
        memory over millions of clocks), else becomes uint64; chunks give it as uint64."""
        widths = dict(widths or {})
        chans, data = [], {}
        n = None
        for name, arr in arrays.items():
            arr = np.asarray(arr)
            w = widths.get(name, 1)
            if w == 1:
                data[name] = arr.astype(np.uint8, copy=False)
            elif arr.dtype.kind == "u" and arr.dtype.itemsize * 8 >= w:
                data[name] = arr
            else:
                data[name] = arr.astype(np.uint64, copy=False)
            chans.append(ChannelInfo(name, w))
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"channel {name} has {len(arr)} samples, expected {n}")

        narrow = {c.name for c in chans if c.width > 1 and data[c.name].dtype != np.uint64}

        def source(names, start, stop, chunk):
            for s in range(start, stop, chunk):
                e = min(stop, s + chunk)
                yield Chunk(s, {k: data[k][s:e].astype(np.uint64) if k in narrow else data[k][s:e]
                                for k in names})

        return cls(chans, timebase, n or 0, source, metadata, path)

    # -- access -------------------------------------------------------------------------
    @property
    def channel_names(self) -> list[str]:
        return [c.name for c in self.channels]

    def channel(self, name: str) -> ChannelInfo:
        try:
            return self._by_name[name]
        except KeyError:
            names = self.channel_names
            listed = ", ".join(names[:16]) + (f", ... ({len(names)} in all)" if len(names) > 16 else "")
            raise PcitraceError(f"no channel named {name!r}; the capture has {listed or 'no channels'}",
                                path=self.path, fix="check the channel name (pcitrace info CAPTURE lists "
                                "them all) or the profile") from None

    def shared_reads(self) -> "SharedReads":
        """A context in which several readers of the capture that advance together (the
        buses of one capture, decoded side by side) share the work of reading it: a reader
        whose samples are stored together (.sr: packed, compressed) inflates each block once
        for all of them. Call ``seal()`` once every reader has made its first read; from then
        on a block is dropped as soon as the last of them has it, so the readers must be
        driven in step (the memory held is the distance between the first and the last).
        Other captures: no effect."""
        make = getattr(self, "_shared_reads", None)
        return make() if make is not None else SharedReads()

    def iter_chunks(self, names: Sequence[str] | None = None, start: int = 0,
                    stop: int | None = None, chunk_samples: int = DEFAULT_CHUNK) -> Iterator[Chunk]:
        names = list(self.channel_names if names is None else names)
        for n in names:
            self.channel(n)
        stop = self.num_samples if stop is None else min(stop, self.num_samples)
        if start >= stop:
            return iter(())
        return self._source(names, start, stop, chunk_samples)

    def iter_fields(self, fields: Mapping[str, "str | Sequence[str]"], start: int = 0,
                    stop: int | None = None, chunk_samples: int = DEFAULT_CHUNK, *,
                    clock: str | None = None, changes: LineCode | None = None) -> Iterator[Chunk] | None:
        """Chunks of assembled fields, or None when the capture has no faster way to make
        them than :meth:`iter_chunks` (the caller then assembles them itself).

        ``clock``: a 1-bit channel; the fields are then given only at its rising edges (the
        samples where it is 1 and was 0 the sample before; the first sample is no edge), and
        ``chunk[EDGES]`` holds those samples' numbers. A chunk covers ``chunk_samples``
        samples of the capture, so it may hold no edge at all.
        ``changes``: a LineCode watched over every sample (not only at the edges):
        ``chunk[CHANGES]`` holds the samples where it differs from the sample before (the
        capture's first sample is no change) and ``chunk[FLIPS]`` its bits that flipped there.

        ``fields`` maps an output name to a 1-bit channel (a str: uint8 levels), to a list of
        1-bit channels, least significant first (uint64, bit i = the i-th channel), or to a
        :class:`LineCode` (uint8). A reader
        that keeps samples packed (.sr) serves these straight from the packed bytes instead of
        unpacking every line; the values are those the generic assembly would give. Arrays
        are the caller's to modify.
        """
        source = getattr(self, "_field_source", None)   # subclasses may not call __init__
        if source is None:
            return None
        for v in list(fields.values()) + ([clock] if clock is not None else []) + ([changes] if changes else []):
            for c in ([v] if isinstance(v, str) else v.channels if isinstance(v, LineCode) else v):
                if self.channel(c).width != 1:
                    return None
        stop = self.num_samples if stop is None else min(stop, self.num_samples)
        if start >= stop:
            return iter(())
        if clock is not None or changes is not None:
            return source(dict(fields), start, stop, chunk_samples, clock, changes)
        return source(dict(fields), start, stop, chunk_samples)

    def read(self, names: Sequence[str] | None = None, start: int = 0,
             stop: int | None = None) -> dict[str, np.ndarray]:
        """Whole arrays of the named channels over [start, stop) (loads them in memory)."""
        names = list(self.channel_names if names is None else names)
        parts: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for ch in self.iter_chunks(names, start, stop):
            for n in names:
                parts[n].append(ch.data[n])
        out = {}
        for n in names:
            dt = np.uint8 if self.channel(n).width == 1 else np.uint64
            out[n] = np.concatenate(parts[n]) if parts[n] else np.zeros(0, dt)
        return out

    def times_ps(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        stop = self.num_samples if stop is None else stop
        return self.timebase.times_ps(start, stop)

    @property
    def duration_ps(self) -> int:
        if self.num_samples == 0:
            return 0
        tb = self.timebase
        if tb.timestamps_ps is not None:
            return int(tb.timestamps_ps[-1] - tb.timestamps_ps[0])
        return int(round(self.num_samples * 1e12 / tb.rate_hz))

    def __repr__(self) -> str:
        return (f"Capture({self.path or '<memory>'}, {len(self.channels)} channels, "
                f"{self.num_samples} samples, {self.timebase.mode})")

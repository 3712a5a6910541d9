"""Clocked views and clock statistics.

``clocked_view(capture, clock)`` samples every channel just before each rising edge of
``clock`` and returns a state-mode capture whose per-sample timestamps are the edge times.
A rising edge is a change of the clock from 0 to 1 (after the VCD x/z rule); the first
sample of a capture is never an edge. "Just before" means the value held in the instant
before the edge: for a VCD, the last change strictly earlier than the edge time; for a
sampled (.sr) capture, the sample before the edge sample.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from pcitrace.buses.pci import CONTROL_CODE
from pcitrace.capture.model import CHANGES, EDGES, FLIPS, Capture, LineCode, SampleTimes, TimeBase
from pcitrace.capture.profile import VECTOR_SIGNALS, BusProfile, check_bus
from pcitrace.errors import PcitraceError


def rising_edges(levels: np.ndarray, prev=None) -> np.ndarray:
    """Indices i where ``levels[i]`` is 1 and the sample before it 0: ``levels[i-1]``, or for
    i = 0 ``prev`` (the previous chunk's last level). Without ``prev`` sample 0 is no edge."""
    if prev is None:
        return np.flatnonzero((levels[1:] == 1) & (levels[:-1] == 0)) + 1
    before = np.empty_like(levels)
    before[:1] = prev
    before[1:] = levels[:-1]
    return np.flatnonzero((levels == 1) & (before == 0))


def _check_clock(capture: Capture, clock: str) -> None:
    ch = capture.channel(clock)
    if ch.width != 1:
        raise PcitraceError(f"clock channel {clock!r} is a {ch.width}-bit vector", path=capture.path,
                            fix="choose a 1-bit clock channel")
    if capture.timebase.mode == "state":
        raise PcitraceError(f"the capture is already in state mode (one sample per clock); "
                            f"it has no clock edges to sample on {clock!r}", path=capture.path,
                            fix="use the capture as it is, without --clock")


def rising_edges_from_changes(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Times of 0 -> 1 changes in a change list (first entry = initial value, never an edge)."""
    v = values.astype(np.int8)
    rise = np.flatnonzero((v[1:] == 1) & (v[:-1] == 0)) + 1
    return times[rise]


def clock_edges(capture: Capture, clock: str) -> np.ndarray:
    """Rising-edge times (ps) of a clock channel of a VCD capture."""
    t, v = capture.change_times(clock)
    return rising_edges_from_changes(t, v)


def unknown_at_edges(capture: Capture, edges: np.ndarray) -> dict[str, dict[str, int]]:
    """For a VCD capture: per channel, how many sampled values (just before ``edges``) were
    an x or a z in the file. Only channels that held any appear."""
    out = {}
    if not hasattr(capture, "unknown_mask"):
        return out
    for c in capture.channels:
        mask = capture.unknown_mask(c.name)
        if mask is None:
            continue
        t, _ = capture.change_times(c.name)
        pos = np.searchsorted(t, edges, side="left") - 1
        np.maximum(pos, 0, out=pos)
        m = mask[pos]
        nx, nz = int(np.count_nonzero(m & 1)), int(np.count_nonzero(m & 2))
        if nx or nz:
            out[c.name] = {"x": nx, "z": nz}
    return out


def clocked_view(capture: Capture, clock: str, *, chunk_samples: int = 1 << 20) -> Capture:
    _check_clock(capture, clock)
    # keep what describes the signals, drop what described the source file's layout
    metadata = {k: v for k, v in capture.metadata.items()
                if k not in ("format", "changes", "timescale_ps", "unitsize", "sr_version",
                             "chunk_members")}
    metadata["clocked_on"] = clock
    widths = {c.name: c.width for c in capture.channels}
    if hasattr(capture, "change_times"):
        ct, cv = capture.change_times(clock)
        edges = rising_edges_from_changes(ct, cv)
        arrays = {}
        for c in capture.channels:
            t, v = capture.change_times(c.name)
            pos = np.searchsorted(t, edges, side="left") - 1
            np.maximum(pos, 0, out=pos)     # before the first change: the initial value
            arrays[c.name] = v[pos]
        # x/z that the sampled values stood in for (the rule's value was used there)
        metadata["unknown_at_clock"] = unknown_at_edges(capture, edges)
        times = edges
    else:
        names = capture.channel_names
        parts = {n: [] for n in names}
        tparts = []
        prev_clk = None
        prev_vals = None
        for ch in capture.iter_chunks(names, chunk_samples=chunk_samples):
            c = ch.data[clock]
            if len(c) == 0:
                continue
            rise = rising_edges(c, prev_clk)
            if len(rise):
                for n in names:
                    a = ch.data[n]
                    src = np.concatenate((prev_vals[n] if prev_vals is not None else a[:1], a))
                    parts[n].append(src[rise])   # index rise in src = sample rise-1 in chunk
                tparts.append(capture.timebase.times_at(rise + ch.start))
            prev_clk = c[-1]
            prev_vals = {n: ch.data[n][-1:].copy() for n in names}
        arrays = {n: (np.concatenate(p) if p else
                      np.zeros(0, np.uint8 if widths[n] == 1 else np.uint64))
                  for n, p in parts.items()}
        times = np.concatenate(tparts) if tparts else np.zeros(0, np.int64)
    tb = TimeBase.state(timestamps_ps=times)
    if len(times) > 1:
        metadata["clock_hz"] = clock_frequency(times)
    return Capture.from_arrays(arrays, tb, widths=widths, metadata=metadata, path=capture.path)


def clock_frequency(edge_times_ps: np.ndarray) -> float:
    """Frequency from the median edge-to-edge period (robust to gaps and a stopped clock)."""
    if len(edge_times_ps) < 2:
        return 0.0
    period = float(np.median(np.diff(edge_times_ps)))
    return 1e12 / period if period > 0 else 0.0


@dataclasses.dataclass
class ClockStats:
    channel: str
    rising_edges: int
    frequency_hz: float
    first_ps: int | None
    last_ps: int | None


def clock_stats(capture: Capture, channel: str, *, chunk_samples: int = 1 << 20) -> ClockStats:
    """Rising edges of a 1-bit channel, streamed (timing captures)."""
    if hasattr(capture, "change_times"):
        t, v = capture.change_times(channel)
        edges = rising_edges_from_changes(t, v)
        n = len(edges)
        # median over the first million periods is plenty and bounds the work
        freq = clock_frequency(edges[: 1 << 20])
        return ClockStats(channel, n, freq, int(edges[0]) if n else None,
                          int(edges[-1]) if n else None)
    tb = capture.timebase
    n = 0
    first = last = None
    prev = None
    sample_edges = []
    for ch in capture.iter_chunks([channel], chunk_samples=chunk_samples):
        c = ch.data[channel]
        if len(c) == 0:
            continue
        rise = rising_edges(c, prev)
        if len(rise):
            if first is None:
                first = tb.time_ps(int(rise[0]) + ch.start)
            last = tb.time_ps(int(rise[-1]) + ch.start)
            if sum(map(len, sample_edges)) < (1 << 16):
                sample_edges.append(rise + ch.start)
            n += len(rise)
        prev = c[-1]
    freq = 0.0
    if sample_edges:
        e = np.concatenate(sample_edges)
        freq = clock_frequency(tb.times_at(e))
    return ClockStats(channel, n, freq, first, last)


def edge_summary(capture: Capture, names: list[str] | None = None, *, keep: int = 1 << 16,
                 chunk_samples: int = 1 << 20, stop: int | None = None
                 ) -> dict[str, tuple[int, np.ndarray, int | None]]:
    """Per 1-bit channel: (rising edges, times of the first ``keep`` edges, last edge time).

    One streamed pass over samples [0, stop) for all channels (VCD: the change lists).
    """
    if names is None:
        names = [c.name for c in capture.channels if c.width == 1]
    out = {}
    if hasattr(capture, "change_times"):
        for n in names:
            t, v = capture.change_times(n)
            e = rising_edges_from_changes(t, v)
            out[n] = (len(e), e[:keep], int(e[-1]) if len(e) else None)
        return out
    tb = capture.timebase
    count = dict.fromkeys(names, 0)
    firsts: dict[str, list] = {n: [] for n in names}
    kept = dict.fromkeys(names, 0)
    last: dict[str, int | None] = dict.fromkeys(names)
    prev: dict[str, int] = {}
    for ch in capture.iter_chunks(names, stop=stop, chunk_samples=chunk_samples):
        for n in names:
            c = ch.data[n]
            if len(c) == 0:
                continue
            rise = rising_edges(c, prev.get(n))
            prev[n] = c[-1]
            if len(rise):
                count[n] += len(rise)
                if kept[n] < keep:
                    take = rise[: keep - kept[n]] + ch.start
                    firsts[n].append(take)
                    kept[n] += len(take)
                last[n] = int(rise[-1]) + ch.start
    for n in names:
        e = np.concatenate(firsts[n]) if firsts[n] else np.zeros(0, np.int64)
        out[n] = (count[n], tb.times_at(e), tb.time_ps(last[n]) if last[n] is not None else None)
    return out


def find_clocks(capture: Capture, *, min_edges: int = 16, max_channels: int = 256,
                min_hz: float = 1e6, probe_samples: int = 1 << 20) -> list[ClockStats]:
    """1-bit channels that look like clocks: many rising edges at a steady period.

    A channel counts when at least 90% of its rising-edge periods are within 5% of the
    median, its edges fill the time between its first and last edge at that period, and
    they cover at least half the capture; data lines toggle irregularly or in bursts.
    Below ``min_hz`` a steady line is a periodic event (a packet stream's frame line, a
    polled REQ#), not a bus or link clock. Sampled captures longer than ``probe_samples``
    are judged on their first ``probe_samples``; only the candidates are then counted in full.
    """
    if capture.timebase.mode == "state":
        return []
    names = [c.name for c in capture.channels if c.width == 1][:max_channels]
    if hasattr(capture, "change_times") or capture.num_samples <= probe_samples:
        return _steady(edge_summary(capture, names), capture.duration_ps, min_edges, min_hz)
    # a long sampled capture: judge regularity on its start, then count only the candidates
    window = capture.timebase.time_ps(probe_samples) - capture.timebase.time_ps(0)
    cands = _steady(edge_summary(capture, names, stop=probe_samples), window, min_edges, min_hz)
    if not cands:
        return []
    full = edge_summary(capture, [c.channel for c in cands])
    return _steady(full, capture.duration_ps, min_edges, min_hz)


def _steady(summary, duration: int, min_edges: int, min_hz: float) -> list[ClockStats]:
    out = []
    for n, (count, times, last) in summary.items():
        if count < min_edges or len(times) < 2:
            continue
        d = np.diff(times)
        med = float(np.median(d))
        if med <= 0 or 1e12 / med < min_hz:
            continue
        steady = np.mean(np.abs(d - med) <= 0.05 * med)
        span = last - int(times[0])
        # a clock runs all along: its edges fill their own span at the median period, and
        # that span is most of the capture (a regular burst on a data line is not a clock)
        if steady >= 0.9 and count * med >= 0.9 * span and count * med >= 0.5 * duration:
            out.append(ClockStats(n, count, 1e12 / med, int(times[0]), last))
    return out


def resample(capture: Capture, samplerate_hz: float) -> Capture:
    """A uniform timing view of an event-timed capture: sample k = state at start + k/rate."""
    if not hasattr(capture, "change_times"):
        raise PcitraceError("only VCD captures can be resampled", path=capture.path,
                            fix="convert .sr captures as they are")
    if not samplerate_hz or samplerate_hz <= 0:
        raise PcitraceError(f"sample rate {samplerate_hz!r} is not a frequency",
                            path=capture.path, fix="give --samplerate in Hz, e.g. 100e6")
    starts = [int(capture.change_times(c.name)[0][0]) for c in capture.channels]
    t0 = min(starts) if starts else 0
    dur = capture.duration_ps
    if "end_ps" in capture.metadata:
        # the dump closes at end_ps: samples strictly before it
        n = max(0, int(np.ceil(round(dur * samplerate_hz / 1e12, 6))))
    else:
        n = int(dur * samplerate_hz / 1e12) + 1   # up to and including the last change
    if n > (1 << 36):
        raise PcitraceError(f"{n} samples at {samplerate_hz:g} Hz is too many", path=capture.path,
                            fix="choose a lower --samplerate or use --clock for one sample per clock")
    tb = TimeBase.timing(samplerate_hz, start_ps=t0)

    def source(names, start, stop, chunk):
        from pcitrace.capture.model import Chunk
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            want = tb.times_at(np.arange(s, e))
            data = {}
            for nm in names:
                t, v = capture.change_times(nm)
                pos = np.searchsorted(t, want, side="right") - 1
                np.maximum(pos, 0, out=pos)
                data[nm] = v[pos]
            yield Chunk(s, data)

    meta = dict(capture.metadata)
    meta["resampled_hz"] = samplerate_hz
    return Capture(capture.channels, tb, n, source, meta, capture.path)


# -- bus clocks ----------------------------------------------------------------------------

@dataclasses.dataclass
class BusChunk:
    """Clocks [start_clock, start_clock + len) of a bus: ``sig`` holds one entry per clock
    of each signal; ``times`` their times, as an int64 array or (uniform-rate state
    captures) a SampleTimes that computes them only where read."""

    start_clock: int
    times: np.ndarray | SampleTimes
    sig: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.times)

    @property
    def times_ps(self) -> np.ndarray:
        """The times as an int64 array."""
        if isinstance(self.times, SampleTimes):
            self.times = np.asarray(self.times)
        return self.times


def _signal_width(capture: Capture, bus: BusProfile, sig: str) -> int:
    return sum(capture.channel(c).width for c in bus.channels_of(sig))


def _assemble(bus: BusProfile, sig: str, data: dict[str, np.ndarray], widths: dict[str, int],
              idx: np.ndarray | None) -> np.ndarray:
    chans = bus.channels_of(sig)
    vector = sig in VECTOR_SIGNALS
    if not vector:
        a = data[chans[0]]
        a = a[idx] if idx is not None else a
        a = a.astype(np.uint8, copy=True)
        if sig in bus.inverted:
            a ^= np.uint8(1)
        return a
    out = None
    shift = 0
    for c in chans:
        a = data[c]
        a = a[idx] if idx is not None else a
        a = a.astype(np.uint64)
        if shift:
            a = a << np.uint64(shift)
        out = a if out is None else (out | a)
        shift += widths[c]
    if sig in bus.inverted:
        mask = np.uint64((1 << shift) - 1) if shift < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        out ^= mask
    return out


def _invert(bus: BusProfile, sig: str, a: np.ndarray, widths: dict[str, int]) -> np.ndarray:
    """Undo the profile's inversion of an assembled signal in place (``a`` is fresh)."""
    if sig not in bus.inverted:
        return a
    if sig not in VECTOR_SIGNALS:
        a ^= np.uint8(1)
        return a
    shift = sum(widths[c] for c in bus.channels_of(sig))
    a ^= np.uint64((1 << shift) - 1) if shift < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return a


def _cat(parts: list) -> np.ndarray | SampleTimes:
    # one part (reads the size of a chunk, the usual case; the last chunk's empty remainder
    # aside) is passed on without a copy
    full = [p for p in parts if len(p)]
    if len(full) == 1:
        return full[0]
    if full and all(isinstance(p, SampleTimes) for p in full) and all(
            b.follows(a) for a, b in zip(full, full[1:])):
        return full[0].joined(full[-1])
    return np.concatenate([np.asarray(p) for p in parts])


def bus_clocks(capture: Capture, bus: BusProfile, chunk_clocks: int = 1 << 20,
               profile_name: str = "profile", *, read_samples: int | None = None,
               control_code: bool = False, watch: Sequence[str] = (),
               on_changes: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
               ) -> Iterator[BusChunk]:
    """One entry per bus clock, in chunks of ``chunk_clocks`` (the last may be shorter).

    ``read_samples``: samples read from the capture at a time (timing captures); edge
    detection and "value before the edge" carry across those reads.
    ``control_code``: where the capture can make it straight from packed samples (a state
    .sr), a PCI bus's chunks have ``sig["code"]`` (uint8, CONTROL_CODE bits of the asserted
    lines) in place of FRAME#, IRDY#, TRDY#, STOP# and DEVSEL#; otherwise the lines.
    ``watch`` / ``on_changes``: where a timing capture gives the clocks from packed samples,
    it also watches these 1-bit signals over every sample, in the same read, and calls
    ``on_changes(clock_edges, change_samples, flips)`` once per block read, in order (sample
    numbers; bit i of a flip = ``watch[i]`` changed there). Never called otherwise: the
    caller then makes a pass of its own (the glitch scan of pcitrace.decode).
    """
    check_bus(capture, bus, profile_name)
    if len(watch) > 8:
        raise ValueError("bus_clocks watches at most 8 lines (one code byte)")
    chunk_clocks = max(1, int(chunk_clocks))
    chans = list(dict.fromkeys(bus.all_channels()))
    widths = {c: capture.channel(c).width for c in chans}
    sigs = [s for s in bus.signals if s != bus.bus_kind.clock]
    tb = capture.timebase

    pend_t: list[np.ndarray] = []
    pend: dict[str, list[np.ndarray]] = {s: [] for s in sigs}
    npend = 0
    clock_no = 0
    prev_clk = None                       # clock level at the last sample of the last chunk
    prev_vals: dict[str, np.ndarray] | None = None   # last sample of each channel (for 'before')

    def flush(final: bool):
        nonlocal pend_t, pend, npend, clock_no
        while npend >= chunk_clocks or (final and npend):
            t = _cat(pend_t)
            cols = {s: _cat(v) for s, v in pend.items()}
            take = min(chunk_clocks, npend)
            yield BusChunk(clock_no, t[:take], {s: v[:take] for s, v in cols.items()})
            clock_no += take
            npend -= take
            pend_t = [t[take:]]
            pend = {s: [v[take:]] for s, v in cols.items()}

    def packed_fields(clock: str | None, read: int):
        """The capture's own assembly of the fields (from packed samples), or None; with
        ``control_code``, the code in place of the five control lines where it can."""
        nonlocal sigs, pend
        fields = {s: (bus.channels_of(s) if s in VECTOR_SIGNALS else bus.channels_of(s)[0])
                  for s in sigs}
        changes = (LineCode(tuple(bus.channels_of(s)[0] for s in watch), tuple(1 << i for i in range(len(watch))),
                            (1,) * len(watch)) if clock is not None and watch and on_changes is not None else None)
        if control_code and bus.is_pci and all(s in fields for s, _ in CONTROL_CODE):
            coded = {s: v for s, v in fields.items() if s not in dict(CONTROL_CODE)}
            # asserted = low, unless the probe shows the line inverted
            coded["code"] = LineCode(tuple(fields[s] for s, _ in CONTROL_CODE), tuple(w for _, w in CONTROL_CODE),
                                     tuple(int(s in bus.inverted) for s, _ in CONTROL_CODE))
            packed = capture.iter_fields(coded, chunk_samples=read, clock=clock, changes=changes)
            if packed is not None:
                sigs = [s for s in sigs if s not in dict(CONTROL_CODE)] + ["code"]
                pend = {s: [] for s in sigs}
                return packed
        return capture.iter_fields(fields, chunk_samples=read, clock=clock, changes=changes)

    def from_packed(packed, clocked: bool):
        # only the profile's inversions are left to apply (a code has them already)
        nonlocal npend
        for ch in packed:
            if CHANGES in ch.data:
                on_changes(ch.data[EDGES], ch.data[CHANGES], ch.data[FLIPS])
            if ch.length == 0:
                continue
            if clocked:
                pend_t.append(tb.times_at(ch.data[EDGES]))
            else:
                pend_t.append(tb.lazy_times(ch.start, ch.start + ch.length))
            for s in sigs:
                pend[s].append(ch.data[s] if s == "code" else _invert(bus, s, ch.data[s], widths))
            npend += ch.length
            yield from flush(False)
        yield from flush(True)

    if tb.mode == "state":
        # every sample is a clock; re-chunk so chunks are exactly chunk_clocks long
        read = read_samples or chunk_clocks
        packed = packed_fields(None, read)
        if packed is not None:
            yield from from_packed(packed, False)
            return
        for ch in capture.iter_chunks(chans, chunk_samples=read):
            if ch.length == 0:
                continue
            pend_t.append(tb.lazy_times(ch.start, ch.start + ch.length))
            for s in sigs:
                pend[s].append(_assemble(bus, s, ch.data, widths, None))
            npend += ch.length
            yield from flush(False)
        yield from flush(True)
        return

    clk = bus.clock
    if clk is None:
        raise PcitraceError(f"bus {bus.name!r} is in a timing capture but has no clock channel",
                            path=capture.path, where=f"profile {profile_name}",
                            fix=f"map {bus.bus_kind.clock} to the clock channel "
                                "in the profile")
    if tb.event_timed and hasattr(capture, "change_times"):
        # VCD change lists: the clocked view samples them directly, then stream it.
        state = clocked_view(capture, clk)
        yield from bus_clocks(state, dataclasses.replace(bus, signals={
            k: v for k, v in bus.signals.items() if k != bus.bus_kind.clock}),
            chunk_clocks, profile_name, read_samples=read_samples)
        return
    before = tb.event_timed  # values just before the edge (event-timed captures)
    read_chunk = int(read_samples) if read_samples else max(chunk_clocks, 1 << 16)
    if not before:
        packed = packed_fields(clk, read_chunk)
        if packed is not None:
            yield from from_packed(packed, True)
            return

    for ch in capture.iter_chunks(chans, chunk_samples=read_chunk):
        c = ch.data[clk]
        n = len(c)
        if n == 0:
            continue
        rise = rising_edges(c, prev_clk)
        if len(rise):
            if before:
                # Value just before the edge = sample rise-1, which may be the previous chunk's last.
                src = {k: (np.concatenate((prev_vals[k], v)) if prev_vals is not None
                           else np.concatenate((v[:1], v)))
                       for k, v in ch.data.items()}
                idx = rise  # shifted by the one prepended sample: rise-1+1
            else:
                src, idx = ch.data, rise
            pend_t.append(tb.times_at(rise + ch.start))
            for s in sigs:
                pend[s].append(_assemble(bus, s, src, widths, idx))
            npend += len(rise)
        prev_clk = c[-1]
        prev_vals = {k: v[-1:].copy() for k, v in ch.data.items()}
        yield from flush(False)
    yield from flush(True)

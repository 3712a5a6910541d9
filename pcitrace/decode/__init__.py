"""Decoding: captures -> transaction records (PCI / PCI-X) and probe frames.

``decode_capture`` is the one entry point the CLI, the analyser and the viewer use. The fast
engine (``pcitrace.decode.engine``) streams the capture bus by bus in chunks of clocks; the
reference engine runs the sigrok decoder ``decoders/pci`` through sigrok-cli
(``pcitrace.decode.sigrok``). Both give records as laid out in docs/records.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable

import numpy as np

from pcitrace.errors import PcitraceError
from pcitrace.records import FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE, BusSummary

ENGINES = ("fast", "sigrok")
DEFAULT_CHUNK_CLOCKS = 1 << 18


@dataclasses.dataclass
class DecodeResult:
    records: np.ndarray                     # RECORD_DTYPE, every PCI bus, sorted by start_ps
    words: np.ndarray                       # WORD_DTYPE; `record` indexes `records`
    findings: np.ndarray                    # FINDING_DTYPE, sorted by time_ps
    profile: object                         # pcitrace.capture.profile.Profile
    buses: dict[str, BusSummary]
    frames: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)   # probe buses
    engine: str = "fast"

    def bus_records(self, name: str) -> np.ndarray:
        return self.records[self.records["bus"] == name]


def bus_summary(bus, clock_hz: float | None, clocks: int, start_ps: int, end_ps: int,
                busy_clocks: int | None = None, measured_clock_hz: float | None = None) -> BusSummary:
    """The BusSummary of a profile's bus from what decoding measured on it."""
    sig, nic = bus.signals, bus.nic
    return BusSummary(bus.name, bus.kind, bus.mode, int(bus.width) if bus.is_pci else 0, clock_hz, clocks,
                      start_ps, end_ps, busy_clocks, bars=tuple(nic.bars), have_ad="ad" in sig,
                      have_cbe="cbe_n" in sig, gnt=nic.gnt, req=nic.req, send_bus=bus.send_bus,
                      recv_bus=bus.recv_bus, measured_clock_hz=measured_clock_hz,
                      max_burst_bytes=nic.max_burst_bytes, descriptor_bytes=nic.descriptor_bytes)


def _clock_hz(bus, times_first: np.ndarray | None, clocks: int, start: int, end: int) -> float | None:
    """The clock rate analysis uses: the profile's, else the one measured."""
    if bus.clock_hz:
        return float(bus.clock_hz)
    return _measured_clock_hz(times_first, clocks, start, end)


def _measured_clock_hz(times_first: np.ndarray | None, clocks: int, start: int, end: int) -> float | None:
    """The clock rate the capture shows: from the first clock times, else the span."""
    if times_first is not None and len(times_first) > 1:
        d = np.diff(times_first)
        med = float(np.median(d))
        if med > 0:
            return 1e12 / med
    if clocks > 1 and end > start:
        return (clocks - 1) * 1e12 / (end - start)
    return None


RESERVE_BYTES = 1 << 30


class _Grow:
    """Parts collected into one array. Each part is written once into spare capacity; the
    capacity comes from an estimate of the final size (``reserve``) or else doubles, and the
    spare end is given back in place at the end (a shrinking realloc does not copy). Growing
    by one part at a time instead (ndarray.resize per chunk) zero-filled every new part and
    could move the whole array at each chunk."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.buf: np.ndarray | None = None
        self.n = 0
        self._first: np.ndarray | None = None   # a lone first part, kept without a copy

    def reserve(self, total: int) -> None:
        """Room for ``total`` items, if that is not too much to ask: a guess too high costs
        only untouched pages, but never more than RESERVE_BYTES at once."""
        total = min(int(total), max(self.n, RESERVE_BYTES // self.dtype.itemsize))
        if self.buf is None:
            if self._first is not None and total <= len(self._first):
                return
            self._grow(total)
        elif total > len(self.buf):
            self._grow(total)

    def _grow(self, cap: int) -> None:
        new = np.zeros(cap, self.dtype)
        if self.buf is not None:
            new[:self.n] = self.buf[:self.n]
        elif self._first is not None:
            new[:self.n] = self._first
            self._first = None
        self.buf = new

    def claim(self, m: int) -> np.ndarray:
        """The next ``m`` slots, zero-filled, for the engine to write its output into in
        place (valid until the next claim or add)."""
        if self.buf is None and self._first is None:
            self.buf = np.zeros(m, self.dtype)
        elif self.buf is None or self.n + m > len(self.buf):
            self._grow(max(2 * (self.n + m), 1024))
        view = self.buf[self.n:self.n + m]
        self.n += m
        return view

    def add(self, part: np.ndarray) -> None:
        m = len(part)
        if not m:
            return
        if self.buf is None and self._first is None:
            # a capture decoded in one chunk costs no copy; parts are fresh engine output
            # that nobody changes afterwards
            self._first, self.n = part, m
            return
        self.claim(m)[:] = part

    @property
    def array(self) -> np.ndarray:
        if self.buf is None:
            return self._first if self._first is not None else np.zeros(0, self.dtype)
        if len(self.buf) != self.n:
            self.buf.resize(self.n, refcheck=False)
        return self.buf


class _BusSpan:
    """Clocks, busy clocks and time span of a bus, gathered chunk by chunk."""

    def __init__(self):
        self.clocks = self.busy = self.start_ps = self.end_ps = 0
        self.first_times = None

    def add(self, ch) -> None:
        if self.first_times is None:
            self.first_times = np.array(ch.times[:4096], np.int64)
            self.start_ps = int(ch.times[0])
        self.end_ps = int(ch.times[-1])
        self.clocks += len(ch)
        if "code" in ch.sig:                 # FRAME# and IRDY# are its two low bits
            self.busy += int(np.count_nonzero(ch.sig["code"] & np.uint8(3)))
        else:
            self.busy += int(np.count_nonzero((ch.sig["frame_n"] == 0) | (ch.sig["irdy_n"] == 0)))

    def share_of(self, capture) -> float:
        """The part of the capture's samples covered so far (0 when unknown). Samples, not
        time: where the bus clock stops for a while the samples (clock edges, or value
        changes in a VCD) stop too, so the share read off the first chunk stays a fair guess
        of how much is to come."""
        tb = capture.timebase
        if capture.num_samples < 2 or self.first_times is None:
            return 0.0
        if tb.timestamps_ps is not None:
            done = int(np.searchsorted(tb.timestamps_ps, self.end_ps, side="right"))
        elif tb.rate_hz:
            done = int(round((self.end_ps - tb.start_ps) * tb.rate_hz / 1e12)) + 1
        else:
            return 0.0
        return min(done / capture.num_samples, 1.0)

    def summary(self, bus) -> "BusSummary":
        return bus_summary(bus, _clock_hz(bus, self.first_times, self.clocks, self.start_ps, self.end_ps),
                           self.clocks, self.start_ps, self.end_ps, self.busy,
                           _measured_clock_hz(self.first_times, self.clocks, self.start_ps, self.end_ps))


def check_control_lines(capture, bus, profile_name: str = "profile") -> None:
    """The decoder reads a PCI bus's five control lines on every clock: a profile that maps
    some of them but not all is named here, with what is missing, before anything is read."""
    from pcitrace.decode.engine import REQUIRED

    missing = [s for s in REQUIRED if s not in bus.signals]
    if missing:
        raise PcitraceError(f"bus {bus.name!r} maps no {', '.join(missing)}; the PCI decoder needs FRAME#, "
                            "IRDY#, TRDY#, STOP# and DEVSEL#", path=capture.path, where=f"profile {profile_name}",
                            fix="map those signals to their channels in the channel profile")


def iter_bus(capture, bus, *, chunk_clocks: int = DEFAULT_CHUNK_CLOCKS, profile_name: str = "profile",
             progress: Callable[[int], None] | None = None, summary: dict | None = None,
             alloc: Callable[[np.dtype, int], np.ndarray] | None = None):
    """Fast-decode one PCI bus chunk by chunk: yields (records, words, findings) as they are
    final, in time order, with memory bounded by the chunk size (plus an open transaction).
    For captures too long to hold every record at once. ``words['record']`` and
    ``data_index`` count from the bus's first record / data phase. If ``summary`` is a dict,
    it receives ``summary['bus']`` = the BusSummary at the end. ``alloc(dtype, n)``: where the
    engine puts each chunk's records and words (``decode_bus`` collects them in place)."""
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.decode.engine import GlitchScan, decode_clocks, glitch_lines, glitches

    check_control_lines(capture, bus, profile_name)
    carry = None
    span = _BusSpan()
    if summary is not None:
        summary["span"] = span
    empty_sig = None
    lanes = {sig: sum(capture.channel(c).width for c in bus.channels_of(sig))
             for sig in ("ad", "cbe_n") if sig in bus.signals}
    opts = dict(mode=bus.mode, width=bus.width, bus=bus.name, ad_bits=lanes.get("ad", 64),
                cbe_bits=lanes.get("cbe_n", 8), alloc=alloc)
    tb = capture.timebase
    timing = tb.mode == "timing" and not tb.event_timed and bus.clock is not None
    # glitches live between clock edges: only the raw samples show them. A packed capture
    # finds the control lines' changes in the read that gives the clocks; others take a pass
    # of their own at the end.
    lines = glitch_lines(bus) if timing else []
    scan = GlitchScan(bus.name, lines, tb)
    fed = []

    def on_changes(edges, at, flips):
        fed.append(True)
        scan.feed(edges, {s: at[(flips & np.uint8(1 << i)) != 0] for i, s in enumerate(lines)})

    for ch in bus_clocks(capture, bus, chunk_clocks=chunk_clocks, profile_name=profile_name, control_code=True,
                         watch=lines, on_changes=on_changes):
        if len(ch) == 0:
            continue
        span.add(ch)
        empty_sig = {k: v[:0] for k, v in ch.sig.items()}
        r, w, f, carry = decode_clocks(ch.sig, ch.times, carry=carry, final=False, **opts)
        if summary is not None:
            summary["frontier_ps"] = _frontier(carry)
        yield r, w, f
        if progress is not None:
            progress(len(ch))
    if carry is not None:
        r, w, f, carry = decode_clocks(empty_sig, np.zeros(0, np.int64), carry=carry, final=True, **opts)
        yield r, w, f
    if timing:
        yield np.zeros(0, RECORD_DTYPE), np.zeros(0, WORD_DTYPE), scan.array() if fed else glitches(capture, bus)
    if summary is not None:
        summary["bus"] = span.summary(bus)


class _BusDecode:
    """One PCI bus decoded chunk by chunk into arrays of its own (``step`` decodes the next
    chunk), so that several buses of a capture can be driven side by side."""

    def __init__(self, capture, bus, *, chunk_clocks: int, profile_name: str, progress):
        self.capture = capture
        self.recs, self.words, self.finds = _Grow(RECORD_DTYPE), _Grow(WORD_DTYPE), _Grow(FINDING_DTYPE)
        self.out: dict = {}
        self._estimated: set = set()
        self._gen = iter_bus(capture, bus, chunk_clocks=chunk_clocks, profile_name=profile_name,
                             progress=progress, summary=self.out, alloc=self._alloc)
        self.done = False

    def _alloc(self, dt, m):
        g = self.recs if dt == RECORD_DTYPE else self.words
        if dt not in self._estimated and m:
            # The rest of the capture is assumed as busy as the first chunk with output: a
            # wrong guess costs a doubling (too low) or untouched pages given back at the
            # end (too high). Sized before that chunk is written, so it is written once, into
            # memory big enough for the kernel to back with huge pages.
            self._estimated.add(dt)
            share = self.out["span"].share_of(self.capture)
            if 0 < share < 1:
                # a record or a data word takes a clock at least: never more than the samples
                g.reserve(min(int((g.n + m) / share * 1.05) + 64, max(self.capture.num_samples, g.n + m)))
        return g.claim(m)

    def step(self) -> bool:
        """Decode the next chunk; False once the bus is done."""
        try:
            part = next(self._gen)
        except StopIteration:
            self.done = True
            return False
        self.finds.add(part[2])     # records and words are already in place (claim)
        return True

    @property
    def reached_ps(self) -> int:
        """The time of the last clock decoded so far (-1 before the first)."""
        span = self.out.get("span")
        return span.end_ps if span is not None and span.first_times is not None else -1

    def result(self):
        return self.recs.array, self.words.array, self.finds.array, self.out["bus"]


def _frontier(carry) -> int | None:
    """No record the bus gives after this chunk starts before this time: the start of the
    transaction still open, else the last clock decoded."""
    t = carry.times_ps
    if not len(t):
        return None
    return int(t[1 if carry.context else 0]) if carry.open else int(t[-1])


def decode_bus(capture, bus, *, chunk_clocks: int = DEFAULT_CHUNK_CLOCKS,
               profile_name: str = "profile", progress: Callable[[int], None] | None = None):
    """Fast-decode one PCI bus of a capture: (records, words, findings, BusSummary)."""
    return decode_buses(capture, [bus], chunk_clocks=chunk_clocks, profile_name=profile_name,
                        progress=progress)[0]


def decode_buses(capture, buses, *, chunk_clocks: int = DEFAULT_CHUNK_CLOCKS,
                 profile_name: str = "profile", progress: Callable[[int], None] | None = None):
    """decode_bus for each of ``buses``, driven side by side so that a capture whose samples
    are stored together (.sr) is read once for all of them (Capture.shared_reads): the bus
    furthest behind in time decodes its next chunk."""
    decoders = [_BusDecode(capture, b, chunk_clocks=chunk_clocks, profile_name=profile_name,
                           progress=progress) for b in buses]
    if len(decoders) < 2:
        for d in decoders:
            while d.step():
                pass
        return [d.result() for d in decoders]
    with capture.shared_reads() as shared:
        live = [d for d in decoders if d.step()]          # every bus makes its first read
        shared.seal()
        while live:
            d = min(live, key=lambda x: x.reached_ps)
            if not d.step():
                live.remove(d)
    return [d.result() for d in decoders]


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def merge_buses(per_bus: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    """Concatenate several buses' (records, words, findings), records sorted by start_ps.

    Each bus's words index its own records; after the merge they index the merged array and
    every record's ``data_index`` points at its first word again (every bus has one word per
    completed data phase, docs/records.md)."""
    per_bus = list(per_bus)
    if len(per_bus) == 1:
        # one bus: the engine already emits records in time order with matching words
        records, words, findings = per_bus[0]
        return records, words, findings[np.argsort(findings["time_ps"], kind="stable")]
    recs, words, finds = [], [], []
    offset = 0
    for r, w, f in per_bus:
        w = w.copy()
        w["record"] += offset
        offset += len(r)
        recs.append(r), words.append(w), finds.append(f)
    records = _cat(recs, RECORD_DTYPE)
    words = _cat(words, WORD_DTYPE)
    findings = _cat(finds, FINDING_DTYPE)
    order = np.argsort(records["start_ps"], kind="stable")
    records = records[order]
    new_index = np.empty(len(order), np.int64)
    new_index[order] = np.arange(len(order))
    if len(words):
        words["record"] = new_index[words["record"]]
        words = words[np.argsort(words["record"], kind="stable")]   # keeps time order within a record
        counts = np.bincount(words["record"], minlength=len(records))
        first = np.zeros(len(records), np.int64)
        np.cumsum(counts[:-1], out=first[1:])
        records["data_index"] = first
    findings = findings[np.argsort(findings["time_ps"], kind="stable")]
    return records, words, findings


def _open(capture, profile):
    """(Capture, Profile) from a capture or its path and a profile, its path or None
    (NAME.profile.toml beside the capture, else auto-detected); a given Profile is checked
    against the capture."""
    from pcitrace.capture import open_capture
    from pcitrace.capture.profile import Profile, resolve_profile

    if isinstance(capture, (str, os.PathLike)):
        capture = open_capture(capture)
    if not isinstance(profile, Profile):
        profile = resolve_profile(capture, profile)
    else:
        profile.check(capture)
    return capture, profile


def _select(profile, buses):
    if buses is None:
        return list(profile.buses)
    names = [buses] if isinstance(buses, str) else list(buses)
    return [profile.bus(n) for n in names]


def decode_capture(capture, profile=None, *, buses=None, engine: str = "fast",
                   chunk_clocks: int = DEFAULT_CHUNK_CLOCKS, progress=None) -> DecodeResult:
    """Decode every PCI bus (and probe link) of ``capture``.

    ``capture``: a Capture or a path; ``profile``: a Profile, a profile path, or None (the
    NAME.profile.toml beside the capture, else auto-detection); ``buses``: a name or names
    to restrict to; ``engine``: 'fast' (numpy) or 'sigrok' (the reference decoder through
    sigrok-cli; slow). ``progress(clocks_done)`` is called as chunks are decoded.
    """
    if engine not in ENGINES:
        raise PcitraceError(f"unknown decode engine {engine!r}", fix="use --engine fast or --engine sigrok")
    capture, profile = _open(capture, profile)
    selected = _select(profile, buses)
    pci = [b for b in selected if b.is_pci]
    probes = [b for b in selected if not b.is_pci]

    summaries: dict[str, BusSummary] = {}
    per_bus = []
    if engine == "fast":
        for b, (r, w, f, summary) in zip(pci, decode_buses(capture, pci, chunk_clocks=chunk_clocks,
                                                            profile_name=profile.describe(), progress=progress)):
            per_bus.append((r, w, f))
            summaries[b.name] = summary
    else:
        for (r, w, f), summary in _decode_sigrok(capture, pci, profile):
            per_bus.append((r, w, f))
            summaries[summary.name] = summary
    records, words, findings = merge_buses(per_bus)
    frames = {}
    for b in probes:
        frames[b.name], summaries[b.name] = _decode_probe(capture, b)
    return DecodeResult(records, words, findings, profile, summaries, frames, engine)


def iter_records(capture, profile=None, *, buses=None, chunk_clocks: int = DEFAULT_CHUNK_CLOCKS,
                 progress=None):
    """The records of ``decode_capture(capture, profile, buses=buses).records`` (fast engine),
    chunk by chunk in the same order with the same ``data_index``, holding only about one
    chunk per bus: for writing captures too long to hold every record (``pcitrace decode -o``).

    Several buses are merged by start time as they stream: the bus that is furthest behind is
    read next, and a record is passed on once no bus can still produce an earlier one.
    """
    capture, profile = _open(capture, profile)
    pci = [b for b in _select(profile, buses) if b.is_pci]
    sums: list[dict] = [{} for _ in pci]
    gens = [iter_bus(capture, b, chunk_clocks=chunk_clocks, profile_name=profile.describe(),
                     progress=progress, summary=sums[k]) for k, b in enumerate(pci)]
    pending: list[list[np.ndarray]] = [[] for _ in pci]
    # the earliest start a bus's next record can have: its last record's start, or how far its
    # clocks have gone (so a bus without transactions does not hold the others' records back
    # nor run ahead of them)
    frontier = [-(1 << 62)] * len(pci)
    live = set(range(len(pci)))
    data_index = 0

    def emit(upto: int | None) -> np.ndarray:
        """Every pending record starting before ``upto`` (all when None), in start order;
        ties go to the bus listed first, as merge_buses orders them."""
        nonlocal data_index
        parts = []
        for k, chunks in enumerate(pending):
            if not chunks:
                continue
            arr = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            cut = len(arr) if upto is None else int(np.searchsorted(arr["start_ps"], upto, side="left"))
            parts.append(arr[:cut])
            pending[k] = [arr[cut:]] if cut < len(arr) else []
        out = _cat(parts, RECORD_DTYPE)
        if len(parts) > 1:
            out = out[np.argsort(out["start_ps"], kind="stable")]
        elif len(out):
            out = out.copy()
        if len(out):
            phases = out["data_phases"].astype(np.int64)
            first = np.empty(len(out), np.int64)
            first[0] = 0
            np.cumsum(phases[:-1], out=first[1:])
            out["data_index"] = data_index + first
            data_index += int(phases.sum())
        return out

    from pcitrace.capture.model import SharedReads

    # the buses advance together, so a .sr is inflated once for all of them (see decode_buses)
    with capture.shared_reads() if len(gens) > 1 else SharedReads() as shared:
        started: set[int] = set()
        while live:
            k = min(live, key=lambda b: frontier[b])
            try:
                r, _, _ = next(gens[k])
            except StopIteration:
                live.discard(k)
            else:
                if len(r):
                    pending[k].append(r)
                    frontier[k] = max(frontier[k], int(r["start_ps"][-1]))
                if sums[k].get("frontier_ps") is not None:
                    frontier[k] = max(frontier[k], sums[k]["frontier_ps"])
            started.add(k)
            if len(started) == len(gens):
                shared.seal()
            out = emit(min(frontier[b] for b in live) if live else None)
            if len(out):
                yield out


def _summary_only(capture, bus) -> BusSummary:
    """Bus clocks and time span without decoding (the sigrok path needs them too)."""
    from pcitrace.capture.clocked import bus_clocks

    span = _BusSpan()
    keep = {k: v for k, v in bus.signals.items() if k in ("clk", "frame_n", "irdy_n")}
    for ch in bus_clocks(capture, dataclasses.replace(bus, signals=keep)):
        if len(ch):
            span.add(ch)
    return span.summary(bus)


def _decode_sigrok(capture, pci_buses, profile):
    """Run the reference decoder through sigrok-cli, writing a temporary .sr for a capture
    that is not a file."""
    from pcitrace.capture import write_sr
    from pcitrace.decode.sigrok import run_sigrok

    with contextlib.ExitStack() as stack:
        path = capture.path
        # run_sigrok reads .sr and VCD files itself (a VCD becomes a state-mode copy there);
        # an in-memory capture is written out first
        if not (path and os.path.exists(path)):
            tmpdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="pcitrace-sigrok-"))
            path = os.path.join(tmpdir, "capture.sr")
            write_sr(capture, path)
        for b in pci_buses:
            res = run_sigrok(path, b)
            recs = np.asarray(res.records)
            finds = np.asarray(getattr(res, "findings", np.zeros(0, FINDING_DTYPE)))
            words = np.asarray(getattr(res, "words", np.zeros(0, WORD_DTYPE)))
            if words.dtype != WORD_DTYPE:
                words = np.zeros(0, WORD_DTYPE)
            yield (recs, words, finds), _summary_only(capture, b)


def _decode_probe(capture, bus):
    """Frames of one probe link, through the probe twin engine (pcitrace.decode.probe)."""
    from pcitrace.decode.probe import decode_probe_capture

    frames = decode_probe_capture(capture, bus)
    times = frames["start_ps"] if len(frames) else np.zeros(0, np.int64)
    summary = bus_summary(bus, None, 0, int(times[0]) if len(times) else 0,
                          int(frames["end_ps"][-1]) if len(frames) else 0)
    return frames, summary


__all__ = ["decode_capture", "decode_bus", "iter_bus", "iter_records", "merge_buses", "bus_summary", "DecodeResult",
           "BusSummary", "ENGINES"]

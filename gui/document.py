"""A capture as the viewer shows it: signal rows, decoded rows and analysis rows.

``Document.open`` reads the capture and profile and builds the change lists of every shown
signal in one streaming pass (plus one pass per bus for AD and C/BE# sampled at the clock);
``decode`` and ``analyse`` add the decoded and analysis rows. All of it is plain numpy so the
worker thread runs it and the tests call it directly; the window only draws the rows.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pcitrace import buses, pipeline
from pcitrace.errors import PcitraceError
from pcitrace.gui.lod import ChangeBuilder, ChangeLOD, IntervalLOD, count_below
from pcitrace.records import short_command  # noqa: F401 - the viewer's labels (D.short_command)

# terminations: severity order (merged blocks show the most severe) and colours
TERMINATIONS = ("normal", "disconnect_with_data", "disconnect_without_data", "split_response",
                "retry", "truncated", "master_abort", "target_abort")
TERMINATION_COLOURS = {
    "normal": "#43a047", "disconnect_with_data": "#1e88e5", "disconnect_without_data": "#00acc1",
    "split_response": "#8e24aa", "retry": "#fb8c00", "truncated": "#9e9e9e",
    "master_abort": "#d81b60", "target_abort": "#e53935",
}
TERMINATION_LABELS = {
    "normal": "normal", "disconnect_with_data": "disconnect w/ data",
    "disconnect_without_data": "disconnect w/o data", "split_response": "split response",
    "retry": "retry", "truncated": "truncated", "master_abort": "master abort",
    "target_abort": "target abort",
}
GROUP_COLOURS = ("#8d6e63", "#f9a825")          # interrupt group, setup group
BURST_COLOURS = ("#26a69a", "#7e57c2", "#3949ab")   # status write-back, descriptor, frame data
BURST_LABELS = ("status write-back", "descriptor fetch", "frame data")
FRAME_COLOUR = "#00897b"
FINDING_COLOUR = "#c62828"



Cancelled = pipeline.Cancelled   # the user cancelled loading or decoding


@dataclasses.dataclass
class Row:
    key: str                  # unique, e.g. 'send/frame_n', 'send/#txn'
    label: str
    group: str                # bus or link name
    kind: str                 # line | vector | txn | finding | csr | burst | occupancy | frames
    lod: object = None        # ChangeLOD / IntervalLOD / BusyTime
    bits: int = 1             # vectors: hex digits from this many bits
    height: int = 20          # pixels


def _progress_noop(done: float, text: str = "") -> None:
    pass


class Document:
    """One open capture with its profile, rows and (once decoded) results."""

    def __init__(self, path: str, capture, profile):
        self.path = path
        self.capture = capture
        self.profile = profile
        self.rows: list[Row] = []
        self.result = None          # DecodeResult
        self.analysis = None        # Analysis
        self.chains: dict = {}      # link -> LinkChain
        self.analysis_error: str | None = None
        self.periods: dict[str, float] = {}   # bus -> clock period ps
        self.clock_counts: dict[str, int] = {}
        self.start_ps = int(capture.timebase.time_ps(0)) if capture.num_samples else 0
        self.end_ps = self.start_ps + int(capture.duration_ps)
        if capture.num_samples and capture.timebase.rate_hz:
            self.end_ps = self.start_ps + int(round(capture.num_samples * 1e12 / capture.timebase.rate_hz))

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(cls, path, profile_path=None, *, progress: Callable = _progress_noop,
             cancelled: Callable[[], bool] = lambda: False, partial: Callable | None = None,
             chunk_samples: int = 1 << 22) -> "Document":
        """Open and read the signal rows; ``partial(doc)`` is called with the rows filled so far
        after 1, 2, 4, 8 ... chunks, so a viewer can paint long before a huge capture is read."""
        path = os.fspath(path)
        capture = pipeline.run(path, until="open").capture
        if capture.num_samples == 0:
            raise PcitraceError("the capture holds no samples", path=path,
                                fix="capture again with a longer sample count")
        profile = pipeline.run(capture, profile_path or None, until="profile").profile
        doc = cls(path, capture, profile)
        doc.build_signal_rows(progress=progress, cancelled=cancelled, chunk_samples=chunk_samples,
                              partial=(lambda: partial(doc)) if partial else None)
        return doc

    def build_signal_rows(self, *, progress: Callable = _progress_noop,
                          cancelled: Callable[[], bool] = lambda: False,
                          chunk_samples: int = 1 << 22, partial: Callable | None = None) -> None:
        """Change lists of every shown signal: 1-bit lines from the samples as captured (so a
        glitch shows), AD / C/BE# as the value sampled at each rising clock edge."""
        cap, tb = self.capture, self.capture.timebase
        plan: list[tuple[Row, object, str | None]] = []   # (row, bus, channel of a 1-bit line)
        vectors: list[tuple[Row, object, str]] = []
        for bus in self.profile.buses:
            kind = bus.bus_kind
            for sig, label in kind.viewer_rows:
                if sig not in bus.signals:
                    continue
                chans = bus.channels_of(sig)
                width = sum(cap.channel(c).width for c in chans)
                if sig in kind.vectors or width > 1:
                    row = Row(f"{bus.name}/{sig}", f"{label}[{width - 1}:0]", bus.name, "vector",
                              bits=width, height=22)
                    vectors.append((row, bus, sig))
                else:
                    row = Row(f"{bus.name}/{sig}", label, bus.name, "line", height=18)
                    plan.append((row, bus, chans[0]))
                self.rows.append(row)
        # one pass over the samples for every 1-bit line
        names = list(dict.fromkeys(ch for _, _, ch in plan))
        builders = {n: ChangeBuilder(np.uint8) for n in names}
        total = max(cap.num_samples, 1)
        empty = ChangeLOD(np.zeros(0, np.int64), np.zeros(0, np.uint8), self.start_ps)
        for row in self.rows:
            row.lod = empty if row.kind == "line" else ChangeLOD(np.zeros(0, np.int64),
                                                                  np.zeros(0, np.uint64), self.start_ps)

        def publish(final: bool):
            for row, bus, ch in plan:
                lod = builders[ch].build(self.end_ps) if final else builders[ch].snapshot()
                if row.key.split("/", 1)[1] in bus.inverted:
                    lod = ChangeLOD(lod.times, lod.values ^ np.uint8(1), lod.end_ps)
                row.lod = lod

        next_snapshot = 1
        done_chunks = 0
        if names:
            for chunk in cap.iter_chunks(names, chunk_samples=chunk_samples):
                if cancelled():
                    raise Cancelled()
                for n in names:
                    builders[n].feed_indices(chunk.start, chunk.data[n], tb.times_at)
                progress(0.6 * (chunk.start + chunk.length) / total, "reading signals")
                done_chunks += 1
                if partial is not None and done_chunks == next_snapshot and \
                        chunk.start + chunk.length < cap.num_samples:
                    next_snapshot *= 2
                    publish(final=False)
                    partial()
        publish(final=True)
        for row, bus, ch in plan:
            if row.key.endswith("/clk"):
                lod = row.lod
                rising = int(np.count_nonzero(lod.values == 1)) - int(lod.values[0] == 1 if len(lod.values) else 0)
                self.clock_counts[bus.name] = max(rising, 0)
        # one pass per bus for its vectors, sampled at the bus clock
        by_bus: dict[str, list[tuple[Row, str]]] = {}
        for row, bus, sig in vectors:
            by_bus.setdefault(bus.name, []).append((row, sig))
        for k, (bname, items) in enumerate(by_bus.items()):
            bus = self.profile.bus(bname)
            for row, sig in items:
                row.lod = self._vector_lod(bus, sig, cancelled)
            progress(0.6 + 0.4 * (k + 1) / len(by_bus), "reading bus values")
        if tb.mode == "state":
            for bus in self.profile.buses:
                self.clock_counts.setdefault(bus.name, cap.num_samples)
        for bus in self.profile.buses:
            if bus.clock_hz:
                self.periods[bus.name] = 1e12 / float(bus.clock_hz)
            elif tb.mode == "state" and tb.clock_hz:
                self.periods[bus.name] = 1e12 / tb.clock_hz
            elif self.clock_counts.get(bus.name):
                self.periods[bus.name] = (self.end_ps - self.start_ps) / self.clock_counts[bus.name]
        progress(1.0, "signals ready")

    def _vector_lod(self, bus, sig: str, cancelled) -> ChangeLOD:
        cap, tb = self.capture, self.capture.timebase
        chans = bus.channels_of(sig)
        builder = ChangeBuilder(np.uint64)
        if tb.mode == "state" or not bus.clock:
            # state capture (or a probe without RX_CLK): every sample is a clock
            for chunk in cap.iter_chunks(chans, chunk_samples=1 << 22):
                if cancelled():
                    raise Cancelled()
                v = self._assemble(chunk.data, chans)
                shift = sum(cap.channel(c).width for c in chans)
                if sig in bus.inverted:
                    v = v ^ np.uint64((1 << shift) - 1 if shift < 64 else 0xFFFFFFFFFFFFFFFF)
                builder.feed_indices(chunk.start, v, tb.times_at)
            return builder.build(self.end_ps)
        from pcitrace.capture.clocked import bus_clocks
        keep = {k: v for k, v in bus.signals.items() if k in (sig, "clk", "frame_n", "rx_clk", "frame_present")}
        slim = dataclasses.replace(bus, signals=keep)
        for bc in bus_clocks(self.capture, slim, chunk_clocks=1 << 20):
            if cancelled():
                raise Cancelled()
            builder.feed(bc.times_ps, bc.sig[sig])
        return builder.build(self.end_ps)

    def _assemble(self, data: dict, chans: list[str]) -> np.ndarray:
        out, shift = None, 0
        for c in chans:
            a = data[c].astype(np.uint64)
            if shift:
                a = a << np.uint64(shift)
            out = a if out is None else out | a
            shift += self.capture.channel(c).width
        return out

    # -- decoding and analysis ------------------------------------------------------------
    def total_clocks(self) -> int:
        return sum(self.clock_counts.get(b.name, 0) for b in self.profile.buses if b.is_pci)

    def decode(self, *, progress: Callable = _progress_noop,
               cancelled: Callable[[], bool] = lambda: False) -> None:
        """Decode, analyse and link through the pipeline. A user error in analysis (e.g. a
        classification rule the capture cannot support) leaves the transactions to show."""
        total = max(self.total_clocks(), 1)
        done = [0]

        def on_progress(stage: str, n: int) -> None:
            if stage == "decode":
                done[0] += n
                progress(min(done[0] / total, 1.0), "decoding")
            elif stage == "analyse":
                progress(1.0, "analysing")

        self.analysis_error = None
        try:
            run = pipeline.run(self.capture, self.profile, chunk_clocks=1 << 18, progress=on_progress,
                               cancelled=cancelled)
        except PcitraceError as exc:
            run = getattr(exc, "run", None)
            if run is None or run.decoded is None:
                raise
            self.analysis_error = str(exc)
        self.result, self.analysis, self.chains = run.decoded, run.analysis, run.chains
        for name, s in self.result.buses.items():
            if s.clock_hz and name not in self.periods:
                self.periods[name] = 1e12 / s.clock_hz
        self._add_decoded_rows()

    def _add_decoded_rows(self) -> None:
        from pcitrace.analyse.occupancy import BusyTime

        res, an = self.result, self.analysis
        recs = res.records
        # class per record through its unique terminations (a handful), not a loop per record
        uniq, inv = np.unique(recs["termination"], return_inverse=True)
        term_class = {t: i for i, t in enumerate(TERMINATIONS)}
        self.record_class = np.array([term_class.get(str(t), 0) for t in uniq], np.int16)[inv] \
            if len(recs) else np.zeros(0, np.int16)
        self.record_end = recs["end_ps"].copy()
        for name in res.buses:
            sel = recs["bus"] == name
            if name in self.periods:
                self.record_end[sel] += int(round(self.periods[name]))
        # per bus: data word times (sorted) and cumulative bytes, for byte counts between cursors
        self.word_bytes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        w = res.words
        if len(w):
            wrec = recs[w["record"]]
            mask = np.where(wrec["width"] == 64, 0xFF, 0x0F).astype(np.uint8)
            enabled = (~w["byte_enables"]) & mask
            nbytes = np.unpackbits(enabled[:, None], axis=1).sum(1).astype(np.int64)
            for name in res.buses:
                sel = wrec["bus"] == name
                t = w["time_ps"][sel]
                order = np.argsort(t, kind="stable")
                self.word_bytes[name] = (t[order], np.concatenate(([0], np.cumsum(nbytes[sel][order]))))
        self.bus_spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.busy: dict = {}
        for name in res.buses:
            sel = recs["bus"] == name
            self.bus_spans[name] = (recs["start_ps"][sel], np.maximum.accumulate(self.record_end[sel])
                                    if sel.any() else self.record_end[sel])
            # busy time straight from the records: the cursor figures need no analyser
            if name in self.periods and buses.kind(res.buses[name].kind).transactions:
                self.busy[name] = BusyTime.of(recs[sel], self.periods[name])
        new: list[Row] = []
        for bus in self.profile.buses:
            name = bus.name
            if bus.is_pci and name in res.buses:
                idx = np.flatnonzero(recs["bus"] == name)
                lod = IntervalLOD(recs["start_ps"][idx], self.record_end[idx], self.record_class[idx])
                lod.order = idx[lod.order]          # back to indices of res.records
                new.append(Row(f"{name}/#txn", "Transactions", name, "txn", lod, height=24))
                f = res.findings[res.findings["bus"] == name]
                fidx = np.flatnonzero(res.findings["bus"] == name)
                flod = IntervalLOD(f["time_ps"], f["time_ps"])
                flod.order = fidx[flod.order]
                new.append(Row(f"{name}/#find", "Findings", name, "finding", flod, height=18))
                ba = an.buses.get(name) if an is not None else None
                if ba is not None:
                    g = ba.groups
                    new.append(Row(f"{name}/#csr", "CSR groups", name, "csr",
                                   IntervalLOD(g["start_ps"], g["end_ps"], g["setup"].astype(np.int16)),
                                   height=20))
                    b = ba.bursts
                    kinds = ba.transfers["kind"][b["transfer"]] if len(b) and len(ba.transfers) else \
                        np.zeros(len(b), np.int8)
                    # class = colour index: status 0, descriptor 1, data 2 (data drawn on top)
                    from pcitrace.analyse.packets import DATA, DESCRIPTOR
                    cls = np.where(kinds == DATA, 2, np.where(kinds == DESCRIPTOR, 1, 0)).astype(np.int16)
                    new.append(Row(f"{name}/#dma", "DMA bursts", name, "burst",
                                   IntervalLOD(b["start_ps"], b["end_ps"], cls), height=20))
                    if name in self.busy:
                        new.append(Row(f"{name}/#occ", "Occupancy", name, "occupancy",
                                       self.busy[name], height=16))
            elif name in res.frames:
                fr = res.frames[name]
                new.append(Row(f"{name}/#frames", "Frames", name, "frames",
                               IntervalLOD(fr["start_ps"], fr["end_ps"]), height=24))
        # insert each bus's decoded rows right after its signal rows
        out: list[Row] = []
        groups = list(dict.fromkeys(r.group for r in self.rows + new))
        for g in groups:
            out.extend(r for r in self.rows if r.group == g and not r.key.split("/", 1)[1].startswith("#"))
            out.extend(r for r in new if r.group == g)
        self.rows = out

    def bytes_between(self, bus: str, t0: float, t1: float) -> int:
        """Bytes moved on ``bus`` in [t0, t1): enabled byte lanes of the data words in it, or
        without AD / C/BE# each transaction's bytes in proportion to its overlap."""
        wb = self.word_bytes.get(bus)
        if wb is not None:
            t, cum = wb
            i0, i1 = count_below(t, np.array([t0, t1], np.float64))
            return int(cum[i1] - cum[i0])
        rec = self.result.records
        sel = np.flatnonzero(rec["bus"] == bus)
        s = rec["start_ps"][sel].astype(np.float64)
        e = self.record_end[sel].astype(np.float64)
        ov = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)
        frac = np.where(e > s, ov / np.maximum(e - s, 1), 0)
        return int(round(float((rec["bytes"][sel] * frac).sum())))

    def transactions_between(self, bus: str, t0: float, t1: float) -> int:
        """Transactions of ``bus`` overlapping [t0, t1) (one bus's never overlap each other)."""
        starts, ends = self.bus_spans[bus]
        return max(count_below(starts, t1) - count_below(ends, t0, inclusive=True), 0)

    # -- labels ---------------------------------------------------------------------------
    def record_label(self, i: int, long: bool = False) -> str:
        r = self.result.records[i]
        cmd = short_command(str(r["command"]))
        txt = f"{cmd} {int(r['address']):08X}" if str(r["command"]) != "unknown" else cmd
        if long:
            txt += f"  {int(r['bytes'])} B  {TERMINATION_LABELS.get(str(r['termination']), str(r['termination']))}"
        return txt

def session_path_for(capture_path) -> Path:
    p = Path(capture_path)
    name = p.name
    for ext in (".vcd.gz", ".sr", ".vcd"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
            break
    return p.with_name(name + ".pcitrace-session.json")

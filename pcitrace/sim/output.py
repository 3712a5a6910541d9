"""Simulation results: the capture (timing or state mode), its profile and its truth.

Time base shared by every mode: bus clock k of a bus with period T has its rising edge at
``T/2 + k*T`` ps. A state capture has one sample per clock at exactly those times
(``start_ps = T/2``); a timing capture samples every ``p`` ps, where ``p`` divides 1e12 (so the
sample rate is a whole number of Hz, as .sr files and sigrok need) and half of every bus
period, with at least four samples per clock. CLK is high for the first half period after
the edge; the other signals change ``ceil(n/4)`` samples after the edge (n samples per clock),
so the sample at the edge still shows the values of that clock (docs/records.md).

Truth file (``NAME.truth.json``, format ``pcitrace-truth/1``; one JSON line per list item). In
memory (``SimResult.truth``) its ``records``, ``frames`` and ``packets`` are sequences of dicts
kept as columns and made into dicts when read (:class:`RecordList`, :class:`DictRows`: a long
capture has hundreds of thousands); :func:`truth_json` writes them column by column.

- ``scenario``, ``seed``, ``mode``, ``ad``, ``gnt``, ``duration_ps``, ``sample_period_ps``
  (timing: the sample period; state: the bus period), ``samples``;
- ``buses``: name -> kind, width, clock_hz, period_ps, first_clock_ps, pc, bar [lo, hi], mmrbc;
- ``records``: every transaction with the docs/records.md fields (what both decoders must
  produce, sorted by start_ps) plus ``master`` (nic | host | other), ``purpose`` (csr_read,
  csr_write, desc_fetch, data_read, data_completion, desc_completion, data_write, status_write,
  other) and ``packet`` (sequence number of the frame it serves, -1 none);
- ``findings``: time_ps, bus, kind, message (the renderer's and the injected faults');
- ``frames``: link (a_to_b | b_to_a), kind (data | pause), seq, frame_bytes (Ethernet header to
  CRC), lost, probed, wire_start_ps / wire_end_ps (exact), start_ps / end_ps / sof_ps /
  wire_time_ps (as sampled: what the gbe_probe decoders report), truncated;
- ``pauses``: start_ps / end_ps of each pause of a's transmitter;
- ``packets``: per UDP packet: seq, src, dst, user_bytes, frame_bytes, lost, send_bus,
  recv_bus, app_send_ps, csr_records (record indices of the CSR group that starts the send),
  csr_start_ps, csr_end_ps, csr_retries, first_dma_ps, csr_setup_ps (first DMA - first CSR
  access), tx_dma_records, tx_data_bursts, tx_bytes, tx_data_start_ps, tx_first_word_ps,
  tx_dma_end_ps, wire_start_ps, wire_end_ps, wire_time_ps, rx_dma_records, rx_data_bursts,
  rx_bytes, rx_data_start_ps, rx_first_word_ps, rx_data_end_ps, rx_dma_end_ps,
  tx_irq_csr_records / rx_irq_csr_records (the interrupt's CSR group), tx_irq_csr_start_ps,
  rx_irq_csr_start_ps, send_to_recv_ps (first data word on the send bus -> on the receive bus),
  tx_interrupt_delay_ps / rx_interrupt_delay_ps (end of the packet's last DMA -> the CSR group
  of the interrupt that reports it); -1 where a step is not in the capture. A packet moved by
  several bursts (the NIC's own max burst or latency timer, the bridge's disconnects) is one
  packet with all of them in its ``*_dma_records``; the records' ``purpose`` tells its
  descriptor fetch, data bursts and status write-back apart. With ``inta`` also tx_inta_ps /
  rx_inta_ps (INTA# fell for the interrupt that reports the packet);
- ``interrupts`` (with ``inta`` only): per interrupt raised by a captured bus's NIC, in order:
  bus, raised_ps (the NIC's decision), inta_ps (INTA# falls; an interrupt raised while INTA# is
  still low shares the earlier fall), inta_release_ps (the clock after its routine's ICR read,
  or after its first access when it reads no ICR; -1 not in the capture), csr_records (its
  routine's accesses, retried ones included), csr_retries, first_access_ps (-1: none),
  packets ([kind, seq]: the tx / rx events it reports);
- ``occupancy``: bus -> clocks, busy (FRAME# or IRDY# asserted), fraction, data (completed
  data phases), address (address / DAC / attribute clocks), retry (clocks of retried
  transactions), stray (busy clocks outside every transaction: IRDY# with no transaction),
  wait (the rest of the busy clocks), by_initiator {nic, host, other}, period_ps, busy_ps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import operator
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pcitrace.capture import Capture, TimeBase, write_capture
from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.profile import BusProfile, NicIdentity, Profile, save_profile
from pcitrace.decode.records import FIELD_NAMES, FINDING_DTYPE, RECORD_DTYPE
from pcitrace.errors import PcitraceError
from pcitrace.sim.bus import RecordColumns, Strings
from pcitrace.sim.model import ROW_WIDTH, ModelResult, run_model
from pcitrace.sim.scenario import Scenario
from pcitrace.sim.specs import MASTER_INDEX, MASTERS, phases, render_txns, spec_clocks

TRUTH_FORMAT = "pcitrace-truth/1"

# canonical signal -> channel base name (prefixed "<bus>.")
PCI_CHANNELS = {
    "clk": "CLK", "frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
    "devsel_n": "DEVSEL#", "ad": "AD", "cbe_n": "CBE#", "par": "PAR", "par64": "PAR64",
    "req64_n": "REQ64#", "ack64_n": "ACK64#", "req_n": "REQ#", "gnt_n": "GNT#", "inta_n": "INTA#",
}
AD_SIGNALS = ("ad", "cbe_n", "par", "par64")
PROBE_CHANNELS = {"frame_present": "FRAME_PRESENT", "sof": "SOF", "rxd": "RXD", "rx_dv": "RX_DV",
                  "rx_clk": "RX_CLK"}
GMII_PERIOD_PS = 8000            # 125 MHz byte clock of a 1 Gbit/s link


@dataclasses.dataclass
class SimResult:
    capture: Capture
    profile: Profile
    truth: dict
    scenario: Scenario | None = None


def _divisors_of_1e12_dividing(g: int) -> list[int]:
    out = []
    for a in range(13):
        for b in range(13):
            d = 2 ** a * 5 ** b
            if g % d == 0:
                out.append(d)
    return sorted(out, reverse=True)


def sample_period_ps(periods: list[int]) -> int:
    """Largest p dividing 1e12 and every half period with >= 4 samples per clock."""
    g = 0
    for T in periods:
        g = math.gcd(g, T // 2)
    for p in _divisors_of_1e12_dividing(g):
        if all(T // p >= 4 for T in periods):
            return p
    raise PcitraceError(f"no sample rate fits the bus periods {periods} ps",
                        fix="use standard clocks (33, 66, 100, 133 MHz)")


def _union_line(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """A line of ``n`` samples (uint8), 1 in the union of the intervals [lo, hi) (any order,
    overlapping or not, clipped to the line): the merged intervals drawn by one repeat, no
    slice per interval."""
    lo, hi = np.clip(lo, 0, n), np.clip(hi, 0, n)
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if not len(lo):
        return np.zeros(n, np.uint8)
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], hi[o]
    reach = np.maximum.accumulate(hi)
    first = np.ones(len(lo), bool)          # an interval that starts a merged one
    first[1:] = lo[1:] > reach[:-1]
    last = np.append(first[1:], True)       # ... and the one that ends it
    b = np.empty(2 * int(first.sum()) + 2, np.int64)
    b[0], b[-1] = 0, n
    b[1:-1:2] = lo[first]
    b[2:-1:2] = reach[last]
    levels = np.zeros(len(b) - 1, np.uint8)
    levels[1::2] = 1
    return np.repeat(levels, np.diff(b))


def _data_clocks(sig: dict, K: int) -> np.ndarray:
    """The clocks with IRDY#, TRDY# and DEVSEL# all asserted: the completed data phases (the
    lines are 0/1 levels: OR-ed together they are 0 exactly there)."""
    x = np.bitwise_or(sig["irdy_n"][:K], sig["trdy_n"][:K])
    x |= sig["devsel_n"][:K]
    return np.flatnonzero(x == 0)


def _first_data_clocks(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    if len(data) == 0:
        return np.full(len(starts), -1, np.int64)
    i = np.searchsorted(data, starts)
    i = np.minimum(i, len(data) - 1)
    return data[i]


MAX_SAMPLES = 200_000_000      # about 2-4 GB of channel arrays: beyond that, refuse up front


def simulate(sc: Scenario, progress=None) -> SimResult:
    """Run the model, render every captured bus, sample the probe lines, build the truth."""
    # A long run holds millions of small objects (transactions, events, truth rows) and frees
    # almost none: the cyclic collector would walk all of them again and again (a quarter of
    # the run time at 10 M clocks). The few cycles (the model's parked generators) are
    # collected once it is back on.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(sc, progress)
    finally:
        if was_enabled:
            # Everything allocated meanwhile is still in the youngest generation: the first
            # allocation after gc.enable() would walk all of it (0.1-0.3 s at 4 M clocks, paid
            # by whoever allocates next). A run leaves no cyclic garbage (tests/sim/test_output.py),
            # so it goes straight to the oldest generation instead (freeze + unfreeze moves the
            # lists, O(1)); what the host made meanwhile goes there too, collected later, not lost.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def _simulate(sc: Scenario, progress=None) -> SimResult:
    _check_size(sc)
    model = run_model(sc, spec_clocks)
    duration = model.duration_ps
    buses = list(model.buses.values())
    timing = sc.mode == "timing"
    periods = [b.period for b in buses]
    if timing:
        p = sample_period_ps(periods)
        nsamples = duration // p
    else:
        T = periods[0]
        phase = T // 2
        nsamples = (duration - phase) // T + 1
        p = T
    arrays: dict[str, np.ndarray] = {}
    widths: dict[str, int] = {}
    profile_buses: list[BusProfile] = []
    rec_parts, find_parts = [], []
    ann: dict[str, list] = {"master": [], "purpose": [], "packet": []}     # per bus: Strings / arrays
    occupancy: dict[str, dict] = {}
    bus_rows: list = []              # per bus: the columns of its transactions (txn_columns)
    inta: dict = {}                  # per bus with INTA#: its interrupts' clocks (inta_clocks)
    first_parts: list = []           # per bus: time of each transaction's first data phase

    for bi, b in enumerate(buses):
        cfg = b.cfg
        K = b.clock_at(duration) if timing else nsamples     # clocks k with T/2 + kT < duration
        # the fault injections pick transactions by their fields: Txn objects, only for them
        f = sc.faults
        txns = b.txns if (f.parity_errors or f.stray_irdy or f.trdy_without_devsel or f.glitches) else None
        frng = np.random.default_rng([sc.seed, 0xFA, bi])
        share = lambda n: n // len(buses) + (bi < n % len(buses))      # noqa: E731
        rb, cols = _render_bus(sc, b, txns, frng, share, K)
        starts, ends = cols["start"], cols["end"]
        phase = b.phase
        injected = _inject_signals(sc, rb.signals, txns, starts, ends, frng, share)
        recs = rb.records            # the renderer's own array: no copy of a long record list
        recs["start_ps"] = phase + starts * b.period
        recs["end_ps"] = phase + ends * b.period
        finds = rb.findings.copy()
        finds["time_ps"] += phase
        glitches = _pick_glitches(txns, starts, frng, share(sc.faults.glitches)) \
            if sc.faults.glitches and timing else []
        extra = [(phase + c * b.period, cfg.name, kind, msg) for kind, c, msg in injected]
        data_clocks = _data_clocks(rb.signals, K)
        first = _first_data_clocks(data_clocks, starts)
        first_parts.append(np.where(first >= 0, phase + first * b.period, -1))
        rec_parts.append(recs)
        ann["master"].append(Strings(MASTERS, cols["master"]))
        ann["purpose"].append(cols["purpose"])
        ann["packet"].append(cols["packet"])
        bus_rows.append(cols)
        occupancy[cfg.name] = _occupancy(rb.signals, data_clocks, cols, recs, b, K)
        if sc.inta:
            inta[cfg.name] = inta_clocks(b, model.irqs[cfg.pc], cols, K)
            rb.signals["inta_n"] = inta_line(inta[cfg.name], K)
        signals = _bus_sample_channels(sc, b, rb.signals, K, p, nsamples, glitches, extra, arrays, widths)
        if extra:
            finds = np.sort(np.concatenate((finds, np.array(extra, FINDING_DTYPE))), order="time_ps")
        find_parts.append(finds)
        profile_buses.append(BusProfile(
            name=cfg.name, kind=cfg.kind, signals=signals, width=cfg.width,
            clock_hz=None if timing else 1e12 / b.period,
            nic=NicIdentity(gnt="gnt_n" if sc.gnt else None, req="req_n" if sc.gnt else None,
                            bars=[(cfg.nic.bar, cfg.nic.bar + 0x1FFFF)])))

    frames_out = _probe_lines(sc, model, periods, p, nsamples, arrays, widths, profile_buses)

    records, rec_dicts, inv, first_ps = _merged_records(rec_parts, ann, first_parts)
    findings = np.concatenate(find_parts) if find_parts else np.zeros(0, FINDING_DTYPE)
    findings = np.sort(findings, order="time_ps")

    truth = {
        "format": TRUTH_FORMAT,
        "scenario": sc.name,
        "seed": sc.seed,
        "mode": sc.mode,
        "ad": sc.ad,
        "gnt": sc.gnt,
        "duration_ps": duration,
        "sample_period_ps": p,
        "samples": int(nsamples),
        "buses": {b.cfg.name: {"kind": b.cfg.kind, "width": b.cfg.width, "clock_hz": 1e12 / b.period,
                               "period_ps": b.period, "first_clock_ps": b.phase,
                               "pc": b.cfg.pc, "bar": [b.cfg.nic.bar, b.cfg.nic.bar + 0x1FFFF],
                               "mmrbc": b.cfg.mmrbc if b.cfg.kind == "pcix" else None}
                  for b in buses},
        "records": rec_dicts,
        "findings": [{"time_ps": int(f["time_ps"]), "bus": str(f["bus"]), "kind": str(f["kind"]),
                      "message": str(f["message"])} for f in findings],
        "frames": frames_out,
        "pauses": [{"start_ps": a, "end_ps": z} for a, z in model.pauses],
        "packets": _packets(model, bus_rows, inv, records, first_ps),
        "occupancy": occupancy,
    }
    if sc.inta:
        _add_interrupts(truth, model, bus_rows, inv, records, inta)
    tb = TimeBase.timing(1e12 / p) if timing else TimeBase.state(clock_hz=1e12 / periods[0],
                                                                  start_ps=periods[0] // 2)
    meta = {"generator": "pcitrace simulate", "scenario": sc.name, "seed": sc.seed}
    cap = Capture.from_arrays(arrays, tb, widths=widths, metadata=meta)
    prof = Profile(profile_buses, source="memory")
    return SimResult(cap, prof, truth, sc)


def _merged_records(rec_parts: list, ann: dict, first_parts: list):
    """The buses' records merged (sorted as the decoders give them) with their notes: (record
    columns, RecordList, per bus-order record its merged index, per merged record the time of
    its first data phase)."""
    # sorted as the decoders give them
    # One scatter per bus into the sorted array (no concatenated copy first): the record
    # array of a long capture is hundreds of MB.
    starts_all = np.concatenate([r["start_ps"] for r in rec_parts]) if rec_parts else np.zeros(0, np.int64)
    order = np.lexsort((np.arange(len(starts_all)), starts_all))
    inv = np.empty(len(order), np.int64)
    inv[order] = np.arange(len(order))
    records = _merge_columns(rec_parts, order)
    # One word per completed data phase on every bus, kept in record order after the merge:
    # a record's first word is the count of data phases before it (docs/records.md).
    phases_ = records["data_phases"]
    records["data_index"] = np.concatenate(([0], np.cumsum(phases_)[:-1])) if len(phases_) else phases_
    ann = {k: _merge_notes(v, order) for k, v in ann.items()}
    first_ps = np.empty(len(order), np.int64)
    if first_parts:
        first_ps[inv] = np.concatenate(first_parts)
    return records, RecordList(records, ann), inv, first_ps


def _check_size(sc: Scenario) -> None:
    """Refuse up front what the simulator cannot capture: GMII in state mode, more than
    MAX_SAMPLES samples."""
    if sc.link.gmii and sc.mode != "timing":
        raise PcitraceError("link.gmii needs a timing capture (the 125 MHz GMII clock is not a bus clock)",
                            path=sc.path, where="link.gmii", fix='use mode = "timing" or gmii = false')
    per = [b.period_ps for b in sc.buses]
    step = sample_period_ps(per) if sc.mode == "timing" else per[0]
    want = int(sc.duration_us * 1e6) // step
    if want > MAX_SAMPLES:
        raise PcitraceError(f"duration_us = {sc.duration_us:g} needs {want:,} samples in {sc.mode} mode, "
                            f"more than the {MAX_SAMPLES:,} the simulator holds in memory",
                            path=sc.path, where="duration_us",
                            fix=f"simulate at most {MAX_SAMPLES * step / 1e6:g} us"
                            + (" or use mode = \"state\"" if sc.mode == "timing" else ""))


def _render_bus(sc: Scenario, b, txns, frng, share, K: int):
    """Bus ``b`` rendered over ``K`` clocks (with its share of the injected parity errors, drawn
    from ``frng``), and the columns of its transactions; checked against the model's schedule."""
    cfg = b.cfg
    rows = b.txn_rows
    parity: dict[int, int] = {}
    if sc.faults.parity_errors:
        cand = [i for i, t in enumerate(txns) if t.master == "nic" and phases(t)]
        for i in sorted(frng.choice(cand, min(len(cand), share(sc.faults.parity_errors)), replace=False)):
            parity[int(i)] = int(frng.integers(0, phases(txns[i])))
    rb = render_txns(rows, parity, mode=cfg.kind, width=cfg.width, clock_hz=1e12 / b.period, bus=cfg.name,
                     gnt_master=0 if sc.gnt else None, with_ad=sc.ad, tail=1, total_clocks=K, lean=True)
    cols = rb.txn_columns or _txn_columns(rows)
    starts, ends = cols["start"], cols["end"]
    if len(rows) and (not np.array_equal(rb.start_clock, starts) or not np.array_equal(rb.end_clock, ends)):
        bad = int(np.flatnonzero((rb.start_clock != starts) | (rb.end_clock != ends))[0])
        raise AssertionError(f"bus {cfg.name}: transaction {bad} scheduled at clocks "
                             f"{starts[bad]}..{ends[bad]} but rendered at "
                             f"{rb.start_clock[bad]}..{rb.end_clock[bad]}")
    return rb, cols


def _pick_glitches(txns, starts, frng, count: int) -> list[tuple[str, int]]:
    """(line, clock) of ``count`` glitches, each inside a transaction of 4 clocks or more."""
    glitches = []
    busy_txns = [i for i, t in enumerate(txns) if t.clocks >= 4]
    for i in sorted(frng.choice(busy_txns, min(len(busy_txns), count), replace=False)):
        line = ("frame_n", "irdy_n", "trdy_n", "devsel_n", "stop_n")[int(frng.integers(0, 5))]
        glitches.append((line, int(starts[i]) + int(frng.integers(1, txns[i].clocks - 1))))
    return glitches


def _bus_sample_channels(sc: Scenario, b, sig: dict, K: int, p: int, nsamples: int, glitches: list,
                         extra: list, arrays: dict, widths: dict) -> dict:
    """Bus ``b``'s captured channels (its first ``K`` clocks of ``sig``) as ``nsamples`` samples
    every ``p`` ps, into ``arrays`` / ``widths``, with the ``glitches`` (line, clock) flipped
    (their findings appended to ``extra``); returns the profile's signal -> channel map."""
    cfg = b.cfg
    timing = sc.mode == "timing"
    wanted = [s for s in PCI_CHANNELS if s in sig or s == "clk"]
    if not sc.ad:
        wanted = [s for s in wanted if s not in AD_SIGNALS]
    if not sc.gnt:
        wanted = [s for s in wanted if s not in ("req_n", "gnt_n")]
    if not timing:
        wanted = [s for s in wanted if s != "clk"]
    if timing:
        n = b.period // p
        e0 = b.phase // p
        c = max(1, -(-n // 4))
        spread = _spreader(K, n, min(c + e0, nsamples), nsamples)
    signals = {}
    for s in wanted:
        ch = f"{cfg.name}.{PCI_CHANNELS[s]}"
        signals[s] = ch
        if s == "clk":
            # CLK repeats with the period n: one period, tiled
            clk_period = (((np.arange(n, dtype=np.int64) - e0) % n) < n // 2).astype(np.uint8)
            arrays[ch] = np.tile(clk_period, -(-nsamples // n))[:nsamples]
            continue
        v = sig[s][:K]
        # (a Capture keeps a vector in the unsigned type it holds: C/BE# stays uint8)
        arrays[ch] = spread(v) if timing else v
        for line, g_clock in glitches:
            if line == s:
                # one sample after the quarter-period change, well before the next edge
                gs = e0 + g_clock * n + c + 1
                arrays[ch][gs] ^= 1
                extra.append((gs * p, cfg.name, "glitch", f"{PCI_CHANNELS[s]} pulsed for one sample"))
        if s in ("ad", "cbe_n"):
            widths[ch] = cfg.width if s == "ad" else cfg.width // 8
    return signals


def _spreader(K: int, n: int, h: int, nsamples: int):
    """The per-sample array of a per-clock one, ``n`` samples a clock: sample s shows clock
    clip((s - h) // n + 1, 0, K-1)."""
    # Clock 0 up to sample h, clock j >= 1 from sample h + (j-1)*n on, the last one to the end.
    # Each channel is written straight into its per-sample array, the whole clocks as one
    # broadcast copy (no per-sample index array, no per-clock repeat counts: a 10 M-clock
    # timing capture has 60 M samples).
    body = min(max(K - 2, 0), (nsamples - h) // n)      # clocks 1..body fill n samples each
    rest = h + body * n

    def spread(v):
        out = np.empty(nsamples, v.dtype)
        out[:h] = v[0]
        out[h:rest].reshape(body, n)[:] = v[1:1 + body, None]
        out[rest:] = v[min(body + 1, K - 1)]
        return out
    return spread


def _probe_lines(sc: Scenario, model, periods: list, p: int, nsamples: int, arrays: dict, widths: dict,
                 profile_buses: list) -> "DictRows":
    """The link probe's channels (into ``arrays`` / ``widths``, their profiles appended to
    ``profile_buses``) and the frames as the truth gives them."""
    timing = sc.mode == "timing"
    directions = (["a_to_b"] + (["b_to_a"] if sc.link.reverse_probe else [])) if sc.link.probe else []
    if timing:
        def to_sample(t):
            return np.asarray(-(-np.asarray(t, np.int64) // p), np.int64)   # first sample at or after t
        sample_ps = lambda i: np.asarray(i, np.int64) * p           # noqa: E731
    else:
        T0, ph0 = periods[0], periods[0] // 2
        def to_sample(t):
            return np.maximum(0, -(-(np.asarray(t, np.int64) - ph0) // T0))
        sample_ps = lambda i: ph0 + np.asarray(i, np.int64) * T0     # noqa: E731
    byte_ps = int(round(8000 / sc.link.rate_gbps))
    # sample indices of every frame's start, end and start-of-frame byte, all at once (lists of
    # python ints: the loops below only slice with them)
    n_fr = len(model.frames)
    f_start = np.fromiter((f.start_ps for f in model.frames), np.int64, n_fr)
    f_end = np.fromiter((f.end_ps for f in model.frames), np.int64, n_fr)
    s_start, s_end = to_sample(f_start), to_sample(f_end)
    s_sof = to_sample(f_start + 7 * byte_ps)
    s_sof_end = np.maximum(s_sof + 1, to_sample(f_start + 8 * byte_ps))
    for d in directions:
        idx = [i for i, f in enumerate(model.frames) if f.link == d]
        fs = [model.frames[i] for i in idx]
        fpn = f"{d}.{PROBE_CHANNELS['frame_present']}"
        arrays[fpn] = _union_line(s_start[idx], s_end[idx], nsamples)
        sigs = {"frame_present": fpn}
        if sc.link.sof:
            sn = f"{d}.{PROBE_CHANNELS['sof']}"
            arrays[sn] = _union_line(s_sof[idx], s_sof_end[idx], nsamples)
            sigs["sof"] = sn
        if sc.link.gmii:
            sigs.update(_gmii_channels(d, fs, p, nsamples, arrays, widths, sc))
        profile_buses.append(BusProfile(name=d, kind="gbe_probe", signals=sigs,
                                        clock_hz=None if timing else 1e12 / periods[0],
                                        link_bps=sc.link.rate_gbps * 1e9))
    # the frames column-wise (dicts made when read: DictRows)
    t_start = np.asarray(sample_ps(s_start), np.int64)
    # a frame cut off by the end of the capture ends at the last sample, as the decoders report it
    t_end = np.asarray(sample_ps(np.minimum(s_end, nsamples - 1)), np.int64)
    f_link, f_kind, f_seq, f_bytes, f_lost = (zip(*map(operator.attrgetter("link", "kind", "seq", "frame_bytes", "lost"),
                                                       model.frames)) if n_fr else [()] * 5)
    f_seq = np.array(f_seq, np.int64)
    return DictRows({
        "link": f_link, "kind": f_kind, "seq": f_seq, "frame_bytes": np.array(f_bytes, np.int64),
        "udpmon_seq": np.where(np.array([k == "data" for k in f_kind], bool), f_seq, -1),
        "lost": f_lost,
        "probed": (np.array([x in directions for x in f_link], bool) & (s_start < nsamples)).tolist(),
        "wire_start_ps": f_start, "wire_end_ps": f_end,
        "start_ps": t_start, "end_ps": t_end,
        "wire_time_ps": t_end - t_start,
        "sof_ps": np.asarray(sample_ps(s_sof), np.int64) if sc.link.sof else np.full(n_fr, -1, np.int64),
        "truncated": (s_end >= nsamples).tolist(),
    })


def _merge_columns(parts: list, order: np.ndarray) -> dict:
    """The buses' records merged in ``order``, column by column: field -> array of the record
    dtype's type, text fields as Strings (one table for all buses). No RECORD_DTYPE rows: at
    452 bytes a record they were the largest array of a long simulation."""
    out: dict = {}
    for name in FIELD_NAMES:
        dt = RECORD_DTYPE[name]
        cols = [p.column(name) if isinstance(p, RecordColumns) else p[name] for p in parts]
        if dt.kind == "U":
            out[name] = _merge_strings(cols, order)
        else:
            out[name] = np.concatenate([np.asarray(c, dt) for c in cols])[order] if cols else np.zeros(0, dt)
    return out


def _merge_strings(parts: list, order: np.ndarray) -> Strings:
    """Text columns of the buses (Strings, or text arrays) merged in ``order``: one table."""
    index: dict[str, int] = {}
    codes = []
    for c in parts:
        if not isinstance(c, Strings):        # a TxnSpec-rendered bus: a text array
            table, inverse = np.unique(c, return_inverse=True)
            c = Strings([str(x) for x in table], inverse.reshape(-1))
        remap = np.array([index.setdefault(v, len(index)) for v in c.table], np.int64)
        codes.append(remap[c.codes] if len(remap) else c.codes)
    merged = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    return Strings(list(index), merged[order])


def _merge_notes(parts: list, order: np.ndarray):
    """The buses' columns of one note (Strings or int arrays) merged in ``order``."""
    if parts and isinstance(parts[0], Strings):
        return _merge_strings(parts, order)
    return np.concatenate(parts)[order] if parts else np.zeros(0, np.int64)


class Ragged:
    """Lists of ints of different lengths as one flat int array and offsets (list i is
    ``values[offsets[i]:offsets[i + 1]]``); a slice of it gives the lists."""

    def __init__(self, offsets: np.ndarray, values: np.ndarray):
        self.offsets = offsets
        self.values = values

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: slice) -> list[list[int]]:
        start, stop, _ = i.indices(len(self))
        o = self.offsets[start:stop + 1].tolist()
        if len(o) < 2:
            return []
        vl = self.values[o[0]:o[-1]].tolist()
        return [vl[a - o[0]:z - o[0]] for a, z in zip(o[:-1], o[1:])]

    def json_texts(self, start: int = 0, stop: int | None = None) -> list[str]:
        """Lists start..stop as compact JSON (what json.dumps gives a list of ints)."""
        start, stop, _ = slice(start, stop).indices(len(self))
        o = self.offsets[start:stop + 1].tolist()
        if len(o) < 2:
            return []
        texts = list(map(str, self.values[o[0]:o[-1]].tolist()))
        return ["[" + ",".join(texts[a - o[0]:z - o[0]]) + "]" for a, z in zip(o[:-1], o[1:])]


class DictRows(Sequence):
    """A list of dicts with the same keys, held as columns (key -> int array, :class:`Ragged`,
    or a list / tuple of python values) and made into dicts only when read: the truth's
    packets (a long capture has tens of thousands, each with 38 fields). ``json_lines`` encodes
    column by column what ``json.dumps`` gives each dict."""

    def __init__(self, columns: dict):
        self.columns = columns
        self._n = len(next(iter(columns.values()))) if columns else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step != 1:
                return self[start:stop][::step]
            cols = [v[start:stop].tolist() if isinstance(v, np.ndarray) else v[start:stop]
                    for v in self.columns.values()]
            return [dict(zip(self.columns, row)) for row in zip(*cols)]
        i = range(self._n)[i]
        return self[i:i + 1][0]

    def __iter__(self):
        step = 65536
        for k in range(0, self._n, step):
            yield from self[k:k + step]

    def __eq__(self, other):
        return list(self) == list(other)

    def _json_fields(self, start: int, stop: int | None) -> tuple[int, list]:
        """Rows start..stop as :func:`_lines_by_format` / :func:`_text_by_join` take them."""
        enc = _COMPACT.encode
        fields = []
        for name, v in self.columns.items():
            if not isinstance(v, Ragged):
                v = v[start:stop]
            if isinstance(v, Ragged):
                col = v.json_texts(start, stop)
            elif isinstance(v, np.ndarray):
                if v.dtype.kind not in "iu":        # (str() of anything else is not its JSON)
                    raise TypeError(f"column {name}: {v.dtype} array")
                col = _int_texts(v)
            elif all(x.__class__ is bool for x in v):
                col = ["true" if x else "false" for x in v]
            else:
                # (a text per distinct value; by type too, as True == 1 but their JSON differs)
                keys = [(x.__class__, x) for x in v]
                table = {k: enc(k[1]) for k in set(keys)}
                col = [table[k] for k in keys]
            fields.append((enc(name), None, col))
        return len(range(self._n)[start:stop]), fields

    def json_lines(self, start: int = 0, stop: int | None = None) -> list[str]:
        """Rows start..stop as the compact JSON objects json.dumps gives their dicts."""
        n, fields = self._json_fields(start, stop)
        return _lines_by_format(n, fields) if fields else []

    def json_chunks(self, rows: int = 1 << 16):
        """``",\n".join(json_lines())`` in pieces of at most ``rows`` lines (a long capture's
        truth is hundreds of MB of text: written piece by piece, never held whole)."""
        for k in range(0, self._n, rows):
            n, fields = self._json_fields(k, k + rows)
            yield _text_by_join(n, fields) if fields else ""


_BOOL_TEXT = np.array(["false", "true"], dtype=object)


def _int_texts(v: np.ndarray) -> list[str]:
    """``list(map(str, v.tolist()))``: the decimal texts of an int array. A column of few
    distinct small values (clocks, widths, byte counts: most of a record's) takes them from a
    table of its range's texts by one gather."""
    if len(v) > 256:
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < 4096:
            table = np.array([str(x) for x in range(lo, hi + 1)], dtype=object)
            return table[(v - lo).astype(np.intp)].tolist()
    return list(map(str, v.tolist()))


def _lines_by_format(n: int, fields: list) -> list[str]:
    """``n`` JSON objects from their fields (key text, the text of a value all share or None,
    else the column of value texts): one str.format per object. The reference for
    :func:`_text_by_join`."""
    parts = [k + ":" + ("{}" if col is not None else same.replace("{", "{{").replace("}", "}}"))
             for k, same, col in fields]
    template = "{{" + ",".join(parts) + "}}"
    cols = [col for _, _, col in fields if col is not None]
    return list(map(template.format, *cols)) if cols else [template.format()] * n


def _text_by_join(n: int, fields: list, sep: str = ",\n") -> str:
    """``sep.join(_lines_by_format(n, fields))`` as one join over the objects' pieces laid out
    side by side (literal, value, literal, value, ...): str.format parses its template again
    for every object, which was most of the time spent writing a long truth file."""
    lits, cols = [], []
    cur = "{"
    for j, (k, same, col) in enumerate(fields):
        cur += ("," if j else "") + k + ":"
        if col is None:
            cur += same
        else:
            lits.append(cur)
            cols.append(col)
            cur = ""
    tail = cur + "}"
    if n == 0:
        return ""
    if not cols:
        return sep.join([tail] * n)
    w = 2 * len(cols)           # per object: its first literal (after the previous object), a value, ...
    pieces = [tail + sep + lits[0]] * (n * w)
    pieces[0] = lits[0]
    for j, col in enumerate(cols):
        pieces[2 * j + 1::w] = col
        if j:
            pieces[2 * j::w] = [lits[j]] * n
    pieces.append(tail)
    return "".join(pieces)


class RecordList(Sequence):
    """The truth's records: the merged record columns (field -> array, text fields as
    :class:`~pcitrace.sim.bus.Strings`) plus the model's notes (columns master, purpose,
    packet: Strings, arrays or lists), seen as a list of dicts (docs/records.md keys + the notes) but converted only on
    access, so a long simulation holds no dict (nor RECORD_DTYPE row) per transaction.
    ``.array`` builds the numpy form. Its JSON is the truth file's, not an output format of
    records: each record carries the model's notes beside the docs/records.md fields, in the
    compact form the truth uses, so it is written here rather than by pcitrace.records' writers
    (whose JSONL is what `pcitrace decode` gives)."""

    def __init__(self, columns: dict, notes: dict[str, list]):
        self.columns = columns
        self.notes = notes

    @property
    def array(self) -> np.ndarray:
        out = np.zeros(len(self), RECORD_DTYPE)
        for k, v in self.columns.items():
            out[k] = v.to_array(RECORD_DTYPE[k]) if isinstance(v, Strings) else v
        return out

    def __len__(self):
        return len(self.columns["start_ps"])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return records_to_dicts({k: v[i] for k, v in self.columns.items()},
                                    {k: v[i] for k, v in self.notes.items()})
        i = range(len(self))[i]
        return self[i:i + 1][0]

    def __iter__(self):
        step = 65536
        for k in range(0, len(self), step):
            yield from self[k:k + step]

    def __eq__(self, other):
        return list(self) == list(other)

    def _json_fields(self, start: int, stop: int | None) -> tuple[int, list]:
        """Records start..stop as :func:`_lines_by_format` / :func:`_text_by_join` take them,
        column by column: each column's values encoded once (a text table once per distinct
        value); a column with one value throughout is one text."""
        enc = _COMPACT.encode
        names = list(FIELD_NAMES) + list(self.notes)
        fields = []
        n = len(range(len(self))[start:stop])
        for name in names:
            v = (self.columns[name] if name in self.columns else self.notes[name])[start:stop]
            same, col = None, None
            if isinstance(v, Strings):
                table = np.array([enc(x) for x in v.table], dtype=object)       # (texts, gathered by code)
                if len(v) and (v.codes == v.codes[0]).all():
                    same = table[v.codes[0]]
                else:
                    col = table[v.codes].tolist()
            elif isinstance(v, np.ndarray) and len(v) and (v == v[0]).all():
                same = enc(v[0].item())
            elif isinstance(v, np.ndarray) and v.dtype == bool:
                col = _BOOL_TEXT[v.view(np.uint8)].tolist()
            elif isinstance(v, np.ndarray):
                col = _int_texts(v)
            else:                   # the notes: python objects
                memo: dict = {}
                col = [memo[x] if x in memo else memo.setdefault(x, enc(x)) for x in v]
            fields.append((enc(name), same, col))
        return n, fields

    def json_lines(self, start: int = 0, stop: int | None = None) -> list[str]:
        """Records start..stop as the compact JSON objects json.dumps gives their dicts."""
        return _lines_by_format(*self._json_fields(start, stop))

    def json_chunks(self, rows: int = 1 << 16):
        """``",\n".join(json_lines())`` in pieces of at most ``rows`` records (see
        DictRows.json_chunks)."""
        for k in range(0, len(self), rows):
            yield _text_by_join(*self._json_fields(k, k + rows))


def records_to_dicts(records, notes: dict[str, list] | None = None) -> list[dict]:
    """record_to_dict for a whole array (or field -> column mapping), column-wise (python ints /
    bools / strs)."""
    names = list(FIELD_NAMES)
    cols = [records[n].tolist() for n in names]
    if notes:
        names += list(notes)
        cols += [v.tolist() if isinstance(v, (Strings, np.ndarray)) else v for v in notes.values()]
    return [dict(zip(names, row)) for row in zip(*cols)]


def frame_wire_bytes(payload: bytes) -> bytes:
    """What the wire carries for a frame: preamble, SFD, the frame and its CRC-32."""
    return b"\x55" * 7 + b"\xd5" + payload + zlib.crc32(payload).to_bytes(4, "little")


def _gmii_channels(d, frames, p, nsamples, arrays, widths, sc) -> dict:
    """RXD[7:0], RX_DV and the free-running 125 MHz RX_CLK of one probed direction.

    Frames start on the byte clock (the model aligns them); byte j is on RXD during
    [start + 8j, start + 8(j+1)) ns and RX_CLK rises in the middle of it, so the first sample
    after each rising edge reads that byte (the sample period is below half a byte time)."""
    if p * 2 > GMII_PERIOD_PS:
        raise PcitraceError(f"GMII needs samples closer than 4 ns; this capture samples every {p / 1000:g} ns",
                            path=sc.path, where="link.gmii",
                            fix="use buses of 66 MHz or faster (finer sampling), or gmii = false")
    # RX_CLK repeats every lcm(p, 8 ns) / p samples: one period, tiled (no per-sample time
    # array: a long timing capture has tens of millions of samples, each int64 temporary
    # hundreds of MB of fresh pages)
    rep = GMII_PERIOD_PS // math.gcd(p, GMII_PERIOD_PS)
    t = np.arange(rep, dtype=np.int64) * p
    clk = np.resize((((t - GMII_PERIOD_PS // 2) % GMII_PERIOD_PS) < GMII_PERIOD_PS // 2).astype(np.uint8), nsamples)
    rxd = np.zeros(nsamples, np.uint64)
    dv = np.zeros(nsamples, np.uint8)
    for f in frames:
        raw = np.frombuffer(frame_wire_bytes(f.payload), np.uint8)
        a = -(-f.start_ps // p)
        z = min(nsamples, -(-f.end_ps // p))
        if a >= z:
            continue
        j = (np.arange(a, z, dtype=np.int64) * p - f.start_ps) // GMII_PERIOD_PS
        rxd[a:z] = raw[np.minimum(j, len(raw) - 1)]
        dv[a:z] = 1
    names = {k: f"{d}.{PROBE_CHANNELS[k]}" for k in ("rxd", "rx_dv", "rx_clk")}
    arrays[names["rxd"]], arrays[names["rx_dv"]], arrays[names["rx_clk"]] = rxd, dv, clk
    widths[names["rxd"]] = 8
    return names


def _inject_signals(sc, sig, txns, starts, ends, rng, share) -> list[tuple[str, int, str]]:
    """Clock-level protocol violations that leave every record as it was (docs/records.md):
    IRDY# on an idle clock between transactions, TRDY# on a CSR write's wait clock before
    DEVSEL#. Returns (finding kind, clock, message)."""
    out = []
    n = share(sc.faults.stray_irdy)
    if n:
        gaps = [int(ends[i]) + 2 for i in range(len(txns) - 1) if starts[i + 1] - ends[i] - 1 >= 3]
        for c in sorted(rng.choice(gaps, min(n, len(gaps)), replace=False)) if gaps else []:
            sig["irdy_n"][c] = 0
            out.append(("irdy_without_transaction", int(c), "IRDY# asserted with no transaction"))
    n = share(sc.faults.trdy_without_devsel)
    if n:
        cand = [i for i, t in enumerate(txns) if t.purpose == "csr_write" and t.termination == "normal"
                and t.devsel >= 2]
        for i in sorted(rng.choice(cand, min(n, len(cand)), replace=False)) if cand else []:
            c = int(starts[i]) + (2 if txns[i].pcix else 1)
            sig["trdy_n"][c] = 0
            out.append(("trdy_without_devsel", c, "TRDY# asserted before DEVSEL#"))
    return out


def _txn_columns(rows) -> dict:
    """What :attr:`RenderedBus.txn_columns` holds, for a bus the TxnSpec path rendered."""
    txns = rows.txns()
    start = np.fromiter((t.start for t in txns), np.int64, len(txns))
    return {"start": start, "end": start + np.fromiter((t.clocks for t in txns), np.int64, len(txns)) - 1,
            "master": np.fromiter((MASTER_INDEX[t.master] for t in txns), np.int64, len(txns)),
            "purpose": _merge_strings([np.array([t.purpose for t in txns], str)], np.arange(len(txns))),
            "packet": np.fromiter((t.packet for t in txns), np.int64, len(txns)),
            "pcix": [t.pcix for t in txns], "nbytes": np.fromiter((t.nbytes for t in txns), np.int64, len(txns)),
            "retry": np.fromiter((t.termination == "retry" for t in txns), bool, len(txns))}


def _occupancy(sig: dict, data_clocks: np.ndarray, cols: dict, recs, b, K: int) -> dict:
    # busy: FRAME# or IRDY# asserted (0/1 levels: AND-ed together they are 1 on the idle clocks);
    # a data phase has IRDY# asserted, so every data clock is busy
    n_busy = K - int(np.count_nonzero(np.bitwise_and(sig["frame_n"][:K], sig["irdy_n"][:K])))
    n_data = len(data_clocks)
    # per transaction, column-wise: address clocks (every transaction but a retry has its
    # header), retried clocks, clocks per initiator
    clocks = recs["clocks"].astype(np.int64)
    retried = recs["termination"] == "retry"
    hdr = 1 + np.array(cols["pcix"], bool)
    address = int(hdr[~retried].sum())
    retry = int(clocks[retried].sum())
    who = cols["master"]
    per_master = np.bincount(who, weights=clocks, minlength=len(MASTERS)) if len(who) else np.zeros(len(MASTERS))
    # busy clocks outside every transaction: IRDY# asserted with no transaction (injected)
    stray = n_busy - int(clocks.sum())
    wait = n_busy - stray - n_data - address - retry
    per = {m: int(per_master[i]) for i, m in enumerate(MASTERS)}
    return {
        "clocks": int(K), "busy": n_busy, "fraction": n_busy / K if K else 0.0,
        "data": n_data, "wait": wait, "address": address, "retry": retry, "stray": stray,
        "by_initiator": per, "period_ps": b.period,
        "busy_ps": n_busy * b.period,
    }


ICR = 0x00C0          # the NIC's interrupt cause register: reading it releases INTA#


def inta_clocks(b, irqs: list, cols: dict, K: int) -> list[tuple[int, int, int]]:
    """Per interrupt of bus ``b``'s NIC (``irqs``: the model's, in the order raised): (the clock
    it is raised at, the clock INTA# falls for it, the clock its routine releases INTA#: the one
    after the routine's ICR read, or after its first access when it reads no ICR; K when that
    is not in the capture). INTA# is low while a raised interrupt's routine has not released it,
    so an interrupt raised before the previous routine's ICR read shares its fall."""
    out = []
    low_until, fall = -1, -1
    for t, _events, group in irqs:
        raised = b.clock_at(t)
        if raised >= K:
            break
        done = _releasing_access(b, group or ())
        release = K if done < 0 else min(K, int(cols["end"][done]) + 1)
        if raised >= low_until:
            fall = raised
        low_until = max(low_until, release)
        out.append((raised, fall, release))
    return out


def _releasing_access(b, group) -> int:
    """The transaction of a routine's CSR ``group`` that releases INTA#: its completed ICR read,
    or its first completed access when it reads no ICR; -1 when neither is in the capture."""
    flat, icr = b.txn_rows.flat, b.cfg.nic.bar + ICR
    first = -1
    for i in group:
        proto = flat[ROW_WIDTH * i]
        if proto[0][2] == "retry":
            continue
        if proto[3] == "csr_read" and flat[ROW_WIDTH * i + 1] == icr:
            return i
        if first < 0:
            first = i
    return first


def inta_line(clocks: list[tuple[int, int, int]], K: int) -> np.ndarray:
    """INTA# over ``K`` clocks (1 = high, 0 = asserted) from :func:`inta_clocks`."""
    if not clocks:
        return np.ones(K, np.uint8)
    lo = np.array([c[0] for c in clocks], np.int64)
    hi = np.array([c[2] for c in clocks], np.int64)
    return 1 - _union_line(lo, hi, K)


def _add_interrupts(truth: dict, model: ModelResult, bus_cols: list, inv: np.ndarray, records, inta: dict) -> None:
    """The truth's ``interrupts`` (per interrupt of a captured bus: bus, raised_ps, inta_ps (INTA#
    falls), inta_release_ps (-1: not in the capture), csr_records (the routine's accesses, its
    retries included), csr_retries, first_access_ps (-1: none), packets ([kind, seq] it reports))
    and the packets' tx_inta_ps / rx_inta_ps (INTA# fall of the interrupt that reports them)."""
    S = np.asarray(records["start_ps"], np.int64)
    out, fall_of = [], {}
    at = 0
    for b, cols in zip(model.buses.values(), bus_cols):
        n = len(cols["start"])
        rec_of = inv[at:at + n]
        at += n
        K = b.clock_at(model.duration_ps)
        for (t, events, group), (_, fall, release) in zip(model.irqs[b.cfg.pc], inta[b.cfg.name]):
            group = group or ()
            recs = [int(rec_of[i]) for i in group]
            fall_ps = b.time_of(fall)
            for kind, log in events:
                fall_of[(kind, log.seq)] = fall_ps
            out.append({"bus": b.cfg.name, "raised_ps": t, "inta_ps": fall_ps,
                        "inta_release_ps": b.time_of(release) if release < K else -1,
                        "csr_records": recs, "csr_retries": int(sum(cols["retry"][i] for i in group)),
                        "first_access_ps": int(S[recs[0]]) if recs else -1,
                        "packets": [[kind, log.seq] for kind, log in events]})
    truth["interrupts"] = out
    cols = truth["packets"].columns
    for kind in ("tx", "rx"):
        cols[f"{kind}_inta_ps"] = np.array([fall_of.get((kind, s), -1) for s in cols["seq"]], np.int64)


_PACKET_LISTS = ("csr_txns", "tx_dma", "rx_dma", "tx_irq_csr", "rx_irq_csr")
_TX_DATA = frozenset(("data_read", "data_completion"))


def _packets(model: ModelResult, bus_cols: list, inv: np.ndarray, records, first_ps: np.ndarray) -> "DictRows":
    """The truth's per-packet figures, column-wise: every packet log's transaction indices (into
    its bus's transactions: the src PC's bus for the CSR group, the transmit DMA and the transmit
    interrupt's group, the dst PC's for the rest) flattened into one array per log, mapped to
    record indices by the buses' columns, and their first / last / counts / sums per packet by
    offsets (no Python loop per transaction). ``bus_cols``: the captured buses' transaction
    columns (txn_columns) in the order their records were merged; ``inv``: merged record ->
    sorted record index. A transaction on a bus nobody probes has no record: its packet's list
    is empty there. The times are the record's (start, end) and its first data phase's. The
    dicts are built when read (:class:`DictRows`)."""
    i64 = np.int64
    pks = model.packets
    npk = len(pks)
    S, E = np.asarray(records["start_ps"], i64), np.asarray(records["end_ps"], i64)
    bus_of = {pc: None for pc in ("a", "b")}
    per_pc = {}             # PC -> (record index, bytes, retried, transmit data, receive data) per transaction
    at = 0
    for b, cols in zip(model.buses.values(), bus_cols):
        n = len(cols["start"])
        purpose = cols["purpose"]         # Strings: a test per table entry, then the codes
        bus_of[b.cfg.pc] = b.cfg.name
        per_pc[b.cfg.pc] = (inv[at:at + n], np.asarray(cols["nbytes"], i64), np.asarray(cols["retry"], bool),
                            np.array([x in _TX_DATA for x in purpose.table], bool)[purpose.codes],
                            np.array([x == "data_write" for x in purpose.table], bool)[purpose.codes])
        at += n
    # every field of every packet log in one pass over the logs (each is a fetch from memory)
    fields = ("seq", "src", "dst", "user_bytes", "frame_bytes", "lost", "send_app_ps", "frame") + _PACKET_LISTS
    (seqs, src, dst, user_bytes, frame_bytes, lost, app_send, frames, *logs) = \
        zip(*map(operator.attrgetter(*fields), pks)) if npk else [()] * len(fields)
    logs = dict(zip(_PACKET_LISTS, logs))
    # per captured PC: the packets whose source / destination it is
    on_src, on_dst = ({pc: np.fromiter(map(pc.__eq__, side), bool, npk) for pc in per_pc} for side in (src, dst))

    def gather(attr: str, on: dict):
        """(offsets per packet into the flat arrays, flat record indices, flat bytes, retried,
        transmit data, receive data) of one log over every packet; ``on``: the packets whose
        log is on each PC's bus."""
        lists = logs[attr]
        lens = np.fromiter(map(len, lists), i64, npk)
        local = np.frombuffer(b"".join(lists), i64)      # (the logs are int64 arrays)
        cols = [np.zeros(len(local), dt) for dt in (i64, i64, bool, bool, bool)]
        keep = np.zeros(npk, bool)
        for pc, got in per_pc.items():
            mine = on[pc]
            keep |= mine
            el = np.repeat(mine, lens)
            for c, g in zip(cols, got):
                c[el] = g[local[el]]
        el = np.repeat(keep, lens)
        lens = np.where(keep, lens, 0)          # a bus nobody probes: no records
        cols = [c[el] for c in cols]
        return (np.concatenate(([0], np.cumsum(lens))), *cols)


    def first(offs, rec, times):
        """times[first record] of every packet's list, -1 for an empty one."""
        has = offs[1:] > offs[:-1]
        out = np.full(npk, -1, i64)
        out[has] = times[rec[offs[:-1][has]]]
        return out

    def last(offs, rec, times):
        has = offs[1:] > offs[:-1]
        out = np.full(npk, -1, i64)
        out[has] = times[rec[offs[1:][has] - 1]]
        return out

    def subset(offs, rec, nbytes, mask):
        """offsets, records and bytes of the transactions ``mask`` picks from a log."""
        counts = sums(offs, mask)
        return np.concatenate(([0], np.cumsum(counts))), rec[mask], nbytes[mask]

    def sums(offs, values):
        c = np.concatenate(([0], np.cumsum(values, dtype=i64)))
        return c[offs[1:]] - c[offs[:-1]]

    F = first_ps
    o_csr, r_csr, _, retry_csr, _, _ = gather("csr_txns", on_src)
    o_tx, r_tx, n_tx, _, data_tx, _ = gather("tx_dma", on_src)
    o_rx, r_rx, n_rx, _, _, data_rx = gather("rx_dma", on_dst)
    o_ti, r_ti, *_ = gather("tx_irq_csr", on_src)
    o_ri, r_ri, *_ = gather("rx_irq_csr", on_dst)
    o_dt, r_dt, n_dt = subset(o_tx, r_tx, n_tx, data_tx & (n_tx != 0))
    o_dr, r_dr, n_dr = subset(o_rx, r_rx, n_rx, data_rx)
    csr_start, tx_first = first(o_csr, r_csr, S), first(o_tx, r_tx, S)
    tx_end, rx_end = last(o_tx, r_tx, E), last(o_rx, r_rx, E)
    ti_start, ri_start = first(o_ti, r_ti, S), first(o_ri, r_ri, S)
    tx_word, rx_word = first(o_dt, r_dt, F), first(o_dr, r_dr, F)
    has_f = np.fromiter((f is not None for f in frames), bool, npk)
    w_start = np.fromiter((f.start_ps if f else -1 for f in frames), i64, npk)
    w_end = np.fromiter((f.end_ps if f else -1 for f in frames), i64, npk)
    has_csr, has_tx, has_rx = o_csr[1:] > o_csr[:-1], o_tx[1:] > o_tx[:-1], o_rx[1:] > o_rx[:-1]
    has_ti, has_ri = o_ti[1:] > o_ti[:-1], o_ri[1:] > o_ri[:-1]
    columns = {
        "seq": np.array(seqs, i64), "src": src, "dst": dst, "user_bytes": np.array(user_bytes, i64),
        "frame_bytes": np.array(frame_bytes, i64), "lost": lost,
        "send_bus": [bus_of[x] for x in src], "recv_bus": [bus_of[x] for x in dst],
        "app_send_ps": np.array(app_send, i64),
        "csr_records": Ragged(o_csr, r_csr),
        "csr_start_ps": csr_start,
        "csr_end_ps": last(o_csr, r_csr, E),
        "csr_retries": sums(o_csr, retry_csr),
        "first_dma_ps": tx_first,
        "tx_dma_records": Ragged(o_tx, r_tx),
        "tx_data_bursts": np.diff(o_dt),
        "tx_bytes": sums(o_dt, n_dt),
        "tx_data_start_ps": first(o_dt, r_dt, S),
        "tx_first_word_ps": tx_word,
        "tx_dma_end_ps": last(o_dt, r_dt, E),
        "wire_start_ps": w_start,
        "wire_end_ps": w_end,
        "wire_time_ps": np.where(has_f, w_end - w_start, -1),
        "rx_dma_records": Ragged(o_rx, r_rx),
        "rx_data_bursts": np.diff(o_dr),
        "rx_bytes": sums(o_dr, n_dr),
        "rx_data_start_ps": first(o_dr, r_dr, S),
        "rx_first_word_ps": rx_word,
        "rx_data_end_ps": last(o_dr, r_dr, E),
        "rx_dma_end_ps": rx_end,
        "tx_irq_csr_records": Ragged(o_ti, r_ti),
        "rx_irq_csr_records": Ragged(o_ri, r_ri),
        "tx_irq_csr_start_ps": ti_start,
        "rx_irq_csr_start_ps": ri_start,
        "csr_setup_ps": np.where(has_csr & has_tx, tx_first - csr_start, -1),
        "send_to_recv_ps": np.where((rx_word >= 0) & (tx_word >= 0), rx_word - tx_word, -1),
        "tx_interrupt_delay_ps": np.where(has_tx & has_ti, ti_start - tx_end, -1),
        "rx_interrupt_delay_ps": np.where(has_rx & has_ri, ri_start - rx_end, -1),
    }
    return DictRows(columns)


def file_profile(profile: Profile, capture: Capture) -> Profile:
    """The profile of the written file: .sr and VCD files hold vector channels as bit
    channels ``X0..X{n-1}``, so vectors become lists of those."""
    buses = []
    for b in profile.buses:
        sigs = {}
        for k, v in b.signals.items():
            w = capture.channel(v).width if isinstance(v, str) else 1
            sigs[k] = [f"{v}{i}" for i in range(w)] if w > 1 else v
        buses.append(dataclasses.replace(b, signals=sigs))
    return Profile(buses, source="memory")


def output_paths(path: str | os.PathLike) -> tuple[Path, Path, Path]:
    """NAME.sr / NAME.vcd -> (capture, NAME.profile.toml, NAME.truth.json)."""
    path = Path(path)
    name = path.name
    for ext in (".sr", ".vcd"):
        if name.lower().endswith(ext):
            stem = name[: -len(ext)]
            break
    else:
        raise PcitraceError("the output must end in .sr or .vcd", path=path,
                            fix="name the capture NAME.sr or NAME.vcd")
    return path, path.with_name(stem + ".profile.toml"), path.with_name(stem + ".truth.json")


_COMPACT = json.JSONEncoder(separators=(",", ":"))   # what json.dumps(x, separators=...) builds per call


def truth_json(truth: dict) -> str:
    """Compact but diff-friendly: one line per record / frame / packet."""
    return "".join(iter_truth_json(truth))


def iter_truth_json(truth: dict):
    """The text of :func:`truth_json` in pieces (tens of thousands of lines each): at tens of
    millions of clocks the truth is hundreds of MB of JSON, and held whole it was most of the
    time spent writing it (fresh pages for the text, its join and its UTF-8 copy)."""
    enc = _COMPACT.encode
    yield "{\n"
    for i, (k, v) in enumerate(truth.items()):
        head = ("" if i == 0 else ",\n") + json.dumps(k)
        if isinstance(v, (RecordList, DictRows)) and len(v):
            yield head + ": [\n"
            for j, text in enumerate(v.json_chunks()):
                yield ("" if j == 0 else ",\n") + text
            yield "\n]"
        elif isinstance(v, list) and len(v):
            yield head + ": [\n" + ",\n".join(map(enc, v)) + "\n]"
        elif isinstance(v, dict) and v:
            body = ",\n".join(f"{json.dumps(kk)}: {enc(vv)}" for kk, vv in v.items())
            yield head + f": {{\n{body}\n}}"
        else:                       # (an empty record list is an empty JSON list too)
            yield head + f": {json.dumps([] if isinstance(v, (RecordList, DictRows)) else v)}"
    yield "\n}\n"


def load_truth(path: str | os.PathLike) -> dict:
    """Read a NAME.truth.json."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PcitraceError(f"cannot read the truth file: {exc.strerror}", path=path, fix="check the path") from None
    except json.JSONDecodeError as exc:
        raise PcitraceError(f"not valid JSON: {exc}", path=path, fix="regenerate it with pcitrace simulate") from None
    if data.get("format") != TRUTH_FORMAT:
        raise PcitraceError(f"not a {TRUTH_FORMAT} file", path=path, fix="regenerate it with pcitrace simulate")
    return data


def write_outputs(result: SimResult, path: str | os.PathLike) -> tuple[Path, Path, Path]:
    """Write the capture (by extension), NAME.profile.toml and NAME.truth.json, atomically."""
    cap_path, prof_path, truth_path = output_paths(path)
    if not cap_path.parent.exists():
        raise PcitraceError("the output directory does not exist", path=cap_path.parent,
                            fix="create it or choose another -o path")
    written: list[Path] = []
    try:
        write_capture(result.capture, cap_path)
        written.append(cap_path)
        save_profile(file_profile(result.profile, result.capture), prof_path)
        written.append(prof_path)
        with atomic_path(truth_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for piece in iter_truth_json(result.truth):
                f.write(piece)
    except BaseException:
        # the three belong together: none is left without the others
        for p in written:
            with contextlib.suppress(OSError):
                p.unlink()
        raise
    return cap_path, prof_path, truth_path

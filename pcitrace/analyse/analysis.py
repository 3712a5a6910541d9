"""The analyser's entry point: decode records in, per-bus figures and per-packet tables out.

Everything here is a pure function of the records and the bus facts (clock, width, clock count,
the NIC's identity); nothing reads files, so the same code serves the CLI, the viewer and tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pcitrace import buses
from pcitrace.analyse import checks, csr, dma, metrics
from pcitrace.analyse import packets as pk
from pcitrace.analyse.classify import CSR, DMA, OTHER, READ, WRITE, ad_captured, classify, directions
from pcitrace.analyse.occupancy import BusyTime, OccupancySplit, rolling, split_clocks
from pcitrace.analyse.stats import Distribution, Histogram
from pcitrace.records import BusSummary

GBE_US_PER_BYTE = 0.008
GBE_LINK_BPS = 1e9
# Bytes a frame occupies on the wire beyond what the NIC DMAs (destination .. payload):
# 8 preamble/SFD + 12 inter-frame gap + 4 CRC (the 14-byte header is in the DMA'd buffer).
WIRE_OVERHEAD_BYTES = 24


@dataclasses.dataclass(frozen=True)
class AnalysisOptions:
    csr_gap_us: float = 2.0              # CSR accesses closer than this form one group
    csr_split_factor: float = 3.0        # no AD: ... unless the gap is this many times the usual one (0 = off)
    classification: str = "auto"         # auto | gnt+bar | gnt | bar | length
    csr_max_data_phases: int = 1         # 'length' / 'gnt' rules: CSR accesses are this short
    transfer_gap_clocks: int = 16        # AD: a master-ended burst continued this soon at the next address is one transfer; no AD: the NIC resumes a cut burst within this
    descriptor_gap_clocks: int = 32      # no C/BE#: a small transfer this close before frame data is its descriptor
    descriptor_bytes: int = 16           # one DMA descriptor (Intel PRO/1000, most NICs)
    max_control_bytes: int = 64          # DMA transfers up to this size are descriptors / status, larger = frame data
    window_us: float | None = None       # rolling occupancy window; None = auto
    window_step: float = 0.5             # step as a fraction of the window
    irq_min_delay_us: float = 5.0        # host interrupt latency: a routine starting sooner after a DMA was raised before it
    pause_factor: float = 3.0            # a packet period > factor x median is a transmit pause
    histogram_bins: int = 20


# What the analyser knows of a bus besides its records: the decoder's summary (one type)


# Per-packet figures that get distributions and histograms: name -> (packet field, scale to report unit)
PACKET_FIGURES: dict[str, tuple[str, float]] = {f.name: (f.field, f.scale) for f in metrics.packet_figures()}


@dataclasses.dataclass
class BusAnalysis:
    facts: BusSummary
    classification_rule: str
    records: np.ndarray           # this bus's records, in time order
    classes: np.ndarray           # int8 CSR / DMA / OTHER per record
    directions: np.ndarray        # int8 READ / WRITE / UNKNOWN_DIR per record
    groups: np.ndarray            # csr.GROUP_DTYPE
    bursts: np.ndarray            # dma.BURST_DTYPE
    transfers: np.ndarray         # dma.TRANSFER_DTYPE
    packets: np.ndarray           # packets.PACKET_DTYPE
    split: OccupancySplit
    rolling_t_ps: np.ndarray
    rolling_occupancy: np.ndarray
    window_ps: float
    pause_after: np.ndarray       # packet indices followed by a pause
    packets_per_interrupt: np.ndarray
    distributions: dict[str, Distribution]
    histograms: dict[str, Histogram]
    warnings: list[str] = dataclasses.field(default_factory=list)   # evidence that did not decide (checks.py)
    link_bps: float = 1e9         # the probed link's rate (the frame-on-the-wire limit)

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def occupancy(self) -> float:
        return self.split.occupancy

    @property
    def efficiency(self) -> float | None:
        """Ideal time of every byte moved (bytes / (width/8 x clock)) over the busy time."""
        busy = self.split.busy_clocks
        if not busy:
            return None
        return float(self.records["bytes"].sum()) / (self.facts.width / 8) / busy

    @property
    def dma_efficiency(self) -> float | None:
        b = self.bursts
        if b.size == 0 or b["duration_ps"].sum() == 0:
            return None
        return float(b["bytes"].sum()) / (self.facts.width / 8) * self.facts.period_ps / float(b["duration_ps"].sum())

    @property
    def throughput_mbit_s(self) -> float:
        """Frame data DMA'd per second of capture."""
        return float(self.packets["data_bytes"].sum()) * 8 / (self.facts.duration_ps * 1e-12) / 1e6 \
            if self.facts.duration_ps else 0.0

    @property
    def dma_mbit_s(self) -> float:
        return float(self.bursts["bytes"].sum()) * 8 / (self.facts.duration_ps * 1e-12) / 1e6 \
            if self.facts.duration_ps else 0.0

    def limits(self) -> dict:
        """The physical limits (DOMAIN.md) that belong beside the measured figures."""
        f = self.facts
        bytes_per_clock = f.width / 8
        us_per_byte = 1e6 / (bytes_per_clock * f.clock_hz)
        data = self.packets["data_bytes"].astype(np.float64)
        return {
            "bus_us_per_byte": us_per_byte,
            "bus_mbit_s": bytes_per_clock * 8 * f.clock_hz / 1e6,
            "link_us_per_byte": self.wire_us_per_byte,
            "data_dma_ideal_us": Distribution.of(data * us_per_byte),
            "dma_burst_ideal_us": Distribution.of(self.bursts["bytes"].astype(np.float64) * us_per_byte),
            "wire_us": Distribution.of((data + WIRE_OVERHEAD_BYTES) * self.wire_us_per_byte) if data.size
            else Distribution.of([]),
        }

    @property
    def wire_us_per_byte(self) -> float:
        """A byte's time on the probed link (0.008 us at 1 Gbit/s)."""
        return 8e6 / self.link_bps

    @property
    def ambiguous(self) -> int:
        """Packets whose grouping or routine could not be told from the capture."""
        return int(self.packets["ambiguous"].sum())

    def packet_counts(self) -> dict:
        d = self.packets["direction"]
        return {"total": int(d.size), "tx": int((d == READ).sum()), "rx": int((d == WRITE).sum()),
                "unknown": int(((d != READ) & (d != WRITE)).sum())}


@dataclasses.dataclass
class Analysis:
    buses: dict[str, BusAnalysis]
    options: AnalysisOptions
    findings: int = 0


def analyse_bus(records: np.ndarray, facts: BusSummary, bars: Sequence[tuple[int, int]] | None = None,
                options: AnalysisOptions | None = None, *, have_ad: bool | None = None,
                link_bps: float | None = None) -> BusAnalysis:
    """All figures of one bus from its records (any order; records of other buses are not allowed)."""
    o = options or AnalysisOptions()
    records = np.sort(records, order="start_ps", kind="stable") if len(records) else records
    T = facts.period_ps
    classes, rule = classify(records, bars, rule=o.classification, csr_max_data_phases=o.csr_max_data_phases)
    dirs = directions(records)
    if have_ad is None:
        have_ad = ad_captured(records)
    busy = BusyTime.of(records, T)
    bursts = dma.dma_bursts(records, classes, dirs, T, facts.width)
    # what the profile says of the NIC wins over what is learnt from the capture
    descriptor_bytes = facts.descriptor_bytes or o.descriptor_bytes
    nic_burst = facts.max_burst_bytes or checks.nic_ended_size(
        bursts, dma.resumed(bursts, T, busy, o.transfer_gap_clocks * T), o.max_control_bytes)
    transfers = dma.dma_transfers(records, classes, bursts, have_ad=have_ad, gap_ps=o.transfer_gap_clocks * T,
                                  period_ps=T, max_control_bytes=o.max_control_bytes,
                                  descriptor_gap_ps=o.descriptor_gap_clocks * T, busy=busy,
                                  descriptor_bytes=descriptor_bytes, nic_burst=nic_burst)
    data_dma = np.zeros(len(records), bool)
    if bursts.size:
        data_dma[bursts["record"]] = transfers["kind"][bursts["transfer"]] == dma.DATA
    groups = csr.csr_groups(records, classes, o.csr_gap_us * 1e6, T, breaks=data_dma,
                            split_factor=0.0 if have_ad else o.csr_split_factor)
    # The send routine is found by its register accesses in windows of accesses less than
    # csr_gap of bus idle time apart; what it leaves is grouped again by time.
    windows = csr.csr_groups(records, classes, o.csr_gap_us * 1e6, T, breaks=np.zeros(len(records), bool),
                             split_factor=0.0, busy=busy)
    packets, groups = pk.packets(transfers, groups, busy, period_ps=T, bus_width=facts.width,
                                 have_ad=have_ad, records=records, classes=classes, plain_groups=windows,
                                 csr_gap_ps=o.csr_gap_us * 1e6, descriptor_bytes=descriptor_bytes,
                                 descriptor_gap_ps=o.descriptor_gap_clocks * T,
                                 irq_min_delay_ps=o.irq_min_delay_us * 1e6)
    split = split_clocks(records, classes, facts.clocks, facts.mode, facts.busy_clocks)

    t0, t1 = float(facts.start_ps), float(facts.start_ps) + facts.duration_ps
    window = o.window_us * 1e6 if o.window_us else max(10e6, (t1 - t0) / 2000)
    rt, ro = rolling(busy, t0, t1, window, window * o.window_step)

    inter = groups[~groups["setup"]]
    ppi = inter["packets"][inter["packets"] > 0]

    sources = {"packet": packets, "interrupt": inter[inter["packets"] > 0], "burst": bursts,
               "transfer": transfers, "group": groups}
    dists, hists = {}, {}
    for fig in metrics.analysed():
        values = sources[fig.per][fig.field]
        dists[fig.name] = Distribution.of(values, fig.scale)
        hists[fig.name] = Histogram.of(values, o.histogram_bins, fig.scale)
    pause_after = pk.pauses(packets, o.pause_factor)
    dists["pause_us"] = Distribution.of(pk.pause_gaps(packets)[pause_after], 1e-6)
    packets["ambiguous"], warnings = checks.ambiguous_packets(
        packets, transfers, bursts, groups, have_ad=have_ad, gnt=facts.gnt is not None, nic_burst=nic_burst, bus=facts.name)

    return BusAnalysis(facts, rule, records, classes, dirs, groups, bursts, transfers, packets, split,
                       rt, ro, window, pause_after, ppi, dists, hists, warnings, link_bps or GBE_LINK_BPS)


def link_rate(decode_result) -> float | None:
    """The probed links' rate (bit/s) when the profile's probe buses agree on one, else None."""
    prof = getattr(decode_result, "profile", None)
    rates = {b.link_bps for b in getattr(prof, "buses", ()) if getattr(b, "link_bps", None)}
    return rates.pop() if len(rates) == 1 else None


def analyse(decode_result, options: AnalysisOptions | None = None) -> Analysis:
    """Analyse every PCI / PCI-X bus of a DecodeResult (``.records``, ``.buses``, ``.findings``)."""
    o = options or AnalysisOptions()
    records = decode_result.records
    link_bps = link_rate(decode_result)
    out: dict[str, BusAnalysis] = {}
    for name, summary in decode_result.buses.items():
        if not buses.kind(summary.kind).transactions:
            continue
        mine = records[records["bus"] == name] if len(records) else records
        out[name] = analyse_bus(mine, summary.with_clock(), list(summary.bars), o, have_ad=summary.have_ad,
                                link_bps=link_bps)
    return Analysis(out, o, int(len(decode_result.findings)))


__all__ = ["AnalysisOptions", "BusAnalysis", "Analysis", "analyse", "analyse_bus",
           "CSR", "DMA", "OTHER", "PACKET_FIGURES"]

"""An Analysis as plain JSON-ready data: the figures (docs/report-schema.md) and the plot series.

The figures go into every output format; the series (rolling occupancy, burst sizes, per-packet
breakdown) only feed the HTML plots, so a JSON report of a thousand captures stays small.
"""

from __future__ import annotations

import math

import numpy as np

from pcitrace.analyse import BusAnalysis
from pcitrace.analyse.metrics import FIGURES, analysed, link_distributions
from pcitrace.analyse.dma import TRANSFER_KINDS

SCHEMA = "pcitrace-report/1"

# Distributions at the top level of every bus object, in this order.
DISTRIBUTIONS = [f.name for f in analysed()]

# Per-packet breakdown plotted in the HTML report: label -> packet field.
BREAKDOWN = {FIGURES[n].label: FIGURES[n].field
             for n in ("csr_setup_us", "descriptor_fetch_us", "data_dma_us", "status_writeback_us")}

MAX_SERIES_POINTS = 4000


def _num(x, digits: int = 6):
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    return round(x, digits)


def bus_figures(b: BusAnalysis) -> dict:
    f = b.facts
    lim = b.limits()
    out = {
        "name": f.name,
        "kind": f.kind,
        "mode": f.mode,
        "width": f.width,
        "clock_mhz": _num(f.clock_hz / 1e6),
        "clocks": f.clocks,
        "duration_us": _num(f.duration_ps * 1e-6),
        "classification_rule": b.classification_rule,
        "occupancy": _num(b.occupancy),
        "occupancy_by": {k: _num(v) for k, v in b.split.fractions().items()},
        "occupancy_by_initiator": {k: _num(v) for k, v in b.split.initiator_fractions().items()},
        "occupancy_window_us": _num(b.window_ps * 1e-6),
        "occupancy_peak": _num(b.rolling_occupancy.max()) if b.rolling_occupancy.size else None,
        "busy_clocks": b.split.busy_clocks,
        "efficiency": _num(b.efficiency),
        "dma_efficiency": _num(b.dma_efficiency),
        "throughput_mbit_s": _num(b.throughput_mbit_s),
        "dma_mbit_s": _num(b.dma_mbit_s),
        "packets": int(len(b.packets)),
        "packets_by_direction": b.packet_counts(),
        "ambiguous": b.ambiguous,
        "transactions": {"total": int(len(b.records)), "csr": int((b.classes == 0).sum()),
                         "dma": int((b.classes == 1).sum()), "other": int((b.classes == 2).sum())},
        "csr_groups": {"total": int(len(b.groups)), "setup": int(b.groups["setup"].sum()),
                       "interrupt": int((~b.groups["setup"]).sum())},
        "dma_bursts": int(len(b.bursts)),
        "dma_burst_terminations": {str(k): int(v) for k, v in
                                   zip(*np.unique(b.bursts["termination"], return_counts=True))},
        "dma_transfers": {k: int((b.transfers["kind"] == i).sum()) for i, k in enumerate(TRANSFER_KINDS)},
        "pauses": {"count": int(b.pause_after.size), "us": b.distributions["pause_us"].rounded(4)},
        "limits": {
            "bus_us_per_byte": _num(lim["bus_us_per_byte"], 7),
            "bus_mbit_s": _num(lim["bus_mbit_s"], 3),
            "link_us_per_byte": lim["link_us_per_byte"],
            "data_dma_ideal_us": lim["data_dma_ideal_us"].rounded(4),
            "dma_burst_ideal_us": lim["dma_burst_ideal_us"].rounded(4),
            "wire_us": lim["wire_us"].rounded(4),
        },
    }
    for name in DISTRIBUTIONS:
        out[name] = b.distributions[name].rounded(4)
    out["histograms"] = {name: _hist(b.histograms[name]) for name in DISTRIBUTIONS if name in b.histograms}
    return out


def _hist(h) -> dict:
    return {"counts": [int(c) for c in h.counts], "edges": [round(float(e), 6) for e in h.edges]}


def _thin(x: np.ndarray, n: int = MAX_SERIES_POINTS) -> np.ndarray:
    if x.size <= n:
        return x
    return x[np.linspace(0, x.size - 1, n).astype(np.int64)]


def _list(x) -> list:
    return [None if not np.isfinite(v) else round(float(v), 6) for v in np.asarray(x, dtype=np.float64)]


def bus_series(b: BusAnalysis) -> dict:
    """Plot data for the HTML report (times in us from the bus's first clock)."""
    t0 = b.facts.start_ps
    p = b.packets
    keep = _thin(np.arange(len(p)))
    return {
        "rolling_t_us": _list(_thin((b.rolling_t_ps - t0) * 1e-6)),
        "rolling_occupancy": _list(_thin(b.rolling_occupancy)),
        "burst_bytes": [int(v) for v in _thin(b.bursts["bytes"])],
        "packet_t_us": _list((p["anchor_ps"][keep] - t0) * 1e-6),
        "breakdown_us": {label: _list(p[field][keep] * 1e-6) for label, field in BREAKDOWN.items()},
        "interrupt_delay_us": _list(p["interrupt_delay_ps"][keep] * 1e-6),
        "packet_occupancy": _list(p["occupancy"][keep]),
        "packets_per_interrupt": [int(v) for v in _thin(b.packets_per_interrupt)],
    }


# Per-link distributions (wire-to-PCI chain), in this order.
LINK_DISTRIBUTIONS = [f.name for f in link_distributions()]
WATERFALL_ROWS = 60


def link_figures(lc) -> dict:
    """A probed link's chain figures (pcitrace.analyse.wire.LinkChain)."""
    out = {"name": lc.link, "send_bus": lc.send_bus, "recv_bus": lc.recv_bus,
           "matching": lc.method, "frames": lc.counts()}
    for name in LINK_DISTRIBUTIONS:
        out[name] = lc.distributions[name].rounded(4)
    return out


def link_series(lc, t0_ps: int) -> dict:
    """The first matched frames' chain for the HTML waterfall (us from the capture start)."""
    c = lc.chain[lc.chain["status"] == "matched"][:WATERFALL_ROWS]

    def us(field):
        v = c[field].astype(np.float64)
        return [None if x < 0 else round((x - t0_ps) * 1e-6, 4) for x in v]

    return {f: us(f + "_ps") for f in ("csr_setup_start", "send_first_dma", "send_first_word", "send_dma_end", "wire_start",
                                       "wire_end", "recv_first_word", "recv_dma_end", "recv_interrupt")} | {
        "seq": [int(x) for x in c["seq"]], "frame": [int(x) for x in c["frame"]]}

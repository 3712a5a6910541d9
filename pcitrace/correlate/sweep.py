"""Sweep: a directory of captures taken at different packet spacings plus the UDPmon scan of
the same spacings -> one table and a plot of throughput and PCI occupancy against spacing,
the figure the seed papers drew by hand (receive wire rate and % bus occupancy vs the
transmit spacing).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.formats import SUFFIXES, format_of, stem
from pcitrace.correlate.correlate import CapturePackets
from pcitrace.correlate.runlog import RunLog
from pcitrace.errors import PcitraceError

@dataclass
class SweepRow:
    capture: str
    spacing_us: float                  # the spacing the test asked for (scenario file or --spacing)
    spacing_source: str                # 'scenario' or 'option'
    measured_spacing_us: float
    scan: dict                         # the scan row this capture belongs to ({} if none near)
    throughput_mbit: float             # user bytes moved by the NIC / time, from the capture
    occupancy: dict[str, float] = field(default_factory=dict)        # bus -> fraction
    packet_busy_us: dict[str, float] = field(default_factory=dict)   # bus -> median busy per packet

    def flat(self) -> dict:
        d = {"capture": self.capture, "spacing_us": self.spacing_us, "spacing_source": self.spacing_source,
             "measured_spacing_us": round(self.measured_spacing_us, 4),
             "throughput_mbit": round(self.throughput_mbit, 3)}
        for k in ("inter_pkt_time_us", "recv_wire_rate_mbit", "recv_user_data_rate_mbit", "pct_lost"):
            if k in self.scan:
                d[f"scan_{k}"] = self.scan[k]
        for b, v in sorted(self.occupancy.items()):
            d[f"occupancy_{b}"] = None if v is None else round(v, 4)
        for b, v in sorted(self.packet_busy_us.items()):
            d[f"packet_busy_us_{b}"] = round(v, 4)
        return d


@dataclass
class SweepResult:
    scan: RunLog
    rows: list[SweepRow]

    def table(self) -> list[dict]:
        return [r.flat() for r in self.rows]


def find_captures(directory: str | Path) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        raise PcitraceError("is not a directory", path=d, fix="give the directory holding the sweep's captures")
    caps = sorted(p for p in d.iterdir() if p.is_file() and format_of(p) is not None)
    if not caps:
        raise PcitraceError(f"holds no captures ({', '.join(SUFFIXES)})", path=d,
                            fix="put one capture per packet spacing in the directory")
    return caps


def _scenario_spacing(capture: Path) -> float | None:
    """traffic.spacing_us of NAME.scenario.toml beside NAME.sr (simulator outputs and samples)."""
    sc = capture.with_name((stem(capture) or capture.name) + ".scenario.toml")
    if not sc.exists():
        return None
    try:
        data = tomllib.loads(sc.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PcitraceError(f"cannot read the scenario beside the capture: {exc}", path=sc,
                            fix="fix or remove the scenario file") from None
    v = data.get("traffic", {}).get("spacing_us")
    return float(v) if isinstance(v, (int, float)) else None


def requested_spacing(capture: Path, measured: float, spacings: dict[str, float] | None = None) -> tuple[float, str]:
    """The spacing the test asked for, and where it was said: ``spacings`` (--spacing, by capture
    file name or NAME), else NAME.scenario.toml beside the capture. Never the measured spacing: a
    NIC that cannot keep up spaces its packets wider than asked, and pairing that with the scan's
    nearest row would compare different runs without a word."""
    spacings = spacings or {}
    for key in (capture.name, stem(capture)):
        if key in spacings:
            return float(spacings[key]), "option"
    requested = _scenario_spacing(capture)
    if requested is not None:
        return requested, "scenario"
    seen = f"{measured:.4g} us measured between its packets" if math.isfinite(measured) else "no spacing measured"
    raise PcitraceError(f"no requested packet spacing for this capture ({seen}; that is what the NIC managed, "
                        "not what the test asked)", path=capture,
                        fix=f"give it: --spacing {stem(capture) or capture.name}=US, or NAME.scenario.toml "
                            "with [traffic] spacing_us beside the capture")


def sweep_row(capture: Path, packets: list[CapturePackets], scan: RunLog,
              spacings: dict[str, float] | None = None) -> SweepRow:
    if not packets:
        raise PcitraceError("the capture shows no packets", path=capture,
                            fix="check its profile (NIC identity) with `pcitrace info`")
    send = next((p for p in packets if p.direction == "tx"), None) or max(packets, key=len)
    recv = next((p for p in packets if p.direction == "rx"), None)
    t = np.sort(send.time_ps)
    measured = float(np.median(np.diff(t))) / 1e6 if len(t) > 1 else math.nan
    spacing, source = requested_spacing(capture, measured, spacings)
    # Throughput as the receiver's bus saw it (what arrived), else the sender's.
    basis = recv if recv is not None and len(recv) > 1 else send
    tb = np.sort(basis.time_ps)
    if len(tb) > 1 and tb[-1] > tb[0]:
        # n packets span n-1 periods; count n-1 packets' bytes over it.
        throughput = float(np.sum(basis.bytes[np.argsort(basis.time_ps)][1:])) * 8 / ((tb[-1] - tb[0]) / 1e12) / 1e6
    else:
        throughput = math.nan
    # The frames the NIC moved carry the scan's UDP payload plus 42 bytes of Ethernet, IPv4
    # and UDP headers (a control-only bus rounds each burst up to whole bus words).
    size = scan.rows[0].get("pkt_len") if scan.rows else None
    moved = float(np.median(send.bytes)) if len(send.bytes) else math.nan
    if size and np.isfinite(moved) and not (size + 42 - 8 <= moved <= size + 42 + 16):
        raise PcitraceError(f"the capture's frames are {moved:.0f} bytes on the bus, but the scan sent "
                            f"{size}-byte UDP packets ({size + 42} bytes with headers)", path=capture,
                            fix="sweep captures of the scan's packet size (udpmon_bw_mon -p)")
    scan_row = {}
    if scan.rows and "inter_pkt_time_us" in scan.rows[0]:
        sp = np.array([r["inter_pkt_time_us"] for r in scan.rows], float)
        k = int(np.argmin(np.abs(sp - spacing)))
        # Only the scan's own step counts: a capture between two steps (11 us in a 10, 12, ...
        # scan) stays unpaired rather than borrowing a neighbour's figures.
        step = np.min(np.diff(np.unique(sp))) if len(np.unique(sp)) > 1 else max(1.0, spacing)
        if abs(sp[k] - spacing) <= step / 4:
            scan_row = scan.rows[k]
    occ = {p.bus: p.occupancy for p in packets}
    busy = {p.bus: float(np.nanmedian(p.figures["busy_us"])) for p in packets if "busy_us" in p.figures
            and np.isfinite(p.figures["busy_us"]).any()}
    return SweepRow(capture.name, float(spacing), source, measured, scan_row, throughput, occ, busy)


def sweep(captures: list[Path], scan: RunLog, packets_of, spacings: dict[str, float] | None = None) -> SweepResult:
    """``packets_of(path) -> list[CapturePackets]`` reads one capture (the analyser normally);
    ``spacings``: requested spacing in us by capture file name or NAME (see requested_spacing)."""
    if (scan.kind != "udpmon_bw" or scan.variant not in ("scan", "scan_x") or len(scan.rows) < 2
            or "recv_wire_rate_mbit" not in scan.rows[0]):
        raise PcitraceError(f"is a {scan.kind} {scan.variant} log, not a udpmon_bw_mon scan", path=scan.path,
                            fix="give the output of udpmon_bw_mon -i START -e END (optionally -x)")
    rows = [sweep_row(Path(c), packets_of(Path(c)), scan, spacings) for c in captures]
    rows.sort(key=lambda r: r.spacing_us)
    return SweepResult(scan, rows)


PLOT_FORMATS = ("png", "svg", "pdf")


def plot_format(out: Path) -> str:
    """The image format from the plot file's suffix; refused before any work if unknown."""
    suffix = Path(out).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise PcitraceError(f"cannot write a plot as {suffix or 'a file without a suffix'!r}", path=out,
                            fix=f"name the plot file with one of .{', .'.join(PLOT_FORMATS)}")
    return suffix


def plot_sweep(result: SweepResult, out: str | Path, *, title: str | None = None) -> Path:
    """Two panels against spacing: throughput (scan's receive wire rate, the captures'
    throughput) and PCI occupancy per bus. Written atomically (PNG/SVG/PDF by suffix)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    scan = result.scan
    sp = np.array([r["inter_pkt_time_us"] for r in scan.rows], float)
    wire = np.array([r["recv_wire_rate_mbit"] for r in scan.rows], float)
    lost = np.array([r.get("pct_lost", np.nan) for r in scan.rows], float)
    order = np.argsort(sp)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7.5, 7.0), sharex=True, constrained_layout=True)
    ax1.plot(sp[order], wire[order], "o-", color="tab:blue", label="UDPmon recv wire rate (scan)")
    xs = [r.spacing_us for r in result.rows]
    ys = [r.throughput_mbit for r in result.rows]
    ax1.plot(xs, ys, "s--", color="tab:orange", label="throughput on the PCI bus (captures)")
    ax1.set_ylabel("Mbit/s")
    top = np.nanmax(np.r_[wire, np.array(ys, float), 1.0])
    ax1.set_ylim(0, top * 1.35)  # from zero, with room for the legend above the curves
    ax1.grid(True, alpha=0.3)
    ax1b = ax1.twinx()
    ax1b.bar(sp[order], lost[order], width=0.6, alpha=0.2, color="tab:red", label="% lost (scan)")
    ax1b.set_ylabel("% lost")
    ax1b.set_ylim(0, 100)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax1b.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    buses = sorted({b for r in result.rows for b in r.occupancy})
    for b in buses:
        pts = [(r.spacing_us, 100 * r.occupancy[b]) for r in result.rows
               if r.occupancy.get(b) is not None]
        if pts:
            x, y = zip(*pts)
            ax2.plot(x, y, "o-", label=f"{b} bus")
    ax2.set_ylabel("PCI bus occupancy %")
    ax2.set_xlabel("transmit spacing between packets (us)")
    ax2.set_ylim(0, 100)
    ax2.grid(True, alpha=0.3)
    if buses:
        ax2.legend(fontsize=8)
    size = scan.rows[0].get("pkt_len")
    fig.suptitle(title or f"{size}-byte UDP packets: throughput and PCI occupancy vs spacing")
    suffix = plot_format(out)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format=suffix, dpi=110)
    finally:
        plt.close(fig)
    return out

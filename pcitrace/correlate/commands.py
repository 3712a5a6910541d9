"""`pcitrace runlog`, `pcitrace correlate`, `pcitrace sweep`."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import click
import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.errors import PcitraceError

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")


def _is_pcap(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) in PCAP_MAGICS
    except OSError:
        return False


def load_run(path: str | Path, *, port: int | None = None):
    """A RunLog, or UdpPackets for a pcap / pcapng file."""
    path = Path(path)
    if _is_pcap(path):
        from pcitrace.correlate.pcap import read_pcap
        return read_pcap(path, port=port)
    from pcitrace.correlate.runlog import read_runlog
    return read_runlog(path)


def _write(text: str, out: str | None) -> None:
    if not out or out == "-":
        click.echo(text, nl=not text.endswith("\n"))
        return
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.6g}"
    return str(v)


def _table(rows: list[dict], columns: list[str] | None = None, limit: int | None = None) -> str:
    if not rows:
        return "(no rows)\n"
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    shown = rows if limit is None or len(rows) <= limit else rows[:limit]
    cells = [[_fmt(r.get(c)) for c in cols] for r in shown]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more rows (use --format json or csv for all)")
    return "\n".join(lines) + "\n"


def _csv(rows: list[dict]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


def _jsonable(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def _dumps(obj) -> str:
    return json.dumps(obj, indent=1, default=_jsonable) + "\n"


# --- runlog ----------------------------------------------------------------------------------
def runlog_text(run) -> str:
    from pcitrace.correlate.correlate import lost_ranges
    from pcitrace.correlate.pcap import UdpPackets
    if isinstance(run, UdpPackets):
        gaps = np.diff(np.sort(run.time_ps))
        out = [f"{run.path}: pcap, {len(run)} UDP datagrams, payload {run.payload_kind}",
               f"  ports {int(run.src_port[0])} -> {int(run.dst_port[0])}, sizes {int(run.size.min())}"
               f"..{int(run.size.max())} bytes",
               f"  span {(run.time_ps[-1] - run.time_ps[0]) / 1e6:.3f} us, median spacing "
               f"{(np.median(gaps) / 1e6 if len(gaps) else float('nan')):.3f} us"]
        if (run.seq >= 0).any():
            seq = run.seq
            expected = int(seq.max() - seq.min() + 1)
            missing = expected - len(np.unique(seq))
            reordered = int(np.sum(seq[1:] < np.maximum.accumulate(seq)[:-1]))
            out.append(f"  sequence {int(seq.min())}..{int(seq.max())}: {missing} missing, {reordered} out of order")
        return "\n".join(out) + "\n"
    p = run.parameters
    head = f"{run.path}: {run.kind} ({run.variant})"
    if p.get("command_line"):
        head += f"\n  command: {p['command_line']}"
    out = [head]
    extras = {k: v for k, v in p.items() if k not in ("command_line", "options", "tool") and v is not None}
    if extras:
        out.append("  " + ", ".join(f"{k}={v}" for k, v in extras.items()))
    for n in run.notes:
        out.append(f"  note: {n}")
    out.append("")
    out.append(_table(run.rows, [c for c in run.columns if any(c in r for r in run.rows)]))
    if run.packets is not None:
        pk = run.packets
        out.append(f"per-packet (-G): {len(pk)} rows, {int(pk.lost.sum())} lost")
        lr = lost_ranges(pk.lost_numbers)
        if lr:
            out.append("  lost packets: " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in lr))
        ok = ~pk.lost
        if ok.sum() > 1:
            ds = np.diff(pk.send_time_ps[ok]) / np.diff(pk.number[ok]) / 1e6
            out.append(f"  send spacing median {np.median(ds):.3f} us, max {ds.max():.3f} us")
    if run.lost is not None:
        lr = lost_ranges(run.lost.packet)
        out.append(f"lost-packet events (-L): {len(run.lost)}: "
                   + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in lr))
    for h in run.histograms:
        nz = np.flatnonzero(h.counts)
        span = f"{h.bins[nz[0]]:g}..{h.bins[nz[-1]]:g}" if len(nz) else "empty"
        stats = ", ".join(f"{k} {v:g}" for k, v in h.stats.items())
        out.append(f"histogram {h.index} '{h.title}': {int(h.counts.sum())} in bins, non-empty {span}; {stats}")
    return "\n".join(out).rstrip("\n") + "\n"


@click.command("runlog")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--port", type=int, default=None, help="pcap: the test stream's UDP port (default: the busiest).")
@click.option("-o", "--output", default=None, help="Write to this file (atomically) instead of stdout.")
def runlog(file, fmt, port, output):
    """Read a UDPmon / iperf3 / iperf2 / netperf output or a pcap of the stream and show what it says."""
    run = load_run(file, port=port)
    from pcitrace.correlate.pcap import UdpPackets
    if fmt == "json":
        if isinstance(run, UdpPackets):
            d = {"path": run.path, "kind": "pcap", "payload": run.payload_kind, "start_epoch_ns": run.start_epoch_ns,
                 "time_ps": run.time_ps, "size": run.size, "seq": run.seq,
                 "src_port": run.src_port, "dst_port": run.dst_port}
        else:
            d = run.to_dict()
        _write(_dumps(d), output)
    else:
        _write(runlog_text(run), output)


# --- correlate -------------------------------------------------------------------------------
def correlation_text(c, limit: int = 40) -> str:
    from pcitrace.correlate.correlate import lost_ranges
    s = c.summary()
    out = [f"bus {s['bus']} ({s['direction']}): {s['capture_packets']} packets in the capture; "
           f"run {c.run.source} ({c.run.which} times): {s['run_packets']} packets with times, {s['run_lost']} lost",
           f"alignment ({s['method']}): offset {s['offset_ps'] / 1e6:.3f} us, drift {s['drift_ppm']:.1f} ppm, "
           f"residual median {_fmt(s['residual_us_median'])} us, max {_fmt(s['residual_us_max'])} us",
           f"matched {s['matched']}, capture-only {s['capture_unmatched']}, run-only {s['run_unmatched']} "
           f"(+{s['run_outside_capture']} outside the capture window), reordered {s['reordered']}, "
           f"mismatched {s['mismatched']}"]
    for d in s.get("doubts", []):
        out.append(f"WARNING: this alignment is doubtful: {d}")
    on_bus = [x["number"] for x in c.lost if x["on_bus"]]
    off_bus = [x["number"] for x in c.lost if not x["on_bus"] and x["in_window"]]

    def rng(ns):
        return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in lost_ranges(ns)) or "none"
    out.append(f"lost by the run and seen on this bus: {rng(on_bus)}")
    out.append(f"lost by the run and not on this bus: {rng(off_bus)}")
    out.append("")
    cols = ["number", "capture_time_us", "capture_in_run_us", f"run_{c.run.which}_us", "residual_us", "bytes",
            "matched", "run_lost"] + list(c.capture.figures)
    out.append(_table(c.rows, [k for k in cols if any(k in r for r in c.rows)], limit))
    return "\n".join(out)


@click.command("correlate")
@click.argument("capture", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("runlog_path", metavar="RUNLOG", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--profile", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Channel profile (default: NAME.profile.toml beside the capture, else detected).")
@click.option("--bus", default=None, help="Bus whose packets to align (default: the send side).")
@click.option("--run-times", type=click.Choice(["send", "recv"]), default="send", show_default=True,
              help="UDPmon -G: align with the send or the receive times.")
@click.option("--port", type=int, default=None, help="pcap run: the stream's UDP port.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("-o", "--output", default=None, help="Write to this file (atomically) instead of stdout.")
def correlate(capture, runlog_path, profile, bus, run_times, port, fmt, output):
    """Align a capture's packets with a UDP test run (UDPmon -G log or pcap)."""
    from pcitrace.correlate.correlate import capture_packets, choose_bus, correlate as do_correlate, run_packets
    run = run_packets(load_run(runlog_path, port=port), run_times)
    packets = capture_packets(capture, profile=profile)
    cp = choose_bus(packets, bus, run)
    c = do_correlate(cp, run)
    if fmt == "json":
        _write(_dumps(c.to_dict()), output)
    elif fmt == "csv":
        _write(_csv(c.rows), output)
    else:
        _write(correlation_text(c), output)
    doubts = c.alignment.doubts()
    for d in doubts:
        click.echo(f"pcitrace: warning: {capture} and {runlog_path} may not be the same stream: {d}", err=True)
    # Exit status 1: the output is written, but its pairing should not be trusted as it is.
    return 1 if doubts else 0


# --- sweep -----------------------------------------------------------------------------------
def _spacings(items) -> dict[str, float]:
    """--spacing NAME=US options as {NAME: us}."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            us = float(value)
        except ValueError:
            us = math.nan
        if not sep or not name or not (math.isfinite(us) and us > 0):
            raise PcitraceError(f"--spacing {item!r} is not NAME=US with a positive spacing in us", where="--spacing",
                                fix="write e.g. --spacing pro1000_w12=12")
        out[name] = us
    return out


@click.command("sweep")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.argument("scanlog", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "plot", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Plot file (.png, .svg or .pdf).")
@click.option("--profile", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Channel profile for every capture (default: each capture's own).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("--table", "table_out", default=None, help="Write the table here instead of stdout.")
@click.option("--spacing", "spacing", multiple=True, metavar="NAME=US",
              help="Requested packet spacing of capture NAME (file name or name without extension), in us; "
                   "default: NAME.scenario.toml beside it. Repeatable.")
def sweep(directory, scanlog, plot, profile, fmt, table_out, spacing):
    """Throughput and PCI occupancy against packet spacing: captures in DIRECTORY + a UDPmon scan."""
    from pcitrace.correlate.correlate import capture_packets
    from pcitrace.correlate.runlog import read_runlog
    from pcitrace.correlate.sweep import find_captures, plot_format, plot_sweep, sweep as do_sweep
    # refuse a plot or table path that cannot be written before the analysis, not after it
    plot_format(plot)
    for out in (plot, table_out):
        if out and out != "-" and not Path(out).resolve().parent.is_dir():
            raise PcitraceError(f"the directory {Path(out).parent} does not exist", path=out,
                                fix="create the directory or choose another output path")
    spacings = _spacings(spacing)
    scan = read_runlog(scanlog)
    caps = find_captures(directory)
    progress = None
    if sys.stderr.isatty():
        from rich.progress import Progress
        progress = Progress(transient=True)
    if progress is not None:
        with progress:
            task = progress.add_task("captures", total=len(caps))

            def packets_of(p):
                r = capture_packets(p, profile=profile)
                progress.advance(task)
                return r
            result = do_sweep(caps, scan, packets_of, spacings)
    else:
        result = do_sweep(caps, scan, lambda p: capture_packets(p, profile=profile), spacings)
    plot_sweep(result, plot)
    rows = result.table()
    if fmt == "json":
        _write(_dumps({"scan": str(scanlog), "plot": str(plot), "rows": rows}), table_out)
    elif fmt == "csv":
        _write(_csv(rows), table_out)
    else:
        _write(_table(rows) + f"plot: {plot}\n", table_out)

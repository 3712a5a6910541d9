"""`pcitrace info` and `pcitrace convert`."""

from __future__ import annotations

import json
import os
import sys

import click

from pcitrace import buses as bus_kinds
from pcitrace.errors import PcitraceError, warning_line


def _si(value: float, unit: str) -> str:
    for mult, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= mult:
            return f"{value / mult:.6g} {prefix}{unit}"
    return f"{value:.6g} {unit}"


def _duration(ps: int) -> str:
    for mult, unit in ((1e12, "s"), (1e9, "ms"), (1e6, "us"), (1e3, "ns")):
        if ps >= mult:
            return f"{ps / mult:.6g} {unit}"
    return f"{ps} ps"


def _thousands(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def _status(text: str):
    """A rich spinner on a terminal, nothing when piped."""
    import contextlib
    if sys.stderr.isatty():
        from rich.console import Console
        return Console(stderr=True).status(text)
    return contextlib.nullcontext()


def capture_summary(path: str, profile_path: str | None = None) -> dict:
    """Everything `info` shows, as plain data."""
    from pcitrace.capture import open_capture
    from pcitrace.capture.clocked import find_clocks
    from pcitrace.capture.profile import find_profile

    cap = open_capture(path)
    tb = cap.timebase
    if tb.mode == "state":
        tbd = {"mode": "state", "clock_hz": tb.clock_hz,
               "timestamps": tb.timestamps_ps is not None}
    elif tb.event_timed:
        tbd = {"mode": "timing", "event_timed": True,
               "timescale_ps": cap.metadata.get("timescale_ps")}
    else:
        tbd = {"mode": "timing", "samplerate_hz": tb.samplerate_hz}
    clocks = find_clocks(cap)
    prof, source = find_profile(cap, profile_path or None)      # a capture with no bus is still shown
    prof.check(cap)
    at_clock = {}
    if clocks and hasattr(cap, "unknown_mask"):
        from pcitrace.capture.clocked import clock_edges, unknown_at_edges
        at_clock = {"clock": clocks[0].channel,
                    "channels": unknown_at_edges(cap, clock_edges(cap, clocks[0].channel))}
    buses = []
    for b in prof.buses:
        width = b.width
        entry = {"name": b.name, "kind": b.kind, "mode": b.mode, "width": width,
                 "clock": b.clock, "clock_hz": b.clock_hz,
                 "signals": {k: v for k, v in b.signals.items()},
                 "inverted": sorted(b.inverted)}
        if b.nic.gnt or b.nic.req or b.nic.bars:
            entry["nic"] = {"gnt": b.nic.gnt, "req": b.nic.req,
                            "bars": [[lo, hi] for lo, hi in b.nic.bars]}
        if not b.is_pci:
            entry["link_bps"] = b.link_bps
        buses.append(entry)
    return {
        "path": cap.path,
        "format": cap.metadata.get("format"),
        "channels": [{"name": c.name, "width": c.width} for c in cap.channels],
        "timebase": tbd,
        "samples": cap.num_samples,
        "duration_ps": cap.duration_ps,
        "clocks": [{"channel": c.channel, "rising_edges": c.rising_edges,
                    "frequency_hz": c.frequency_hz, "first_ps": c.first_ps,
                    "last_ps": c.last_ps} for c in clocks],
        "profile": source,
        "buses": buses,
        "unknown_counts": cap.metadata.get("unknown_counts", {}),
        "unknown_at_clock": at_clock,
        "changes": cap.metadata.get("changes"),
        "warnings": list(cap.metadata.get("warnings", [])),
    }


def echo_warnings(path, warnings) -> None:
    """What a reader could read only in part (a file cut short), on standard error: one line each."""
    for w in warnings:
        click.echo(warning_line(path, w), err=True)


def _print_summary(s: dict) -> None:
    out = click.echo
    out(f"capture   {s['path']} ({s['format']})")
    tb = s["timebase"]
    out(f"time base {_timebase_text(tb)}")
    extra = f", {_thousands(s['changes'])} value changes" if s.get("changes") else ""
    out(f"duration  {_duration(s['duration_ps'])} ({_thousands(s['samples'])} samples{extra})")
    out(f"channels  {len(s['channels'])}")
    for line in _channel_lines(s["channels"], s["unknown_counts"]):
        out(line)
    if s["clocks"]:
        out("clocks")
        for c in s["clocks"]:
            out(f"  {c['channel']}: {_si(c['frequency_hz'], 'Hz')}, "
                f"{_thousands(c['rising_edges'])} rising edges")
    else:
        out("clocks    none found" if tb["mode"] != "state" else "clocks    (state capture)")
    out(f"buses     {len(s['buses'])} ({s['profile']})")
    for b in s["buses"]:
        for line in _bus_lines(b):
            out(line)
    for line in _unknown_lines(s["unknown_counts"], s.get("unknown_at_clock") or {}):
        out(line)


def _timebase_text(tb: dict) -> str:
    """The time base in words: state (clock or timestamps), VCD change times, or a sample rate."""
    if tb["mode"] == "state":
        if tb.get("clock_hz"):
            return f"state, one sample per bus clock at {_si(tb['clock_hz'], 'Hz')}"
        return "state, one sample per bus clock (per-sample timestamps)"
    if tb.get("event_timed"):
        scale = (_duration(tb['timescale_ps']) if tb['timescale_ps'] >= 1
                 else str(tb['timescale_ps'] * 1000) + ' fs')
        return f"timing, sampled at each value change (VCD timescale {scale})"
    return f"timing, {_si(tb['samplerate_hz'], 'Hz')} sample rate"


def _channel_lines(channels: list[dict], unk: dict) -> list[str]:
    """One line per channel: name, width, and its x/z counts when it had any."""
    wname = max((len(c["name"]) for c in channels), default=4)
    lines = []
    for c in channels:
        u = unk.get(c["name"])
        note = ""
        if u:
            note = "  unknown: " + ", ".join(f"{k} {_thousands(v)}" for k, v in u.items() if v)
        width = f"{c['width']} bits" if c["width"] > 1 else "1 bit"
        lines.append(f"  {c['name']:<{wname}}  {width:>8}{note}")
    return lines


def _bus_lines(b: dict) -> list[str]:
    """A bus: kind, width and clock; its signals; inverted lines; the NIC's lines and BARs."""
    kind = bus_kinds.kind(b["kind"])
    if not kind.is_pci:
        head = f"  {b['name']}: {kind.title}, {_si(b['link_bps'] or 0, 'b/s')}"
    else:
        clk = (f"clock {b['clock']}" if b["clock"] else
               f"clock {_si(b['clock_hz'], 'Hz')}" if b["clock_hz"] else "no clock")
        head = f"  {b['name']}: {bus_kinds.kind(b['mode']).title} {b['width']}-bit, {clk}"
    sig = ", ".join(f"{k}={v if isinstance(v, str) else v[0] + '..' + v[-1]}"
                    for k, v in b["signals"].items())
    lines = [head, f"    {sig}"]
    if b["inverted"]:
        lines.append(f"    inverted: {', '.join(b['inverted'])}")
    if b.get("nic"):
        n = b["nic"]
        bars = ", ".join(f"0x{lo:x}-0x{hi:x}" for lo, hi in n["bars"])
        lines.append(f"    NIC: gnt={n['gnt']} req={n['req']} bars={bars or 'none'}")
    return lines


def _unknown_lines(unk: dict, ac: dict) -> list[str]:
    """The x/z totals and the rule read by; the unknown values sampled just before clock edges."""
    lines = []
    total_x = sum(u.get("x", 0) for u in unk.values())
    total_z = sum(u.get("z", 0) for u in unk.values())
    if total_x or total_z:
        lines.append(f"unknown   {_thousands(total_x)} x and {_thousands(total_z)} z value changes read "
                     "by the rule: active-low lines deasserted (1), other bits 0")
    if ac.get("channels"):
        parts = [f"{n} " + ", ".join(f"{k} {_thousands(v)}" for k, v in u.items() if v)
                 for n, u in ac["channels"].items()]
        lines.append(f"          sampled just before {ac['clock']} edges: {'; '.join(parts)}")
    elif ac:
        lines.append(f"          none sampled just before {ac['clock']} edges")
    return lines


@click.command(help="Show a capture's channels, time base, duration, clock edges, detected "
                    "buses and unknown-value counts.")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False),
              help="Channel profile (TOML); default NAME.profile.toml beside the capture, "
                   "else auto-detection.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def info(capture, profile_path, as_json):
    with _status(f"reading {capture}"):
        s = capture_summary(capture, profile_path)
    echo_warnings(capture, s["warnings"])
    if as_json:
        click.echo(json.dumps(s, indent=1))
    else:
        _print_summary(s)


@click.command(help="Convert a capture between .sr and VCD (by extension). With --clock, "
                    "write one sample per rising edge of that channel (a state capture); "
                    "with --samplerate, resample a VCD at a fixed rate (a timing capture).")
@click.argument("src", metavar="IN", type=click.Path(dir_okay=False))
@click.argument("dst", metavar="OUT", type=click.Path(dir_okay=False))
@click.option("--clock", "clock", help="Clock channel: sample just before each rising edge.")
@click.option("--samplerate", type=float, help="Resample a VCD at this rate (Hz).")
def convert(src, dst, clock, samplerate):
    from pcitrace.capture import capture_format, open_capture, write_capture
    from pcitrace.capture.clocked import clocked_view, resample

    capture_format(dst)
    if os.path.abspath(src) == os.path.abspath(dst):
        raise PcitraceError("input and output are the same file", path=dst,
                            fix="choose another output name")
    if clock and samplerate:
        raise PcitraceError("--clock and --samplerate exclude each other", where="command line",
                            fix="choose one: --clock for a state capture, --samplerate for timing")
    with _status(f"converting {src} -> {dst}"):
        cap = open_capture(src)
        if clock:
            cap = clocked_view(cap, clock)
        elif samplerate:
            cap = resample(cap, samplerate)
        elif (capture_format(dst) == "sr" and cap.timebase.event_timed):
            raise PcitraceError(
                "a VCD sampled at its value changes has no fixed sample rate for .sr",
                path=src, fix="give --clock CHANNEL (one sample per bus clock) or "
                              "--samplerate HZ (a timing capture)")
        write_capture(cap, dst)
    echo_warnings(src, cap.metadata.get("warnings", []))
    click.echo(f"wrote {dst}: {len(cap.channels)} channels, {cap.num_samples} samples "
               f"({cap.timebase.mode})", err=True)

"""`pcitrace capture` (live capture from a SUMP / OLS analyser) and `pcitrace emulate-sump`."""

from __future__ import annotations

import re
import signal
import sys

import click

from pcitrace.errors import PcitraceError

_SI = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024 ** 2}


def parse_quantity(text: str, what: str, unit: str = "") -> float:
    """'100M', '33.3MHz', '4k', '1e6', '24Ki' -> number."""
    m = re.fullmatch(rf"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(Ki|Mi|[kKMG]?)\s*(?:{unit})?\s*",
                     text, flags=re.IGNORECASE if unit else 0)
    if not m:
        raise PcitraceError(f"{what} {text!r} is not a number", where=f"--{what}",
                            fix=f"write e.g. 100M{unit} or 4k")
    prefix = m.group(2)
    prefix = {"k": "k", "K": "K", "m": "M", "M": "M", "g": "G", "G": "G", "ki": "Ki", "Ki": "Ki",
              "mi": "Mi", "Mi": "Mi", "": ""}.get(prefix, prefix)
    return float(m.group(1)) * _SI[prefix]


def profile_channel_names(path) -> list[str]:
    """The capture channel names a profile uses, in profile order (probe 0 first)."""
    from pcitrace.capture.profile import VECTOR_SIGNALS, load_profile

    prof = load_profile(path)
    names: list[str] = []
    for bus in prof:
        for sig, chan in bus.signals.items():
            if isinstance(chan, str) and sig in VECTOR_SIGNALS:
                raise PcitraceError(
                    f"bus {bus.name!r} maps the vector {sig} to the single channel {chan!r}; a SUMP probe "
                    "carries one line", path=path,
                    fix=f"list its bit channels ({sig} = [\"{chan}0\", \"{chan}1\", ...]) or leave it out")
            for c in ([chan] if isinstance(chan, str) else chan):
                if c not in names:
                    names.append(c)
    return names


def parse_channels(spec: str | None, names: list[str] | None) -> dict[int, str] | None:
    """--channels LIST -> probe -> name. Items: N, A-B, NAME (from the profile / CHn) or NAME=N.

    Probe n is named by the n-th profile channel, else CHn. None: every channel of the
    profile, or (without a profile) every probe the device has.
    """
    def default_name(i: int) -> str:
        return names[i] if names and i < len(names) else f"CH{i}"

    if not spec:
        if names:
            if len(names) > 32:
                raise PcitraceError(f"the profile names {len(names)} channels; SUMP devices have 32 probes",
                                    where="--profile", fix="choose up to 32 with --channels")
            return {i: n for i, n in enumerate(names)}
        return None
    lookup = {default_name(i): i for i in range(32)}
    out: dict[int, str] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if "=" in item:
            name, _, num = item.rpartition("=")
            if not num.strip().isdigit() or not name.strip():
                raise PcitraceError(f"channel item {item!r} is not NAME=PROBE", where="--channels",
                                    fix="write e.g. FRAME#=0")
            out[int(num)] = name.strip()
        elif re.fullmatch(r"\d+-\d+", item):
            a, b = (int(x) for x in item.split("-"))
            if b < a:
                raise PcitraceError(f"probe range {item!r} runs backwards", where="--channels", fix=f"write {b}-{a}")
            for i in range(a, b + 1):
                out[i] = default_name(i)
        elif item.isdigit():
            out[int(item)] = default_name(int(item))
        elif item in lookup:
            out[lookup[item]] = item
        else:
            known = ", ".join(n for n in lookup if not re.fullmatch(r"CH\d+", n)) or "CH0..CH31"
            raise PcitraceError(f"unknown channel {item!r}", where="--channels",
                                fix=f"use a probe number, NAME=PROBE, or one of {known}")
    return dict(sorted(out.items()))


def parse_trigger(specs: tuple[str, ...], channels: dict[int, str] | None, names: list[str] | None):
    """--trigger 'FRAME#=0,IRDY#=0' (one parallel stage; repeat for the next stages)."""
    from pcitrace.acquire.sump import TriggerStage

    lookup: dict[str, int] = {f"CH{i}": i for i in range(32)}
    for i, n in enumerate(names or []):
        lookup[n] = i
    for i, n in (channels or {}).items():
        lookup[n] = i
    stages = []
    for level, spec in enumerate(specs):
        mask = value = 0
        for cond in (c.strip() for c in spec.split(",")):
            if not cond:
                continue
            m = re.fullmatch(r"(.+?)\s*=\s*([01])", cond)
            if not m:
                raise PcitraceError(f"trigger condition {cond!r} is not NAME=0 or NAME=1", where="--trigger",
                                    fix="write e.g. --trigger FRAME#=0")
            name, bit = m.group(1), int(m.group(2))
            if name not in lookup:
                raise PcitraceError(f"unknown channel {name!r} in trigger {spec!r}", where="--trigger",
                                    fix=f"use one of {', '.join((channels or {}).values()) or 'CH0..CH31'}")
            mask |= 1 << lookup[name]
            value |= bit << lookup[name]
        if mask == 0:
            raise PcitraceError(f"trigger {spec!r} has no condition", where="--trigger",
                                fix="write e.g. --trigger FRAME#=0")
        stages.append(TriggerStage(mask=mask, value=value, level=level, start=level == len(specs) - 1))
    return stages


@click.command("capture")
@click.option("--port", required=True, help="Serial port of the analyser (e.g. /dev/ttyACM0).")
@click.option("--rate", "rate", required=True, help="Sample rate, e.g. 100M (SUMP: 100 MHz / n, 200M demux).")
@click.option("--samples", "samples", required=True, help="Samples to read, e.g. 24k (rounded up to 4).")
@click.option("--channels", default=None,
              help="Probes: N, A-B, NAME or NAME=N, comma separated (default: the profile's channels "
                   "on probes 0.., or every probe).")
@click.option("--trigger", "triggers", multiple=True,
              help="Trigger stage, e.g. FRAME#=0 or 'FRAME#=0,IRDY#=0'; repeat for sequential stages.")
@click.option("--pretrigger", default=10.0, show_default=True, type=float,
              help="Percent of the samples kept from before the trigger.")
@click.option("--rle", is_flag=True, help="Run-length encode on the device (longer captures of quiet buses).")
@click.option("--external-clock", is_flag=True,
              help="Sample on the device's clock input (a state capture, e.g. on PCI CLK); --rate is then "
                   "that clock's frequency.")
@click.option("--falling-edge", is_flag=True, help="With --external-clock: sample on the falling edge.")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False), default=None,
              help="Channel profile: its channel names name probes 0, 1, ... in order.")
@click.option("--wait", "wait_s", type=float, default=None, help="Give up if no trigger within this many seconds.")
@click.option("--timeout", "timeout_s", type=float, default=2.0, show_default=True,
              help="Seconds of silence that count as a dead device.")
@click.option("--baud", type=int, default=115200, show_default=True, help="Serial speed.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output .sr file.")
def capture(port, rate, samples, channels, triggers, pretrigger, rle, external_clock, falling_edge, profile_path,
            wait_s, timeout_s, baud, output):
    """Capture from a SUMP / OLS logic analyser into a .sr file.

    Ctrl-C stops the capture and keeps the samples read so far; so does a device that
    goes away mid-transfer (then the exit status is 2).
    """
    from pcitrace.acquire.client import CaptureRequest, acquire, check_request
    from pcitrace.capture import write_sr

    if not output.lower().endswith(".sr"):
        raise PcitraceError("the output must be a .sr file", path=output, fix="name it e.g. capture.sr")
    names = profile_channel_names(profile_path) if profile_path else None
    chan_map = parse_channels(channels, names)
    stages = parse_trigger(triggers, chan_map, names)
    req = CaptureRequest(rate_hz=parse_quantity(rate, "rate", "Hz"), samples=int(parse_quantity(samples, "samples")),
                         channels=chan_map or {}, stages=stages, pretrigger=pretrigger / 100.0, rle=rle,
                         external_clock=external_clock, invert_clock=falling_edge)
    if falling_edge and not external_clock:
        raise PcitraceError("--falling-edge needs --external-clock", where="--falling-edge",
                            fix="add --external-clock or drop --falling-edge")
    if chan_map is not None:
        check_request(req)   # before the port is opened

    reporter = _Progress()

    def on_plan(plan):
        if not external_clock and abs(plan.rate_hz - req.rate_hz) > 1e-6 * req.rate_hz:
            click.echo(f"pcitrace: note: {plan.info.name} samples at {plan.rate_hz:,.0f} Hz "
                       f"(nearest to {req.rate_hz:,.0f} Hz)", err=True)
        reporter.start(plan)

    try:
        acq = acquire(port, req, baudrate=baud, timeout_s=timeout_s, wait_s=wait_s, progress=reporter.update,
                      on_plan=on_plan)
    finally:
        reporter.stop()
    if acq.capture is None:
        if acq.error:
            raise acq.error
        click.echo("pcitrace: nothing was captured; no file written", err=True)
        return 130 if acq.interrupted else 1
    write_sr(acq.capture, output)
    cap = acq.capture
    trig = cap.metadata.get("trigger_sample")
    summary = (f"wrote {cap.num_samples} samples x {len(cap.channels)} channels at {acq.plan.rate_hz:,.0f} Hz "
               f"to {output}" + (f" (trigger at sample {trig})" if trig is not None else ""))
    if acq.error is not None:
        raise PcitraceError(f"{acq.error.message}; {summary}", where=acq.error.where, fix=acq.error.fix)
    click.echo(summary, err=True)
    if acq.interrupted:
        click.echo("pcitrace: interrupted; kept the samples read so far", err=True)
        return 130
    return 0


class _Progress:
    """rich progress on a terminal (waiting for the trigger, then reading); silent when piped."""

    def __init__(self):
        self.progress = None
        self.task = None
        self.reading = False

    def start(self, plan):
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 DownloadColumn(), TimeElapsedColumn(), console=console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task(f"waiting for trigger on {plan.info.name}", total=None)
        self.total = plan.bytes_expected

    def update(self, stage, done, total):
        if self.progress is None:
            return
        if stage == "read":
            if not self.reading:
                self.reading = True
                self.progress.update(self.task, description="reading samples", total=total)
            self.progress.update(self.task, completed=done)
        else:
            self.progress.update(self.task, description=f"waiting for trigger ({done:.0f} s)")

    def stop(self):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


@click.command("emulate-sump")
@click.argument("capture_path", metavar="CAPTURE", type=click.Path(dir_okay=False))
@click.option("--memory", default="24Ki", show_default=True,
              help="Sample memory in bytes, as the device reports it (OLS: 24Ki).")
@click.option("--max-rate", "max_rate", default="200M", show_default=True, help="Highest sample rate offered.")
@click.option("--probes", default=None, help="Capture lines on probes 0, 1, ... (default: all, up to 32).")
@click.option("--fault-after", "fault_after", default=None, help="Fail after this many bytes of sample data.")
@click.option("--clock-line", default=None,
              help="Line of a timing capture that drives the external clock input (default: CLK if present).")
@click.option("--throughput", default=None, help="Pace the transfer, bytes per second (e.g. 11520 for 115200 baud).")
@click.option("--fault-mode", type=click.Choice(["close", "hang"]), default="close", show_default=True,
              help="close: the pty disappears (unplugged cable); hang: it goes silent.")
def emulate_sump(capture_path, memory, max_rate, probes, fault_after, clock_line, throughput, fault_mode):
    """Serve CAPTURE as an emulated SUMP analyser on a pseudo-terminal.

    Prints the pty path on stdout (point `pcitrace capture --port` at it) and serves
    until stopped with Ctrl-C.
    """
    from pcitrace.acquire.emulator import SumpEmulator
    from pcitrace.capture import open_capture

    cap = open_capture(capture_path)
    emu = SumpEmulator(cap, probes=[p.strip() for p in probes.split(",")] if probes else None,
                       memory=int(parse_quantity(memory, "memory")),
                       max_rate_hz=int(parse_quantity(max_rate, "max-rate", "Hz")),
                       fault_after=int(parse_quantity(fault_after, "fault-after")) if fault_after else None,
                       fault_mode=fault_mode, clock_line=clock_line,
                       bytes_per_s=parse_quantity(throughput, "throughput") if throughput else None)
    emu.start()
    click.echo(emu.port)
    sys.stdout.flush()
    click.echo(f"serving {capture_path} as '{emu.info.name}': {emu.info.probes} probes, "
               f"{emu.info.sample_memory} bytes, up to {emu.info.max_rate_hz:,} Hz", err=True)
    for k, (line, _, _) in enumerate(emu.lines):
        click.echo(f"  probe {k}: {line}", err=True)
    if cap.timebase.mode == "state":
        click.echo("  external clock input: one pulse per sample of the state capture", err=True)
    elif emu.clock_line is not None:
        click.echo(f"  external clock input: {emu.clock_line[0]}", err=True)
    signal.signal(signal.SIGTERM, lambda *_: emu.request_stop())
    try:
        emu.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
    if emu.faulted:
        click.echo(f"fault injected after {fault_after} bytes of sample data ({fault_mode})", err=True)
    return 0

"""The reference decoder path: run sigrok-cli with decoders/pci and read its JSON lines back.

``run_sigrok(capture_path, bus)`` maps the bus profile's signals onto the decoder's channels
(bit channels AD0.. for vectors), runs ``sigrok-cli -P pci:... -B pci=json`` with
SIGROKDECODE_DIR pointing at pcitrace's decoders, and returns the records, data words and
findings as the numpy arrays the fast engine returns. Samples are mapped to picoseconds
through the capture's own time base (per-sample timestamps of a clocked VCD view included).

When sigrok-cli cannot read the capture as it is (a VCD, inverted probe lines, channel names
that the -P syntax cannot carry), the bus is first reduced to one sample per bus clock
(``pcitrace.capture.clocked.bus_clocks``) and written as a temporary state-mode .sr, which
the decoder reads with clock=none.

The ``decoders`` click group (``pcitrace decoders path|install``) lives here too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import click
import numpy as np

from pcitrace import buses
from pcitrace.errors import PcitraceError
from pcitrace.records import DECODERS_DIR, FINDING_DTYPE, WORD_DTYPE, empty_records, records_from_dicts

# decoders/<name> packages that `pcitrace decoders install` copies: every bus kind's decoder
INSTALLED_DECODERS = tuple(dict.fromkeys(k.sigrok_decoder for k in buses.KINDS.values()))
DEFAULT_INSTALL_DIR = Path("~/.local/share/libsigrokdecode/decoders")

# canonical profile signal -> sigrok channel id of decoders/pci (vectors: id prefix + bit)
_SCALAR_IDS = {
    "clk": "clk", "frame_n": "frame", "irdy_n": "irdy", "trdy_n": "trdy", "stop_n": "stop",
    "devsel_n": "devsel", "par": "par", "par64": "par64", "req64_n": "req64",
    "ack64_n": "ack64", "idsel": "idsel", "perr_n": "perr", "serr_n": "serr",
}
_VECTOR_IDS = {"ad": ("ad", 64), "cbe_n": ("cbe", 8)}
_REQUIRED = ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n")
# characters sigrok-cli's "-P dec:key=value:..." syntax cannot carry in a channel name
_UNSAFE = set(":=,")


class SigrokResult(NamedTuple):
    records: np.ndarray    # RECORD_DTYPE
    words: np.ndarray      # WORD_DTYPE
    findings: np.ndarray   # FINDING_DTYPE


def decoders_dir() -> Path:
    """The directory to give as SIGROKDECODE_DIR (it holds pci/ and gbe_probe/)."""
    return DECODERS_DIR


def sigrok_cli_path() -> str:
    exe = shutil.which("sigrok-cli")
    if exe is None:
        raise PcitraceError("sigrok-cli is not installed; the reference decoder runs through it",
                            fix="install it (Debian/Ubuntu: apt-get install sigrok-cli) or use "
                                "the fast engine")
    return exe


# -- channel mapping ---------------------------------------------------------------------------

def _bit_names(capture, channel: str) -> list[str]:
    """The .sr line names of a capture channel: itself, or NAME0..NAMEn-1 for a vector."""
    names = set(capture.channel_names)
    if channel in names:
        w = capture.channel(channel).width
        return [channel] if w == 1 else [f"{channel}{i}" for i in range(w)]
    bits = []
    while f"{channel}{len(bits)}" in names:
        bits.append(f"{channel}{len(bits)}")
    if not bits:
        capture.channel(channel)   # raises the PcitraceError naming the channel
    return bits


def channel_map(capture, bus) -> dict[str, str]:
    """sigrok channel id of decoders/pci -> .sr channel name, for ``bus`` in ``capture``
    (a capture read from the .sr, whose channels are the .sr's 1-bit lines)."""
    out: dict[str, str] = {}
    signals = dict(bus.signals)
    # GNT#/REQ# of the NIC: the profile says which canonical signals carry them.
    for role, default in (("gnt", "gnt_n"), ("req", "req_n")):
        sig = getattr(bus.nic, role, None) or default
        if sig in signals:
            signals[f"__{role}"] = signals[sig]
    for sig, value in signals.items():
        if sig in ("__gnt", "__req"):
            sid = sig[2:]
        elif sig in _SCALAR_IDS:
            sid = _SCALAR_IDS[sig]
        elif sig in _VECTOR_IDS:
            prefix, limit = _VECTOR_IDS[sig]
            chans = [value] if isinstance(value, str) else list(value)
            bits: list[str] = []
            for c in chans:
                bits.extend(_bit_names(capture, c))
            for i, name in enumerate(bits[:limit]):
                out[f"{prefix}{i}"] = name
            continue
        else:
            continue   # gnt_n/req_n handled above; inta_n, rst_n are not decoder inputs
        chans = [value] if isinstance(value, str) else list(value)
        if len(chans) != 1:
            raise PcitraceError(f"bus {bus.name!r} signal {sig} maps {len(chans)} channels; it is "
                                "a 1-bit line", path=capture.path, fix="map it to one channel")
        out[sid] = _bit_names(capture, chans[0])[0]
    missing = [s for s in _REQUIRED if _SCALAR_IDS[s] not in out]
    if missing:
        raise PcitraceError(f"bus {bus.name!r} has no {', '.join(missing)} in its profile; the "
                            "sigrok decoder needs FRAME#, IRDY#, TRDY#, STOP# and DEVSEL#",
                            path=capture.path, fix="map these signals in the channel profile")
    return out


# -- running ------------------------------------------------------------------------------------

def _state_capture(capture, bus):
    """The bus reduced to one sample per clock (inversion undone, vectors assembled), as a
    state-mode Capture with the clock times, plus the sigrok channel map for its .sr."""
    from pcitrace.capture.model import Capture, TimeBase
    from pcitrace.capture.clocked import bus_clocks

    # A .sr holds bit lines only: a vector signal named by its vector channel (AD) is read
    # from its bits (AD0..).
    signals = {}
    for sig, value in bus.signals.items():
        if sig in _VECTOR_IDS:
            chans = [value] if isinstance(value, str) else list(value)
            bits = []
            for c in chans:
                bits.extend([c] if c in capture.channel_names else _bit_names(capture, c))
            signals[sig] = bits
        else:
            signals[sig] = value
    bus = dataclasses.replace(bus, signals=signals)
    times, cols = [], {}
    for ch in bus_clocks(capture, bus):
        times.append(ch.times_ps)
        for k, v in ch.sig.items():
            cols.setdefault(k, []).append(v)
    t = np.concatenate(times) if times else np.zeros(0, np.int64)
    arrays, widths, mapping = {}, {}, {}
    for sig, parts in cols.items():
        a = np.concatenate(parts)
        name = sig.upper()
        if sig in _VECTOR_IDS:
            w = sum(capture.channel(c).width for c in bus.channels_of(sig))
            prefix, limit = _VECTOR_IDS[sig]
            w = min(w, limit)
            widths[name] = w
            arrays[name] = a
            for i in range(w):
                mapping[f"{prefix}{i}"] = f"{name}{i}"
        else:
            arrays[name] = a
    for sig, sid in _SCALAR_IDS.items():
        if sig in arrays or sig.upper() in arrays:
            mapping[sid] = sig.upper()
    for role, default in (("gnt", "gnt_n"), ("req", "req_n")):
        sig = getattr(bus.nic, role, None) or default
        if sig.upper() in arrays:
            mapping[role] = sig.upper()
    if len(t) == 0:
        raise PcitraceError(f"bus {bus.name!r} has no clocks in the capture", path=capture.path,
                            fix="check the clock channel in the profile")
    tb = TimeBase.state(timestamps_ps=t)
    return Capture.from_arrays(arrays, tb, widths=widths), mapping


def _needs_state_copy(capture, bus, mapping: Mapping[str, str] | None) -> bool:
    if not (capture.path and str(capture.path).lower().endswith(".sr")):
        return True
    if bus.inverted:
        return True
    if mapping is None:
        return True
    if any(_UNSAFE & set(name) for name in mapping.values()):
        return True
    if capture.timebase.mode != "state" and "clk" not in mapping:
        return True
    return False


def run_sigrok(capture_path, bus, *, extra_options: Mapping[str, object] | None = None,
               sigrok_cli: str | None = None) -> SigrokResult:
    """Decode one PCI / PCI-X bus of a capture with the sigrok decoder through sigrok-cli.

    ``bus``: a BusProfile (kind pci or pcix). ``extra_options``: further decoder options
    (e.g. ``{"width": 64}``). Returns (records, words, findings) as numpy arrays with the
    fast engine's dtypes; a transaction still running at the end of the capture is absent
    (libsigrokdecode 0.5.3 never reports the end of the data).
    """
    from pcitrace.capture import open_capture

    exe = sigrok_cli or sigrok_cli_path()
    if not bus.is_pci:
        raise PcitraceError(f"bus {bus.name!r} is a {bus.kind} link, not a PCI bus",
                            fix="run the pci decoder on a bus of kind pci or pcix")
    capture = open_capture(capture_path)
    try:
        mapping = channel_map(capture, bus)
    except PcitraceError:
        if str(capture_path).lower().endswith(".sr"):
            raise
        mapping = None
    with contextlib.ExitStack() as stack:
        if _needs_state_copy(capture, bus, mapping):
            from pcitrace.capture import write_sr
            view, mapping = _state_capture(capture, bus)
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="pcitrace-sigrok-"))
            sr_path = os.path.join(tmp, "bus.sr")
            write_sr(view, sr_path)
            timebase, nsamples = view.timebase, view.num_samples
            clock = "none"
            mapping.pop("clk", None)
        else:
            sr_path = os.fspath(capture_path)
            timebase, nsamples = capture.timebase, capture.num_samples
            clock = "clk" if capture.timebase.mode != "state" and "clk" in mapping else "none"
            if clock == "none":
                mapping.pop("clk", None)
        options = {"clock": clock, "mode": bus.mode, "width": int(bus.width), "bus": "pci"}
        if extra_options:
            options.update(extra_options)
        lines = _run(exe, sr_path, mapping, options)
    return _collect(lines, bus.name, timebase, nsamples, sr_path)


def _run(exe: str, sr_path: str, mapping: Mapping[str, str], options: Mapping[str, object]):
    spec = "pci:" + ":".join([f"{k}={v}" for k, v in mapping.items()] +
                             [f"{k}={v}" for k, v in options.items()])
    env = dict(os.environ, SIGROKDECODE_DIR=str(decoders_dir()))
    cmd = [exe, "-i", sr_path, "-P", spec, "-B", "pci=json"]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        lines = []
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.strip():
                lines.append(raw)
        rc = proc.wait()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if rc != 0 or "Traceback" in stderr or "srd: " in stderr:
        tail = " ".join(stderr.strip().splitlines()[-3:]) or f"exit status {rc}"
        raise PcitraceError(f"sigrok-cli failed on the pci decoder: {tail}", path=sr_path,
                            fix="check the capture with `pcitrace info` and the channel profile")
    return lines


def _collect(lines, bus_name: str, timebase, nsamples: int, sr_path: str) -> SigrokResult:
    def t_of(sample: int) -> int:
        return timebase.time_ps(min(max(int(sample), 0), max(nsamples - 1, 0)))

    txns, words, finds = [], [], []
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            raise PcitraceError(f"sigrok-cli wrote a line that is not JSON: {raw[:80]!r}",
                                path=sr_path, fix="check that decoders/pci is pcitrace's own "
                                "(pcitrace decoders path)") from None
        if "finding" in obj:
            f = obj["finding"]
            finds.append((t_of(f["sample"]), bus_name, f["kind"], f["message"][:160]))
        elif "word" in obj:
            w = obj["word"]
            words.append((w["record"], t_of(w["sample"]), w["value"], w["byte_enables"]))
        else:
            obj["bus"] = bus_name
            obj["start_ps"] = t_of(obj["start_sample"])
            obj["end_ps"] = t_of(obj["end_sample"])
            txns.append(obj)
    records = records_from_dicts(txns) if txns else empty_records()
    words_arr = np.array(words, dtype=WORD_DTYPE) if words else np.zeros(0, WORD_DTYPE)
    finds_arr = np.array(finds, dtype=FINDING_DTYPE) if finds else np.zeros(0, FINDING_DTYPE)
    if len(finds_arr):
        finds_arr = finds_arr[np.argsort(finds_arr["time_ps"], kind="stable")]
    return SigrokResult(records, words_arr, finds_arr)


# -- `pcitrace decoders` ------------------------------------------------------------------------

@click.group("decoders")
def decoders():
    """Locate or install pcitrace's sigrok protocol decoders (pci, gbe_probe)."""


@decoders.command("path")
def path_cmd():
    """Print the directory to give as SIGROKDECODE_DIR."""
    click.echo(str(decoders_dir()))


@decoders.command("install")
@click.option("--dest", type=click.Path(file_okay=False), default=None,
              help=f"Target directory [default: {DEFAULT_INSTALL_DIR}].")
def install_cmd(dest):
    """Copy the decoders where PulseView and sigrok-cli find them without SIGROKDECODE_DIR."""
    for name, target in install(dest):
        click.echo(f"installed {name} -> {target}")


def install(dest=None) -> list[tuple[str, Path]]:
    """Copy decoders/pci and decoders/gbe_probe into ``dest`` (default
    ~/.local/share/libsigrokdecode/decoders); each is replaced whole, via a temporary copy."""
    root = Path(os.path.expanduser(os.fspath(dest))) if dest else DEFAULT_INSTALL_DIR.expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PcitraceError(f"cannot create the decoder directory: {exc.strerror}", path=root,
                            fix="choose a writable directory with --dest") from None
    done = []
    for name in INSTALLED_DECODERS:
        src = decoders_dir() / name
        if not (src / "pd.py").exists():
            raise PcitraceError(f"decoder {name} is missing from pcitrace's decoders", path=src,
                                fix="reinstall pcitrace")
        target = root / name
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            staged = tmp / name
            shutil.copytree(src, staged, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            old = None
            if target.exists():
                old = tmp / (name + ".old")
                os.replace(target, old)
            os.replace(staged, target)
        except OSError as exc:
            raise PcitraceError(f"cannot install decoder {name}: {exc}", path=target,
                                fix="choose a writable directory with --dest") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        done.append((name, target))
    return done

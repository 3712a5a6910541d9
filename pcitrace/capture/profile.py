"""Channel profiles: which capture channels are which bus signals, for one or more buses.

A profile is a TOML file with one ``[[bus]]`` table per bus (or probe link direction)::

    # a NIC's send and receive PCI buses in one capture
    [[bus]]
    name = "send"
    kind = "pci"                 # pci | pcix | gbe_probe   (mode = "pcix" is the same as kind)
    width = 32                   # 32 | 64 (AD width when AD is not captured in full)
    clock_hz = 66e6              # only needed without a clk channel (state captures)
    inverted = ["frame_n"]       # probes that show the inverse of the electrical level
    [bus.signals]                # canonical name -> channel, or list of bit channels LSB first
    clk = "send.CLK"
    frame_n = "send.FRAME#"
    ad = "send.AD"               # a vector channel, or ["send.AD0", "send.AD1", ...]
    [bus.nic]                    # the NIC's identity on this bus
    gnt = "gnt_n"                # canonical signals carrying the NIC's GNT# / REQ#
    req = "req_n"
    bars = [[0xf0000000, 0xf0001fff]]

Canonical PCI signals: clk, frame_n, irdy_n, trdy_n, stop_n, devsel_n, ad, cbe_n, par, par64,
req64_n, ack64_n, idsel, req_n, gnt_n, perr_n, serr_n, inta_n, rst_n. Probe signals
(kind gbe_probe): frame_present, sof, rxd, rx_dv, rx_er, rx_clk (+ ``link_bps``).

``bus_clocks`` streams one entry per bus clock: a timing capture with a uniform sample rate is
read at the first sample where CLK reads 1 after 0 (docs/records.md); an event-timed capture
(VCD) is read just before each rising CLK edge (the clocked view); a state capture is every
sample. 1-bit signals come out as uint8 electrical levels (inversion undone), vectors uint64.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.clocked import rising_edges
from pcitrace.capture.model import CHANGES, EDGES, FLIPS, Capture, LineCode, SampleTimes
from pcitrace.errors import PcitraceError

PCI_SIGNALS = ("clk", "frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n", "ad", "cbe_n", "par",
               "par64", "req64_n", "ack64_n", "idsel", "req_n", "gnt_n", "perr_n", "serr_n",
               "inta_n", "rst_n")
PROBE_SIGNALS = ("frame_present", "sof", "rxd", "rx_dv", "rx_er", "rx_clk")
VECTOR_SIGNALS = {"ad": 64, "cbe_n": 8, "rxd": 8}
KINDS = ("pci", "pcix", "gbe_probe")
DEFAULT_LINK_BPS = 1e9


@dataclasses.dataclass
class NicIdentity:
    """The NIC on a bus: which canonical signals are its GNT#/REQ#, its BAR address ranges."""

    gnt: str | None = None
    req: str | None = None
    bars: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def in_bar(self, address: int) -> bool:
        return any(lo <= address <= hi for lo, hi in self.bars)


@dataclasses.dataclass
class BusProfile:
    name: str
    kind: str = "pci"
    signals: dict[str, str | list[str]] = dataclasses.field(default_factory=dict)
    inverted: set[str] = dataclasses.field(default_factory=set)
    width: int = 32
    clock_hz: float | None = None
    nic: NicIdentity = dataclasses.field(default_factory=NicIdentity)
    link_bps: float | None = None

    @property
    def mode(self) -> str:
        """'pcix' or 'pci' (probe links report 'pci' but have no bus mode)."""
        return "pcix" if self.kind == "pcix" else "pci"

    @property
    def is_pci(self) -> bool:
        return self.kind in ("pci", "pcix")

    @property
    def clock(self) -> str | None:
        """The capture channel of the bus clock, if the profile names one."""
        c = self.signals.get("clk" if self.is_pci else "rx_clk")
        return c if isinstance(c, str) else None

    def channels_of(self, signal: str) -> list[str]:
        v = self.signals[signal]
        return [v] if isinstance(v, str) else list(v)

    def all_channels(self) -> list[str]:
        out = []
        for s in self.signals:
            out.extend(self.channels_of(s))
        return out


@dataclasses.dataclass
class Profile:
    buses: list[BusProfile] = dataclasses.field(default_factory=list)
    path: str | None = None
    source: str = "file"   # 'file' | 'auto-detected' | 'memory'

    def __iter__(self):
        return iter(self.buses)

    def __len__(self):
        return len(self.buses)

    def bus(self, name: str) -> BusProfile:
        for b in self.buses:
            if b.name == name:
                return b
        raise PcitraceError(f"no bus named {name!r}; the profile has "
                            f"{', '.join(b.name for b in self.buses) or 'no buses'}",
                            path=self.path, fix="use one of the bus names in the profile")

    @property
    def pci_buses(self) -> list[BusProfile]:
        return [b for b in self.buses if b.is_pci]

    @property
    def probe_buses(self) -> list[BusProfile]:
        return [b for b in self.buses if b.kind == "gbe_probe"]

    def describe(self) -> str:
        return self.path or self.source

    def check(self, capture: Capture) -> None:
        """Every channel the profile names exists in the capture with a usable width."""
        for b in self.buses:
            check_bus(capture, b, self.describe())


# -- TOML ----------------------------------------------------------------------------------

def _err(path, where, msg, fix="correct the profile (see `pcitrace info CAPTURE` for channel names)"):
    return PcitraceError(msg, path=path, where=where, fix=fix)


def _parse_bus(path, i: int, t: dict) -> BusProfile:
    where = f"[[bus]] #{i + 1}"
    if not isinstance(t, dict):
        raise _err(path, where, "each [[bus]] entry must be a table")
    known = {"name", "kind", "mode", "signals", "inverted", "width", "clock_hz", "nic",
             "link_bps"}
    extra = set(t) - known
    if extra:
        raise _err(path, where, f"unknown keys {sorted(extra)}; known: {sorted(known)}")
    name = t.get("name")
    if not isinstance(name, str) or not name:
        raise _err(path, where, "the bus needs a name = \"...\"")
    where = f"[[bus]] {name!r}"
    kind = t.get("kind", "pci")
    mode = t.get("mode")
    if kind not in KINDS:
        raise _err(path, where, f"kind = {kind!r} is not one of {', '.join(KINDS)}")
    if mode is not None:
        if mode not in ("pci", "pcix") or kind == "gbe_probe":
            raise _err(path, where, f"mode = {mode!r}: must be 'pci' or 'pcix' on a PCI bus")
        kind = mode if kind in ("pci", "pcix") else kind
    allowed = PROBE_SIGNALS if kind == "gbe_probe" else PCI_SIGNALS
    sigs = t.get("signals", {})
    if not isinstance(sigs, dict) or not sigs:
        raise _err(path, where, "the bus needs a [bus.signals] table mapping signals to channels")
    signals: dict[str, str | list[str]] = {}
    for k, v in sigs.items():
        if k not in allowed:
            raise _err(path, f"{where} signals.{k}",
                       f"unknown signal {k!r}; {kind} signals are {', '.join(allowed)}")
        if isinstance(v, str) and v:
            signals[k] = v
        elif isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
            signals[k] = list(v)
        else:
            raise _err(path, f"{where} signals.{k}",
                       "must be a channel name or a list of bit channel names (LSB first)")
    inv = t.get("inverted", [])
    if not isinstance(inv, list) or not all(isinstance(x, str) for x in inv):
        raise _err(path, f"{where} inverted", "must be a list of signal names")
    for x in inv:
        if x not in signals:
            raise _err(path, f"{where} inverted", f"{x!r} is not one of this bus's signals")
    width = t.get("width", 32)
    if width not in (8, 16, 32, 64) or isinstance(width, bool):
        raise _err(path, f"{where} width", f"width = {width!r}; use 32 or 64")
    clock_hz = t.get("clock_hz")
    if clock_hz is not None and (not isinstance(clock_hz, (int, float)) or isinstance(clock_hz, bool)
                                 or not math.isfinite(clock_hz) or clock_hz <= 0):
        raise _err(path, f"{where} clock_hz", f"clock_hz = {clock_hz!r} is not a frequency in Hz")
    link = t.get("link_bps")
    if link is not None and (not isinstance(link, (int, float)) or link <= 0):
        raise _err(path, f"{where} link_bps", f"link_bps = {link!r} is not a bit rate")
    nic_t = t.get("nic", {})
    if not isinstance(nic_t, dict):
        raise _err(path, f"{where} nic", "must be a table")
    bad = set(nic_t) - {"gnt", "req", "bars"}
    if bad:
        raise _err(path, f"{where} nic", f"unknown keys {sorted(bad)}; known: bars, gnt, req")
    for key in ("gnt", "req"):
        v = nic_t.get(key)
        if v is not None and (not isinstance(v, str) or v not in signals):
            raise _err(path, f"{where} nic.{key}",
                       f"{v!r} must name one of this bus's signals (e.g. \"{key}_n\")")
    bars = []
    for j, r in enumerate(nic_t.get("bars", [])):
        if (not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) for x in r)
                or r[0] > r[1] or r[0] < 0):
            raise _err(path, f"{where} nic.bars[{j}]", f"{r!r} must be [low, high] addresses, low <= high")
        bars.append((int(r[0]), int(r[1])))
    return BusProfile(name=name, kind=kind, signals=signals, inverted=set(inv), width=int(width),
                      clock_hz=float(clock_hz) if clock_hz else None,
                      nic=NicIdentity(nic_t.get("gnt"), nic_t.get("req"), bars),
                      link_bps=float(link) if link else (DEFAULT_LINK_BPS if kind == "gbe_probe" else None))


def parse_profile(data: dict, path=None) -> Profile:
    if not isinstance(data, dict) or "bus" not in data:
        raise _err(path, "top level", "no [[bus]] tables", fix="add one [[bus]] table per bus")
    buses_t = data["bus"]
    if not isinstance(buses_t, list) or not buses_t:
        raise _err(path, "top level", "bus must be an array of tables ([[bus]])",
                   fix="write each bus as a [[bus]] table")
    buses = [_parse_bus(path, i, t) for i, t in enumerate(buses_t)]
    names = [b.name for b in buses]
    if len(set(names)) != len(names):
        raise _err(path, "[[bus]] names", f"duplicate bus names in {names}",
                   fix="give every bus its own name")
    return Profile(buses, path=os.fspath(path) if path else None,
                   source="file" if path else "memory")


def load_profile(path) -> Profile:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise PcitraceError("no such profile", path=path, fix="check the --profile path") from None
    except tomllib.TOMLDecodeError as exc:
        raise PcitraceError(f"not valid TOML: {exc}", path=path,
                            fix="correct the TOML syntax") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PcitraceError(f"cannot read the profile: {exc}", path=path,
                            fix="check the file") from None
    return parse_profile(data, path)


def _toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_str(k)


def _toml_num(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e18:
        return str(int(x))
    return repr(float(x))


def dump_profile(profile: Profile) -> str:
    lines = ["# pcitrace channel profile: canonical bus signal -> capture channel",
             "# (lists are bit channels, least significant first)", ""]
    for b in profile.buses:
        lines += ["[[bus]]", f"name = {_toml_str(b.name)}", f"kind = {_toml_str(b.kind)}"]
        if b.is_pci:
            lines.append(f"width = {b.width}")
        if b.clock_hz:
            lines.append(f"clock_hz = {_toml_num(b.clock_hz)}")
        if b.link_bps and b.kind == "gbe_probe":
            lines.append(f"link_bps = {_toml_num(b.link_bps)}")
        if b.inverted:
            lines.append("inverted = [" + ", ".join(_toml_str(x) for x in sorted(b.inverted)) + "]")
        lines.append("[bus.signals]")
        for k, v in b.signals.items():
            val = _toml_str(v) if isinstance(v, str) else "[" + ", ".join(_toml_str(x) for x in v) + "]"
            lines.append(f"{_toml_key(k)} = {val}")
        if b.nic.gnt or b.nic.req or b.nic.bars:
            lines.append("[bus.nic]")
            if b.nic.gnt:
                lines.append(f"gnt = {_toml_str(b.nic.gnt)}")
            if b.nic.req:
                lines.append(f"req = {_toml_str(b.nic.req)}")
            if b.nic.bars:
                lines.append("bars = [" + ", ".join(f"[0x{lo:x}, 0x{hi:x}]" for lo, hi in b.nic.bars) + "]")
        lines.append("")
    return "\n".join(lines)


def save_profile(profile: Profile, path) -> None:
    text = dump_profile(profile)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


# -- auto-detection ------------------------------------------------------------------------

# Base names (upper case, active-low markers and separators removed) -> canonical signal.
_BASE = {
    "CLK": "clk", "PCICLK": "clk", "PCICLOCK": "clk", "CLOCK": "clk", "PCLK": "clk",
    "FRAME": "frame_n", "IRDY": "irdy_n", "TRDY": "trdy_n", "STOP": "stop_n",
    "DEVSEL": "devsel_n", "AD": "ad", "CBE": "cbe_n", "PAR": "par", "PAR64": "par64",
    "REQ64": "req64_n", "ACK64": "ack64_n", "IDSEL": "idsel", "REQ": "req_n", "GNT": "gnt_n",
    "PERR": "perr_n", "SERR": "serr_n", "INTA": "inta_n", "RST": "rst_n",
    "FRAMEPRESENT": "frame_present", "SOF": "sof", "RXD": "rxd", "RXDV": "rx_dv",
    "RXER": "rx_er", "RXCLK": "rx_clk",
}
_PROBE = set(PROBE_SIGNALS)
_LOW_PREFIX = re.compile(r"^(?:/|!|~|N_|n_|not_)")
_LOW_SUFFIX = re.compile(r"(?:#|_N|_n|_L|_l|_B|_b|\*|N#)$")
_RANGE = re.compile(r"^(.*?)\s*[\[(]\s*(\d+)\s*(?::\s*(\d+)\s*)?[\])]$")


def _split_prefix(name: str) -> tuple[str, str]:
    if "." in name:
        p, _, b = name.rpartition(".")
        return p, b
    return "", name


def _classify(base: str) -> tuple[str | None, int | None, tuple[int, int] | None]:
    """base channel name -> (canonical, bit index or None, (msb, lsb) range or None)."""
    rng = None
    bit = None
    s = base.strip()
    m = _RANGE.match(s)
    if m:
        s = m.group(1)
        if m.group(3) is not None:
            rng = (int(m.group(2)), int(m.group(3)))
        else:
            bit = int(m.group(2))
    s = _LOW_PREFIX.sub("", s)
    s = _LOW_SUFFIX.sub("", s)
    s = s.rstrip("#")
    key = re.sub(r"[/_\-\s]", "", s).upper()
    if key in _BASE:
        return _BASE[key], bit, rng
    if bit is None and rng is None:
        # AD0..AD63, CBE0, C/BE#3, RXD7: a trailing bit number.
        m2 = re.fullmatch(r"(.*?\D)_?(\d+)", key)
        if m2 and m2.group(1) in _BASE and _BASE[m2.group(1)] in VECTOR_SIGNALS:
            return _BASE[m2.group(1)], int(m2.group(2)), None
        # C/BE#3 keeps its '#' inside: strip markers once more after the number.
        m3 = re.fullmatch(r"(.*?)#?_?(\d+)", s)
        if m3:
            k3 = re.sub(r"[/_\-\s#]", "", m3.group(1)).upper()
            if k3 in _BASE and _BASE[k3] in VECTOR_SIGNALS:
                return _BASE[k3], int(m3.group(2)), None
    return None, None, None


def detect_profile(capture: Capture) -> Profile:
    """Guess the buses from channel names; one bus per name prefix (``send.FRAME#`` -> send)."""
    groups: dict[str, dict[str, list]] = {}
    for ch in capture.channels:
        prefix, base = _split_prefix(ch.name)
        canon, bit, rng = _classify(base)
        if canon is None:
            continue
        g = groups.setdefault(prefix, {})
        g.setdefault(canon, []).append((ch, bit, rng))

    buses = []
    for prefix, g in groups.items():
        if "frame_n" in g and ("ad" in g or "irdy_n" in g):
            bus = _bus_from_group(capture, prefix or "pci", g, PCI_SIGNALS, "pci")
            if bus:
                buses.append(bus)
        if "rxd" in g or "frame_present" in g or "sof" in g:
            bus = _bus_from_group(capture, prefix or "probe", g, PROBE_SIGNALS, "gbe_probe")
            if bus:
                buses.append(bus)
    names = [b.name for b in buses]
    for b in buses:  # a capture with both a PCI bus and probe lines under one prefix
        if names.count(b.name) > 1 and b.kind == "gbe_probe":
            b.name = f"{b.name}.probe"
    return Profile(buses, source="auto-detected")


def _bus_from_group(capture, name, g, allowed, kind) -> BusProfile | None:
    signals: dict[str, str | list[str]] = {}
    for canon in allowed:
        cands = g.get(canon)
        if not cands:
            continue
        if canon in VECTOR_SIGNALS:
            whole = [c for c, bit, rng in cands if bit is None and (c.width > 1 or rng)]
            if len(whole) == 1 and whole[0].width > 1:
                signals[canon] = whole[0].name
                continue
            bits = {bit: c.name for c, bit, rng in cands if bit is not None and c.width == 1}
            if bits and sorted(bits) == list(range(len(bits))):
                signals[canon] = [bits[i] for i in range(len(bits))]
            elif len(whole) == 1:
                signals[canon] = whole[0].name
            continue
        singles = [c for c, bit, rng in cands if c.width == 1 and bit is None and rng is None]
        if len(singles) == 1:
            signals[canon] = singles[0].name
    if kind == "pci" and "frame_n" not in signals:
        return None
    if kind == "gbe_probe" and not ({"rxd", "frame_present", "sof"} & set(signals)):
        return None
    width = 32
    if "ad" in signals:
        nbits = sum(capture.channel(c).width for c in
                    ([signals["ad"]] if isinstance(signals["ad"], str) else signals["ad"]))
        width = 64 if nbits > 32 else 32
    tb = capture.timebase
    clock_hz = tb.clock_hz if tb.mode == "state" and tb.clock_hz else None
    nic = NicIdentity(gnt="gnt_n" if "gnt_n" in signals else None,
                      req="req_n" if "req_n" in signals else None)
    return BusProfile(name=name, kind=kind, signals=signals, width=width, clock_hz=clock_hz,
                      nic=nic if kind != "gbe_probe" else NicIdentity(),
                      link_bps=DEFAULT_LINK_BPS if kind == "gbe_probe" else None)


def sidecar_profile_path(capture_path) -> Path | None:
    """NAME.profile.toml beside NAME.sr / NAME.vcd / NAME.vcd.gz, if present."""
    if not capture_path:
        return None
    p = Path(capture_path)
    name = p.name
    for ext in (".vcd.gz", ".vcd", ".sr"):
        if name.lower().endswith(ext):
            cand = p.with_name(name[: -len(ext)] + ".profile.toml")
            return cand if cand.exists() else None
    return None


def resolve_profile(capture: Capture, path=None) -> Profile:
    """The profile to use: ``path``; else NAME.profile.toml beside the capture; else detection.

    The result is checked against the capture (missing channels are errors naming them).
    """
    if path is not None:
        prof = load_profile(path)
    else:
        side = sidecar_profile_path(capture.path)
        if side is not None:
            prof = load_profile(side)
        else:
            prof = detect_profile(capture)
            if not prof.buses:
                raise PcitraceError(
                    "no bus found among the channel names "
                    f"({', '.join(capture.channel_names[:12])}{'...' if len(capture.channels) > 12 else ''})",
                    path=capture.path, where="auto-detection",
                    fix="write a channel profile (TOML) and pass it with --profile")
    prof.check(capture)
    return prof


# -- validation and streaming --------------------------------------------------------------

def check_bus(capture: Capture, bus: BusProfile, profile_name: str = "profile") -> None:
    have = set(capture.channel_names)
    for sig in bus.signals:
        chans = bus.channels_of(sig)
        for c in chans:
            if c not in have:
                raise PcitraceError(
                    f"bus {bus.name!r} signal {sig} needs channel {c!r}, which the capture "
                    f"does not have (it has {', '.join(capture.channel_names[:16])}"
                    f"{'...' if len(have) > 16 else ''})",
                    path=capture.path, where=f"profile {profile_name}",
                    fix="correct the channel name in the profile or remove the signal")
        width = sum(capture.channel(c).width for c in chans)
        if sig not in VECTOR_SIGNALS and width != 1:
            raise PcitraceError(f"bus {bus.name!r} signal {sig} is a 1-bit line but channel(s) "
                                f"{chans} are {width} bits wide", path=capture.path,
                                where=f"profile {profile_name}",
                                fix="map the signal to a single 1-bit channel")
        if sig in VECTOR_SIGNALS and width > 64:
            raise PcitraceError(f"bus {bus.name!r} signal {sig} maps {width} bits, more than 64",
                                path=capture.path, where=f"profile {profile_name}",
                                fix="map at most 64 bit channels")
    if bus.is_pci and "frame_n" not in bus.signals:
        raise PcitraceError(f"bus {bus.name!r} has no frame_n channel", path=capture.path,
                            where=f"profile {profile_name}",
                            fix="map frame_n to the FRAME# channel")


@dataclasses.dataclass
class BusChunk:
    """Clocks [start_clock, start_clock + len) of a bus: ``sig`` holds one entry per clock
    of each signal; ``times`` their times, as an int64 array or (uniform-rate state
    captures) a SampleTimes that computes them only where read."""

    start_clock: int
    times: np.ndarray | SampleTimes
    sig: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.times)

    @property
    def times_ps(self) -> np.ndarray:
        """The times as an int64 array."""
        if isinstance(self.times, SampleTimes):
            self.times = np.asarray(self.times)
        return self.times


def _signal_width(capture: Capture, bus: BusProfile, sig: str) -> int:
    return sum(capture.channel(c).width for c in bus.channels_of(sig))


def _assemble(bus: BusProfile, sig: str, data: dict[str, np.ndarray], widths: dict[str, int],
              idx: np.ndarray | None) -> np.ndarray:
    chans = bus.channels_of(sig)
    vector = sig in VECTOR_SIGNALS
    if not vector:
        a = data[chans[0]]
        a = a[idx] if idx is not None else a
        a = a.astype(np.uint8, copy=True)
        if sig in bus.inverted:
            a ^= np.uint8(1)
        return a
    out = None
    shift = 0
    for c in chans:
        a = data[c]
        a = a[idx] if idx is not None else a
        a = a.astype(np.uint64)
        if shift:
            a = a << np.uint64(shift)
        out = a if out is None else (out | a)
        shift += widths[c]
    if sig in bus.inverted:
        mask = np.uint64((1 << shift) - 1) if shift < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        out ^= mask
    return out


def _invert(bus: BusProfile, sig: str, a: np.ndarray, widths: dict[str, int]) -> np.ndarray:
    """Undo the profile's inversion of an assembled signal in place (``a`` is fresh)."""
    if sig not in bus.inverted:
        return a
    if sig not in VECTOR_SIGNALS:
        a ^= np.uint8(1)
        return a
    shift = sum(widths[c] for c in bus.channels_of(sig))
    a ^= np.uint64((1 << shift) - 1) if shift < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return a


def _cat(parts: list) -> np.ndarray | SampleTimes:
    # one part (reads the size of a chunk, the usual case; the last chunk's empty remainder
    # aside) is passed on without a copy
    full = [p for p in parts if len(p)]
    if len(full) == 1:
        return full[0]
    if full and all(isinstance(p, SampleTimes) for p in full) and all(
            b.follows(a) for a, b in zip(full, full[1:])):
        return full[0].joined(full[-1])
    return np.concatenate([np.asarray(p) for p in parts])


# The PCI control lines as one code per clock (bit set = line asserted), in the weights
# the decoding engine uses
CONTROL_CODE = (("frame_n", 1), ("irdy_n", 2), ("trdy_n", 4), ("stop_n", 8), ("devsel_n", 16))


def bus_clocks(capture: Capture, bus: BusProfile, chunk_clocks: int = 1 << 20,
               profile_name: str = "profile", *, read_samples: int | None = None,
               control_code: bool = False, watch: Sequence[str] = (),
               on_changes: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
               ) -> Iterator[BusChunk]:
    """One entry per bus clock, in chunks of ``chunk_clocks`` (the last may be shorter).

    ``read_samples``: samples read from the capture at a time (timing captures); edge
    detection and "value before the edge" carry across those reads.
    ``control_code``: where the capture can make it straight from packed samples (a state
    .sr), a PCI bus's chunks have ``sig["code"]`` (uint8, CONTROL_CODE bits of the asserted
    lines) in place of FRAME#, IRDY#, TRDY#, STOP# and DEVSEL#; otherwise the lines.
    ``watch`` / ``on_changes``: where a timing capture gives the clocks from packed samples,
    it also watches these 1-bit signals over every sample, in the same read, and calls
    ``on_changes(clock_edges, change_samples, flips)`` once per block read, in order (sample
    numbers; bit i of a flip = ``watch[i]`` changed there). Never called otherwise: the
    caller then makes a pass of its own (the glitch scan of pcitrace.decode).
    """
    check_bus(capture, bus, profile_name)
    if len(watch) > 8:
        raise ValueError("bus_clocks watches at most 8 lines (one code byte)")
    chunk_clocks = max(1, int(chunk_clocks))
    chans = list(dict.fromkeys(bus.all_channels()))
    widths = {c: capture.channel(c).width for c in chans}
    sigs = [s for s in bus.signals if not (s == "clk" or (s == "rx_clk" and bus.kind == "gbe_probe"))]
    tb = capture.timebase

    pend_t: list[np.ndarray] = []
    pend: dict[str, list[np.ndarray]] = {s: [] for s in sigs}
    npend = 0
    clock_no = 0
    prev_clk = None                       # clock level at the last sample of the last chunk
    prev_vals: dict[str, np.ndarray] | None = None   # last sample of each channel (for 'before')

    def flush(final: bool):
        nonlocal pend_t, pend, npend, clock_no
        while npend >= chunk_clocks or (final and npend):
            t = _cat(pend_t)
            cols = {s: _cat(v) for s, v in pend.items()}
            take = min(chunk_clocks, npend)
            yield BusChunk(clock_no, t[:take], {s: v[:take] for s, v in cols.items()})
            clock_no += take
            npend -= take
            pend_t = [t[take:]]
            pend = {s: [v[take:]] for s, v in cols.items()}

    def packed_fields(clock: str | None, read: int):
        """The capture's own assembly of the fields (from packed samples), or None; with
        ``control_code``, the code in place of the five control lines where it can."""
        nonlocal sigs, pend
        fields = {s: (bus.channels_of(s) if s in VECTOR_SIGNALS else bus.channels_of(s)[0])
                  for s in sigs}
        changes = (LineCode(tuple(bus.channels_of(s)[0] for s in watch), tuple(1 << i for i in range(len(watch))),
                            (1,) * len(watch)) if clock is not None and watch and on_changes is not None else None)
        if control_code and bus.is_pci and all(s in fields for s, _ in CONTROL_CODE):
            coded = {s: v for s, v in fields.items() if s not in dict(CONTROL_CODE)}
            # asserted = low, unless the probe shows the line inverted
            coded["code"] = LineCode(tuple(fields[s] for s, _ in CONTROL_CODE), tuple(w for _, w in CONTROL_CODE),
                                     tuple(int(s in bus.inverted) for s, _ in CONTROL_CODE))
            packed = capture.iter_fields(coded, chunk_samples=read, clock=clock, changes=changes)
            if packed is not None:
                sigs = [s for s in sigs if s not in dict(CONTROL_CODE)] + ["code"]
                pend = {s: [] for s in sigs}
                return packed
        return capture.iter_fields(fields, chunk_samples=read, clock=clock, changes=changes)

    def from_packed(packed, clocked: bool):
        # only the profile's inversions are left to apply (a code has them already)
        nonlocal npend
        for ch in packed:
            if CHANGES in ch.data:
                on_changes(ch.data[EDGES], ch.data[CHANGES], ch.data[FLIPS])
            if ch.length == 0:
                continue
            if clocked:
                pend_t.append(tb.times_at(ch.data[EDGES]))
            else:
                pend_t.append(tb.lazy_times(ch.start, ch.start + ch.length))
            for s in sigs:
                pend[s].append(ch.data[s] if s == "code" else _invert(bus, s, ch.data[s], widths))
            npend += ch.length
            yield from flush(False)
        yield from flush(True)

    if tb.mode == "state":
        # every sample is a clock; re-chunk so chunks are exactly chunk_clocks long
        read = read_samples or chunk_clocks
        packed = packed_fields(None, read)
        if packed is not None:
            yield from from_packed(packed, False)
            return
        for ch in capture.iter_chunks(chans, chunk_samples=read):
            if ch.length == 0:
                continue
            pend_t.append(tb.lazy_times(ch.start, ch.start + ch.length))
            for s in sigs:
                pend[s].append(_assemble(bus, s, ch.data, widths, None))
            npend += ch.length
            yield from flush(False)
        yield from flush(True)
        return

    clk = bus.clock
    if clk is None:
        raise PcitraceError(f"bus {bus.name!r} is in a timing capture but has no clock channel",
                            path=capture.path, where=f"profile {profile_name}",
                            fix=f"map {'clk' if bus.is_pci else 'rx_clk'} to the clock channel "
                                "in the profile")
    if tb.event_timed and hasattr(capture, "change_times"):
        # VCD change lists: the clocked view samples them directly, then stream it.
        from pcitrace.capture.clocked import clocked_view
        state = clocked_view(capture, clk)
        yield from bus_clocks(state, dataclasses.replace(bus, signals={
            k: v for k, v in bus.signals.items() if k != ("clk" if bus.is_pci else "rx_clk")}),
            chunk_clocks, profile_name, read_samples=read_samples)
        return
    before = tb.event_timed  # values just before the edge (event-timed captures)
    read_chunk = int(read_samples) if read_samples else max(chunk_clocks, 1 << 16)
    if not before:
        packed = packed_fields(clk, read_chunk)
        if packed is not None:
            yield from from_packed(packed, True)
            return

    for ch in capture.iter_chunks(chans, chunk_samples=read_chunk):
        c = ch.data[clk]
        n = len(c)
        if n == 0:
            continue
        rise = rising_edges(c, prev_clk)
        if len(rise):
            if before:
                # Value just before the edge = sample rise-1, which may be the previous chunk's last.
                src = {k: (np.concatenate((prev_vals[k], v)) if prev_vals is not None
                           else np.concatenate((v[:1], v)))
                       for k, v in ch.data.items()}
                idx = rise  # shifted by the one prepended sample: rise-1+1
            else:
                src, idx = ch.data, rise
            pend_t.append(tb.times_at(rise + ch.start))
            for s in sigs:
                pend[s].append(_assemble(bus, s, src, widths, idx))
            npend += len(rise)
        prev_clk = c[-1]
        prev_vals = {k: v[-1:].copy() for k, v in ch.data.items()}
        yield from flush(False)
    yield from flush(True)

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
    max_burst_bytes = 256        # optional: the NIC ends its own bursts every N bytes (else learnt)
    descriptor_bytes = 16        # optional: one DMA descriptor (default 16)

Canonical PCI signals: clk, frame_n, irdy_n, trdy_n, stop_n, devsel_n, ad, cbe_n, par, par64,
req64_n, ack64_n, idsel, req_n, gnt_n, perr_n, serr_n, inta_n, rst_n. Probe signals
(kind gbe_probe): frame_present, sof, rxd, rx_dv, rx_er, rx_clk (+ ``link_bps``).

What each kind of bus has (signals, channel names, clock) is in ``pcitrace.buses``; a bus's
clocks are streamed by ``pcitrace.capture.clocked.bus_clocks``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from pathlib import Path

from pcitrace import buses
from pcitrace.buses import BusKind
from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.formats import stem
from pcitrace.capture.meta import MAX_RATE_HZ, MIN_RATE_HZ
from pcitrace.capture.model import Capture
from pcitrace.errors import PcitraceError

VECTOR_SIGNALS = buses.all_vectors()
KINDS = tuple(buses.KINDS)
MAX_ADDRESS = 2**64 - 1          # a BAR bound: PCI addresses are at most 64 bits
MAX_LINK_BPS = 1e15              # 1 Pbit/s: past any link; the wire-time arithmetic holds it


@dataclasses.dataclass
class NicIdentity:
    """The NIC on a bus: which canonical signals are its GNT#/REQ#, its BAR address ranges."""

    gnt: str | None = None
    req: str | None = None
    bars: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    max_burst_bytes: int | None = None     # the NIC ends its own bursts every N bytes (a hint; else learnt)
    descriptor_bytes: int | None = None    # one DMA descriptor (a hint; else AnalysisOptions' 16)

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
    # a probed link: the PCI bus whose NIC sends its frames and the one whose NIC receives them,
    # when the user knows them (else they are told from the data)
    send_bus: str | None = None
    recv_bus: str | None = None

    @property
    def bus_kind(self) -> BusKind:
        """What this kind of bus is (pcitrace.buses)."""
        return buses.kind(self.kind)

    @property
    def mode(self) -> str:
        """'pcix' or 'pci' (probe links report 'pci' but have no bus mode)."""
        return self.bus_kind.mode

    @property
    def is_pci(self) -> bool:
        """It carries PCI / PCI-X transactions."""
        return self.bus_kind.transactions

    @property
    def clock(self) -> str | None:
        """The capture channel of the bus clock, if the profile names one."""
        c = self.signals.get(self.bus_kind.clock)
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
        return [b for b in self.buses if not b.is_pci]

    def describe(self) -> str:
        return self.path or self.source

    def check(self, capture: Capture) -> None:
        """Every channel the profile names exists in the capture with a usable width."""
        for b in self.buses:
            check_bus(capture, b, self.describe())


# -- TOML ----------------------------------------------------------------------------------

def _err(path, where, msg, fix="correct the profile (see `pcitrace info CAPTURE` for channel names)"):
    return PcitraceError(msg, path=path, where=where, fix=fix)


_BUS_KEYS = {"name", "kind", "mode", "signals", "inverted", "width", "clock_hz", "nic", "link_bps",
             "send_bus", "recv_bus"}


def _parse_bus(path, i: int, t: dict) -> BusProfile:
    where = f"[[bus]] #{i + 1}"
    if not isinstance(t, dict):
        raise _err(path, where, "each [[bus]] entry must be a table")
    extra = set(t) - _BUS_KEYS
    if extra:
        raise _err(path, where, f"unknown keys {sorted(extra)}; known: {sorted(_BUS_KEYS)}")
    name = t.get("name")
    if not isinstance(name, str) or not name:
        raise _err(path, where, "the bus needs a name = \"...\"")
    where = f"[[bus]] {name!r}"
    kind = _parse_kind(path, where, t.get("kind", "pci"), t.get("mode"))
    signals = _parse_signals(path, where, kind, t.get("signals", {}))
    inverted = _parse_inverted(path, where, t.get("inverted", []), signals)
    width = t.get("width", 32)
    if width not in (8, 16, 32, 64) or isinstance(width, bool):
        raise _err(path, f"{where} width", f"width = {width!r}; use 32 or 64")
    clock_hz = _parse_rate(path, f"{where} clock_hz", "clock_hz", t.get("clock_hz"), "a frequency in Hz",
                           MIN_RATE_HZ, MAX_RATE_HZ)
    link = _parse_rate(path, f"{where} link_bps", "link_bps", t.get("link_bps"), "a bit rate", 1.0, MAX_LINK_BPS)
    ends = {key: _parse_link_end(path, where, kind, key, t.get(key)) for key in ("send_bus", "recv_bus")}
    return BusProfile(name=name, kind=kind.name, signals=signals, inverted=inverted, width=int(width),
                      clock_hz=clock_hz, nic=_parse_nic(path, f"{where} nic", t.get("nic", {}), signals),
                      link_bps=link or kind.default_link_bps, **ends)


def _parse_link_end(path, where: str, kind: BusKind, key: str, value) -> str | None:
    """``send_bus`` / ``recv_bus`` of a probed link: a bus name (checked against the profile's
    buses once all are read)."""
    if value is None:
        return None
    if kind.transactions:
        raise _err(path, f"{where} {key}", f"{key} belongs to a probed link (kind = \"gbe_probe\"), not a {kind.title} bus",
                   fix=f"move {key} to the link's [[bus]] table")
    if not isinstance(value, str) or not value:
        raise _err(path, f"{where} {key}", f"{key} = {value!r} is not a bus name", fix=f'write {key} = "BUS NAME"')
    return value


def _check_link_ends(path, buses: list[BusProfile]) -> None:
    """Each link's send_bus / recv_bus names a PCI bus of the profile, and not the same one twice."""
    pci = [b.name for b in buses if b.is_pci]
    for b in buses:
        for key in ("send_bus", "recv_bus"):
            name = getattr(b, key)
            if name is not None and name not in pci:
                raise _err(path, f"[[bus]] {b.name!r} {key}", f"{key} = {name!r} is no PCI bus of the profile",
                           fix=f"use one of {', '.join(pci) or '(no PCI bus)'}")
        if b.send_bus is not None and b.send_bus == b.recv_bus:
            raise _err(path, f"[[bus]] {b.name!r}", f"send_bus and recv_bus are both {b.send_bus!r}",
                       fix="name the bus whose NIC sends and the one whose NIC receives")


def _parse_kind(path, where: str, kind, mode) -> BusKind:
    """``kind``, with ``mode = "pci" | "pcix"`` choosing between the two on a PCI bus."""
    if kind not in KINDS:
        raise _err(path, where, f"kind = {kind!r} is not one of {', '.join(KINDS)}")
    k = buses.kind(kind)
    if mode is None:
        return k
    if mode not in ("pci", "pcix") or not k.transactions:
        raise _err(path, where, f"mode = {mode!r}: must be 'pci' or 'pcix' on a PCI bus")
    return buses.kind(mode)


def _parse_signals(path, where: str, kind: BusKind, sigs) -> dict[str, str | list[str]]:
    if not isinstance(sigs, dict) or not sigs:
        raise _err(path, where, "the bus needs a [bus.signals] table mapping signals to channels")
    signals: dict[str, str | list[str]] = {}
    for k, v in sigs.items():
        if k not in kind.signals:
            raise _err(path, f"{where} signals.{k}",
                       f"unknown signal {k!r}; {kind.name} signals are {', '.join(kind.signals)}")
        if isinstance(v, str) and v:
            signals[k] = v
        elif isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
            signals[k] = list(v)
        else:
            raise _err(path, f"{where} signals.{k}",
                       "must be a channel name or a list of bit channel names (LSB first)")
    return signals


def _parse_inverted(path, where: str, inv, signals) -> set[str]:
    if not isinstance(inv, list) or not all(isinstance(x, str) for x in inv):
        raise _err(path, f"{where} inverted", "must be a list of signal names")
    for x in inv:
        if x not in signals:
            raise _err(path, f"{where} inverted", f"{x!r} is not one of this bus's signals")
    return set(inv)


def _parse_rate(path, where: str, key: str, value, what: str, lo: float, hi: float) -> float | None:
    """A number of Hz or bit/s in lo .. hi (what the time arithmetic holds), or None when not given."""
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
        text = repr(value) if len(repr(value)) <= 40 else repr(value)[:30] + "..."
        raise _err(path, where, f"{key} = {text} is not {what} in {lo:g} .. {hi:g}")
    return float(value)


def _parse_nic(path, where: str, nic_t, signals) -> NicIdentity:
    if not isinstance(nic_t, dict):
        raise _err(path, where, "must be a table")
    known = {"gnt", "req", "bars", "max_burst_bytes", "descriptor_bytes"}
    bad = set(nic_t) - known
    if bad:
        raise _err(path, where, f"unknown keys {sorted(bad)}; known: {', '.join(sorted(known))}")
    for key in ("gnt", "req"):
        v = nic_t.get(key)
        if v is not None and (not isinstance(v, str) or v not in signals):
            raise _err(path, f"{where}.{key}",
                       f"{v!r} must name one of this bus's signals (e.g. \"{key}_n\")")
    bars = []
    bars_t = nic_t.get("bars", [])
    if not isinstance(bars_t, list):
        raise _err(path, f"{where}.bars", f"{bars_t!r} must be a list of [low, high] address ranges")
    for j, r in enumerate(bars_t):
        if (not isinstance(r, list) or len(r) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_ADDRESS for x in r)
                or r[0] > r[1]):
            raise _err(path, f"{where}.bars[{j}]",
                       f"{r!r} must be [low, high] addresses in 0 .. 2**64-1, low <= high")
        bars.append((int(r[0]), int(r[1])))
    sizes = {key: _nic_size(path, f"{where}.{key}", key, nic_t.get(key), hi)
             for key, hi in (("max_burst_bytes", 1 << 20), ("descriptor_bytes", 4096))}
    return NicIdentity(nic_t.get("gnt"), nic_t.get("req"), bars, **sizes)


def _nic_size(path, where: str, key: str, v, hi: int) -> int | None:
    """A byte count the user knows of the NIC: a whole number of DWORDs, 4 .. ``hi``."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 4 <= v <= hi or v % 4:
        raise _err(path, where, f"{key} = {v!r} must be a whole number of DWORDs (a multiple of 4) in 4 .. {hi}")
    return v


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
    _check_link_ends(path, buses)
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
        if b.link_bps and b.bus_kind.default_link_bps is not None:
            lines.append(f"link_bps = {_toml_num(b.link_bps)}")
        for key in ("send_bus", "recv_bus"):
            if getattr(b, key) is not None:
                lines.append(f"{key} = {_toml_str(getattr(b, key))}")
        if b.inverted:
            lines.append("inverted = [" + ", ".join(_toml_str(x) for x in sorted(b.inverted)) + "]")
        lines.append("[bus.signals]")
        for k, v in b.signals.items():
            val = _toml_str(v) if isinstance(v, str) else "[" + ", ".join(_toml_str(x) for x in v) + "]"
            lines.append(f"{_toml_key(k)} = {val}")
        sizes = [(k, getattr(b.nic, k)) for k in ("max_burst_bytes", "descriptor_bytes") if getattr(b.nic, k)]
        if b.nic.gnt or b.nic.req or b.nic.bars or sizes:
            lines.append("[bus.nic]")
            if b.nic.gnt:
                lines.append(f"gnt = {_toml_str(b.nic.gnt)}")
            if b.nic.req:
                lines.append(f"req = {_toml_str(b.nic.req)}")
            if b.nic.bars:
                lines.append("bars = [" + ", ".join(f"[0x{lo:x}, 0x{hi:x}]" for lo, hi in b.nic.bars) + "]")
            lines += [f"{k} = {v}" for k, v in sizes]
        lines.append("")
    return "\n".join(lines)


def save_profile(profile: Profile, path) -> None:
    text = dump_profile(profile)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


# -- auto-detection ------------------------------------------------------------------------

# Base names (upper case, active-low markers and separators removed) -> canonical signal.
_BASE = {name: sig for k in buses.KINDS.values() for name, sig in k.channel_names.items()}
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

    found = []
    for prefix, g in groups.items():
        for kind in buses.DETECTABLE:
            if kind.detect(set(g)):
                bus = _bus_from_group(capture, prefix or kind.default_name, g, kind)
                if bus:
                    found.append(bus)
    names = [b.name for b in found]
    for b in found:  # a capture with both a PCI bus and probe lines under one prefix
        if names.count(b.name) > 1 and not b.is_pci:
            b.name = f"{b.name}.probe"
    return Profile(found, source="auto-detected")


def _vector_channels(cands) -> str | list[str] | None:
    """A vector signal's channel: one vector channel, or 1-bit channels numbered 0..n-1."""
    whole = [c for c, bit, rng in cands if bit is None and (c.width > 1 or rng)]
    if len(whole) == 1 and whole[0].width > 1:
        return whole[0].name
    bits = {bit: c.name for c, bit, rng in cands if bit is not None and c.width == 1}
    if bits and sorted(bits) == list(range(len(bits))):
        return [bits[i] for i in range(len(bits))]
    if len(whole) == 1:
        return whole[0].name
    return None


def _line_channel(cands) -> str | None:
    """A 1-bit signal's channel: the one plain 1-bit channel of that name."""
    singles = [c for c, bit, rng in cands if c.width == 1 and bit is None and rng is None]
    return singles[0].name if len(singles) == 1 else None


def _ad_width(capture: Capture, signals) -> int:
    if "ad" not in signals:
        return 32
    nbits = sum(capture.channel(c).width for c in
                ([signals["ad"]] if isinstance(signals["ad"], str) else signals["ad"]))
    return 64 if nbits > 32 else 32


def _bus_from_group(capture, name, g, kind: BusKind) -> BusProfile | None:
    """The bus of ``kind`` that a group of recognised channels makes, if they are enough."""
    signals: dict[str, str | list[str]] = {}
    for canon in kind.signals:
        cands = g.get(canon)
        if not cands:
            continue
        chan = _vector_channels(cands) if canon in VECTOR_SIGNALS else _line_channel(cands)
        if chan is not None:
            signals[canon] = chan
    if not kind.usable(signals):
        return None
    tb = capture.timebase
    clock_hz = tb.clock_hz if tb.mode == "state" and tb.clock_hz else None
    nic = NicIdentity(gnt="gnt_n" if "gnt_n" in signals else None,
                      req="req_n" if "req_n" in signals else None) if kind.has_nic else NicIdentity()
    return BusProfile(name=name, kind=kind.name, signals=signals, width=_ad_width(capture, signals),
                      clock_hz=clock_hz, nic=nic, link_bps=kind.default_link_bps)


def sidecar_profile_path(capture_path) -> Path | None:
    """NAME.profile.toml beside NAME.sr / NAME.vcd / NAME.vcd.gz, if present."""
    if not capture_path:
        return None
    p = Path(capture_path)
    name = stem(p)
    if name is None:
        return None
    cand = p.with_name(name + ".profile.toml")
    return cand if cand.exists() else None


def find_profile(capture: Capture, path=None) -> tuple[Profile, str]:
    """The profile to use and where it came from: ``path``; else NAME.profile.toml beside the
    capture; else detection ('auto-detected'). Not yet checked against the capture."""
    if path is not None:
        return load_profile(path), str(path)
    side = sidecar_profile_path(capture.path)
    if side is not None:
        return load_profile(side), str(side)
    return detect_profile(capture), "auto-detected"


def resolve_profile(capture: Capture, path=None) -> Profile:
    """The profile to use (find_profile), checked against the capture: missing channels are
    errors naming them, and a capture where detection finds no bus is one too."""
    prof, source = find_profile(capture, path)
    if source == "auto-detected" and not prof.buses:
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

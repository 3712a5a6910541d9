"""Times as users type and read them: '10us', '1.5 ms', '250ns', '3ps', '2s'."""

from __future__ import annotations

import math
import re

from pcitrace.errors import PcitraceError

_UNIT_PS = {"ps": 1.0, "ns": 1e3, "us": 1e6, "µs": 1e6, "ms": 1e9, "s": 1e12}
_TIME_RE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(ps|ns|us|µs|ms|s)?\s*$")


def parse_time_ps(text: str, *, what: str = "time") -> float:
    """Picoseconds from '10us', '1.5ms', '0.25 s'; a bare number is seconds."""
    m = _TIME_RE.match(str(text))
    if not m:
        raise PcitraceError(f"cannot read {what} {text!r}",
                            fix="give a number with a unit: ps, ns, us, ms or s (e.g. 10us, 1.5ms)")
    return float(m.group(1)) * _UNIT_PS[m.group(2) or "s"]


def parse_range_ps(text: str, option: str = "--zoom") -> tuple[float, float]:
    """'START:END' -> (start_ps, end_ps), START < END; ``option`` names it in errors."""
    parts = str(text).split(":")
    if len(parts) != 2:
        raise PcitraceError(f"cannot read the {option} range {text!r}",
                            fix=f"write START:END with units, e.g. {option} 10us:25us")
    a = parse_time_ps(parts[0], what=f"{option} start")
    b = parse_time_ps(parts[1], what=f"{option} end")
    if not b > a:
        raise PcitraceError(f"the {option} range {text!r} ends before it starts",
                            fix=f"write START:END with END after START, e.g. {option} 10us:25us")
    return a, b


def format_time(ps: float, digits: int = 4) -> str:
    """Engineering format with the unit that keeps 1..999 before the point: '12.35 us'."""
    if ps is None or not math.isfinite(ps):
        return "-"
    a = abs(ps)
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if a >= scale:
            return f"{ps / scale:.{digits}g} {unit}"
    return f"{ps:.{digits}g} ps"


def format_freq(hz: float, digits: int = 4) -> str:
    if hz is None or not math.isfinite(hz) or hz <= 0:
        return "-"
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if hz >= scale:
            return f"{hz / scale:.{digits}g} {unit}"
    return f"{hz:.{digits}g} Hz"

"""pcitrace's own metadata in a capture, read once and typed.

What sigrok's and VCD's own headers cannot say (state mode, the capture's start time, a
uniform clock, how many samples a VCD holds, vector widths, the capture's metadata) pcitrace
writes as a JSON object: the ``pcitrace.json`` member of an .sr, the ``$comment pcitrace``
of a VCD. A file can carry anything there, so every field is checked here, against its type
and a range that the time arithmetic downstream can hold, before any reader uses it. A field
that fails is the pcitrace error naming the file, the field and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pcitrace.errors import PcitraceError

MODES = ("timing", "state")
MAX_RATE_HZ = 1e13            # 10 THz: past any analyser; a rate sets the picoseconds per sample
MIN_RATE_HZ = 1e-3
MAX_ABS_START_PS = 2**62      # times are int64 picoseconds; a start past this overflows them
MAX_SAMPLES = 2**48
MAX_VECTOR_BITS = 4096

# Keys of the capture metadata that readers compute and code downstream reads, with their type.
_KNOWN_METADATA = {"end_ps": int, "trigger_sample": int, "changes": int, "timescale_ps": (int, float)}


@dataclass(frozen=True)
class OwnMeta:
    mode: Literal["timing", "state"] = "timing"
    start_ps: int = 0
    samplerate_hz: float | None = None
    clock_hz: float | None = None
    num_samples: int | None = None
    sample_clock: bool = False             # VCD: state samples at a SAMPLE_CLOCK variable's edges
    timestamps: bool = False               # .sr: per-sample times in a member of their own
    vectors: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class _Fields:
    def __init__(self, obj: dict, path, where: str):
        self.obj, self.path, self.where = obj, path, where

    def error(self, key: str, message: str, fix: str) -> PcitraceError:
        return PcitraceError(f"{key} {message}", path=self.path, where=f"{self.where} {key}",
                             fix=f"{fix}, or re-export the capture with pcitrace")

    def integer(self, key: str, lo: int, hi: int) -> int | None:
        v = self.obj.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.error(key, f"is {_short(v)}, not a whole number in {lo} .. {hi}", f"write {key} as one")
        return v

    def rate(self, key: str) -> float | None:
        v = self.obj.get(key)
        if v is None or v == 0:
            return None                    # absent (pcitrace writes null for a clock it does not know)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v) \
                or not MIN_RATE_HZ <= v <= MAX_RATE_HZ:
            raise self.error(key, f"is {_short(v)}, not a frequency in {MIN_RATE_HZ:g} .. {MAX_RATE_HZ:g} Hz",
                             f"write {key} in Hz")
        return float(v)

    def flag(self, key: str) -> bool:
        v = self.obj.get(key, False)
        if not isinstance(v, bool):
            raise self.error(key, f"is {_short(v)}, not true/false", f"write {key} as true or false")
        return v

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        v = self.obj.get(key, default)
        if v not in choices:
            raise self.error(key, f"is {_short(v)}, not one of {', '.join(choices)}", f"write one of them")
        return v

    def vectors(self) -> dict[str, int]:
        v = self.obj.get("vectors") or {}
        if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(w, int) and not isinstance(w, bool)
                                              and 1 <= w <= MAX_VECTOR_BITS for k, w in v.items()):
            raise self.error("vectors", f"is {_short(v)}, not channel names with widths of 1 .. {MAX_VECTOR_BITS}",
                             "write {\"AD\": 64, ...}")
        return v

    def metadata(self) -> dict[str, Any]:
        v = self.obj.get("metadata") or {}
        if not isinstance(v, dict):
            raise self.error("metadata", f"is {_short(v)}, not an object", "write an object of names and values")
        for key, kind in _KNOWN_METADATA.items():
            x = v.get(key)
            if x is not None and (isinstance(x, bool) or not isinstance(x, kind) or not _finite(x)
                                  or abs(x) > MAX_ABS_START_PS):
                raise self.error(f"metadata.{key}", f"is {_short(x)}, not a number", "write a number")
        return v


def parse_own_meta(obj: Any, path, where: str) -> OwnMeta:
    """The typed metadata of a capture from its pcitrace JSON object (``where``: the member or
    header it came from). ``None`` (no such object) gives the defaults."""
    if obj is None:
        return OwnMeta()
    if not isinstance(obj, dict):
        raise PcitraceError(f"is {_short(obj)}, not a JSON object", path=path, where=where,
                            fix="delete it or re-export the capture with pcitrace")
    f = _Fields(obj, path, where)
    return OwnMeta(mode=f.choice("mode", MODES, "timing"),
                   start_ps=f.integer("start_ps", -MAX_ABS_START_PS, MAX_ABS_START_PS) or 0,
                   samplerate_hz=f.rate("samplerate_hz"), clock_hz=f.rate("clock_hz"),
                   num_samples=f.integer("num_samples", 0, MAX_SAMPLES),
                   sample_clock=f.flag("sample_clock"), timestamps=f.flag("timestamps"),
                   vectors=f.vectors(), metadata=f.metadata())


def _finite(v) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:               # an int past what a float holds
        return False


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:30] + f"... ({len(text)} characters)"

"""Captures: the model, the .sr and VCD readers/writers, clocked views and channel profiles.

``open_capture`` picks the reader by extension (.sr, .vcd, .vcd.gz); ``write_sr`` /
``write_vcd`` write atomically. ``pcitrace.capture.profile`` maps channels to bus signals.
"""

from __future__ import annotations

import os
from pathlib import Path

from pcitrace.capture.formats import FORMATS, SUFFIXES, format_of  # noqa: F401
from pcitrace.capture.model import (DEFAULT_CHUNK, Capture, ChannelInfo, Chunk,  # noqa: F401
                                    TimeBase)
from pcitrace.capture.sr import read_sr, write_sr  # noqa: F401
from pcitrace.errors import PcitraceError

__all__ = ["Capture", "ChannelInfo", "Chunk", "TimeBase", "DEFAULT_CHUNK", "open_capture",
           "write_sr", "write_vcd", "write_capture", "clocked_view", "capture_format"]


def capture_format(path) -> str:
    """'sr' or 'vcd' from the file name (capture.formats.FORMATS)."""
    fmt = format_of(path)
    if fmt is None:
        raise PcitraceError(f"unknown capture format (expected {', '.join(SUFFIXES)})", path=path,
                            fix="rename the file with the extension of its format")
    return fmt


def open_capture(path: str | os.PathLike) -> Capture:
    """Open a capture file; the reader is chosen by extension."""
    path = os.fspath(path)
    fmt = capture_format(path)
    if not os.path.exists(path):
        raise PcitraceError("no such file", path=path, fix="check the path")
    if fmt == "sr":
        return read_sr(path)
    from pcitrace.capture.vcd import read_vcd
    return read_vcd(path)


def write_vcd(capture: Capture, path: str | os.PathLike, **kwargs) -> None:
    """Write a bit-blasted scalar VCD that sigrok-cli 0.7.2 imports and GTKWave opens."""
    from pcitrace.capture.vcd import write_vcd as _write_vcd
    _write_vcd(capture, path, **kwargs)


def write_capture(capture: Capture, path: str | os.PathLike) -> None:
    """Write by extension: .sr or .vcd (atomic)."""
    fmt = capture_format(path)
    if fmt == "sr":
        write_sr(capture, path)
    else:
        if str(path).lower().endswith(".gz"):
            raise PcitraceError("writing gzip'd VCD is not supported", path=path,
                                fix="write .vcd and compress it with gzip afterwards")
        write_vcd(capture, path)


def clocked_view(capture: Capture, clock_channel: str) -> Capture:
    """State-mode view: one sample per rising edge of ``clock_channel``, values just before it."""
    from pcitrace.capture.clocked import clocked_view as _clocked_view
    return _clocked_view(capture, clock_channel)

"""sigrok session files (.sr): a zip of ``version``, ``metadata`` and ``logic-1-N`` chunks.

Layout (libsigrok session format version 2):
- ``metadata`` is an INI file; section ``[device 1]`` holds ``capturefile`` (chunk prefix,
  normally ``logic-1``), ``total probes``, ``samplerate`` ("33 MHz", "33333333 Hz" or a bare
  number of Hz), ``unitsize`` (bytes per sample) and ``probeK=name`` for each enabled channel.
- The chunks ``<capturefile>-1``, ``-2``, ... concatenated are the samples, ``unitsize`` bytes
  each, little-endian; channel ``probeK`` is bit K-1 of a sample. (Version 1 files keep all
  samples in one member named ``<capturefile>``; both are read.)

pcitrace writes 1-bit channels only (a vector ``X`` of width n becomes ``X0``..``X{n-1}``) and
keeps what sigrok cannot say in an extra member ``pcitrace.json`` (plus ``pcitrace-timestamps.npy``
for state captures with non-uniform sample times). libsigrok opens members by name, so it never
looks at them. For a state-mode capture the sigrok ``samplerate`` is the bus clock.

The reader streams: it keeps one chunk member open and reads ``chunk_samples`` at a time, so
peak memory does not grow with the capture's length. Every declared size is checked against the
compressed size before anything is inflated (zip bombs) and every member is read with a cap.
"""

from __future__ import annotations

import collections
import configparser
import io
import json
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from pcitrace.capture._atomic import atomic_path
from pcitrace.capture._zipread import ERRORS as ZIP_ERRORS
from pcitrace.capture._zipread import Member, SalvagedZip, salvage
from pcitrace.capture._zipread import check as zip_check
from pcitrace.capture._zipwrite import ZipWriter, deflate
from pcitrace.capture.clocked import rising_edges
from pcitrace.capture.meta import MAX_ABS_START_PS, MAX_RATE_HZ, MIN_RATE_HZ, OwnMeta, parse_own_meta
from pcitrace.capture.model import (CHANGES, EDGES, FLIPS, Broadcast, Capture, ChannelInfo, Chunk, LineCode,
                                    SharedReads, TimeBase)
from pcitrace.errors import PcitraceError

EXTRA_MEMBER = "pcitrace.json"
SHARED_BYTES = 256 << 20
TIMESTAMPS_MEMBER = "pcitrace-timestamps.npy"
EXTRA_FORMAT = 1

# Deflate cannot expand more than 1032:1; anything declaring more than this is lying.
MAX_DEFLATE_RATIO = 1100
# bzip2 / lzma can do better on constant data; still bound them.
MAX_OTHER_RATIO = 100_000
# Small members (metadata, version, JSON) are read whole; bound them absolutely.
MAX_SMALL_MEMBER = 16 << 20

# Target bytes per chunk member when writing (sigrok itself writes a few MB per chunk).
WRITE_CHUNK_BYTES = 4 << 20

_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([kKMGT]?)\s*(?:[Hh][Zz])?\s*$")
_RATE_MULT = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_samplerate(text: str, *, path=None, where="metadata [device 1] samplerate") -> float:
    """"33 MHz", "33333333 Hz", "33.3 MHz", "200 kHz" or a bare "33333333" -> Hz."""
    m = _RATE_RE.match(text)
    if not m:
        raise PcitraceError(f"cannot read the sample rate {text!r}", path=path, where=where,
                            fix='write it as e.g. "33 MHz", "33333333 Hz" or a bare number of Hz')
    hz = float(m.group(1)) * _RATE_MULT[m.group(2)]
    if not math.isfinite(hz) or hz <= 0:
        raise PcitraceError(f"sample rate {text!r} is not a positive frequency", path=path,
                            where=where, fix="give the capture's real sample rate")
    if not MIN_RATE_HZ <= hz <= MAX_RATE_HZ:
        # the time arithmetic (picoseconds per sample) holds these, no analyser goes past them
        raise PcitraceError(f"sample rate {text!r} is outside {MIN_RATE_HZ:g} .. {MAX_RATE_HZ:g} Hz", path=path,
                            where=where, fix="give the capture's real sample rate")
    return hz


def format_samplerate(hz: float) -> str:
    """The way libsigrok's sr_samplerate_string writes it: exact, largest fitting unit."""
    n = int(round(hz))
    for mult, unit in ((10**9, "GHz"), (10**6, "MHz"), (10**3, "kHz")):
        if n >= mult and n % mult == 0:
            return f"{n // mult} {unit}"
    return f"{n} Hz"


# -- reading -------------------------------------------------------------------------------

def _member_limit(info: zipfile.ZipInfo) -> int:
    if info.compress_type == zipfile.ZIP_STORED:
        return info.compress_size
    ratio = MAX_DEFLATE_RATIO if info.compress_type == zipfile.ZIP_DEFLATED else MAX_OTHER_RATIO
    return info.compress_size * ratio + 4096


def _check_member_size(path, info: zipfile.ZipInfo) -> None:
    if info.file_size > _member_limit(info):
        raise PcitraceError(
            f"member {info.filename!r} declares {info.file_size} uncompressed bytes from "
            f"{info.compress_size} compressed bytes, more than any real capture can expand to "
            "(zip bomb or corrupt directory)", path=path, where=f"zip member {info.filename}",
            fix="re-export the capture from the analyser software; do not open untrusted archives")


def _read_small(zf: zipfile.ZipFile, path, name: str) -> bytes:
    info = zf.getinfo(name)
    _check_member_size(path, info)
    if info.file_size > MAX_SMALL_MEMBER:
        raise PcitraceError(f"member {name!r} is {info.file_size} bytes, too large for what it "
                            "should hold", path=path, where=f"zip member {name}",
                            fix="re-export the capture; the file is corrupt")
    try:
        zip_check(info)
        with zf.open(info) as f:
            data = f.read(MAX_SMALL_MEMBER + 1)
    except ZIP_ERRORS as exc:
        raise PcitraceError(f"member {name!r} is corrupt ({exc})", path=path,
                            where=f"zip member {name}",
                            fix="re-export or re-copy the capture; the file is damaged") from None
    return data


def _open_zip(path) -> zipfile.ZipFile | SalvagedZip:
    """The zip, or where its directory is lost (a file cut short) the whole members before the cut."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise PcitraceError("no such file", path=path, fix="check the path") from None
    except IsADirectoryError:
        raise PcitraceError("is a directory, not a capture", path=path,
                            fix="give the path of a .sr file") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, NotImplementedError) as exc:
        # (NotImplementedError: a directory entry asking for a zip version zipfile does not read)
        kept = _salvaged(path, exc)
        if kept is not None:
            return kept
        raise PcitraceError(f"not a readable .sr (zip) file: {exc}", path=path,
                            where="zip central directory",
                            fix="the file is truncated or not a sigrok session; re-copy or "
                                "re-export it") from None


def _salvaged(path, exc: Exception) -> SalvagedZip | None:
    """A .sr whose zip directory is unreadable (``exc``; a file cut short): its whole members
    before the cut, if they include the metadata."""
    try:
        kept = salvage(path)
    except OSError:
        return None
    kept.why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return kept if "metadata" in kept.namelist() else None


class _SrLayout:
    """What the zip directory and metadata say: channels, bit positions, chunk members."""

    def __init__(self, path):
        self.path = os.fspath(path)
        with _open_zip(path) as zf:
            names = set(zf.namelist())
            if "metadata" not in names:
                raise PcitraceError("the zip has no 'metadata' member, so it is not a sigrok "
                                    "session", path=path, where="zip directory",
                                    fix="export the capture from sigrok/PulseView as .sr")
            self.version = 2
            if "version" in names:
                v = _read_small(zf, path, "version").decode("ascii", "replace").strip()
                if not v.isdigit() or int(v) not in (1, 2):
                    raise PcitraceError(f"unsupported session format version {v!r}", path=path,
                                        where="zip member version",
                                        fix="re-save the capture with sigrok 0.5 or later (version 2)")
                self.version = int(v)
            meta_text = _read_small(zf, path, "metadata").decode("utf-8", "replace")
            self._parse_metadata(meta_text)
            self.own = self._read_own(zf, names)
            self.timestamps = None
            if self.own.timestamps and TIMESTAMPS_MEMBER in names:
                self.timestamps = self._read_timestamps(zf)
            self._find_chunks(zf, names)
            self.cut = f"{zf.why}; {zf.stop}" if isinstance(zf, SalvagedZip) else None
            if self.cut is not None and not self.chunks:
                raise PcitraceError(f"not a readable .sr (zip) file: its directory is unreadable and it is cut "
                                    f"short before its first whole chunk of samples ({self.cut})", path=path,
                                    where="zip central directory",
                                    fix="the file is truncated; re-copy or re-export it")

    def _read_own(self, zf, names: set[str]) -> OwnMeta:
        """pcitrace's own metadata (the defaults where there is none), every field typed."""
        obj = None
        if EXTRA_MEMBER in names:
            try:
                obj = json.loads(_read_small(zf, self.path, EXTRA_MEMBER))
            except (ValueError, UnicodeDecodeError) as exc:
                raise PcitraceError(f"the pcitrace extras are not valid JSON ({exc})",
                                    path=self.path, where=f"zip member {EXTRA_MEMBER}",
                                    fix="delete that member (zip -d) or re-export the "
                                        "capture") from None
        return parse_own_meta(obj, self.path, f"zip member {EXTRA_MEMBER}")

    def _parse_metadata(self, text: str) -> None:
        cp = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
        cp.optionxform = str
        try:
            cp.read_string(text)
        except configparser.Error as exc:
            # configparser's messages run over several lines; the error is one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PcitraceError(f"metadata is not a valid INI file: {first}", path=self.path,
                                where="zip member metadata",
                                fix="re-export the capture from sigrok/PulseView") from None
        devs = [s for s in cp.sections() if s.startswith("device ")]
        if not devs:
            raise PcitraceError("metadata has no [device N] section", path=self.path,
                                where="zip member metadata",
                                fix="re-export the capture from sigrok/PulseView")
        sec = cp[devs[0]]
        self.capturefile = sec.get("capturefile")
        if not self.capturefile:
            raise PcitraceError("metadata has no capturefile= entry, so there is no logic "
                                "data", path=self.path, where=f"metadata [{devs[0]}]",
                                fix="export a capture with logic channels")
        rate = sec.get("samplerate")
        self.samplerate = (parse_samplerate(rate, path=self.path,
                                            where=f"metadata [{devs[0]}] samplerate")
                           if rate else None)
        self.total_probes = self._count(sec, devs[0], "total probes", 0)
        self.unitsize = self._count(sec, devs[0], "unitsize", 1)
        self.analog = self._count(sec, devs[0], "total analog", 0)
        if not 1 <= self.unitsize <= 1024:
            raise PcitraceError(f"unitsize={self.unitsize} is not a sample size", path=self.path,
                                where=f"metadata [{devs[0]}] unitsize",
                                fix="re-export the capture; unitsize is bytes per sample")
        probes = []
        for key, val in sec.items():
            m = re.fullmatch(r"probe(\d+)", key)
            if m:
                idx = int(m.group(1)) - 1
                if idx < 0 or idx >= self.unitsize * 8:
                    raise PcitraceError(f"{key}={val} lies outside the {self.unitsize}-byte "
                                        "sample", path=self.path,
                                        where=f"metadata [{devs[0]}] {key}",
                                        fix="re-export the capture")
                if "\n" in val.strip() or "\r" in val:
                    raise PcitraceError(f"{key} runs over several lines ({val.strip()[:40]!r})", path=self.path,
                                        where=f"metadata [{devs[0]}] {key}",
                                        fix="write each channel name on one line")
                probes.append((idx, val.strip()))
        probes.sort()
        self.bits = [i for i, _ in probes]
        self.names = [n for _, n in probes]

    def _count(self, sec, device: str, key: str, default: int) -> int:
        """A whole number of the metadata (``default`` where absent or empty)."""
        text = (sec.get(key) or "").strip()
        if not text:
            return default
        if not text.isdigit() or not text.isascii() or len(text) > 18:
            raise PcitraceError(f"{key}={text[:40]!r} is not a whole number", path=self.path,
                                where=f"metadata [{device}] {key}", fix="re-export the capture")
        return int(text)

    def _read_timestamps(self, zf) -> np.ndarray:
        raw = _read_small_big(zf, self.path, TIMESTAMPS_MEMBER)
        try:
            ts = np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise PcitraceError(f"sample timestamps are unreadable ({exc})", path=self.path,
                                where=f"zip member {TIMESTAMPS_MEMBER}",
                                fix="re-export the capture") from None
        where = f"zip member {TIMESTAMPS_MEMBER}"
        if ts.ndim != 1 or ts.dtype.kind not in "iu":
            raise PcitraceError(f"sample timestamps are {ts.dtype} of shape {ts.shape}, not one list of "
                                "whole picoseconds", path=self.path, where=where, fix="re-export the capture")
        if len(ts) and (int(ts.min()) < -MAX_ABS_START_PS or int(ts.max()) > MAX_ABS_START_PS
                        or int(ts[-1]) - int(ts[0]) > MAX_ABS_START_PS):
            raise PcitraceError(f"sample timestamps run from {int(ts.min())} to {int(ts.max())} ps, past the "
                                f"{MAX_ABS_START_PS} ps that times may span", path=self.path, where=where,
                                fix="re-export the capture")
        ts = ts.astype(np.int64)
        back = np.flatnonzero(ts[1:] < ts[:-1])
        if len(back):
            raise PcitraceError(f"sample timestamps go backwards at sample {int(back[0]) + 1}", path=self.path,
                                where=where, fix="re-export the capture")
        return ts

    def _find_chunks(self, zf: zipfile.ZipFile, names: set[str]) -> None:
        prefix = self.capturefile
        chunks = []
        if self.version == 1 and prefix in names:
            chunks.append(zf.getinfo(prefix))
        else:
            k = 1
            while f"{prefix}-{k}" in names:
                chunks.append(zf.getinfo(f"{prefix}-{k}"))
                k += 1
        _check_layout(self.path, os.path.getsize(self.path), chunks)
        self.chunks: list[tuple[str, int, int]] = []  # (member, first sample, samples)
        total = 0
        for info in chunks:
            _check_member_size(self.path, info)
            if info.file_size % self.unitsize:
                raise PcitraceError(
                    f"chunk {info.filename!r} holds {info.file_size} bytes, not a multiple of "
                    f"unitsize={self.unitsize}", path=self.path, where=f"zip member {info.filename}",
                    fix="the capture is truncated or its metadata unitsize is wrong; re-export it")
            n = info.file_size // self.unitsize
            self.chunks.append((info.filename, total, n))
            total += n
        self.num_samples = total


def _check_layout(path, file_size: int, members: list[zipfile.ZipInfo]) -> None:
    """Members hold data of their own inside the file: a directory whose entries share one
    member's data (or point past the file's end) would have it read over and over."""
    end = 0
    for info in sorted(members, key=lambda i: i.header_offset):
        if info.header_offset < end:
            raise PcitraceError(f"zip member {info.filename!r} overlaps the member before it", path=path,
                                where=f"zip member {info.filename}",
                                fix="the zip directory is corrupt or crafted; re-export the capture")
        end = info.header_offset + 30 + len(info.filename.encode()) + info.compress_size
        if end > file_size:
            raise PcitraceError(f"zip member {info.filename!r} runs past the end of the file "
                                f"({end} of {file_size} bytes)", path=path, where=f"zip member {info.filename}",
                                fix="the capture is truncated; re-copy or re-export it")


def _read_small_big(zf, path, name) -> bytes:
    """Read a whole member bounded by its (already plausibility-checked) declared size."""
    info = zf.getinfo(name)
    _check_member_size(path, info)
    try:
        zip_check(info)
        with zf.open(info) as f:
            return f.read(info.file_size + 1)
    except ZIP_ERRORS as exc:
        raise PcitraceError(f"member {name!r} is corrupt ({exc})", path=path,
                            where=f"zip member {name}", fix="re-export the capture") from None


class _Lines:
    """One-bit lines of a block of packed samples ((n, unitsize) uint8). A sample byte is
    copied out once, contiguous, for all the lines in it: reading a column of the block is
    strided and costs several times the masking that follows."""

    def __init__(self, raw: np.ndarray):
        self.raw = raw
        self.columns: dict[int, np.ndarray] = {}

    def column(self, byte: int) -> np.ndarray:
        col = self.columns.get(byte)
        if col is None:
            col = self.columns[byte] = np.ascontiguousarray(self.raw[:, byte])
        return col

    def bit(self, bit: int) -> np.ndarray:
        """uint8 0/1 of one bit position (a new array)."""
        return ((self.column(bit >> 3) & np.uint8(1 << (bit & 7))) != 0).view(np.uint8)

    def code(self, bits: Sequence[int], weights: Sequence[int], levels: Sequence[int]) -> np.ndarray:
        """A LineCode's values from the sample bytes that hold its lines. Lines whose bit
        position and code bit differ by the same shift (the usual case: the control lines on
        consecutive channels) are moved together by one shift and mask; a line counts when
        at ``levels[i]``, so the lines counted when low are flipped at the end. Many
        scattered lines go through one 256-entry table per byte instead."""
        groups: dict[tuple[int, int], int] = {}
        flip = 0
        for b, w, lv in zip(bits, weights, levels):
            key = (b >> 3, (b & 7) - (int(w).bit_length() - 1))
            groups[key] = groups.get(key, 0) | int(w)
            flip |= 0 if lv else int(w)
        out = np.zeros(len(self.raw), np.uint8)
        if len(groups) > 4:
            v = np.arange(256)
            for byte in {b >> 3 for b in bits}:
                table = np.zeros(256, np.uint8)
                for b, w, lv in zip(bits, weights, levels):
                    if b >> 3 == byte:
                        table += (((v >> (b & 7)) & 1) == lv).astype(np.uint8) * np.uint8(w)
                out |= np.take(table, self.column(byte))
            return out
        for (byte, shift), mask in groups.items():
            col = self.column(byte)
            # (a multiply, not a left shift: numpy vectorises only the former on uint8)
            part = col >> np.uint8(shift) if shift > 0 else col * np.uint8(1 << -shift) if shift < 0 else col.copy()
            part &= np.uint8(mask)
            out |= part
        out ^= np.uint8(flip)
        return out


def _runs_of_bits(bits: Sequence[int]) -> list[tuple[int, int, int]]:
    """(first bit position, lines, first line) of each stretch of consecutive bit positions."""
    out = []
    i = 0
    while i < len(bits):
        j = i + 1
        while j < len(bits) and bits[j] == bits[j - 1] + 1 and j - i < 64 - (bits[i] & 7):
            j += 1
        out.append((bits[i], j - i, i))
        i = j
    return out


def _gather_vector(buf: np.ndarray, n: int, unitsize: int, bits: Sequence[int]) -> np.ndarray:
    """uint64 per sample: line i of the vector is sample bit ``bits[i]``. Consecutive bit
    positions are read together as one little-endian word straight from the packed samples
    (a strided view, no per-line unpacking); ``buf`` holds n samples plus 8 spare bytes.
    A stretch ends where one 8-byte read starting at its first bit's byte would not cover it."""
    if n == 0:
        return np.zeros(0, np.uint64)      # (a view at a byte past the 8 spare ones does not fit)
    out = None
    for pos, width, line in _runs_of_bits(bits):
        word = np.ndarray((n,), dtype="<u8", buffer=buf, offset=pos >> 3, strides=(unitsize,))
        part = word >> np.uint64(pos & 7) if pos & 7 else word.copy()
        if width < 64:
            part &= np.uint64((1 << width) - 1)
        if line:
            part <<= np.uint64(line)
        if out is None:
            out = part
        else:
            out |= part
    return out.astype(np.uint64, copy=False) if out is not None else np.zeros(n, np.uint64)


def read_sr(path) -> Capture:
    """Open a sigrok session file as a (streamed) Capture."""
    path = os.fspath(path)
    lay = _SrLayout(path)
    if not lay.names:
        raise PcitraceError("the capture has no enabled logic channels", path=path,
                            where="zip member metadata",
                            fix="enable at least one logic channel when capturing")
    tb = _sr_timebase(lay, lay.own, path)
    reader = _SrReader(path, lay)
    metadata = {"format": "sr", "unitsize": lay.unitsize, "sr_version": lay.version,
                "chunk_members": len(lay.chunks)}
    if lay.analog:
        metadata["analog_channels_ignored"] = lay.analog
    metadata.update(lay.own.metadata)
    if lay.cut is not None:
        metadata["warnings"] = [_cut_warning(lay, tb)]
    cap = Capture([ChannelInfo(n, 1) for n in lay.names], tb, lay.num_samples, reader.source,
                  metadata=metadata, path=path, field_source=reader.field_source,
                  shared_reads=lambda: _SrShared(reader))
    reader.capture = cap
    return cap


def _cut_warning(lay: _SrLayout, tb: TimeBase) -> str:
    n = lay.num_samples
    at = f"after sample {n - 1} ({tb.time_ps(n - 1) / 1e6:.3f} us)" if n else "before the first sample"
    return (f"the zip directory is unreadable, read from the members' own headers ({lay.cut}): "
            f"the data stops {at}, {len(lay.chunks)} whole chunk(s)")


def _sr_timebase(lay: _SrLayout, own: OwnMeta, path: str) -> TimeBase:
    """The capture's time base: a state capture's clock (or sample timestamps), a timing
    capture's samplerate; the pcitrace metadata's figures first."""
    start_ps = own.start_ps
    if own.mode == "state":
        ts = lay.timestamps
        if ts is not None and len(ts) != lay.num_samples:
            raise PcitraceError(f"{len(ts)} sample timestamps for {lay.num_samples} samples",
                                path=path, where=f"zip member {TIMESTAMPS_MEMBER}",
                                fix="re-export the capture; it was modified after writing")
        clock = own.clock_hz or lay.samplerate
        if ts is None and not clock:
            raise PcitraceError("state capture without a clock frequency", path=path,
                                where="metadata samplerate",
                                fix="set samplerate to the bus clock in the metadata")
        return TimeBase.state(clock_hz=clock, timestamps_ps=ts, start_ps=start_ps)
    rate = own.samplerate_hz or lay.samplerate
    if not rate:
        raise PcitraceError("no samplerate in the metadata", path=path,
                            where="metadata [device 1]",
                            fix='add e.g. "samplerate=100 MHz" to the metadata')
    return TimeBase.timing(rate, start_ps=start_ps)


class _SrReader:
    """The packed samples of one .sr file, read in blocks: as channels (``source``), as
    fields and clocked fields (``field_source``); ``session``: the streams of the active
    shared_reads(), by request (None outside one)."""

    def __init__(self, path: str, lay: _SrLayout):
        self.path = path
        self.chunks = lay.chunks
        self.unitsize = lay.unitsize
        self.bit_of = dict(zip(lay.names, lay.bits))
        self.session: dict | None = None
        self.capture: Capture | None = None     # what a damaged chunk's warning goes to

    def _damaged(self, member: str, first: int, n: int, reached: int, exc: Exception) -> None:
        """A chunk after the first one is damaged: the stream ends where the damage showed
        and the capture's warnings say so (the chunks before it are whole). A damaged first
        chunk leaves nothing to read: that is the error."""
        what = f"chunk {member!r} (samples {first}..{first + n - 1}) is corrupt ({exc})"
        if first == 0 or self.capture is None:
            # a CRC error shows only at the member's end: name the member's samples
            raise PcitraceError(what, path=self.path, where=f"zip member {member}",
                                fix="the capture is damaged or truncated; re-copy or re-export it")
        at = self.capture.timebase.time_ps(reached - 1) / 1e6
        text = (f"{what}: the data stops after sample {reached - 1} ({at:.3f} us)"
                + (f"; samples {first}..{reached - 1} came from the damaged chunk" if reached > first else ""))
        warnings = self.capture.metadata.setdefault("warnings", [])
        if text not in warnings:
            warnings.append(text)

    def raw_blocks(self, start: int, stop: int, chunk: int, whole: bool = True) -> Iterator[tuple[int, bytes]]:
        """(first sample, bytes of the packed samples) blocks covering [start, stop), each
        ``chunk`` samples long but the last: a block runs on into the next member, so
        consumers re-chunking to the same size never have to stitch pieces together.
        ``whole=False``: a block ends at its member's end too (no copy to join the pieces,
        for consumers that take blocks of any size)."""
        chunk = max(1, int(chunk))
        unitsize = self.unitsize
        acc: list[bytes] = []
        acc_n = 0
        acc_pos = start
        with _open_zip(self.path) as zf:
            for member, first, n in self.chunks:
                if first + n <= start:
                    continue
                if first >= stop:
                    break
                try:
                    with Member(zf, zf.getinfo(member)) as f:
                        pos = _skip_samples(f, first, start, chunk, unitsize)
                        end = min(first + n, stop)
                        while pos < end:
                            step = min(chunk - acc_n, end - pos)
                            buf = _read_exactly(f, step * unitsize)
                            pos += step
                            if acc_n == 0 and (step == chunk or not whole):
                                yield acc_pos, buf
                                acc_pos += step
                                continue
                            acc.append(buf)
                            acc_n += step
                            if acc_n == chunk:
                                yield acc_pos, b"".join(acc)
                                acc_pos += acc_n
                                acc, acc_n = [], 0
                except ZIP_ERRORS as exc:
                    self._damaged(member, first, n, acc_pos + acc_n, exc)
                    break
        if acc_n:
            yield acc_pos, b"".join(acc)

    def blocks(self, start: int, stop: int, chunk: int, whole: bool = True) -> Iterator[tuple[int, bytes]]:
        """raw_blocks, or inside a shared_reads() session a branch of the one stream that
        reads them for every reader making the same request."""
        session = self.session
        if session is None:
            return self.raw_blocks(start, stop, chunk, whole)
        key = (start, stop, chunk, whole)
        b = session["streams"].get(key)
        if b is None:
            # at most SHARED_BYTES of inflated blocks held for readers that fall behind
            b = session["streams"][key] = Broadcast(self.raw_blocks(*key), lambda: self.raw_blocks(*key),
                                                    max_items=max(2, SHARED_BYTES // max(chunk * self.unitsize, 1)))
            if session["sealed"]:
                b.seal()
        return b.branch()

    def source(self, names: Sequence[str], start: int, stop: int, chunk: int) -> Iterator[Chunk]:
        bit_of = self.bit_of
        for pos, data in self.blocks(start, stop, chunk):
            lines = _Lines(np.frombuffer(data, dtype=np.uint8).reshape(-1, self.unitsize))
            yield Chunk(pos, {nm: lines.bit(bit_of[nm]) for nm in names})

    def field_source(self, fields, start: int, stop: int, chunk: int, clock: str | None = None,
                     changes: LineCode | None = None) -> Iterator[Chunk]:
        bit_of, unitsize = self.bit_of, self.unitsize
        plan = {k: (v if isinstance(v, LineCode) else [bit_of[v]] if isinstance(v, str) else [bit_of[c] for c in v],
                    isinstance(v, str))
                for k, v in fields.items()}
        cb = bit_of[clock] if clock is not None else None
        prev = None
        prev_code = None
        # clocked fields come in any number per block: blocks need not be joined across members
        for pos, data in self.blocks(start, stop, chunk, whole=cb is None):
            raw = np.frombuffer(data, np.uint8).reshape(-1, unitsize)
            change_out = (np.zeros(0, np.int64), np.zeros(0, np.uint8))
            if changes is not None and len(raw):
                change_out, prev_code = _code_changes(raw, [bit_of[x] for x in changes.channels], changes,
                                                      prev_code, pos)
            if cb is not None:
                # only the samples at the clock's rising edges are unpacked: a timing capture
                # holds several samples per clock
                clk = (raw[:, cb >> 3] >> np.uint8(cb & 7)) & np.uint8(1)
                edges = rising_edges(clk, prev)
                prev = clk[-1] if len(clk) else prev
                raw = raw[edges]
            out = _unpack_fields(raw, unitsize, plan, bit_of)
            if cb is not None:
                out[EDGES] = edges + pos
            if changes is not None:
                out[CHANGES], out[FLIPS] = change_out
            yield Chunk(pos, out)


def _skip_samples(f, first: int, start: int, chunk: int, unitsize: int) -> int:
    """Read past the member's samples before ``start`` (members cannot seek cheaply: by
    reading, in bounded pieces); returns the sample the member is then at."""
    pos = first
    skip = max(0, start - first)
    while skip:
        step = min(skip, chunk)
        _read_exactly(f, step * unitsize)
        skip -= step
        pos += step
    return pos


def _read_exactly(f, size: int) -> bytes:
    got = f.read(size)
    if len(got) != size:
        raise EOFError("chunk shorter than its declared size")
    return got


def _code_changes(raw: np.ndarray, bits: list[int], changes: LineCode, prev_code, pos: int):
    """The samples of a block where the code of ``changes``' lines changes (from the block
    before's last code ``prev_code`` too) and which bits flip there: ((samples, flips), the
    block's last code)."""
    c = _Lines(raw).code(bits, changes.weights, changes.levels)
    at = np.flatnonzero(c[1:] != c[:-1]) + 1
    flips = c[at] ^ c[at - 1]
    if prev_code is not None and c[0] != prev_code:
        at = np.concatenate(([0], at))
        flips = np.concatenate(([c[0] ^ prev_code], flips))
    return (at + pos, flips), c[-1]


def _unpack_fields(raw: np.ndarray, unitsize: int, plan: dict, bit_of: dict) -> dict[str, np.ndarray]:
    """The planned fields of packed samples: a line's bits, a vector's value, or a LineCode."""
    n = len(raw)
    # 8 spare bytes: a word read at any byte of the last sample stays in the buffer
    buf = np.empty(n * unitsize + 8, np.uint8)
    buf[:n * unitsize] = raw.reshape(-1)
    buf[n * unitsize:] = 0
    lines = _Lines(buf[:n * unitsize].reshape(n, unitsize))
    out = {}
    for k, (bits, single) in plan.items():
        if isinstance(bits, LineCode):
            out[k] = lines.code([bit_of[c] for c in bits.channels], bits.weights, bits.levels)
        else:
            out[k] = lines.bit(bits[0]) if single else _gather_vector(buf, n, unitsize, bits)
    return out


class _SrShared(SharedReads):
    """A shared_reads() context of one .sr reader: the first one opens a session (one at a
    time; a nested one shares nothing), ``seal`` ends the joining of new readers."""

    def __init__(self, reader: _SrReader):
        self.reader = reader
        self.own = False                  # this context opened the session

    def __enter__(self):
        if self.reader.session is None:
            self.reader.session = {"streams": {}, "sealed": False}
            self.own = True
        return self

    def seal(self):
        if self.own:
            self.reader.session["sealed"] = True
            for b in self.reader.session["streams"].values():
                b.seal()

    def close(self):
        if self.own:
            self.reader.session, self.own = None, False


# -- writing -------------------------------------------------------------------------------
#
# A chunk member is packed (its sample bytes made from the channels' arrays) and deflated in
# a worker thread while the next chunk is read: numpy's loops, ISA-L and zlib release the GIL,
# so the cores share the work. Members are written in order whatever thread finished first,
# so the same capture always gives the same bytes (with the same deflate library).

WRITE_THREADS_MAX = 4


def _byte_plan(lines: list[tuple[str, str, int]], unitsize: int) -> list[list[tuple[str, int, int, int]]]:
    """Per sample byte: (source, first bit, bits, bit position in the byte) of each run of
    its lines that come from one source in consecutive bits (the reference packer's plan)."""
    plan: list[list[tuple[str, int, int, int]]] = [[] for _ in range(unitsize)]
    for pos, (_, src, bit) in enumerate(lines):
        groups = plan[pos >> 3]
        if groups:
            g_src, g_bit, g_n, g_at = groups[-1]
            if g_src == src and g_bit + g_n == bit and g_at + g_n == (pos & 7):
                groups[-1] = (src, g_bit, g_n + 1, g_at)
                continue
        groups.append((src, bit, 1, pos & 7))
    return plan


def _pack_reference(plan, data: dict[str, np.ndarray], n: int, unitsize: int) -> np.ndarray:
    """The sample bytes built one sample byte at a time (what :class:`_Packer` is tested and
    measured against)."""
    packed = np.empty((n, unitsize), dtype=np.uint8)
    for byte, groups in enumerate(plan):
        col = np.zeros(n, np.uint8)
        for src, bit, count, at in groups:
            arr = _unsigned(data[src])
            t = arr.dtype.type
            part = (arr >> t(bit)) if bit else arr
            part = part & t((1 << count) - 1)
            col |= (part * t(1 << at) if at else part).astype(np.uint8)
        packed[:, byte] = col
    return packed


def _unsigned(a) -> np.ndarray:
    """A channel's array as native unsigned integers holding the same bits."""
    a = np.asarray(a)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype.kind == "b":
        return a.view(np.uint8)
    if a.dtype.kind == "i":
        return a.view(np.dtype(f"u{a.dtype.itemsize}"))
    if a.dtype.kind != "u":
        return a.astype(np.uint64)
    return a


class _Packer:
    """The sample bytes of a chunk, ``(n, unitsize)`` uint8.

    A run of lines taken from one source in consecutive bits is moved as one value, shifted
    to where it starts in its sample byte (a 64-bit vector: one shift, mask and multiply for
    all of its bytes, where building the sample byte by byte shifted and masked the whole
    vector again for every byte). A run is cut where it would outgrow its source's integer
    type once shifted. A value spanning several sample bytes that no other run reaches is
    stored as one (unaligned, strided) 2-, 4- or 8-byte word: a strided store costs per
    element, not per byte, so this is about 8x faster than storing its bytes one by one.
    Every other sample byte is the OR of the bytes of the values reaching into it (or a copy
    of the only one), stored after the words, so it also mends a byte a word overwrote."""

    def __init__(self, lines: list[tuple[str, str, int]], unitsize: int):
        self.lines = lines
        self.unitsize = unitsize
        self.sources = list(dict.fromkeys(src for _, src, _ in lines))
        self._plans: dict[tuple[int, ...], tuple] = {}

    def _plan(self, sizes: dict[str, int]):
        runs: list[list] = []             # [source, first bit, bits, first line's position]
        for pos, (_, src, bit) in enumerate(self.lines):
            if runs:
                r = runs[-1]
                if (r[0] == src and r[1] + r[2] == bit and r[3] + r[2] == pos
                        and (r[3] & 7) + r[2] < 8 * sizes[src]):
                    r[2] += 1
                    continue
            runs.append([src, bit, 1, pos])
        into: list[list[tuple[int, int]]] = [[] for _ in range(self.unitsize)]  # (run, its byte)
        reach = []
        for i, (src, _, count, pos) in enumerate(runs):
            nbytes = ((pos & 7) + count + 7) // 8
            reach.append(nbytes)
            for j in range(nbytes):
                into[(pos >> 3) + j].append((i, j))

        def owned(words: dict[int, int]) -> list[int]:
            """Sample bytes that only run words[byte] reaches and only its word covers."""
            cover = [0] * self.unitsize
            for i, w in words.items():
                for k in range(runs[i][3] >> 3, (runs[i][3] >> 3) + w):
                    cover[k] += 1
            return [k for k, r in enumerate(into) if len(r) == 1 and r[0][0] in words and cover[k] == 1]

        words = {}                        # run -> bytes of the word that stores it
        for i, (src, _, _, pos) in enumerate(runs):
            w = next((w for w in (2, 4, 8) if w >= reach[i]), 0)
            if reach[i] > 1 and w <= sizes[src] and (pos >> 3) + w <= self.unitsize:
                words[i] = w
        own = owned(words)
        # a word storing fewer than two bytes of its own saves nothing
        words = {i: w for i, w in words.items() if sum(into[k][0][0] == i for k in own) >= 2}
        own = set(owned(words))
        rest = [(k, r) for k, r in enumerate(into) if k not in own]
        return [tuple(r) for r in runs], words, rest

    def __call__(self, data: dict[str, np.ndarray], n: int) -> np.ndarray:
        arrays = {s: _unsigned(data[s]) for s in self.sources}
        key = tuple(arrays[s].dtype.itemsize for s in self.sources)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(dict(zip(self.sources, key)))
        runs, words, rest = plan
        packed = np.empty((n, self.unitsize), np.uint8)
        if not n:
            return packed
        values, parts = [], []
        for i, (src, bit, count, pos) in enumerate(runs):
            a = arrays[src]
            size = a.dtype.itemsize
            v = np.right_shift(a, bit) if bit else None
            if count < 8 * size - bit:
                v = np.bitwise_and(a if v is None else v, (1 << count) - 1, out=v)
            if pos & 7:
                # a multiply, not a left shift: numpy's uint8 left shift is not vectorised (10x slower)
                v = np.multiply(a if v is None else v, 1 << (pos & 7), out=v)
            if v is None:
                v = np.ascontiguousarray(a)
            w = words.get(i)
            if w:
                if w < size:
                    v = v.astype(np.dtype(f"u{w}"))
                word = np.ndarray((n,), np.dtype(f"<u{w}"), packed, pos >> 3, (self.unitsize,))
                np.copyto(word, v, casting="unsafe")
                size = w
            values.append(v)
            # byte j of the value, whatever the machine's byte order
            parts.append(v.astype(v.dtype.newbyteorder("<"), copy=False).view(np.uint8).reshape(n, size))
        col = np.empty(n, np.uint8)
        tmp = np.empty(n, np.uint8)
        for k, reach in rest:
            if len(reach) == 1:
                i, j = reach[0]
                packed[:, k] = parts[i][:, j]
                continue
            for m, (i, j) in enumerate(reach):
                # a strided operand slows a ufunc more than copying it out first does, and the
                # low byte is a plain truncating copy
                out = col if m == 0 else tmp
                if values[i].dtype.itemsize == 1:
                    out = values[i]
                elif j == 0:
                    np.copyto(out, values[i], casting="unsafe")
                else:
                    np.copyto(out, parts[i][:, j])
                if m == 0:
                    if out is not col:
                        np.copyto(col, out)
                else:
                    np.bitwise_or(col, out, out=col)
            packed[:, k] = col
        return packed


def bit_channels(capture: Capture) -> list[tuple[str, str, int]]:
    """(sr channel name, source channel, bit) for every 1-bit line the .sr will hold."""
    out = []
    for ch in capture.channels:
        if ch.width == 1:
            out.append((ch.name, ch.name, 0))
        else:
            out.extend((f"{ch.name}{i}", ch.name, i) for i in range(ch.width))
    names = [o[0] for o in out]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise PcitraceError(f"splitting vectors into bits gives duplicate channel names {dup}",
                            path=capture.path,
                            fix="rename the channels so that X0..Xn of a vector X do not clash")
    return out


def _jsonable(meta: dict) -> dict:
    out = {}
    for k, v in meta.items():
        try:
            json.dumps(v)
        except (TypeError, ValueError):
            continue
        out[str(k)] = v
    return out


def write_sr(capture: Capture, path, *, chunk_bytes: int = WRITE_CHUNK_BYTES, force_zip64: bool = False,
             reference: bool = False) -> None:
    """Write ``capture`` as a sigrok session file (atomic; 1-bit channels only).

    ``force_zip64``: ZIP64 records for every member whatever its size (to test readers).
    ``reference``: the plain path the fast one is tested and measured against (``zipfile`` with
    zlib level 6, sample bytes built one at a time, one thread); same content, other bytes."""
    lines = bit_channels(capture)
    if not lines:
        raise PcitraceError("the capture has no channels to write", path=capture.path,
                            fix="select at least one channel")
    for name, _, _ in lines:
        if not name.strip() or name != name.strip() or any(c in name for c in "\r\n"):
            raise PcitraceError(f"channel name {name!r} cannot be stored in .sr metadata "
                                "(empty, line breaks or surrounding blanks)", path=capture.path,
                                fix="rename the channel")
    nbits = len(lines)
    unitsize = max(1, (nbits + 7) // 8)
    tb = capture.timebase
    extra: dict = {"format": EXTRA_FORMAT, "mode": tb.mode, "start_ps": int(tb.start_ps),
                   "metadata": _jsonable({k: v for k, v in capture.metadata.items()
                                          if k not in ("format", "unitsize", "sr_version",
                                                       "chunk_members", "changes",
                                                       "timescale_ps", "warnings")})}
    vectors = {c.name: c.width for c in capture.channels if c.width > 1}
    if vectors:
        extra["vectors"] = vectors
    if tb.mode == "timing":
        if tb.event_timed:
            raise PcitraceError(
                "the capture is sampled at its value changes (a VCD), which .sr cannot hold",
                path=capture.path, fix="use clocked_view (convert --clock CHANNEL) or resample "
                                       "it (convert --samplerate HZ) first")
        rate = tb.samplerate_hz
        extra["samplerate_hz"] = rate
    else:
        if tb.clock_hz:
            rate = tb.clock_hz
            extra["clock_hz"] = tb.clock_hz
        else:
            ts = np.asarray(tb.timestamps_ps, dtype=np.int64)
            period = np.median(np.diff(ts)) if len(ts) > 1 else 0
            rate = 1e12 / period if period > 0 else 1.0
            extra["clock_hz"] = None
        if tb.timestamps_ps is not None:
            extra["timestamps"] = True
    srate = max(1, int(round(rate)))

    meta = ["[global]", "sigrok version=0.5.2", "", "[device 1]", "capturefile=logic-1",
            f"total probes={nbits}", f"samplerate={format_samplerate(srate)}",
            "total analog=0"]
    meta += [f"probe{i + 1}={name}" for i, (name, _, _) in enumerate(lines)]
    meta += [f"unitsize={unitsize}", ""]
    head = [("version", b"2"), ("metadata", "\n".join(meta).encode())]
    tail = []
    if tb.mode == "state" and tb.timestamps_ps is not None:
        bio = io.BytesIO()
        np.save(bio, np.asarray(tb.timestamps_ps, dtype=np.int64), allow_pickle=False)
        tail.append((TIMESTAMPS_MEMBER, bio.getvalue()))
    tail.append((EXTRA_MEMBER, json.dumps(extra, indent=1, sort_keys=True).encode()))

    sources = sorted({src for _, src, _ in lines}, key=capture.channel_names.index)
    chunks = capture.iter_chunks(sources, chunk_samples=max(1, chunk_bytes // unitsize))
    if reference:
        _write_zipfile(path, head, tail, chunks, _byte_plan(lines, unitsize), unitsize)
    else:
        _write_threaded(path, head, tail, chunks, _Packer(lines, unitsize), force_zip64)


def _workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, WRITE_THREADS_MAX))


def _pack_deflate(pack: _Packer, data: dict[str, np.ndarray], n: int) -> tuple[int, int, bytes]:
    return deflate(pack(data, n))


class _Output:
    """The file being written: a failed write (a full disk, a file size limit) is the
    user's to fix, not a traceback. Errors of the capture's source pass unchanged."""

    def __init__(self, fp, path):
        self._fp = fp
        self._path = path

    def _failed(self, exc: OSError) -> PcitraceError:
        return PcitraceError(f"cannot write the capture: {exc.strerror or exc}", path=self._path,
                             fix="free space on that disk or choose another output path")

    def write(self, data) -> int:
        try:
            return self._fp.write(data)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self._fp.flush()
        except OSError as exc:
            raise self._failed(exc) from None


def _write_threaded(path, head, tail, chunks, pack: _Packer, force_zip64: bool) -> None:
    workers = _workers()
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fp:
            zw = ZipWriter(_Output(fp, path), force_zip64=force_zip64)
            for name, data in head:
                zw.add(name, data)
            members = 0
            # chunks held at once: one per worker and the next one read (a chunk from a .sr
            # source is every line unpacked, ~8x its packed size), so memory stays bounded
            ahead = workers + 1
            pending: collections.deque = collections.deque()
            pool = ThreadPoolExecutor(workers, thread_name_prefix="pcitrace-write-sr")
            try:
                for ch in chunks:
                    pending.append(pool.submit(_pack_deflate, pack, ch.data, ch.length))
                    if len(pending) >= ahead:
                        members += 1
                        zw.add_deflated(f"logic-1-{members}", *pending.popleft().result())
                while pending:
                    members += 1
                    zw.add_deflated(f"logic-1-{members}", *pending.popleft().result())
            finally:
                # on a failure the workers stop before the temporary file is removed
                pool.shutdown(wait=True, cancel_futures=True)
            for name, data in tail:
                zw.add(name, data)
            zw.finish()


def _write_zipfile(path, head, tail, chunks, plan, unitsize: int) -> None:
    def member(name: str) -> zipfile.ZipInfo:
        # A fixed timestamp: the same capture always gives the same bytes.
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        return info

    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for name, data in head:
                zf.writestr(member(name), data)
            for k, ch in enumerate(chunks, 1):
                packed = _pack_reference(plan, ch.data, ch.length, unitsize)
                with zf.open(member(f"logic-1-{k}"), "w", force_zip64=packed.nbytes > (1 << 31)) as f:
                    f.write(packed.tobytes())
            for name, data in tail:
                zf.writestr(member(name), data)


def is_sr(path) -> bool:
    return Path(path).suffix.lower() == ".sr"

"""A zip writer for members deflated beforehand (the sample chunks of a .sr written in parallel).

Why not ``zipfile``: it deflates a member itself, with zlib, in the thread that writes it, and
has no public way to add a member whose data is already compressed. Writing a wide .sr is
mostly deflating (zlib level 6: about 85 MB/s here; ISA-L, the ``isal`` package: about
1 GB/s at level 2), and the members are independent, so they are deflated in worker threads
(ISA-L and zlib release the GIL) while the file is written in order here. What is written is
plain PKZIP as APPNOTE 6.3 describes it and ``zipfile`` itself writes: a local header with the
CRC-32 and both sizes (no data descriptor: everything is known before the header is
written), the data, then the central directory and the end record; ZIP64 extra fields and
end records where a size, an offset or the member count does not fit (``force_zip64`` writes
them for every member, so readers' ZIP64 paths can be tested on small files). Timestamps are
fixed (1980-01-01), so the same members always give the same bytes.

``deflate`` gives a member's raw deflate stream, CRC-32 and size; the bytes depend on the
library (ISA-L or zlib) and its level, the content never does.
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO

try:        # a compiled wheel (a dependency): where none exists, zlib does the same work more slowly
    from isal import isal_zlib as _isal
except ImportError:   # pragma: no cover - the wheel is a dependency
    _isal = None

# Measured on a 10 M-clock 170-line state capture (210 MB of samples): ISA-L level 2 deflates
# 1.0 GB/s to 57.9 MB, level 3 0.41 GB/s to 57.3 MB, level 1 the speed of 2 to 58.1 MB;
# zlib level 6 (what zipfile writes by default) 86 MB/s to 56.6 MB, level 1 156 MB/s to 60.0 MB.
ISAL_LEVEL = 2
ZLIB_LEVEL = 1
DEFLATE = "isal" if _isal is not None else "zlib"

_LOCAL = struct.Struct("<4s5H3L2H")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")
_MAX16 = 0xFFFF
_MAX32 = 0xFFFFFFFF
_DEFLATED = 8
_VERSION = 20            # deflate
_VERSION64 = 45          # ZIP64
_UNIX = 3                # "made by" a Unix system: the external attributes are a file mode
_UTF8 = 0x800
_DOS_DATE = (0 << 9) | (1 << 5) | 1      # 1980-01-01
_DOS_TIME = 0
_MODE = 0o100644 << 16   # a regular file, rw-r--r--


def deflate(data) -> tuple[int, int, bytes]:
    """(CRC-32, size, raw deflate stream) of a bytes-like ``data``; releases the GIL."""
    if _isal is not None:
        return _isal.crc32(data), memoryview(data).nbytes, _isal.compress(data, ISAL_LEVEL, -15)
    c = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15)
    return zlib.crc32(data), memoryview(data).nbytes, c.compress(data) + c.flush()


class ZipWriter:
    """Members added in order to ``fp`` (a binary file at the archive's start); ``finish()``
    writes the directory. Without ``finish()`` the file is no zip: callers write into a
    temporary file that is dropped on failure."""

    def __init__(self, fp: BinaryIO, *, force_zip64: bool = False):
        self._fp = fp
        self._pos = 0
        self._force = force_zip64
        self._entries: list[tuple[bytes, int, int, int, int, int]] = []   # name, flags, crc, size, csize, offset
        self._names: set[str] = set()

    def add(self, name: str, data) -> None:
        """Deflate ``data`` here and add it."""
        self.add_deflated(name, *deflate(data))

    def add_deflated(self, name: str, crc: int, size: int, stream) -> None:
        """Add a member whose raw deflate ``stream`` of ``size`` bytes with CRC-32 ``crc`` was
        made elsewhere (``deflate``)."""
        if name in self._names:
            raise ValueError(f"duplicate zip member {name!r}")
        self._names.add(name)
        try:
            raw, flags = name.encode("ascii"), 0
        except UnicodeEncodeError:
            raw, flags = name.encode("utf-8"), _UTF8
        csize = memoryview(stream).nbytes
        zip64 = self._force or size >= _MAX32 or csize >= _MAX32
        if zip64:
            # the local header's ZIP64 field holds both sizes, always (APPNOTE 4.5.3)
            extra = struct.pack("<2H2Q", 1, 16, size, csize)
            head = _LOCAL.pack(b"PK\x03\x04", _VERSION64, flags, _DEFLATED, _DOS_TIME, _DOS_DATE,
                               crc, _MAX32, _MAX32, len(raw), len(extra))
        else:
            extra = b""
            head = _LOCAL.pack(b"PK\x03\x04", _VERSION, flags, _DEFLATED, _DOS_TIME, _DOS_DATE,
                               crc, csize, size, len(raw), 0)
        self._entries.append((raw, flags, crc, size, csize, self._pos))
        self._write(head + raw + extra)
        self._write(stream)

    def finish(self) -> None:
        """Write the central directory and the end records."""
        start = self._pos
        for raw, flags, crc, size, csize, offset in self._entries:
            # the central ZIP64 field holds only what its header field cannot, in this order
            big = [v for v in (size, csize, offset) if self._force or v >= _MAX32]
            extra = struct.pack(f"<2H{len(big)}Q", 1, 8 * len(big), *big) if big else b""
            version = _VERSION64 if big else _VERSION
            head = _CENTRAL.pack(b"PK\x01\x02", (_UNIX << 8) | version, version, flags, _DEFLATED,
                                 _DOS_TIME, _DOS_DATE, crc,
                                 _MAX32 if self._force or csize >= _MAX32 else csize,
                                 _MAX32 if self._force or size >= _MAX32 else size,
                                 len(raw), len(extra), 0, 0, 0, _MODE,
                                 _MAX32 if self._force or offset >= _MAX32 else offset)
            self._write(head + raw + extra)
        count, length = len(self._entries), self._pos - start
        if self._force or count >= _MAX16 or length >= _MAX32 or start >= _MAX32:
            end64 = self._pos
            self._write(_END64.pack(b"PK\x06\x06", _END64.size - 12, (_UNIX << 8) | _VERSION64,
                                    _VERSION64, 0, 0, count, count, length, start))
            self._write(_LOCATOR64.pack(b"PK\x06\x07", 0, end64, 1))
            # the classic record keeps what fits; a field that does not says "see ZIP64"
            if self._force:
                count, length, start = _MAX16, _MAX32, _MAX32
            count, length, start = min(count, _MAX16), min(length, _MAX32), min(start, _MAX32)
        self._write(_END.pack(b"PK\x05\x06", 0, 0, count, count, length, start, 0))
        self._fp.flush()

    def _write(self, data) -> None:
        self._fp.write(data)
        self._pos += memoryview(data).nbytes

"""Streaming reads of deflated zip members (the sample chunks of a .sr) through a faster inflate.

A .sr is a zip of deflated sample chunks. For a wide capture most of the time of reading it
goes to inflating them and to their CRC-32: zlib 1.2 as Python ships it inflates about
0.5 GB/s here; ISA-L (the ``isal`` package, a maintained binding of Intel's library) inflates
the same stream 2-2.5x faster and checksums it 5x faster. ``zipfile`` reads the central
directory as usual; only a member's data goes through :class:`Member`, which checks what
``zipfile`` checks (local header signature, the declared sizes, the CRC-32 at the end) and
raises the same exceptions. Members stored or compressed in other ways, or encrypted, are
read by ``zipfile`` itself.
"""

from __future__ import annotations

import lzma
import struct
import zipfile
import zlib

try:        # a compiled wheel: where none exists, zlib does the same work more slowly
    from isal import isal_zlib as _inflate
    INFLATE = "isal"
except ImportError:   # pragma: no cover - the wheel is a dependency
    _inflate = zlib
    INFLATE = "zlib"

_LOCAL = struct.Struct("<4s5H3L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_PIECE = 1 << 20            # compressed bytes handed to the inflater at a time
ERRORS = (zipfile.BadZipFile, zlib.error, _inflate.error, lzma.LZMAError, EOFError, OSError)
_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def check(info: zipfile.ZipInfo) -> None:
    """A member zipfile cannot read (encrypted, or compressed some other way) as the same
    error a damaged one gives, naming what is wrong."""
    if info.flag_bits & 0x1:
        raise zipfile.BadZipFile(f"member {info.filename!r} is encrypted")
    if info.flag_bits & 0x20:          # zipfile raises NotImplementedError on it (long fuzz run, seed 216)
        raise zipfile.BadZipFile(f"member {info.filename!r} holds compressed patched data (flag bit 5)")
    if info.compress_type not in _METHODS:
        raise zipfile.BadZipFile(f"member {info.filename!r} uses compression method {info.compress_type}, "
                                 "which no sigrok program writes")


class Member:
    """A member's uncompressed bytes, read in order: ``read(n)`` gives n bytes, fewer only at
    the member's end. Use as a context manager."""

    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo):
        self._info = info
        self._plain = None
        check(info)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            self._plain = zf.open(info)
            return
        self._fp = open(zf.filename, "rb")
        try:
            self._fp.seek(info.header_offset)
            head = self._fp.read(_LOCAL.size)
            if len(head) != _LOCAL.size or head[:4] != _LOCAL_SIGNATURE:
                raise zipfile.BadZipFile(f"bad local header of member {info.filename!r}")
            name_len, extra_len = _LOCAL.unpack(head)[-2:]
            self._fp.seek(name_len + extra_len, 1)
        except BaseException:
            self._fp.close()
            raise
        self._stored = info.compress_type == zipfile.ZIP_STORED
        self._left = info.compress_size          # compressed bytes not yet read
        self._out = 0                             # uncompressed bytes given
        self._crc = 0
        self._d = None if self._stored else _inflate.decompressobj(-15)
        self._done = self._checked = False

    def __enter__(self) -> "Member":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
        else:
            self._fp.close()

    def read(self, n: int) -> bytes:
        if self._plain is not None:
            return self._plain.read(n)
        parts, have = [], 0
        while have < n and not self._done:
            piece = self._next(n - have)
            if piece:
                parts.append(piece)
                have += len(piece)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if data:
            self._crc = _inflate.crc32(data, self._crc)
            self._out += len(data)
        if self._done or self._out >= self._info.file_size:
            # checked as soon as the declared bytes are out, as zipfile does: a reader that
            # takes exactly those never asks for the end
            while not self._done:
                if self._next(1 << 16):
                    raise zipfile.BadZipFile(f"member {self._info.filename!r} holds more than the "
                                             f"{self._info.file_size} bytes it declares")
            self._finish()
        return data

    def _next(self, want: int) -> bytes:
        if self._stored:
            take = min(want, self._left)
            got = self._fp.read(take)
            if len(got) != take:
                raise EOFError("member data ends before its declared size")
            self._left -= take
            if not self._left:
                self._done = True
            return got
        d = self._d
        if d.unconsumed_tail:
            return d.decompress(d.unconsumed_tail, want)
        # ISA-L takes in all the input it is given and holds back what exceeds max_length
        # (zlib leaves it in unconsumed_tail instead): drain that before reading more
        out = d.decompress(b"", want)
        if out:
            return out
        if self._left:
            comp = self._fp.read(min(self._left, _PIECE))
            if not comp:
                raise EOFError("member data ends before its declared size")
            self._left -= len(comp)
            return d.decompress(comp, want)
        self._done = True
        return d.flush()

    def _finish(self) -> None:
        if self._checked:
            return
        self._checked = True
        if self._d is not None and not self._d.eof:
            raise EOFError("compressed data ended before the end-of-stream marker")
        if self._out != self._info.file_size:
            raise zipfile.BadZipFile(f"member {self._info.filename!r} holds {self._out} bytes, "
                                     f"not the {self._info.file_size} it declares")
        if self._crc != self._info.CRC:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self._info.filename!r}")


# -- a zip cut short -----------------------------------------------------------------------
#
# A zip's directory is at its end, so a file cut anywhere loses all of it and zipfile reads
# nothing. The members before the cut are still whole, each behind its local header with its
# sizes and CRC-32 (sigrok and pcitrace write them there, not in a data descriptor):
# :func:`salvage` lists them by walking those headers from the start.

_ZIP64_EXTRA = 0x0001
_MAX32 = 0xFFFFFFFF


class SalvagedZip:
    """The whole members at the start of a zip whose directory is lost, read through
    :class:`Member` like a ``zipfile.ZipFile``'s (stored and deflated ones only)."""

    def __init__(self, filename: str, infos: list[zipfile.ZipInfo], stop: str):
        self.filename = filename
        self.filelist = infos
        self._by_name = {i.filename: i for i in infos}
        self.stop = stop                      # why the walk ended (where the file is cut)

    def namelist(self) -> list[str]:
        return [i.filename for i in self.filelist]

    def getinfo(self, name: str) -> zipfile.ZipInfo:
        return self._by_name[name]

    def open(self, info: zipfile.ZipInfo) -> Member:
        return Member(self, info)

    def close(self) -> None:
        pass

    def __enter__(self) -> "SalvagedZip":
        return self

    def __exit__(self, *exc) -> None:
        pass


def salvage(path) -> SalvagedZip:
    """The whole members before the cut of a zip with no readable directory."""
    infos: list[zipfile.ZipInfo] = []
    with open(path, "rb") as fp:
        size = fp.seek(0, 2)
        offset, stop = 0, "the file ends"
        while True:
            info, offset, stop = _local_member(fp, offset, size)
            if info is None:
                break
            infos.append(info)
    return SalvagedZip(str(path), infos, stop)


def _local_member(fp, offset: int, size: int) -> tuple[zipfile.ZipInfo | None, int, str]:
    """The member whose local header is at ``offset`` and the offset after it, if all of it
    is in the file, else (None, offset, why not)."""
    fp.seek(offset)
    head = fp.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != _LOCAL_SIGNATURE:
        return None, offset, f"no whole member at byte {offset}"
    _, _, flags, method, _, _, crc, csize, usize, name_len, extra_len = _LOCAL.unpack(head)
    name_raw, extra = fp.read(name_len), fp.read(extra_len)
    if len(name_raw) < name_len or len(extra) < extra_len:
        return None, offset, f"the header of the member at byte {offset} is cut at byte {size}"
    if flags & 0x9 or method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return None, offset, f"member at byte {offset} has no sizes in its header"   # (or is encrypted)
    if _MAX32 in (csize, usize):
        csize, usize = _zip64_sizes(extra, csize, usize)
    data_at = offset + _LOCAL.size + name_len + extra_len
    if data_at + csize > size:
        return None, offset, f"member {name_raw.decode('utf-8', 'replace')!r} is cut at byte {size}"
    info = zipfile.ZipInfo(name_raw.decode("utf-8" if flags & 0x800 else "cp437"))
    info.header_offset, info.compress_type, info.flag_bits = offset, method, flags
    info.compress_size, info.file_size, info.CRC = csize, usize, crc
    return info, data_at + csize, ""


def _zip64_sizes(extra: bytes, csize: int, usize: int) -> tuple[int, int]:
    at = 0
    while at + 4 <= len(extra):
        kind, n = struct.unpack_from("<HH", extra, at)
        if kind == _ZIP64_EXTRA and n >= 16 and at + 20 <= len(extra):
            return struct.unpack_from("<QQ", extra, at + 4)[::-1]
        at += 4 + n
    return csize, usize

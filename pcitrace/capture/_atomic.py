"""Atomic output: write beside the target, rename into place only when complete."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pcitrace.errors import PcitraceError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; on success rename it to ``path``.

    On any exception the temporary file is removed, so a half-written capture never appears
    under the requested name (and an existing file there is left untouched).
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise PcitraceError(f"the directory {parent} does not exist", path=target,
                            fix="create the directory or choose another output path")
    if target.is_dir():
        raise PcitraceError("the output path is a directory", path=target,
                            fix="give a file name inside it")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise PcitraceError(f"cannot write in {parent}: {exc.strerror}", path=target,
                            fix="choose a directory you can write to") from None
    os.close(fd)
    # mkstemp makes the file private (0600); give it the permissions open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    tmp_path = Path(tmp)
    try:
        try:
            yield tmp_path
        except OSError as exc:
            if not _is_write_failure(exc, tmp_path):
                raise
            raise PcitraceError(f"cannot write the output: {exc.strerror or exc}", path=target,
                                fix="free space on that disk or choose another output path") from None
        try:
            os.replace(tmp_path, target)
        except OSError as exc:
            raise PcitraceError(f"cannot write the output: {exc.strerror}", path=target,
                                fix="choose a path you can write to") from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


# What a write to the output meets on a full or limited disk, whatever file object it went through.
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def _is_write_failure(exc: OSError, tmp: Path) -> bool:
    """An OSError of writing the output (not, say, of reading an input while writing)."""
    return exc.errno in _WRITE_ERRNOS or (exc.filename is not None and os.fspath(exc.filename) == os.fspath(tmp))

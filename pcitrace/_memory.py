"""Process-wide memory policy for pcitrace's own processes (the CLI and the viewer).

Decoding, rendering and analysis make numpy temporaries of megabytes per chunk. By default
glibc serves blocks over 128 KiB (rising to at most 32 MiB as it adapts) with fresh mappings
and returns them to the kernel when freed, so the next chunk's temporaries fault fresh pages
in again; on virtual machines the first touch of a page can cost more than the work done on
it (a 2 M-clock decode: about 26 k page faults, 8 k with this policy, and 40 % less CPU
time). Blocks below 32 MiB are then served from the heap, which is trimmed only when more
than 256 MiB at its top are free: freed pages are reused, and a long-lived process (the
viewer, a report's pool workers) gives big leftovers back.

numpy also asks the kernel for transparent huge pages on every array of 4 MiB and more
(madvise); where huge pages are "madvise" only, as on the VMs pcitrace is measured on, each
2 MiB fault then zeroes (and may first compact) a whole huge page. That pays where arrays are
written once and kept (a decode's records: a 10 M-clock decode takes 0.26 s with huge pages
and 0.32 s without) and costs where gigabytes of temporaries are filled and dropped (filling
1.6 GB of fresh arrays: 2.5 s of system time with them, 0.8 s without), so only the simulator
turns the request off (``no_huge_pages``).

Set only by processes pcitrace starts (a library call must not change its host's malloc).
"""

from __future__ import annotations

import platform

_done: bool | None = None
TRIM_BYTES = 256 << 20

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Apply the policy once; True when glibc took it (other C libraries: nothing happens)."""
    global _done
    if _done is None:
        _done = False
        if platform.libc_ver()[0] != "glibc":
            return False
        try:
            import ctypes

            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError, TypeError):
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        # 32 MiB is glibc's ceiling for the mmap threshold on 64-bit systems
        _done = bool(mallopt(M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
    return _done


def no_huge_pages() -> None:
    """numpy stops asking for transparent huge pages (for the simulator's processes)."""
    try:       # numpy >= 2 (numpy.core before): a private switch, hence the guard
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        return
    _set_madvise_hugepage(False)

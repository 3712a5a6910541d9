"""The bottom layer: every record pcitrace hands from one stage to the next, and how records
are written out.

- ``RECORD_DTYPE``: one PCI / PCI-X transaction (fields from decoders/pci/lists.py, meanings in
  docs/records.md); ``WORD_DTYPE``: one data word per completed data phase; ``FINDING_DTYPE``:
  a protocol finding; ``FRAME_DTYPE``: one Ethernet frame seen by a probe
  (decoders/gbe_probe/lists.py).
- ``BusSummary``: what decoding learnt about one bus and what analysis needs to know of it.
- ``to_csv`` / ``to_jsonl`` / ``write_csv`` / ``write_jsonl``: the one serialiser of any of
  these arrays.

The decoder facts come from the sigrok decoders' own ``lists.py`` files (executed here, since
libsigrokdecode loads those packages on its own and they cannot import pcitrace): one copy of
every table.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

import pcitrace.sigrok_decoders as _decoders

DECODERS_DIR = Path(_decoders.__file__).resolve().parent


def _load_lists(package: str):
    spec = importlib.util.spec_from_file_location(f"pcitrace._{package}_lists", DECODERS_DIR / package / "lists.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PCI_LISTS = _load_lists("pci")
GBE_LISTS = _load_lists("gbe_probe")

RECORD_FIELDS: tuple[tuple[str, str], ...] = PCI_LISTS.RECORD_FIELDS
FRAME_FIELDS: tuple[tuple[str, str], ...] = GBE_LISTS.FRAME_FIELDS

_STRING_WIDTH = {"bus": 24, "command": 24, "devsel": 12, "termination": 24}
_KIND_DTYPE = {"i": np.int64, "u": np.uint64, "b": np.bool_}


def _dtype(fields, string_width: Callable[[str], int]) -> np.dtype:
    return np.dtype([(name, f"U{string_width(name)}" if kind == "s" else _KIND_DTYPE[kind])
                     for name, kind in fields])


# Strings are fixed-width unicode so a record array is one contiguous block; the widths fit
# every name in the decoders' lists.
RECORD_DTYPE = _dtype(RECORD_FIELDS, _STRING_WIDTH.__getitem__)
FIELD_NAMES: tuple[str, ...] = tuple(n for n, _ in RECORD_FIELDS)

# One data word per completed data phase; `record` indexes the record array.
WORD_DTYPE = np.dtype([("record", np.int64), ("time_ps", np.int64), ("value", np.uint64),
                       ("byte_enables", np.uint8)])

FINDING_DTYPE = np.dtype([("time_ps", np.int64), ("bus", "U24"), ("kind", "U32"), ("message", "U160")])

FRAME_DTYPE = _dtype(FRAME_FIELDS, lambda name: 24)
FRAME_FIELD_NAMES: tuple[str, ...] = tuple(n for n, _ in FRAME_FIELDS)


# -- commands ------------------------------------------------------------------------------

# Short command names for narrow displays (the viewer's labels and filters)
COMMAND_SHORT_NAMES = {
    "mem_read": "MemRd", "mem_write": "MemWr", "mem_read_multiple": "MemRdMul",
    "mem_read_line": "MemRdLine", "mem_write_invalidate": "MemWrInv", "io_read": "IORd",
    "io_write": "IOWr", "config_read": "CfgRd", "config_write": "CfgWr",
    "split_completion": "SplitCpl", "mem_read_block": "MemRdBlk", "mem_write_block": "MemWrBlk",
    "mem_read_dword": "MemRdDW", "mem_read_block_alias": "MemRdBlk*",
    "mem_write_block_alias": "MemWrBlk*", "dac": "DAC", "int_ack": "IntAck",
    "special": "Special", "device_id_message": "DevIdMsg", PCI_LISTS.COMMAND_UNKNOWN: "Txn",
}

# Which way a command moves data: READ = from the target to the initiator (the completer's
# split completion carries read data to the requester), WRITE = from the initiator
READ_COMMANDS = frozenset({"mem_read", "mem_read_multiple", "mem_read_line", "io_read", "config_read",
                           "mem_read_dword", "mem_read_block", "mem_read_block_alias", "int_ack",
                           "split_completion"})
WRITE_COMMANDS = frozenset({"mem_write", "mem_write_invalidate", "io_write", "config_write",
                            "mem_write_block", "mem_write_block_alias", "special", "device_id_message"})


def short_command(name: str) -> str:
    """The short display name of a command (the name itself when it has none)."""
    return COMMAND_SHORT_NAMES.get(name, name)


# -- bus summary ---------------------------------------------------------------------------

@dataclasses.dataclass
class BusSummary:
    """One bus of a decoded capture: what the profile says of it and what decoding measured.

    The analyser takes it as is (``with_clock`` fills a missing clock rate first)."""

    name: str
    kind: str = "pci"               # a pcitrace.buses kind: 'pci' | 'pcix' | 'gbe_probe'
    mode: str = "pci"               # 'pci' | 'pcix'
    width: int = 32
    clock_hz: float | None = None   # from the profile, else measured from the clock times
    clocks: int = 0                 # bus clocks in the capture
    start_ps: int = 0
    end_ps: int = 0
    # clocks with FRAME# or IRDY# asserted, counted on the bus itself (DOMAIN.md's busy clock):
    # the records' clocks plus IRDY# asserted outside any transaction (a protocol violation)
    busy_clocks: int | None = None
    bars: tuple[tuple[int, int], ...] = ()   # the NIC's BAR address ranges
    have_ad: bool | None = None              # AD captured (None: not known, judge by the records)
    have_cbe: bool | None = None             # C/BE# captured
    gnt: str | None = None                   # the signal carrying the NIC's GNT#
    req: str | None = None                   # ... and its REQ#
    send_bus: str | None = None              # a probed link: the bus whose NIC sends, if the profile says
    recv_bus: str | None = None              # ... and the one whose NIC receives
    measured_clock_hz: float | None = None   # the clock rate the capture shows (clock_hz may be the profile's)
    max_burst_bytes: int | None = None       # the profile's hints about the NIC: it ends its own bursts every N bytes
    descriptor_bytes: int | None = None      # ... and one DMA descriptor's size

    def with_clock(self) -> "BusSummary":
        """This summary with a clock rate for the analyser: measured from the time span when
        the profile gave none (33 MHz when even that is unknown)."""
        if self.clock_hz:
            return self
        span = int(self.end_ps) - int(self.start_ps)
        clock_hz = 1e12 * max(int(self.clocks) - 1, 1) / span if span > 0 else 33e6
        return dataclasses.replace(self, clock_hz=float(clock_hz))

    @property
    def period_ps(self) -> float:
        return 1e12 / self.clock_hz

    @property
    def duration_ps(self) -> float:
        return self.clocks * self.period_ps


# -- building and comparing ----------------------------------------------------------------

def empty_records(n: int = 0) -> np.ndarray:
    return np.zeros(n, RECORD_DTYPE)


def records_from_dicts(rows: Iterable[Mapping]) -> np.ndarray:
    """Build a record array from dicts with the record keys (extra keys are ignored)."""
    rows = list(rows)
    out = empty_records(len(rows))
    for i, row in enumerate(rows):
        for name in FIELD_NAMES:
            if name in row:
                out[name][i] = row[name]
    return out


def record_to_dict(rec: np.void) -> dict:
    """A JSON-ready dict of one record (python ints / bools / strs)."""
    return dict(zip(rec.dtype.names, rec.tolist()))


def records_from_jsonl(text: str) -> np.ndarray:
    return records_from_dicts(json.loads(line) for line in text.splitlines() if line.strip())


def diff_records(a: np.ndarray, b: np.ndarray, ignore: Iterable[str] = ()) -> list[str]:
    """Human-readable field-by-field differences between two record arrays (empty = equal)."""
    ignore = set(ignore)
    out = []
    if len(a) != len(b):
        out.append(f"{len(a)} records vs {len(b)} records")
    for i in range(min(len(a), len(b))):
        for name in FIELD_NAMES:
            if name in ignore:
                continue
            if a[name][i] != b[name][i]:
                out.append(f"record {i} (start {int(a['start_ps'][i])} ps): {name} {a[name][i]!r} != {b[name][i]!r}")
        if len(out) > 50:
            out.append("...")
            break
    return out


# -- the serialiser ------------------------------------------------------------------------

def rows_of(arr: np.ndarray, names: Iterable[str] | None = None,
            formats: Mapping[str, Callable] | None = None) -> Iterable[tuple]:
    """The rows of a structured array as tuples of Python values, column by column (fast);
    ``formats[name]`` turns that column's values into what is written."""
    names = tuple(arr.dtype.names if names is None else names)
    formats = formats or {}
    cols = []
    for n in names:
        col = arr[n].tolist()
        cols.append([formats[n](v) for v in col] if n in formats else col)
    return zip(*cols) if cols else iter(())


def write_csv(fh, parts: Iterable[np.ndarray], names: Iterable[str], *, formats: Mapping[str, Callable] | None = None,
              lineterminator: str = "\n") -> None:
    """A header of ``names`` and one row per item of each array of ``parts`` (arrays written
    as they come, so a stream of chunks never has to be held at once)."""
    names = tuple(names)
    w = csv.writer(fh, lineterminator=lineterminator)
    w.writerow(names)
    for arr in parts:
        w.writerows(rows_of(arr, names, formats))


def write_jsonl(fh, parts: Iterable[np.ndarray]) -> None:
    """One JSON object per item of each array of ``parts`` (keys = the fields)."""
    for arr in parts:
        fh.write(to_jsonl(arr))


def to_csv(arr: np.ndarray) -> str:
    buf = io.StringIO()
    write_csv(buf, [arr], arr.dtype.names)
    return buf.getvalue()


def to_jsonl(arr: np.ndarray) -> str:
    names = arr.dtype.names
    return "".join(json.dumps(dict(zip(names, r))) + "\n" for r in rows_of(arr))


__all__ = ["RECORD_DTYPE", "WORD_DTYPE", "FINDING_DTYPE", "FRAME_DTYPE", "FIELD_NAMES", "FRAME_FIELD_NAMES",
           "BusSummary", "COMMAND_SHORT_NAMES", "READ_COMMANDS", "WRITE_COMMANDS", "short_command", "empty_records",
           "records_from_dicts", "record_to_dict", "records_from_jsonl", "diff_records", "rows_of",
           "write_csv", "write_jsonl", "to_csv", "to_jsonl"]

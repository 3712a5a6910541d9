"""Transaction records as numpy structured arrays (layout from decoders/pci/lists.py).

See docs/records.md for what every field means. Strings are fixed-width unicode so a record
array is one contiguous block; the widths below fit every name in lists.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import numpy as np

from pcitrace.decode.facts import RECORD_FIELDS

_STRING_WIDTH = {"bus": 24, "command": 24, "devsel": 12, "termination": 24}
_KIND_DTYPE = {"i": np.int64, "u": np.uint64, "b": np.bool_}


def _dtype() -> np.dtype:
    fields = []
    for name, kind in RECORD_FIELDS:
        if kind == "s":
            fields.append((name, f"U{_STRING_WIDTH[name]}"))
        else:
            fields.append((name, _KIND_DTYPE[kind]))
    return np.dtype(fields)


RECORD_DTYPE = _dtype()
FIELD_NAMES: tuple[str, ...] = tuple(n for n, _ in RECORD_FIELDS)

# One data word per completed data phase; `record` indexes the record array.
WORD_DTYPE = np.dtype([("record", np.int64), ("time_ps", np.int64), ("value", np.uint64),
                       ("byte_enables", np.uint8)])

FINDING_DTYPE = np.dtype([("time_ps", np.int64), ("bus", "U24"), ("kind", "U32"), ("message", "U160")])


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
    d = {}
    for name, kind in RECORD_FIELDS:
        v = rec[name]
        d[name] = str(v) if kind == "s" else bool(v) if kind == "b" else int(v)
    return d


def records_to_jsonl(records: np.ndarray) -> str:
    return "".join(json.dumps(record_to_dict(r)) + "\n" for r in records)


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

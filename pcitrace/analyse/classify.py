"""Who did a transaction: the host touching the NIC's registers (CSR), the NIC's DMA, or someone else.

The rule depends on what the capture holds (docs/report-schema.md, "classification_rule"):

- ``gnt+bar`` (GNT# and AD captured, BARs known): NIC DMA = the NIC's GNT# was asserted on the
  clock before the address phase (record ``gnt`` = 1), or a PCI-X split completion (the bridge
  drives it, but it carries the NIC's read data); CSR = not granted to the NIC and the
  address falls in one of the NIC's BARs; everything else is ``other`` (unrelated devices).
- ``gnt`` (GNT# captured, no usable AD/BARs): NIC DMA = ``gnt`` 1; not granted and at most
  ``csr_max_data_phases`` data phases = CSR (register accesses are single data phases; a
  retried one has none); longer non-NIC transactions = ``other``.
- ``bar`` (AD captured, BARs known, no GNT#): CSR = address in a BAR; configuration, interrupt
  acknowledge and special cycles = ``other``; all remaining transactions are taken as NIC DMA
  (unrelated bus masters cannot be told apart without GNT#).
- ``length`` (control-only capture, nothing else known): at most ``csr_max_data_phases`` data
  phases = CSR, longer = NIC DMA. A retried DMA read (no data phase) counts as CSR here; the
  report names the rule so a reader knows how far to trust the split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pcitrace.errors import PcitraceError
from pcitrace.records import READ_COMMANDS, WRITE_COMMANDS

CSR, DMA, OTHER = 0, 1, 2
CLASS_NAMES = ("csr", "dma", "other")

RULES = ("auto", "gnt+bar", "gnt", "bar", "length")

# Data direction seen from the NIC: READ = NIC reads host memory (transmit data, descriptors),
# WRITE = NIC writes host memory (received frames, status write-back).
UNKNOWN_DIR, READ, WRITE = 0, 1, 2

_NOT_DMA_COMMANDS = {"config_read", "config_write", "int_ack", "special"}


def directions(records: np.ndarray) -> np.ndarray:
    """int8 per record: READ, WRITE or UNKNOWN_DIR (no C/BE# captured)."""
    cmd = records["command"]
    out = np.zeros(len(records), np.int8)
    out[np.isin(cmd, list(READ_COMMANDS))] = READ
    out[np.isin(cmd, list(WRITE_COMMANDS))] = WRITE
    return out


def ad_captured(records: np.ndarray) -> bool:
    """Whether the decoder saw AD / C/BE#: a control-only decode has command 'unknown' and address 0."""
    if len(records) == 0:
        return False
    return bool(np.any(records["command"] != "unknown") or np.any(records["address"] != 0))


def in_bars(address: np.ndarray, bars: Sequence[tuple[int, int]]) -> np.ndarray:
    """Address inside any BAR; a BAR is (low, high) inclusive, as in the profile's NicIdentity."""
    a = np.asarray(address, dtype=np.uint64)
    hit = np.zeros(a.shape, bool)
    for lo, hi in bars:
        hit |= (a >= np.uint64(int(lo))) & (a <= np.uint64(int(hi)))
    return hit


def choose_rule(records: np.ndarray, bars: Sequence[tuple[int, int]] | None, rule: str = "auto") -> str:
    if rule not in RULES:
        raise PcitraceError(f"unknown classification rule {rule!r}", fix=f"use one of {', '.join(RULES)}")
    has_gnt = len(records) > 0 and bool(np.all(records["gnt"] >= 0))
    has_bar = bool(bars) and ad_captured(records)
    if rule == "auto":
        if has_gnt and has_bar:
            return "gnt+bar"
        if has_gnt:
            return "gnt"
        if has_bar:
            return "bar"
        return "length"
    if rule in ("gnt", "gnt+bar") and not has_gnt and len(records):
        raise PcitraceError(f"classification rule {rule!r} needs GNT#, which this capture does not hold",
                            fix="use --classify auto, or map the NIC's GNT# line in the profile")
    if rule in ("bar", "gnt+bar") and not has_bar and len(records):
        raise PcitraceError(f"classification rule {rule!r} needs AD and the NIC's BAR ranges",
                            fix="use --classify auto, or add the NIC's bars to the profile")
    return rule


def classify(records: np.ndarray, bars: Sequence[tuple[int, int]] | None = None, *, rule: str = "auto",
             csr_max_data_phases: int = 1) -> tuple[np.ndarray, str]:
    """Class per record (CSR / DMA / OTHER as int8) and the rule that was used."""
    used = choose_rule(records, bars, rule)
    n = len(records)
    out = np.full(n, OTHER, np.int8)
    if n == 0:
        return out, used
    short = records["data_phases"] <= csr_max_data_phases
    # The completer (host bridge) drives a split completion, but it carries the NIC's DMA read data.
    completion = records["command"] == "split_completion"
    if used == "gnt+bar":
        granted = (records["gnt"] == 1) | completion
        out[~granted & in_bars(records["address"], bars)] = CSR
        out[granted] = DMA
    elif used == "gnt":
        granted = (records["gnt"] == 1) | completion
        out[~granted & short] = CSR
        out[granted] = DMA
    elif used == "bar":
        hit = in_bars(records["address"], bars)
        out[:] = DMA
        out[np.isin(records["command"], list(_NOT_DMA_COMMANDS))] = OTHER
        out[hit] = CSR
    else:
        out[:] = np.where(short, CSR, DMA)
    return out, used

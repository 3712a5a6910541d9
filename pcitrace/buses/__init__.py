"""Bus kinds, one module each (``pci``: PCI and PCI-X; ``gbe_probe``: Ethernet probe lines).

A ``BusKind`` is everything the rest of pcitrace needs to know about a kind of bus: its
canonical signals and the channel names they are detected by, which signal is its clock,
what it decodes into (records or frames) and with which sigrok decoder, and the viewer's rows.
Code asks ``kind(name)`` instead of comparing kind strings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from pcitrace.errors import PcitraceError


@dataclasses.dataclass(frozen=True)
class BusKind:
    name: str                               # as written in a profile: kind = "..."
    title: str                              # what a person calls it: 'PCI', 'PCI-X', 'Ethernet probe'
    mode: str                               # 'pci' | 'pcix' (probe links report 'pci')
    transactions: bool                      # decoded into PCI transaction records (else frames)
    signals: tuple[str, ...]                # canonical signals a profile may map
    vectors: Mapping[str, int]              # multi-bit signals -> their most bits
    clock: str                              # the signal that clocks the bus
    channel_names: Mapping[str, str]        # channel base name (upper case, no markers) -> signal
    detect: Callable[[set], bool]           # do these recognised signals make a bus of this kind?
    usable: Callable[[set], bool]           # are these mapped signals enough to decode it?
    default_name: str                       # a detected bus's name when its channels have no prefix
    record_dtype: np.dtype                  # what one decoded item is
    sigrok_decoder: str                     # the libsigrokdecode decoder id (decoders/<id>)
    viewer_rows: tuple[tuple[str, str], ...]   # (signal, label) in the viewer's display order
    has_nic: bool = False                   # a NIC identity (GNT#/REQ#/BARs) belongs on it
    default_link_bps: float | None = None   # a probe link's rate unless the profile says

    @property
    def is_pci(self) -> bool:
        return self.transactions


def _registry() -> dict[str, BusKind]:
    from pcitrace.buses import gbe_probe, pci

    return {k.name: k for k in (pci.PCI, pci.PCIX, gbe_probe.GBE_PROBE)}


KINDS: dict[str, BusKind] = _registry()
# the kinds channel names can reveal (a PCI-X bus has PCI's signals: its profile says pcix)
DETECTABLE: tuple[BusKind, ...] = (KINDS["pci"], KINDS["gbe_probe"])


def kind(name: str) -> BusKind:
    """The bus kind called ``name`` ('pci', 'pcix', 'gbe_probe')."""
    try:
        return KINDS[name]
    except KeyError:
        raise PcitraceError(f"unknown bus kind {name!r}", fix=f"use one of {', '.join(KINDS)}") from None


def all_vectors() -> dict[str, int]:
    """Every kind's multi-bit signals."""
    out: dict[str, int] = {}
    for k in KINDS.values():
        out.update(k.vectors)
    return out


__all__ = ["BusKind", "KINDS", "DETECTABLE", "kind", "all_vectors"]

"""The PCI facts shared with the sigrok decoder, loaded from decoders/pci/lists.py itself.

The sigrok decoder package cannot import pcitrace (libsigrokdecode loads it on its own), and
pcitrace must not keep a second copy of its tables: pcitrace.records executes that one file.
"""

from __future__ import annotations

from pcitrace.records import DECODERS_DIR  # noqa: F401 - where the sigrok decoders are
from pcitrace.records import PCI_LISTS as _lists

PCI_COMMANDS: dict[int, tuple[str, str]] = _lists.PCI_COMMANDS
PCIX_COMMANDS: dict[int, tuple[str, str]] = _lists.PCIX_COMMANDS
PCIX_DWORD_COMMANDS: tuple[int, ...] = _lists.PCIX_DWORD_COMMANDS
COMMAND_UNKNOWN: str = _lists.COMMAND_UNKNOWN
DEVSEL_SPEEDS: tuple[str, ...] = _lists.DEVSEL_SPEEDS
TERMINATIONS: tuple[str, ...] = _lists.TERMINATIONS
RECORD_FIELDS: tuple[tuple[str, str], ...] = _lists.RECORD_FIELDS
FINDING_KINDS: tuple[str, ...] = _lists.FINDING_KINDS
MAX_INITIAL_LATENCY: int = _lists.MAX_INITIAL_LATENCY
MAX_DEVSEL_CLOCKS: int = _lists.MAX_DEVSEL_CLOCKS


def command_name(code: int, mode: str = "pci") -> str:
    table = PCIX_COMMANDS if mode == "pcix" else PCI_COMMANDS
    return table[code & 0xF][0]


def command_code(name: str, mode: str = "pci") -> int:
    table = PCIX_COMMANDS if mode == "pcix" else PCI_COMMANDS
    for code, (snake, _) in table.items():
        if snake == name:
            return code
    raise KeyError(name)

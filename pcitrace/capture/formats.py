"""The capture file formats pcitrace reads, by file name suffix: the one list every part asks
(opening a file, finding captures in a folder, a profile beside its capture, the viewer's file
dialog). A new input format is a reader plus one entry here."""

from __future__ import annotations

from pathlib import Path

# suffix (lower case, longest first where one ends another) -> format
FORMATS: dict[str, str] = {".sr": "sr", ".vcd.gz": "vcd", ".vcd": "vcd"}
SUFFIXES: tuple[str, ...] = tuple(FORMATS)


def format_of(path) -> str | None:
    """'sr' / 'vcd' from the file name, or None for a name of no capture format."""
    name = Path(path).name.lower()
    return next((fmt for suffix, fmt in FORMATS.items() if name.endswith(suffix)), None)


def stem(path) -> str | None:
    """NAME of NAME.sr / NAME.vcd / NAME.vcd.gz (case kept), or None."""
    name = Path(path).name
    return next((name[: -len(s)] for s in FORMATS if name.lower().endswith(s)), None)


def dialog_filter() -> str:
    """A Qt file-dialog filter for every capture format."""
    return "Captures (" + " ".join(f"*{s}" for s in SUFFIXES) + ")"

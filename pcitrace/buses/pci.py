"""PCI and PCI-X (mode 1): the canonical signals, how channels are recognised, the control
code the fast engine reads, and the viewer's rows."""

from __future__ import annotations

from pcitrace.buses import BusKind
from pcitrace.records import RECORD_DTYPE

SIGNALS = ("clk", "frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n", "ad", "cbe_n", "par",
           "par64", "req64_n", "ack64_n", "idsel", "req_n", "gnt_n", "perr_n", "serr_n",
           "inta_n", "rst_n")
VECTORS = {"ad": 64, "cbe_n": 8}

# Channel base names (upper case, active-low markers and separators removed) -> signal
CHANNEL_NAMES = {
    "CLK": "clk", "PCICLK": "clk", "PCICLOCK": "clk", "CLOCK": "clk", "PCLK": "clk",
    "FRAME": "frame_n", "IRDY": "irdy_n", "TRDY": "trdy_n", "STOP": "stop_n",
    "DEVSEL": "devsel_n", "AD": "ad", "CBE": "cbe_n", "PAR": "par", "PAR64": "par64",
    "REQ64": "req64_n", "ACK64": "ack64_n", "IDSEL": "idsel", "REQ": "req_n", "GNT": "gnt_n",
    "PERR": "perr_n", "SERR": "serr_n", "INTA": "inta_n", "RST": "rst_n",
}

# The control lines as one code per clock (bit set = line asserted), in the weights the fast
# engine (pcitrace.decode.engine) decodes
CONTROL_CODE = (("frame_n", 1), ("irdy_n", 2), ("trdy_n", 4), ("stop_n", 8), ("devsel_n", 16))

VIEWER_ROWS = (
    ("clk", "CLK"), ("frame_n", "FRAME#"), ("irdy_n", "IRDY#"), ("trdy_n", "TRDY#"),
    ("devsel_n", "DEVSEL#"), ("stop_n", "STOP#"), ("ad", "AD"), ("cbe_n", "C/BE#"),
    ("par", "PAR"), ("par64", "PAR64"), ("req64_n", "REQ64#"), ("ack64_n", "ACK64#"),
    ("req_n", "REQ#"), ("gnt_n", "GNT#"), ("idsel", "IDSEL"), ("perr_n", "PERR#"),
    ("serr_n", "SERR#"), ("inta_n", "INTA#"), ("rst_n", "RST#"),
)


def detect(found: set) -> bool:
    """FRAME# and AD or IRDY# among a group of channels make a PCI bus."""
    return "frame_n" in found and ("ad" in found or "irdy_n" in found)


def usable(signals) -> bool:
    """Transactions need FRAME# at least."""
    return "frame_n" in signals


def _kind(name: str, title: str) -> BusKind:
    return BusKind(name=name, title=title, mode=name, transactions=True, signals=SIGNALS, vectors=VECTORS, clock="clk",
                   channel_names=CHANNEL_NAMES, detect=detect, usable=usable, default_name="pci", record_dtype=RECORD_DTYPE,
                   sigrok_decoder="pci", viewer_rows=VIEWER_ROWS, has_nic=True)


PCI = _kind("pci", "PCI")
PCIX = _kind("pcix", "PCI-X")

"""Ethernet probe lines (a frame-present line, SOF, GMII bytes): decoded into frames."""

from __future__ import annotations

from pcitrace.buses import BusKind
from pcitrace.records import FRAME_DTYPE

SIGNALS = ("frame_present", "sof", "rxd", "rx_dv", "rx_er", "rx_clk")
VECTORS = {"rxd": 8}
CHANNEL_NAMES = {"FRAMEPRESENT": "frame_present", "SOF": "sof", "RXD": "rxd", "RXDV": "rx_dv",
                 "RXER": "rx_er", "RXCLK": "rx_clk"}
# any of these makes a probe link
FRAME_SIGNALS = frozenset({"rxd", "frame_present", "sof"})
DEFAULT_LINK_BPS = 1e9

VIEWER_ROWS = (
    ("frame_present", "FRAME"), ("sof", "SOF"), ("rx_dv", "RX_DV"), ("rx_er", "RX_ER"),
    ("rxd", "RXD"), ("rx_clk", "RX_CLK"),
)


def detect(found: set) -> bool:
    return bool(FRAME_SIGNALS & set(found))


def usable(signals) -> bool:
    return detect(signals)


GBE_PROBE = BusKind(name="gbe_probe", title="Ethernet probe", mode="pci", transactions=False, signals=SIGNALS, vectors=VECTORS,
                    clock="rx_clk", channel_names=CHANNEL_NAMES, detect=detect, usable=usable, default_name="probe",
                    record_dtype=FRAME_DTYPE, sigrok_decoder="gbe_probe", viewer_rows=VIEWER_ROWS,
                    default_link_bps=DEFAULT_LINK_BPS)

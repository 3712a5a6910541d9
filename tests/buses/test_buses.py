"""pcitrace.buses: the registry and what each kind says of itself."""

from __future__ import annotations

import pytest

from pcitrace import buses
from pcitrace.buses import gbe_probe, pci
from pcitrace.errors import PcitraceError
from pcitrace.records import FRAME_DTYPE, RECORD_DTYPE


def test_kind_finds_every_kind_and_names_the_choices_when_unknown():
    assert buses.kind("pci") is pci.PCI and buses.kind("pcix") is pci.PCIX
    assert buses.kind("gbe_probe") is gbe_probe.GBE_PROBE
    with pytest.raises(PcitraceError, match="pci, pcix, gbe_probe"):
        buses.kind("usb")


def test_pci_kinds_decode_transactions_probes_frames():
    assert pci.PCI.transactions and pci.PCIX.transactions and not gbe_probe.GBE_PROBE.transactions
    assert pci.PCI.record_dtype == RECORD_DTYPE and gbe_probe.GBE_PROBE.record_dtype == FRAME_DTYPE
    assert (pci.PCI.mode, pci.PCIX.mode, gbe_probe.GBE_PROBE.mode) == ("pci", "pcix", "pci")
    assert (pci.PCI.clock, gbe_probe.GBE_PROBE.clock) == ("clk", "rx_clk")
    assert pci.PCI.sigrok_decoder == "pci" and gbe_probe.GBE_PROBE.sigrok_decoder == "gbe_probe"


def test_every_signal_named_by_a_channel_pattern_or_a_row_belongs_to_its_kind():
    for k in buses.KINDS.values():
        assert set(k.channel_names.values()) <= set(k.signals)
        assert [s for s, _ in k.viewer_rows] and {s for s, _ in k.viewer_rows} <= set(k.signals)
        assert set(k.vectors) <= set(k.signals)


def test_control_code_covers_the_five_control_lines_in_distinct_bits():
    names = [s for s, _ in pci.CONTROL_CODE]
    weights = [w for _, w in pci.CONTROL_CODE]
    assert names == ["frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n"]
    assert sorted(weights) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("found, is_pci, is_probe", [
    ({"frame_n", "ad"}, True, False), ({"frame_n", "irdy_n"}, True, False), ({"frame_n"}, False, False),
    ({"ad", "irdy_n"}, False, False), ({"rxd"}, False, True), ({"sof", "rx_clk"}, False, True),
    ({"rx_clk"}, False, False)])
def test_detection(found, is_pci, is_probe):
    assert pci.detect(found) is is_pci
    assert gbe_probe.detect(found) is is_probe


def test_detectable_kinds_leave_pcix_to_the_profile():
    assert [k.name for k in buses.DETECTABLE] == ["pci", "gbe_probe"]

"""Classification rules on hand-built records (pcitrace.analyse.classify)."""

import numpy as np
import pytest

from pcitrace.analyse.classify import (CSR, DMA, OTHER, READ, UNKNOWN_DIR, WRITE, ad_captured, choose_rule,
                                       classify, directions, in_bars)
from pcitrace.decode.records import records_from_dicts
from pcitrace.errors import PcitraceError

from .builders import BAR, txn


def recs(*rows):
    return records_from_dicts(rows)


def test_bars_are_inclusive():
    a = np.array([BAR[0] - 1, BAR[0], BAR[1], BAR[1] + 1], dtype=np.uint64)
    assert in_bars(a, [BAR]).tolist() == [False, True, True, False]


def test_gnt_plus_bar():
    r = recs(txn(0, 4, command="mem_write", address=BAR[0] + 8, nbytes=4, gnt=0),       # host -> NIC
             txn(10, 40, command="mem_read_multiple", address=0x1000, data_phases=30, gnt=1),   # NIC DMA
             txn(60, 40, command="mem_write", address=0xD000_0000, data_phases=32, gnt=0),  # other master
             txn(110, 3, command="mem_read", address=0x2000, gnt=0),                     # host, elsewhere
             txn(120, 10, command="split_completion", address=0x11000, data_phases=4, gnt=0))
    cls, rule = classify(r, [BAR])
    assert rule == "gnt+bar"
    assert cls.tolist() == [CSR, DMA, OTHER, OTHER, DMA]


def test_gnt_only_uses_length_for_the_rest():
    r = recs(txn(0, 4, command="unknown", nbytes=4, gnt=0),
             txn(10, 40, command="unknown", data_phases=30, gnt=1),
             txn(60, 40, command="unknown", data_phases=32, gnt=0),
             txn(110, 5, command="unknown", data_phases=0, nbytes=0, gnt=0, termination="retry"))
    cls, rule = classify(r, [BAR])        # BARs are no use without AD
    assert rule == "gnt"
    assert cls.tolist() == [CSR, DMA, OTHER, CSR]


def test_bar_only():
    r = recs(txn(0, 4, command="mem_read", address=BAR[1], nbytes=4),
             txn(10, 40, command="mem_write", address=0x1000, data_phases=30),
             txn(60, 4, command="config_read", address=0x80000000, nbytes=4))
    cls, rule = classify(r, [BAR])
    assert rule == "bar"
    assert cls.tolist() == [CSR, DMA, OTHER]


def test_length_rule_for_control_only_captures():
    r = recs(txn(0, 4, command="unknown", nbytes=8), txn(10, 40, command="unknown", data_phases=30),
             txn(60, 5, command="unknown", data_phases=2))
    assert not ad_captured(r)
    cls, rule = classify(r, None)
    assert rule == "length"
    assert cls.tolist() == [CSR, DMA, DMA]
    cls2, _ = classify(r, None, csr_max_data_phases=2)
    assert cls2.tolist() == [CSR, DMA, CSR]


def test_forced_rule_needs_its_signals():
    r = recs(txn(0, 4, command="unknown", nbytes=4))
    with pytest.raises(PcitraceError, match="GNT#"):
        choose_rule(r, [BAR], "gnt")
    with pytest.raises(PcitraceError, match="BAR"):
        choose_rule(r, [BAR], "bar")
    with pytest.raises(PcitraceError, match="unknown classification rule"):
        choose_rule(r, [BAR], "magic")


def test_directions():
    r = recs(txn(0, 4, command="mem_read_line"), txn(5, 4, command="mem_write_invalidate"),
             txn(10, 4, command="split_completion"), txn(15, 4, command="unknown"))
    assert directions(r).tolist() == [READ, WRITE, READ, UNKNOWN_DIR]

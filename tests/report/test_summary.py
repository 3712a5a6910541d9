"""bus_figures: every distribution the analyser computes reaches the report, once."""

from pcitrace.analyse import analyse_bus
from pcitrace.report.summary import DISTRIBUTIONS, bus_figures
from tests.analyse.builders import BAR, PACKETS, SPACING, T_PS, facts, send_stream


def _bus():
    return analyse_bus(send_stream(), facts(100 + (PACKETS + 1) * SPACING), [BAR])


def test_every_group_span_reaches_the_report():
    # docs/report-schema.md promises csr_group_all_us (every CSR group, setup and interrupt);
    # it was listed as a second csr_group_us and never written.
    b = _bus()
    out = bus_figures(b)
    assert len(DISTRIBUTIONS) == len(set(DISTRIBUTIONS))
    assert out["csr_group_all_us"]["count"] == len(b.groups) == PACKETS + PACKETS // 4
    assert out["csr_group_all_us"]["min"] == round(14 * T_PS * 1e-6, 4)   # an interrupt group: two accesses 10 clocks apart
    assert "csr_group_all_us" in out["histograms"]

"""The figure table (pcitrace/analyse/metrics.py) agrees with what the analyser computes, what the
writers print and what docs/report-schema.md says."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from pcitrace.analyse import analyse_bus, metrics
from pcitrace.analyse.packets import PACKET_DTYPE
from pcitrace.analyse.wire import CHAIN_DTYPE
from pcitrace.report.summary import DISTRIBUTIONS, bus_figures
from pcitrace.report.writers import CSV_FIELDS, to_csv
from tests.analyse.builders import BAR, PACKETS, SPACING, facts, send_stream
from tests.conftest import ROOT

SCHEMA_DOC = ROOT / "docs" / "report-schema.md"


def test_the_schema_doc_has_the_generated_tables():
    # Regenerate with: python -m pcitrace.analyse.metrics --write docs/report-schema.md
    text = SCHEMA_DOC.read_text(encoding="utf-8")
    assert metrics.with_generated(text) == text
    for f in metrics.FIGURES.values():
        assert f"| `{f.name}` |" in text


def test_every_figure_names_a_column_of_what_it_is_per():
    dtypes = {"packet": PACKET_DTYPE, "frame": CHAIN_DTYPE}
    for f in metrics.FIGURES.values():
        assert f.definition and f.label
        if f.field is not None and f.per in dtypes:
            assert f.field in dtypes[f.per].names, f.name
        assert set(f.statistics) <= set(metrics.STATISTICS)
        assert f.limit is None or f.limit in metrics.FIGURES
        if f.unit == "µs" and f.field is not None:
            assert f.field.endswith("_ps") and f.scale == 1e-6


@pytest.fixture(scope="module")
def bus():
    return analyse_bus(send_stream(), facts(100 + (PACKETS + 1) * SPACING), [BAR])


def test_the_analyser_summarises_each_distribution_with_its_scale(bus):
    assert list(bus.distributions)[:len(DISTRIBUTIONS)] == DISTRIBUTIONS
    d = bus.distributions["csr_setup_us"]
    assert d.median == pytest.approx(float(np.median(bus.packets["csr_setup_ps"])) * 1e-6)
    assert bus.distributions["dma_burst_bytes"].max == bus.bursts["bytes"].max()


def test_every_bus_figure_is_where_the_table_says(bus):
    out = bus_figures(bus)
    for f in metrics.BUS_FIGURES:
        node = out
        for key in f.where:
            assert key in node, f.name
            node = node[key]
        if f.distribution:
            assert set(node) == set(metrics.STATISTICS)


def test_csv_columns_come_from_the_table(bus):
    result = {"capture": "x.sr", "buses": [bus_figures(bus)], "findings": 0}
    row = next(csv.DictReader(io.StringIO(to_csv([result]))))
    assert list(row) == CSV_FIELDS
    assert float(row["csr_setup_us_p90"]) == bus_figures(bus)["csr_setup_us"]["p90"]
    assert row["occupancy_nic"] == str(bus_figures(bus)["occupancy_by_initiator"]["nic"])


def test_header_names_unit_and_statistics():
    assert metrics.header("csr_setup_us", ("median", "p90")) == "CSR setup µs (median, p90)"
    assert metrics.header("packets_per_interrupt", ("median",)) == "pkts/interrupt"
    assert metrics.header("throughput_mbit_s") == "Mbit/s"

"""analyse_bus on hand-built transmit streams with answers worked out by hand (tests/analyse/builders.py)."""

import numpy as np
import pytest

from pcitrace.analyse import AnalysisOptions, analyse, analyse_bus
from pcitrace.analyse.classify import READ, UNKNOWN_DIR

from .builders import BAR, PACKETS, SPACING, T_PS, facts, send_stream

TOTAL = 100 + (PACKETS + 1) * SPACING   # room for the last interrupt service routine
BUSY = PACKETS * 204 + (PACKETS // 4) * 8


@pytest.fixture(params=["gnt+bar", "gnt", "bar", "length"])
def variant(request):
    rule = request.param
    recs = send_stream(with_gnt=rule.startswith("gnt"), with_ad=rule != "length" and rule != "gnt")
    bars = [BAR] if "bar" in rule else None
    return rule, analyse_bus(recs, facts(TOTAL), bars)


def test_rule_reported(variant):
    rule, a = variant
    assert a.classification_rule == rule


def test_per_packet_figures(variant):
    rule, a = variant
    p = a.packets
    assert len(p) == PACKETS
    np.testing.assert_array_equal(p["data_bytes"], 1400)
    np.testing.assert_array_equal(p["data_bursts"], 2)
    np.testing.assert_array_equal(p["csr_setup_ps"], 30 * T_PS)      # group start to descriptor fetch
    np.testing.assert_array_equal(p["csr_group_ps"], 24 * T_PS)      # first access to end of last
    np.testing.assert_array_equal(p["csr_accesses"], 3)
    np.testing.assert_array_equal(p["csr_to_dma_ps"], 6 * T_PS)
    np.testing.assert_array_equal(p["descriptor_fetch_ps"], 5 * T_PS)
    np.testing.assert_array_equal(p["data_dma_ps"], 186 * T_PS)
    # 1400 bytes at 8 bytes a clock: 175 of the data transfer's 186 clocks moved data
    np.testing.assert_allclose(p["data_dma_efficiency"], 175 / 186)
    np.testing.assert_array_equal(p["status_writeback_ps"], 4 * T_PS)
    i = np.arange(PACKETS)
    expect_delay = ((4 * (i // 4) + 3 - i) * SPACING + 497) * T_PS
    np.testing.assert_array_equal(p["interrupt_delay_ps"], expect_delay)
    np.testing.assert_array_equal(a.packets_per_interrupt, [4, 4, 4])
    np.testing.assert_array_equal(p["period_ps"][:-1], SPACING * T_PS)
    assert np.isnan(p["period_ps"][-1])
    # The service routine after packets 3, 7 falls in the period of packets 4, 8.
    busy = np.where((i % 4 == 0) & (i > 0), 212, 204)[:-1]
    np.testing.assert_allclose(p["occupancy"][:-1], busy / SPACING)
    assert a.pause_after.size == 0
    expected_dir = READ if rule in ("gnt+bar", "bar") else UNKNOWN_DIR
    np.testing.assert_array_equal(p["direction"], expected_dir)


def test_occupancy_and_split(variant):
    _, a = variant
    assert a.split.busy_clocks == BUSY
    assert a.occupancy == pytest.approx(BUSY / TOTAL)
    assert (a.split.data, a.split.wait, a.split.address, a.split.retry) == (2190, 192, 90, 0)
    assert a.split.by_initiator == {"nic": PACKETS * 192, "host": BUSY - PACKETS * 192, "other": 0}
    assert sum(a.split.fractions().values()) == pytest.approx(a.occupancy)


def test_groups_and_transfers(variant):
    _, a = variant
    g = a.groups
    assert len(g) == PACKETS + PACKETS // 4
    assert g["setup"].sum() == PACKETS
    np.testing.assert_array_equal(g["packets"][~g["setup"]], 4)
    assert len(a.bursts) == PACKETS * 4
    assert len(a.transfers) == PACKETS * 3
    np.testing.assert_array_equal(np.bincount(a.transfers["kind"]), [PACKETS] * 3)


def test_distributions(variant):
    _, a = variant
    d = a.distributions
    assert d["csr_setup_us"].count == PACKETS
    assert d["csr_setup_us"].median == pytest.approx(0.6)
    assert d["csr_group_us"].median == pytest.approx(0.48)
    assert d["data_dma_us"].max == pytest.approx(3.72)
    assert d["packet_period_us"].count == PACKETS - 1
    assert d["packets_per_interrupt"].min == 4 == d["packets_per_interrupt"].max
    assert d["dma_burst_bytes"].count == PACKETS * 4
    assert d["dma_burst_bytes"].max == 704
    h = a.histograms["dma_burst_bytes"]
    assert h.counts.sum() == PACKETS * 4


def test_efficiency_and_throughput(variant):
    _, a = variant
    moved = PACKETS * (1400 + 16 + 16) + (3 * PACKETS + 2 * (PACKETS // 4)) * 4  # DMA + 4-byte CSR accesses
    assert a.efficiency == pytest.approx(a.records["bytes"].sum() / 8 / BUSY)
    assert a.records["bytes"].sum() == moved
    assert a.dma_efficiency == pytest.approx(PACKETS * (1400 + 32) / 8 / (PACKETS * 192))
    duration_s = TOTAL * T_PS * 1e-12
    assert a.throughput_mbit_s == pytest.approx(PACKETS * 1400 * 8 / duration_s / 1e6)
    lim = a.limits()
    assert lim["bus_mbit_s"] == pytest.approx(3200)
    assert lim["data_dma_ideal_us"].median == pytest.approx(1400 / 8 * 0.02)
    assert lim["wire_us"].median == pytest.approx((1400 + 24) * 0.008)


def test_pause_found():
    recs = send_stream(pause_after=5)
    a = analyse_bus(recs, facts(TOTAL + 10 * SPACING), [BAR])
    np.testing.assert_array_equal(a.pause_after, [5])
    assert a.distributions["pause_us"].max == pytest.approx(11 * SPACING * T_PS * 1e-6)


def test_rolling_window_matches_whole_capture():
    recs = send_stream()
    a = analyse_bus(recs, facts(TOTAL), [BAR], AnalysisOptions(window_us=11.0, window_step=1.0))
    # Whole windows of one packet period starting at t=0 cover the bus exactly once per window.
    assert len(a.rolling_occupancy) == TOTAL * T_PS // (11 * 10**6)
    covered = a.rolling_occupancy.sum() * 11e6
    # The last packet's activity ends before the last whole window does.
    assert covered == pytest.approx(a.split.busy_clocks * T_PS)
    np.testing.assert_allclose(a.rolling_occupancy[1:11], 204 / SPACING, atol=8 / SPACING)
    assert a.rolling_occupancy.max() <= 1.0


def test_csr_gap_option_merges_interrupt_and_setup():
    from pcitrace.analyse import csr, dma
    recs = send_stream()
    a = analyse_bus(recs, facts(TOTAL), [BAR], AnalysisOptions(csr_gap_us=10.0, csr_split_factor=0),
                    have_ad=False)
    # With a 10 us gap each interrupt group merges with the setup group after it (5.7 us apart,
    # only a write-back between) ...
    data_dma = np.zeros(len(a.records), bool)
    data_dma[a.bursts["record"]] = a.transfers["kind"][a.bursts["transfer"]] == dma.DATA
    merged = csr.csr_groups(a.records, a.classes, 10e6, T_PS, breaks=data_dma, split_factor=0)
    assert merged["accesses"].tolist() == [3, 3, 3, 3, 3, 5, 3, 3, 3, 5, 3, 3, 2]
    # ... but the send routine (three quick writes at the CPU's pace, learnt from the first
    # sends) is still told apart from the interrupt service routine in front of it.
    assert len(a.groups) == PACKETS + 3
    assert a.groups["accesses"][a.groups["setup"]].tolist() == [3] * PACKETS
    np.testing.assert_array_equal(a.packets["csr_setup_ps"], 30 * T_PS)
    np.testing.assert_array_equal(a.packets_per_interrupt, [4, 4, 4])


def test_retry_clocks_counted_as_retry():
    from pcitrace.decode.records import records_from_dicts

    from .builders import txn
    rows = [txn(10, 5, command="mem_write", address=BAR[0], data_phases=0, nbytes=0, gnt=0, termination="retry",
                target_waits=2),
            txn(20, 4, command="mem_write", address=BAR[0], nbytes=4, gnt=0)]
    a = analyse_bus(records_from_dicts(rows), facts(100), [BAR])
    assert a.split.retry == 5
    assert (a.split.data, a.split.wait, a.split.address) == (1, 2, 1)
    assert a.groups["retries"].tolist() == [1]
    assert a.groups["accesses"].tolist() == [2]


def test_empty_bus():
    from pcitrace.decode.records import empty_records
    a = analyse_bus(empty_records(), facts(1000), [BAR])
    assert a.occupancy == 0
    assert len(a.packets) == 0
    assert a.distributions["csr_setup_us"].count == 0
    assert a.efficiency is None


def test_analyse_decode_result_splits_buses():
    from types import SimpleNamespace

    from pcitrace.records import BusSummary, record_to_dict, records_from_dicts
    a_recs = send_stream()
    b_rows = [dict(record_to_dict(r), bus="rx") for r in send_stream()[:20]]
    recs = np.concatenate([a_recs, records_from_dicts(b_rows)])
    recs = np.sort(recs, order="start_ps", kind="stable")
    summ = {n: BusSummary(name=n, kind="pci", mode="pci", width=64, clock_hz=50e6, clocks=TOTAL, start_ps=0,
                          end_ps=(TOTAL - 1) * T_PS, bars=(BAR,), have_ad=True) for n in ("pci", "rx")}
    summ["probe"] = BusSummary(name="probe", kind="gbe_probe")
    res = SimpleNamespace(records=recs, buses=summ, findings=[])
    an = analyse(res)
    assert set(an.buses) == {"pci", "rx"}
    assert len(an.buses["pci"].packets) == PACKETS
    assert len(an.buses["rx"].records) == 20

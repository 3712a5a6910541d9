"""Every real tool output in tests/data/udp-tools (copied from ../shared/reference) is read; values pinned to the files."""

from __future__ import annotations

import numpy as np
import pytest

from pcitrace.correlate.runlog import read_runlog
from pcitrace.errors import PcitraceError
from tests.conftest import UDP_TOOLS

US = 1_000_000


def rl(name):
    path = UDP_TOOLS / name
    if not path.exists():
        pytest.fail(f"{path} missing: tests/data/udp-tools holds the reference outputs")
    return read_runlog(path)


def test_every_reference_file_is_read():
    names = sorted(p.name for p in UDP_TOOLS.iterdir())
    assert len(names) >= 24
    for n in names:
        log = rl(n)
        assert log.rows, n


def test_udpmon_basic():
    log = rl("udpmon_bw_basic.txt")
    assert (log.kind, log.variant) == ("udpmon_bw", "plain")
    (r,) = log.rows
    assert r["pkt_len"] == 1472 and r["num_sent"] == 1000 and r["inter_pkt_time_us"] == 10
    assert r["num_recv"] == 954 and r["num_lost"] == 46 and r["pct_lost"] == 4.6
    assert r["recv_wire_rate_mbit"] == 1140.91 and r["send_user_data_rate_mbit"] == 1140.97
    assert log.parameters["options"]["p"] == 1472 and log.parameters["port"] == 14299
    assert log.parameters["cpu_mhz"] == pytest.approx(2596.1476342)


def test_udpmon_x_keeps_host_blocks():
    log = rl("udpmon_bw_x.txt")
    assert log.variant == "x"
    r = log.rows[0]
    assert r["time_per_frame_us"] == 16.48 and r["send_time_us"] == 8240 and r["num_lost"] == 264
    assert r["recv_wire_rate_mbit"] == 1104.21 and r["num_in_hist"] == 232 and r["hist_iq75"] == 102
    ex = log.extra[0]
    assert set(ex["cpu"]) == {"L", "L0", "L1", "R", "R0", "R1"}
    assert ex["cpu"]["R0"]["idle_cpu"] == 95
    assert ex["interfaces"]["L"]["lo"]["pktsin"] == 500 and ex["interfaces"]["L"]["lo"]["bytesin"] == 750000
    assert ex["interfaces"]["R"]["lo"]["bytesout"] == 750472
    assert ex["snmp"]["L"]["UDPInDatagrams"] == 236 and ex["snmp"]["L"]["UDPInErrors"] == 264
    assert ex["snmp"]["R"]["InReceives"] == 502


def test_udpmon_q_one_line():
    log = rl("udpmon_bw_q.txt")
    assert log.variant == "q"
    r = log.rows[0]
    assert r["unix_time"] == 1795319140 and r["local_host"] == "vm"
    assert r["pkt_len"] == 1472 and r["num_sent"] == 500 and r["num_recv"] == 500
    assert r["recv_wire_rate_mbit"] == 911.434 and r["send_user_data_rate_mbit"] == 868.949


def test_udpmon_scan_recv_wire_rate_per_spacing():
    log = rl("udpmon_bw_scan.txt")
    assert log.variant == "scan"
    assert log.column("inter_pkt_time_us").tolist() == [0, 5, 10, 15]
    assert log.column("recv_wire_rate_mbit").tolist() == [437.117, 336.449, 379.696, 555.99]
    assert log.column("num_lost").tolist() == [89, 407, 140, 0]


def test_udpmon_scan_x():
    log = rl("udpmon_bw_1472_scan_x.txt")
    assert log.variant == "scan_x" and len(log.rows) == 16 and len(log.extra) == 16
    sp = log.column("inter_pkt_time_us")
    assert sp.tolist() == list(range(0, 31, 2))
    wire = dict(zip(sp.tolist(), log.column("recv_wire_rate_mbit").tolist()))
    assert wire[0] == 1153.89 and wire[12] == 733.45 and wire[30] == 404.852
    assert log.rows[-1]["num_lost"] == 4 and log.rows[-1]["time_per_frame_us"] == 30.347
    assert log.extra[6]["snmp"]["R"]["UDPInDatagrams"] == 1729


def test_udpmon_G_per_packet_and_lost_rows():
    log = rl("udpmon_bw_1472_w12_G.txt")
    assert log.variant == "G"
    p = log.packets
    assert len(p) == 2000 and int(p.lost.sum()) == 294 == log.rows[0]["num_lost"]
    lost = p.lost_numbers
    assert lost[0] == 57 and lost[244] == 301 and lost[245] == 1878 and lost[-1] == 1926
    assert np.array_equal(lost, np.r_[57:302, 1878:1927])
    # packet 1: recv 113370, send 63844 (0.1 us)
    assert p.number[0] == 1 and p.recv_time_ps[0] == 113370 * 100_000 and p.send_time_ps[0] == 63844 * 100_000
    assert p.one_way_us[0] == pytest.approx(3690.24)
    assert p.send_time_ps[1999] == 309869 * 100_000 and p.recv_time_ps[1999] == 322736 * 100_000
    assert p.recv_time_ps[56] == 0 and p.send_time_ps[56] == 0  # packet 57, lost


def test_udpmon_G_short():
    log = rl("udpmon_bw_G.txt")
    p = log.packets
    assert len(p) == 10 and not p.lost.any()
    assert p.number.tolist() == list(range(1, 11))
    assert (p.send_time_ps[1] - p.send_time_ps[0]) == 285 * 100_000  # 44575 - 44290
    assert log.parameters["packets_skipped"] == 0


def test_udpmon_L_lost_events():
    log = rl("udpmon_bw_1400_w11_L.txt")
    assert log.variant == "L"
    L = log.lost
    assert len(L) == 36 == log.rows[0]["num_lost"]
    assert L.packet.tolist() == list(range(585, 621))
    assert L.recv_time_ps[0] == 113586 * 100_000 and L.between[0] == 585 and L.between[1] == 1
    short = rl("udpmon_bw_L.txt").lost
    assert short.packet.tolist() == [770, 771, 772, 773, 774]
    assert rl("udpmon_bw_L.txt").rows[0]["num_lost"] == 7855


def test_udpmon_histograms():
    log = rl("udpmon_bw_hist.txt")
    assert [h.title for h in log.histograms] == ["Time between frames 0.1us", "Lost-frame sequence", "Out-of-order"]
    h = log.histograms[0]
    assert h.stats["counts"] == 198 and h.stats["mean"] == 202.23 and h.stats["overflows"] == 2
    assert int(h.counts.sum()) == 198
    counts = dict(zip(h.bins.tolist(), h.counts.tolist()))
    assert counts[190] == 82 and counts[200] == 95 and counts[750] == 1


def test_udpmon_req_and_H():
    r = rl("udpmon_req.txt")
    assert (r.kind, r.variant) == ("udpmon_req", "plain")
    assert r.rows[0] == {"response_len": 64, "request_len": 64, "loop_count": 1000, "num_bad": 0,
                         "time_per_frame_us": 17.313, "mean_us": 17.263, "min_us": 15.89, "max_us": 90.926,
                         "num_timeouts": 0}
    h = rl("udpmon_req_H.txt")
    assert h.variant == "H" and h.rows[0]["response_len"] == 1000 and h.rows[0]["max_us"] == 114.459
    (hist,) = h.histograms
    assert hist.title == "Time per req-resp us"
    assert hist.stats["sigma"] == 6.246 and hist.stats["median"] == 16 and int(hist.counts.sum()) == 500
    s = rl("udpmon_req_scan.txt")
    assert s.variant == "scan" and len(s.rows) == 23
    assert s.column("response_len")[-1] == 1472 and s.rows[3]["max_us"] == 1890.431


def test_iperf3_json_and_text():
    j = rl("iperf3_udp.json")
    assert (j.kind, j.variant) == ("iperf3", "json")
    assert j.parameters["blksize"] == 1472 and j.parameters["target_bitrate"] == 100000000
    by = {r["row"]: r for r in j.rows if r["row"] != "interval"}
    assert by["sum_sent"]["packets"] == 16977 and by["sum_received"]["bytes"] == 24990144
    assert by["sum_received"]["jitter_ms"] == pytest.approx(0.00597596836717551)
    assert [r["packets"] for r in j.rows if r["row"] == "interval"] == [8485, 8492]
    t = rl("iperf3_udp.txt")
    assert t.variant == "text" and t.parameters["port"] == 5299
    recv = next(r for r in t.rows if r["row"] == "receiver")
    assert recv["jitter_ms"] == 0.014 and recv["packets"] == 16977 and recv["lost_packets"] == 0
    assert t.rows[0]["bits_per_second"] == 99.9e6


def test_iperf2_enhanced_client_server_plain_and_csv():
    c = rl("iperf2_client.txt")
    assert (c.kind, c.variant, c.parameters["role"]) == ("iperf2", "e", "client")
    assert c.parameters["datagram_bytes"] == 1472 and c.parameters["ipg_target_us"] == 112.30
    assert c.parameters["datagrams_sent"] == 17812
    assert c.rows[0]["writes"] == 8904 and c.rows[0]["pps"] == 8907
    rep = next(r for r in c.rows if r["row"] == "server_report")
    assert rep["packets"] == 17811 and rep["latency_max_ms"] == 0.129
    s = rl("iperf2_server.txt")
    assert s.parameters["role"] == "server" and [r["packets"] for r in s.rows] == [8905, 8904, 17811]
    assert s.rows[1]["jitter_ms"] == 0.003
    p = rl("iperf2_server_plain.txt")
    assert p.variant == "plain" and p.rows[0]["packets"] == 4461 and p.rows[0]["end_s"] == 1.0002
    csv = rl("iperf2_csv.txt")
    assert csv.variant == "csv"
    r = csv.rows[0]
    assert r["bytes"] == 6557670 and r["bits_per_second"] == 52447356 and r["remote_port"] == 5297
    assert (r["start_s"], r["end_s"]) == (0.0, 1.0)


def test_netperf_tables():
    ts = rl("netperf_TCP_STREAM.txt")
    assert ts.variant == "TCP_STREAM" and ts.rows[0]["throughput_mbit_s"] == 18029.51
    assert ts.rows[0]["recv_socket_bytes"] == 131072
    us = rl("netperf_UDP_STREAM.txt")
    assert us.variant == "UDP_STREAM"
    assert us.rows[0]["messages_ok"] == 140336 and us.rows[0]["throughput_mbit_s"] == 1652.45
    assert us.rows[1]["messages_ok"] == 88889 and us.rows[1]["throughput_mbit_s"] == 1046.67
    nb = rl("netperf_udp_nobanner.txt")
    assert nb.variant == "UDP_STREAM" and nb.rows[1]["throughput"] == 1121.63 and nb.rows[0]["message_bytes"] == 1472
    rr = rl("netperf_TCP_RR.txt")
    assert rr.variant == "TCP_RR" and rr.rows[0]["transactions_per_s"] == 72149.08
    urr = rl("netperf_UDP_RR.txt")
    assert urr.variant == "UDP_RR" and urr.rows[0]["transactions_per_s"] == 86205.29
    omni = rl("netperf_UDP_RR_omni.txt")
    assert omni.variant == "UDP_RR_omni"
    assert omni.rows[0]["mean_latency_microseconds"] == 11.82
    assert omni.rows[0]["99th_percentile_latency_microseconds"] == 16


def test_tolerates_preamble_and_column_variations(tmp_path):
    src = (UDP_TOOLS / "udpmon_bw_scan.txt").read_text()
    # An extra banner line and trailing columns a newer version might add.
    lines = src.splitlines()
    lines.insert(0, "some shell noise before the tool started")
    hdr = next(i for i, x in enumerate(lines) if x.lstrip().startswith("pkt len;"))
    lines[hdr] += " new_col;"
    for i in range(hdr + 1, len(lines)):
        lines[i] += " 7;"
    p = tmp_path / "scan.txt"
    p.write_text("\n".join(lines) + "\n")
    log = read_runlog(p)
    assert log.column("recv_wire_rate_mbit").tolist() == [437.117, 336.449, 379.696, 555.99]
    assert log.column("new_col").tolist() == [7, 7, 7, 7]


@pytest.mark.parametrize("text, needle", [
    ("hello world\nthis is not a tool output\n", "not a UDP test tool output"),
    ("", "empty"),
    ("{\"a\": 1}", "iperf3"),
    (" Sun Nov 22 03:45:25 2026 :  UDPmon Version 1.5.2  CPUs Command line:  udpmon_bw_mon -d x\n", "summary header"),
])
def test_bad_files_name_the_file(tmp_path, text, needle):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(PcitraceError) as e:
        read_runlog(p)
    assert str(p) in str(e.value) and needle in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(PcitraceError, match="cannot read"):
        read_runlog(tmp_path / "nope.txt")


@pytest.mark.parametrize("damage,match", [
    (lambda lines: lines[:39] + [lines[39].replace(";", "; abc;", 1)] + lines[40:], "not five numbers"),
    (lambda lines: lines[:900] + [lines[900][:6]], "not five numbers|promises 2000"),
    (lambda lines: lines[:1000], "has 984 rows but the command line"),
    (lambda lines: lines[:40] + lines[41:], "not numbered one after another"),
])
def test_a_damaged_G_table_is_refused_not_read_short(tmp_path, damage, match):
    # Before: a single bad row ended the table there, and the run read as 24 packets, 0 lost.
    lines = (UDP_TOOLS / "udpmon_bw_1472_w12_G.txt").read_text().splitlines()
    p = tmp_path / "g.txt"
    p.write_text("\n".join(damage(lines)) + "\n")
    with pytest.raises(PcitraceError, match=match) as err:
        read_runlog(p)
    assert "line" in (err.value.where or "")


@pytest.mark.parametrize("tok,want", [("12", 12), ("-3", -3), ("1.5", 1.5), ("1e3", 1000.0), ("nan", None),
                                      ("inf", None), ("1" * 30, None), ("1.2.3", None), (".", None), ("", None)])
def test_a_number_is_one_a_column_can_hold(tok, want):
    from pcitrace.correlate.runlog import _num
    assert _num(tok) == want


@pytest.mark.parametrize("doc,where", [
    ('{"start": 1.5, "end": {}}', "`start`"),
    ('{"start": {"test_start": "x"}, "end": {}}', "`start.test_start`"),
    ('{"start": {}, "end": {}, "intervals": [{"sum": 7}]}', r"`intervals\[0\].sum`"),
    ('{"start": {}, "end": {"sum_sent": {"bytes": "many"}}}', "`end.sum_sent.bytes`"),
    ('{"start": {}, "end": {}, "intervals": true}', "`intervals`"),
])
def test_iperf3_json_of_the_wrong_type_names_the_key(tmp_path, doc, where):
    path = tmp_path / "run.json"
    path.write_text(doc)
    with pytest.raises(PcitraceError, match=where):
        read_runlog(path)


def test_iperf3_text_with_a_malformed_number_is_not_a_row(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("Connecting to host h, port 5201\n"
                    "[  5]   0.00-1.00   sec  1.2.3 MBytes  9.4 Mbits/sec  812\n"
                    "[  5]   1.00-2.00   sec  1.19 MBytes  10.0 Mbits/sec  860\n- - -\niperf Done.\n")
    log = read_runlog(path)
    assert [r["start_s"] for r in log.rows] == [1.0]

def test_netperf_parts():
    from pathlib import Path

    from pcitrace.correlate.runlog import (RunLog, _netperf_banner, _netperf_omni, _netperf_rows,
                                           _netperf_test_from_shape)
    log = RunLog("x", "netperf", "table")
    banner = "MIGRATED UDP REQUEST/RESPONSE TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to h1 () port 0"
    assert _netperf_banner(log, ["", banner]) == "UDP_RR" and log.parameters["host"] == "h1"
    assert _netperf_banner(RunLog("x", "netperf", "table"), ["no banner"]) is None
    assert not _netperf_omni(log, ["a b", "1 2"], "TCP_STREAM")
    assert _netperf_omni(log, ["Throughput,Elapsed Time (sec)", "941.5,10.0"], "TCP_STREAM")
    assert log.variant == "TCP_STREAM_omni" and log.rows == [{"throughput": 941.5, "elapsed_time_sec": 10.0}]
    data, unit = _netperf_rows(["Recv Send", "bytes  10^6bits/sec", "87380 16384 16384 10.00 941.23"])
    assert data == [(3, [87380, 16384, 16384, 10.0, 941.23])] and unit == "10^6bits/sec"
    log = RunLog("x", "netperf", "table")
    assert _netperf_test_from_shape(log, Path("x"), [(1, [1] * 5)]) == "TCP_STREAM"
    assert _netperf_test_from_shape(log, Path("x"), [(1, [1] * 6), (2, [1] * 4)]) == "UDP_STREAM"
    assert _netperf_test_from_shape(log, Path("x"), [(1, [262144] + [1] * 5), (2, [1, 1])]) == "UDP_RR"
    assert log.notes
    with pytest.raises(PcitraceError, match="matches no known test"):
        _netperf_test_from_shape(log, Path("x"), [(1, [1] * 3)])

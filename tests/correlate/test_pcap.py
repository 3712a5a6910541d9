"""pcap / pcapng reading, with captures written by dpkt holding UDPmon- and iperf-shaped payloads."""

from __future__ import annotations

import struct
from decimal import Decimal

import dpkt
import numpy as np
import pytest

from pcitrace.correlate.pcap import payload_sequence, read_pcap, udpmon_payload, write_pcap
from pcitrace.errors import PcitraceError

EPOCH_NS = 1_795_319_048_000_000_000


def _times(n, spacing_ps=12_000_000, jitter=True):
    rng = np.random.default_rng(3)
    t = np.arange(n, dtype=np.int64) * spacing_ps
    if jitter:
        t += rng.integers(0, 100_000, n)  # sub-us jitter: kept exactly by nanosecond pcaps
    return t - t % 1000


def test_udpmon_stream_nanosecond_pcap(tmp_path):
    t = _times(50)
    frames = [udpmon_payload(i, 638_440 + 120 * i, 1472) for i in range(50)]
    p = tmp_path / "s.pcap"
    write_pcap(p, t, frames, start_epoch_ns=EPOCH_NS)
    u = read_pcap(p)
    assert u.payload_kind == "udpmon"
    assert np.array_equal(u.time_ps, t - t[0])
    assert u.start_epoch_ns == EPOCH_NS + int(t[0]) // 1000
    assert u.size.tolist() == [1472] * 50
    assert u.seq.tolist() == list(range(50))
    assert int(u.dst_port[0]) == 14299


def test_microsecond_pcap_keeps_exact_microseconds(tmp_path):
    t = _times(20, jitter=False) + 7_000_000  # whole microseconds
    p = tmp_path / "us.pcap"
    write_pcap(p, t, [udpmon_payload(i, 0, 100) for i in range(20)], start_epoch_ns=EPOCH_NS, nanosecond=False)
    u = read_pcap(p)
    assert np.array_equal(u.time_ps, t - t[0])
    assert u.seq.tolist() == list(range(20))


def _eth_udp(payload: bytes, sport: int, dport: int) -> bytes:
    udp = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    udp.ulen = 8 + len(payload)
    ip = dpkt.ip.IP(src=b"\x0a\0\0\1", dst=b"\x0a\0\0\2", p=dpkt.ip.IP_PROTO_UDP, data=udp)
    ip.len = 20 + udp.ulen
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_pcapng_iperf3_with_other_traffic(tmp_path):
    """iperf3 payload (sec, usec, 64-bit count, big-endian) in a pcapng; an unrelated DNS packet
    is filtered out by the stream's port, and nanosecond timestamps survive."""
    p = tmp_path / "i3.pcapng"
    t0 = Decimal(1_795_319_048)
    with open(p, "wb") as f:
        shb = dpkt.pcapng.SectionHeaderBlockLE()
        idb = dpkt.pcapng.InterfaceDescriptionBlockLE(
            linktype=dpkt.pcap.DLT_EN10MB,
            opts=[dpkt.pcapng.PcapngOptionLE(code=dpkt.pcapng.PCAPNG_OPT_IF_TSRESOL, data=b"\x09"),
                  dpkt.pcapng.PcapngOptionLE(code=dpkt.pcapng.PCAPNG_OPT_ENDOFOPT)])
        w = dpkt.pcapng.Writer(f, shb=shb, idb=idb)
        for i in range(30):
            ns = int(t0 * 10**9) + i * 117_765 + (i % 3) * 7
            w.writepkt(dpkt.pcapng.EnhancedPacketBlockLE(
                pkt_data=_eth_udp(struct.pack(">IIq", 1, 2, i + 1) + b"x" * 1448, 40001, 5201),
                ts_high=ns >> 32, ts_low=ns & 0xFFFFFFFF))
            if i == 10:
                w.writepkt(dpkt.pcapng.EnhancedPacketBlockLE(pkt_data=_eth_udp(b"dns?", 5353, 53),
                                                             ts_high=ns >> 32, ts_low=ns & 0xFFFFFFFF))
    u = read_pcap(p)
    assert u.payload_kind == "iperf3"
    assert len(u) == 30 and u.seq.tolist() == list(range(1, 31))
    assert u.size[0] == 16 + 1448
    # nanosecond resolution kept: packet 2 is 2 * 117765 + 14 ns after packet 0
    assert int(u.time_ps[2]) == (2 * 117_765 + 14) * 1000


def test_iperf2_payload_detected(tmp_path):
    # iperf2: int32 id, u32 sec, u32 usec (network order)
    t = _times(40)
    pls = [struct.pack(">iII", i, 1_795_319_048, 5 * i) + b"\0" * 1000 for i in range(40)]
    p = tmp_path / "i2.pcap"
    write_pcap(p, t, pls, dport=5001)
    u = read_pcap(p)
    assert u.payload_kind == "iperf2" and u.seq.tolist() == list(range(40))


def test_port_filter_and_errors(tmp_path):
    t = _times(5)
    p = tmp_path / "a.pcap"
    write_pcap(p, t, [udpmon_payload(i, 0, 64) for i in range(5)])
    with pytest.raises(PcitraceError, match="port 9"):
        read_pcap(p, port=9)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"this is not a pcap file at all")
    with pytest.raises(PcitraceError) as e:
        read_pcap(bad)
    assert str(bad) in str(e.value)
    with pytest.raises(PcitraceError, match="cannot open"):
        read_pcap(tmp_path / "missing.pcap")


def test_payload_sequence_layouts():
    head = np.zeros((2, 24), np.uint8)
    head[0, :16] = np.frombuffer(struct.pack("<iiq", 4, 1, 123456789012), np.uint8)
    head[1, :16] = np.frombuffer(struct.pack("<iiq", 4, 1, 7), np.uint8)
    assert payload_sequence(head, "udpmon").tolist() == [123456789012, 7]
    assert payload_sequence(head, "none").tolist() == [-1, -1]


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_a_cut_pcap_is_refused_not_read_short(tmp_path, cut):
    # dpkt yields a cut last record as a short frame; skipping it would silently lose packets
    whole = tmp_path / "w.pcap"
    write_pcap(whole, np.arange(100, dtype=np.int64) * 12_000_000,
               [udpmon_payload(i, 0, 1472) for i in range(100)])
    assert len(read_pcap(whole)) == 100
    data = whole.read_bytes()
    part = tmp_path / "cut.pcap"
    part.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(PcitraceError, match="ends in the middle of a record") as err:
        read_pcap(part)
    assert "record" in str(err.value)


def test_a_cut_pcapng_is_refused_not_read_short(tmp_path):
    test_pcapng_iperf3_with_other_traffic(tmp_path)
    data = (tmp_path / "i3.pcapng").read_bytes()
    part = tmp_path / "cut.pcapng"
    part.write_bytes(data[:len(data) - 700])
    with pytest.raises(PcitraceError, match="ends in the middle of a record"):
        read_pcap(part)


@pytest.mark.parametrize("blen", [0xFFFFFFF0, 0x7FFFFFFC, 6, 13])
def test_a_pcapng_block_length_past_the_file_is_an_error_not_an_allocation(tmp_path, blen):
    # fuzz corpus pcap/memory_0fd9282eab: a block length of 0xFFFFFFF0 made dpkt allocate 4 GiB
    shb = struct.pack("<II", 0x0A0D0D0A, 28) + struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
    bad = struct.pack("<II", 6, blen) + b"\0" * 24
    path = tmp_path / "bad.pcapng"
    path.write_bytes(shb + bad)
    with pytest.raises(PcitraceError, match="block 2"):
        read_pcap(path)

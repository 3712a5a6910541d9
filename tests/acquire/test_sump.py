"""SUMP byte formats: commands, metadata, flags, triggers, sample words and run-length coding."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.acquire import sump
from pcitrace.errors import PcitraceError


def test_long_command_is_opcode_then_little_endian_argument():
    assert sump.long_command(0x80, 0x00123456) == bytes([0x80, 0x56, 0x34, 0x12, 0x00])
    with pytest.raises(ValueError):
        sump.long_command(0x02, 1)


def test_short_counts_pack_read_low_and_delay_high_minus_one():
    # 1000 quads read (4000 samples), 900 quads after the trigger
    got = sump.count_commands(1000, 900, extended=False)
    assert got == bytes([0x81]) + struct.pack("<HH", 999, 899)
    with pytest.raises(ValueError):
        sump.count_commands(0x10001, 1, extended=False)


def test_extended_counts_use_0x84_read_and_0x83_delay():
    got = sump.count_commands(0x20000, 0x18000, extended=True)
    assert got == bytes([0x84]) + struct.pack("<I", 0x1FFFF) + bytes([0x83]) + struct.pack("<I", 0x17FFF)


def test_metadata_round_trip_and_byte_by_byte_parsing():
    info = sump.DeviceInfo(name="Logic Sniffer v1.01", fpga_version="3.07", ancillary_version="PIC 2.4",
                           probes=32, sample_memory=24576, dynamic_memory=0, max_rate_hz=200_000_000,
                           protocol_version=2)
    raw = sump.encode_metadata(info)
    assert raw[0] == 0x01 and raw[-1] == 0x00
    p = sump.MetadataParser()
    for b in raw:                       # a slow serial line delivers it a byte at a time
        assert not p.done
        p.feed(bytes([b]))
    assert p.done
    got = p.info
    assert (got.name, got.fpga_version, got.ancillary_version) == ("Logic Sniffer v1.01", "3.07", "PIC 2.4")
    assert (got.probes, got.sample_memory, got.max_rate_hz, got.protocol_version) == (32, 24576, 200_000_000, 2)


def test_metadata_short_tokens_and_unknown_tokens():
    raw = (b"\x01Shrimp1.0\x00" + b"\x40\x04" + b"\x41\x02" + b"\x21" + struct.pack(">I", 262144)
           + b"\x2a" + struct.pack(">I", 7) + b"\x05odd\x00" + b"\x00")
    info = sump.parse_metadata(raw)
    assert info.name == "Shrimp1.0" and info.probes == 4 and info.protocol_version == 2
    assert info.sample_memory == 262144 and not info.extended_counts
    assert info.unknown_tokens == {0x2A: 7, 0x05: "odd"}


def test_metadata_without_end_token_is_an_error():
    with pytest.raises(PcitraceError, match="end token"):
        sump.parse_metadata(b"\x01name\x00\x20\x00\x00")
    with pytest.raises(PcitraceError, match="unknown type"):
        sump.parse_metadata(b"\xe0")


def test_flags_bits():
    f = sump.Flags(groups=(True, True, False, False), rle=True)
    assert f.encode() == (1 << 4) | (1 << 5) | (1 << 8)
    assert sump.Flags(demux=True, groups=(False, True, True, True)).encode() == 0x01 | 0x04
    for v in (0, 0x3C, 0x1FF, 0xC000 | 0x0A01):
        assert sump.Flags.decode(v).encode() == v
    assert sump.Flags.decode(0x3C & ~0x08).groups == (False, True, False, False)


def test_trigger_config_word_layout():
    stage = sump.TriggerStage(mask=0xFF, value=0x0F, level=2, delay=5, channel=3, serial=True, start=True)
    assert stage.config_word() == 5 | (2 << 16) | (3 << 20) | (1 << 26) | (1 << 27)
    assert sump.TriggerStage.from_words(0xFF, 0x0F, stage.config_word()) == stage
    cmds = sump.TriggerStage(mask=1, value=0, start=True).commands(2)
    assert cmds[0] == 0xC8 and cmds[5] == 0xC9 and cmds[10] == 0xCA
    assert cmds[11:15] == struct.pack("<I", 1 << 27)


@pytest.mark.parametrize("rate, div, demux, actual", [
    (100e6, 0, False, 100e6), (50e6, 1, False, 50e6), (200e6, 0, True, 200e6),
    (1e6, 99, False, 1e6), (33.3e6, 2, False, 100e6 / 3), (150e6, 0, True, 200e6),
])
def test_divider(rate, div, demux, actual):
    got = sump.divider_for(rate)
    assert got[0] == div and got[1] is demux and got[2] == pytest.approx(actual)
    assert sump.rate_for(div, demux) == pytest.approx(actual)


def test_disabled_groups_are_not_sent_and_come_back_in_place():
    words = np.array([0x11223344, 0xAABBCCDD], np.uint32)
    groups = (True, False, True, False)
    raw = sump.words_to_bytes(words, groups)
    assert raw == bytes([0x44, 0x22, 0xDD, 0xBB])
    assert sump.words_from_bytes(raw + b"\x99", groups).tolist() == [0x00220044, 0x00BB00DD]


def test_rle_count_precedes_its_value_in_the_stream():
    # one group: flag is bit 7; stream (newest first) = count 3, value 0x05, value 0x06
    stream = np.array([0x83, 0x05, 0x06], np.uint32)
    got = sump.rle_decode_stream(stream, (True, False, False, False))
    assert got.tolist() == [5, 5, 5, 5, 6]
    # a count left dangling by a cut transfer is dropped
    assert sump.rle_decode_stream(np.array([0x05, 0x82], np.uint32), (True, False, False, False)).tolist() == [5]


def test_rle_counts_span_all_sent_bytes():
    groups = (True, False, True, False)        # two bytes sent: flag is bit 23 (top of group 2)
    samples = np.full(300, 0x00070001, np.uint32)
    entries, idx = sump.rle_encode(samples, groups)
    assert entries.tolist() == [0x00070001, (1 << 23) | (0x01 << 16) | 0x2B]   # 299 = 0x012B
    assert (idx == 0).all()
    assert sump.rle_decode_stream(entries[::-1], groups)[::-1].tolist() == samples.tolist()


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 0x7F), st.integers(1, 400)), min_size=1, max_size=30))
def test_rle_round_trip(runs):
    groups = (True, False, False, False)        # 7-bit counts, so long runs must be split
    samples = np.concatenate([np.full(n, v, np.uint32) for v, n in runs])
    entries, sample_entry = sump.rle_encode(samples, groups)
    assert not (entries[sample_entry] & 0x80).any()           # each sample maps to a value word
    assert (entries[sample_entry] == samples).all()
    assert len(entries) <= 2 * len(samples)
    back = sump.rle_decode_stream(entries[::-1], groups)[::-1]
    assert back.tolist() == samples.tolist()


def test_rle_clears_the_flag_channel_of_values():
    entries, _ = sump.rle_encode(np.array([0xFF, 0xFF], np.uint32), (True, False, False, False))
    assert entries.tolist() == [0x7F, 0x81]

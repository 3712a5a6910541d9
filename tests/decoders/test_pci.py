"""The sigrok decoder decoders/pci, run by the real sigrok-cli on hand-written bus activity.

Every expectation below is worked out from the PCI 2.3 / PCI-X 1.0 rules as docs/records.md
states them (clock by clock, in the comments), not taken from the decoder's output. Each
scenario runs twice: as a state-mode .sr (clock=none) and as a timing-mode .sr with CLK.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from busgen import DECODERS, Bus, channel_map, parity, run_decoder
from pcitrace.decode.facts import FINDING_KINDS, RECORD_FIELDS

pytestmark = pytest.mark.sigrok

KEYS = {name for name, _ in RECORD_FIELDS} | {"start_sample", "end_sample"}


def decode(sigrok_cli, tmp_path, bus: Bus, timing: bool, mode="pci", control_only=False,
           extra=("gnt",), options=""):
    sr = bus.write(tmp_path / ("t.sr" if timing else "s.sr"), timing=timing)
    opts = f"clock={'clk' if timing else 'none'}:mode={mode}:width={bus.width}"
    if options:
        opts += ":" + options
    txns, words, findings = run_decoder(
        sigrok_cli, sr, channel_map(bus.width, timing, control_only, extra), opts)
    for t in txns:
        assert set(t) == KEYS
    for f in findings:
        assert f["kind"] in FINDING_KINDS
    return txns, words, findings


def clock_sample(i: int, timing: bool, k: int = 8) -> int:
    """Sample number of bus clock i as busgen writes it."""
    return (i + 1) * k if timing else i


def expect(rec: dict, **fields):
    got = {k: rec[k] for k in fields}
    assert got == fields


@pytest.fixture(params=[False, True], ids=["state", "timing"])
def timing(request):
    return request.param


def test_burst_read_with_waits(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2, GNT=1)                                          # c0 c1: GNT# asserted, idle
    b.clock(F=1, AD=0x80001000, CBE=0x6)                      # c2 address: memory read
    b.clock(F=1, I=1, CBE=0x0)                                # c3 turnaround: target wait
    b.clock(F=1, I=1, D=1)                                    # c4 DEVSEL# 2 after H: medium; wait
    b.clock(F=1, I=1, D=1, T=1, AD=0xAAAA5555)                # c5 data 1
    b.clock(F=1, D=1, T=1)                                    # c6 IRDY# off: initiator wait
    b.clock(F=0, I=1, D=1, T=1, AD=0x12345678, CBE=0xC)       # c7 data 2 (last: FRAME# off)
    b.idle(2, GNT=0)
    txns, words, findings = decode(sigrok_cli, tmp_path, b, timing)
    assert findings == []
    assert len(txns) == 1
    expect(txns[0], command="mem_read", address=0x80001000, dac=False, clocks=6,
           data_phases=2, bytes=4 + 2, devsel="medium", termination="normal",
           initiator_waits=1, target_waits=2, parity_error=False, width=32, gnt=1, tag=-1,
           requester=-1, byte_count=-1, data_index=0,
           start_sample=clock_sample(2, timing), end_sample=clock_sample(7, timing))
    assert [(w["value"], w["byte_enables"], w["record"]) for w in words] == \
        [(0xAAAA5555, 0x0, 0), (0x12345678, 0xC, 0)]
    assert [w["sample"] for w in words] == [clock_sample(5, timing), clock_sample(7, timing)]


def test_terminations(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2)
    # retry: STOP# without TRDY# on the first data phase (PCI 3.3.3.2.2)
    b.clock(F=1, AD=0x00000810, CBE=0xA)             # config read, fast DEVSEL# next clock
    b.clock(F=1, I=1, D=1, S=1)                      # k: S and D, no data before -> retry
    b.clock(I=1, D=1, S=1)
    b.idle(2)
    # disconnect with data, IRDY# asserted on k (Disconnect-A)
    b.clock(F=1, AD=0x1000, CBE=0x7)
    b.clock(F=1, I=1, D=1, T=1, AD=1, CBE=0)         # data 1
    b.clock(F=1, I=1, D=1, T=1, S=1, AD=2)           # data 2 with STOP#
    b.clock(I=1, D=1, S=1)                           # master ends; termination clock
    b.idle(2)
    # disconnect with data where the initiator waits on k: the data moves a clock later
    b.clock(F=1, AD=0x2000, CBE=0x7)
    b.clock(F=1, D=1, T=1, S=1, AD=3, CBE=0)         # k: T, S, D but no IRDY#: termination clock
    b.clock(I=1, D=1, T=1, S=1)                      # data 1 under STOP#, last
    b.idle(2)
    # disconnect without data: STOP# without TRDY# after a data phase
    b.clock(F=1, AD=0x3000, CBE=0x7)
    b.clock(F=1, I=1, D=1, T=1, AD=4, CBE=0)         # data 1
    b.clock(F=1, I=1, D=1, S=1)                      # k, no data on it
    b.clock(I=1, D=1, S=1)
    b.idle(2)
    # target abort: DEVSEL# dropped with STOP# after DEVSEL# had been asserted
    b.clock(F=1, AD=0x4000, CBE=0x6)
    b.clock(F=1, I=1)                                # turnaround
    b.clock(F=1, I=1, D=1)                           # medium
    b.clock(F=1, I=1, S=1)                           # S without D: target abort
    b.clock(I=1, S=1)
    b.idle(2)
    # master abort: no DEVSEL# by the subtractive clock; FRAME# then IRDY# released
    b.clock(F=1, AD=0x5000, CBE=0x6)
    b.clock(F=1, I=1, n=4)
    b.clock(I=1)
    b.idle(3)
    txns, words, findings = decode(sigrok_cli, tmp_path, b, timing)
    assert findings == []
    got = [(t["termination"], t["devsel"], t["data_phases"], t["clocks"], t["initiator_waits"],
            t["target_waits"]) for t in txns]
    assert got == [
        ("retry", "fast", 0, 3, 0, 0),
        ("disconnect_with_data", "fast", 2, 4, 0, 0),
        ("disconnect_with_data", "fast", 1, 3, 0, 0),
        ("disconnect_without_data", "fast", 1, 4, 0, 0),
        ("target_abort", "medium", 0, 5, 0, 2),
        ("master_abort", "none", 0, 6, 0, 5),
    ]
    assert [t["command"] for t in txns] == ["config_read", "mem_write", "mem_write", "mem_write",
                                           "mem_read", "mem_read"]
    assert [t["data_index"] for t in txns] == [0, 0, 2, 3, 4, 4]
    assert len(words) == 4


def test_dac_fast_back_to_back_and_devsel_speeds(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x00002000, CBE=0xD)             # DAC: low address
    b.clock(F=1, AD=0x00000001, CBE=0x7)             # high address, memory write = H
    b.clock(I=1, D=1, T=1, AD=0xCAFE, CBE=0)         # D one after H: fast; single data phase
    b.clock(F=1, AD=0x100, CBE=0x3)                  # fast back-to-back I/O write
    b.clock(F=1, I=1, AD=7)                          # wait
    b.clock(F=1, I=1)
    b.clock(I=1, D=1, T=1)                           # D 3 after the address: slow
    b.clock(F=1, AD=0x104, CBE=0x2)                  # back-to-back again: I/O read
    b.clock(F=1, I=1, n=3)
    b.clock(I=1, D=1, T=1)                           # 4 after: subtractive
    b.idle(2)
    txns, _, findings = decode(sigrok_cli, tmp_path, b, timing)
    assert findings == []
    expect(txns[0], dac=True, address=0x1_0000_2000, command="mem_write", devsel="fast",
           clocks=3, data_phases=1, bytes=4)
    expect(txns[1], dac=False, address=0x100, command="io_write", devsel="slow", clocks=4,
           target_waits=2)
    expect(txns[2], command="io_read", devsel="subtractive", clocks=5, target_waits=3)


def test_64bit_transfer_and_parity(sigrok_cli, tmp_path, timing):
    b = Bus(width=64)
    b.idle(2)
    b.clock(F=1, REQ64=1, AD=0x8000, CBE=0x7)
    b.clock(F=1, I=1, D=1, T=1, REQ64=1, ACK64=1, AD=0x11112222_33334444, CBE=0x00)
    b.clock(I=1, D=1, T=1, ACK64=1, AD=0x55556666_77778888, CBE=0x0F)   # upper 4 bytes only
    b.idle(2)
    b.clock(F=1, AD=0x9000, CBE=0x7)                 # 32-bit: no REQ64#
    b.clock(I=1, D=1, T=1, AD=0x0F0F, CBE=0)         # data
    b.clock(PAR=1 - parity(0x0F0F, 0))               # wrong PAR for that data phase
    b.idle(2)
    txns, words, findings = decode(sigrok_cli, tmp_path, b, timing, extra=("gnt", "req64", "ack64"))
    expect(txns[0], width=64, bytes=12, data_phases=2, parity_error=False)
    assert [w["value"] for w in words[:2]] == [0x11112222_33334444, 0x55556666_77778888]
    assert [w["byte_enables"] for w in words[:2]] == [0x00, 0x0F]
    expect(txns[1], width=32, bytes=4, parity_error=True)
    assert [(f["kind"], f["sample"]) for f in findings] == \
        [("parity_error", clock_sample(8, timing))]
    assert "data phase 1" in findings[0]["message"]


def test_control_only_capture(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x1, CBE=0x7)
    b.clock(F=1, I=1, D=1)
    b.clock(F=1, I=1, D=1, T=1)
    b.clock(I=1, D=1, T=1)
    b.idle(2)
    txns, words, findings = decode(sigrok_cli, tmp_path, b, timing, control_only=True, extra=())
    expect(txns[0], command="unknown", address=0, data_phases=2, bytes=8, devsel="fast",
           termination="normal", target_waits=1, gnt=-1, parity_error=False, clocks=4)
    assert [(w["value"], w["byte_enables"]) for w in words] == [(0, 0), (0, 0)]


def test_pcix_split_response_and_split_completion(sigrok_cli, tmp_path, timing):
    attr = (1 << 30) | (5 << 24) | (1 << 16) | (2 << 11) | (3 << 8) | 0x80
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x1000, CBE=0xE)                 # memory read block
    b.clock(F=1, AD=attr, CBE=0x0)                   # attribute phase: 128 bytes, tag 5, RO
    b.clock(F=1, I=1, D=1)                           # decode A
    b.clock(I=1, T=1)                                # Split Response: TRDY# with DEVSEL# off
    b.idle(2)
    sc_addr = (5 << 24) | (0x0113 << 8) | 0x00
    sc_attr = (1 << 29) | (0x0200 << 8) | 4          # SCM, completer 02:00.0, 4 bytes
    b.clock(F=1, AD=sc_addr, CBE=0xC)                # split completion
    b.clock(F=1, AD=sc_attr, CBE=0x0)
    b.clock(I=1, D=1, T=1, AD=(1 << 28) | (0x01 << 20) | 4, CBE=0)   # message: target abort
    b.idle(2)
    b.clock(F=1, AD=0x2000, CBE=0x6)                 # memory read DWORD
    b.clock(F=1, AD=(7 << 24) | (0x0113 << 8), CBE=0x3)   # byte enables: bytes 2, 3
    b.clock(F=1, I=1, D=1)
    b.clock(I=1, D=1, T=1, S=1, AD=0xDD)              # single data phase disconnect
    b.idle(2)
    txns, words, findings = decode(sigrok_cli, tmp_path, b, timing, mode="pcix")
    assert findings == []
    expect(txns[0], command="mem_read_block", termination="split_response", devsel="fast",
           tag=5, requester=0x113, byte_count=128, relaxed_ordering=True, no_snoop=False,
           data_phases=0, target_waits=1, clocks=4)
    expect(txns[1], command="split_completion", tag=5, requester=0x113, byte_count=4,
           data_phases=1, termination="normal", devsel="fast")
    expect(txns[2], command="mem_read_dword", byte_count=2, tag=7, requester=0x113,
           termination="disconnect_with_data", data_phases=1)


def test_findings(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2)
    b.clock(I=1, n=2)                                # c2 c3: IRDY# with no transaction
    b.idle(2)
    b.clock(F=1, AD=0x10, CBE=0x7)                   # c6
    b.clock(F=1, I=1, D=1, CBE=0x0)                  # c7 wait
    b.clock(I=1, D=1, CBE=0x0)                       # c8 last data phase pending
    b.clock(F=1, AD=0x20, CBE=0x7)                   # c9: FRAME# again before it completed
    b.clock(F=1, I=1, CBE=0x0, n=17)                 # c10..c26: long initial latency
    b.clock(F=1, I=1, CBE=0x3, T=1)                  # c27 TRDY# without DEVSEL#; C/BE# changed
    b.clock(I=1, D=1, T=1, CBE=0x3)                  # c28 data, 19 clocks after c9; DEVSEL# late
    b.idle(3)
    txns, _, findings = decode(sigrok_cli, tmp_path, b, timing)
    kinds = [(f["kind"], f["sample"]) for f in findings]
    assert kinds == [
        ("irdy_without_transaction", clock_sample(2, timing)),
        ("frame_reasserted", clock_sample(9, timing)),
        ("trdy_without_devsel", clock_sample(27, timing)),
        ("byte_enables_changed_in_wait", clock_sample(27, timing)),
        ("devsel_late", clock_sample(28, timing)),
        ("initial_latency", clock_sample(28, timing)),
    ]
    # the first one had DEVSEL# and no STOP#: "normal" by the rules, though no data moved
    assert [t["termination"] for t in txns] == ["normal", "normal"]
    assert [t["devsel"] for t in txns] == ["fast", "subtractive"]


def late_devsel_bus() -> Bus:
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x100, CBE=0x6)                  # c2 address (H), memory read
    b.clock(F=1, I=1, CBE=0x0, n=3)                  # c3..c5 waits, no DEVSEL#
    b.clock(I=1, D=1, T=1, CBE=0x0, AD=1)            # c6: DEVSEL# n = 4, subtractive: legal
    b.idle(2)
    b.clock(F=1, AD=0x200, CBE=0x6)                  # c9 address (H)
    b.clock(F=1, I=1, CBE=0x0, n=4)                  # c10..c13 waits: the master aborts by now
    b.clock(F=1, I=1, D=1, CBE=0x0)                  # c14: DEVSEL# n = 5: late
    b.clock(F=1, I=1, D=1, CBE=0x0, n=2)             # c15 c16 still DEVSEL#: reported once
    b.clock(I=1, D=1, T=1, CBE=0x0, AD=2)            # c17 data
    b.idle(2)
    b.clock(F=1, AD=0x300, CBE=0xD)                  # c20 DAC first phase
    b.clock(F=1, AD=0x1, CBE=0x7)                    # c21 second phase (H), memory write
    b.clock(F=1, I=1, CBE=0x0, n=5)                  # c22..c26
    b.clock(I=1, D=1, T=1, CBE=0x0, AD=3)            # c27: n = 6 from H
    b.idle(2)
    return b


def test_devsel_after_the_subtractive_slot(sigrok_cli, tmp_path, timing):
    txns, _, findings = decode(sigrok_cli, tmp_path, late_devsel_bus(), timing)
    # the records are those of subtractive decodes, by the rules; the late ones are findings
    assert [(t["devsel"], t["termination"], t["data_phases"], t["target_waits"]) for t in txns] == [
        ("subtractive", "normal", 1, 3), ("subtractive", "normal", 1, 7),
        ("subtractive", "normal", 1, 5)]
    assert [(f["kind"], f["sample"]) for f in findings] == [
        ("devsel_late", clock_sample(14, timing)), ("devsel_late", clock_sample(27, timing))]
    assert "5 clocks after the address phase" in findings[0]["message"]
    assert "6 clocks after the second address phase" in findings[1]["message"]


def test_devsel_late_in_a_control_only_capture(sigrok_cli, tmp_path, timing):
    # without C/BE# the DAC is not seen: n = 5 could be a DAC's subtractive decode, 7 cannot
    txns, _, findings = decode(sigrok_cli, tmp_path, late_devsel_bus(), timing, control_only=True,
                               extra=())
    assert [t["devsel"] for t in txns] == ["subtractive"] * 3
    assert [(f["kind"], f["sample"]) for f in findings] == [("devsel_late", clock_sample(27, timing))]
    assert "7 clocks after the address phase" in findings[0]["message"]


def test_glitch_in_timing_mode(sigrok_cli, tmp_path):
    from pcitrace.capture import write_sr
    from pcitrace.capture.model import Capture
    b = Bus()
    b.idle(6)
    b.clock(F=1, AD=0x10, CBE=0x7)
    b.clock(I=1, D=1, T=1)
    b.idle(3)
    cap = b.capture(timing=True)
    arrays = cap.read()
    arrays["FRAME"][3 * 8 + 5] = 0                   # one-sample FRAME# pulse between clocks
    widths = {c.name: c.width for c in cap.channels}
    write_sr(Capture.from_arrays(arrays, cap.timebase, widths=widths), tmp_path / "g.sr")
    txns, _, findings = run_decoder(sigrok_cli, tmp_path / "g.sr",
                                    channel_map(32, True), "clock=clk")
    assert [(f["kind"], f["sample"]) for f in findings] == [("glitch", 3 * 8 + 5)]
    assert "FRAME#" in findings[0]["message"]
    assert len(txns) == 1 and txns[0]["start_sample"] == 7 * 8


def test_capture_starting_mid_transaction_and_truncated_end(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.clock(F=1, I=1, D=1, T=1)                      # mid-burst at clock 0: ignored
    b.clock(I=1, D=1, T=1)
    b.idle(2)
    b.clock(F=1, AD=0x40, CBE=0x7)
    b.clock(I=1, D=1, T=1)
    b.idle(1)
    b.clock(F=1, AD=0x80, CBE=0x7)                   # still running when the capture ends
    b.clock(F=1, I=1, D=1)
    txns, _, findings = decode(sigrok_cli, tmp_path, b, timing)
    assert findings == []
    assert [t["address"] for t in txns] == [0x40]


def test_first_clock_address_phase(sigrok_cli, tmp_path):
    b = Bus()
    b.clock(F=1, AD=0x44, CBE=0x7, GNT=1)           # clock 0 with F and not I: an address phase
    b.clock(I=1, D=1, T=1)
    b.idle(2)
    txns, _, _ = decode(sigrok_cli, tmp_path, b, False)
    expect(txns[0], address=0x44, start_sample=0, gnt=0)   # no clock before clock 0 -> 0


def test_show_lists_channels_options_rows(sigrok_cli):
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS))
    out = subprocess.run([sigrok_cli, "-L"], capture_output=True, env=env, check=True).stdout.decode()
    assert any(line.split()[:1] == ["pci"] for line in out.splitlines())
    proc = subprocess.run([sigrok_cli, "-P", "pci", "--show"], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    show = proc.stdout.decode()
    for ch in ("frame", "irdy", "trdy", "stop", "devsel", "clk", "ad0", "ad63", "cbe7", "par64",
               "req64", "ack64", "gnt"):
        assert f"{ch} (" in show, ch
    for opt in ("clock", "mode", "width", "bus"):
        assert f"{opt}:" in show.replace("'", ""), opt
    for row in ("phases", "commands", "data", "terminations", "warnings"):
        assert f"{row} " in show or f"{row}\n" in show, row


def test_annotations_and_pcix_attribute_text(sigrok_cli, tmp_path):
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x00010A08, CBE=0xB)             # config write type 0, function 2, reg 0x08
    b.clock(I=1, D=1, T=1, AD=5, CBE=0)
    b.idle(2)
    sr = b.write(tmp_path / "a.sr")
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS))
    proc = subprocess.run([sigrok_cli, "-i", str(sr), "-P",
                           "pci:" + channel_map() + ":clock=none", "-A", "pci"],
                          capture_output=True, env=env)
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "Configuration Write @ 00010A08" in text
    assert "Type 0: function 2, register 0x08" in text
    assert "Data phase 1" in text and "normal, 1 data phase, 4 bytes" in text

"""The sigrok decoder on the OpenCores PCI bridge testbench trace (tests/data/conformance, copied from ../shared).

Nobody on this project wrote that trace, so it is checked against what its own testbench says:
  - pci_mon.log: every "Undetected Address/Read Data Parity Error" (a parity error the
    testbench injected and no device reported) must be a parity_error finding on the phase
    it names, two clocks before the monitor's time (PAR comes one clock after the phase, the
    monitor looks one clock after that);
  - pci_tb.log: the tests that provoke target and master aborts must show them, and a read
    from the behavioural PCI target must have the DEVSEL# speed the test configured.
The only other findings allowed are the parity errors the testbench injected on purpose and
a device *did* detect (so the monitor stayed quiet): each is followed within four clocks by
PERR# (data phase) or SERR# (address phase). The whole trace (~647k clocks) decodes in about
ten seconds, so it runs in full (marked slow).
"""

from __future__ import annotations

import collections
import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from pcitrace.capture.clocked import bus_clocks
from pcitrace.capture.profile import BusProfile, Profile
from pcitrace.decode.sigrok import run_sigrok

from tests.conftest import OPENCORES_MON  # noqa: E402

pytestmark = [pytest.mark.sigrok, pytest.mark.slow]

PERIOD_PS = 30000   # 33.33 MHz
SIGNALS = dict(clk="pci_clock", frame_n="FRAME", irdy_n="IRDY", trdy_n="TRDY", stop_n="STOP",
               devsel_n="DEVSEL", ad="AD", cbe_n="CBE", par="PAR", perr_n="PERR", serr_n="SERR",
               idsel="TAR0_IDSEL")
BUS = BusProfile("pci", "pci", SIGNALS)
TB_LOG = OPENCORES_MON.with_name("pci_tb.log.gz")


@pytest.fixture(scope="module")
def decoded(sigrok_cli, opencores_vcd):
    return run_sigrok(opencores_vcd, BUS)


@pytest.fixture(scope="module")
def error_lines(opencores_vcd):
    """Per-clock times, PERR# and SERR# of the trace (the clocked view the decoder saw)."""
    from pcitrace.capture import open_capture
    cap = open_capture(opencores_vcd)
    slim = BusProfile("pci", "pci", dict(clk="pci_clock", frame_n="FRAME", perr_n="PERR",
                                         serr_n="SERR"))
    t, perr, serr = [], [], []
    for ch in bus_clocks(cap, slim):
        t.append(ch.times_ps)
        perr.append(ch.sig["perr_n"])
        serr.append(ch.sig["serr_n"])
    return np.concatenate(t), np.concatenate(perr), np.concatenate(serr)


def monitor_events():
    text = OPENCORES_MON.read_text()
    return [(m.group(1), m.group(2), int(m.group(3), 16), int(m.group(4)))
            for m in re.finditer(r"monitor - (\w+) ([\w ]+?) Parity Error, Address 'h([0-9a-f]+)"
                                 r", CBE 'h[0-9a-f]+, PAR: 'h[0-9a-f]+, at\s+(\d+)", text)]


def test_every_undetected_parity_error_is_flagged_on_its_phase(decoded):
    records, _, findings = decoded
    assert set(findings["kind"]) == {"parity_error"}
    by_time = collections.defaultdict(list)
    for f in findings:
        by_time[int(f["time_ps"])].append(str(f["message"]))
    undetected = [e for e in monitor_events() if e[0] == "Undetected"]
    assert len(undetected) == 209
    starts = records["start_ps"]
    for _, what, address, t in undetected:
        phase_t = t - 2 * PERIOD_PS
        msgs = by_time.get(phase_t)
        assert msgs, f"no parity finding for the {what} parity error the monitor saw at {t}"
        if what == "Address":
            assert any("address phase" in m for m in msgs), msgs
            # the flagged phase belongs to a transaction starting there (or one clock before
            # for the second phase of a DAC) whose address holds the monitor's address
            k = np.searchsorted(starts, phase_t, side="right") - 1
            r = records[k]
            assert phase_t - int(r["start_ps"]) in (0, PERIOD_PS)
            a = int(r["address"])
            assert address in (a & 0xFFFFFFFF, a >> 32)
        else:
            assert what == "Read Data" and any("data phase" in m for m in msgs), msgs
        k = np.searchsorted(starts, phase_t, side="right") - 1
        assert records["parity_error"][k]


def test_other_parity_findings_are_injected_errors_a_device_reported(decoded, error_lines):
    _, _, findings = decoded
    t, perr, serr = error_lines
    undetected = {e[3] - 2 * PERIOD_PS for e in monitor_events() if e[0] == "Undetected"}
    extra = collections.Counter()
    for f in findings:
        ft = int(f["time_ps"])
        if ft in undetected:
            continue
        i = int(np.searchsorted(t, ft))
        assert t[i] == ft
        window = slice(i + 1, i + 5)
        if "data phase" in str(f["message"]):
            assert (perr[window] == 0).any(), f"parity error at {ft} without PERR#"
            extra["data, PERR#"] += 1
        else:
            assert (serr[window] == 0).any(), f"address parity error at {ft} without SERR#"
            extra["address, SERR#"] += 1
    # 19 passes of the testbench's error tests: 2 read-data and 5 address errors each
    assert extra == {"data, PERR#": 38, "address, SERR#": 95}


def _tests():
    text = gzip.open(TB_LOG, "rt").read()
    return [(int(t), name.strip(), speed) for t, name, speed in re.findall(
        r"At time\s+(\d+)\s*\n\s*Test (.*?)\n\s*reported \*\w+\*.*?DEVSEL speed\s+=\s+(\w+)",
        text, re.S)]


def test_testbench_aborts_and_devsel_speeds(decoded):
    records = decoded.records
    tests = _tests()
    starts = records["start_ps"]

    def window(i, upto=None):
        lo = tests[i - 1][0] if i else 0
        hi = tests[upto if upto is not None else i][0]
        return records[np.searchsorted(starts, lo):np.searchsorted(starts, hi, side="right")]

    def has(w, term, commands=None, phases=None):
        m = w["termination"] == term
        if commands is not None:
            m &= np.isin(w["command"], commands)
        if phases is not None:
            m &= w["data_phases"] == phases
        return bool(m.any())

    seen = collections.Counter()
    for i, (_, name, speed) in enumerate(tests):
        w = window(i)
        if name == "TARGET ABORT ERROR ON SINGLE WRITE":
            assert has(w, "target_abort", ["mem_write"], 0)
        elif name == "TARGET ABORT DURING SINGLE MEMORY READ":
            assert has(w, "target_abort", ["mem_read"], 0)
        elif name in ("TARGET ABORT TERMINATION ON SECOND DATA PHASE OF BURST WRITE",
                      "TARGET ABORT ERROR DURING SECOND DATAPHASE OF BURST READ"):
            assert has(w, "target_abort", phases=1)
        elif name == "TARGET ABORT SIGNALING ON I/O ACCESSES WITH INVALID ADDRESS/BYTE ENABLE COMBINATION":
            assert has(w, "target_abort", ["io_read", "io_write"])
        elif name == "MASTER ABORT ERROR HANDLING FOR WB TO PCI READS":
            assert has(w, "master_abort", ["mem_read"])
        elif name == "MASTER ABORT ERROR HANDLING DURING WB TO PCI WRITES":
            # the two writes are posted: they may reach the bus after the test reported
            both = window(i, upto=i + 1)
            assert int((both["termination"] == "master_abort").sum()) >= 2
        elif name == "NORMAL SINGLE MEMORY READ THROUGH WB IMAGE FROM PCI":
            reads = w[w["command"] == "mem_read"]
            assert len(reads) and set(reads["devsel"]) == {speed.lower()}, (name, speed)
        else:
            continue
        seen[name] += 1
    assert sum(seen.values()) == 19 * 6 + 52 + 77


def test_records_overview_and_agreement_with_the_fast_engine(decoded, opencores_vcd):
    from pcitrace.decode import decode_capture
    from pcitrace.decode.records import diff_records

    records, words, findings = decoded
    assert len(records) > 60000
    assert set(records["termination"]) == {"normal", "retry", "disconnect_with_data",
                                           "disconnect_without_data", "target_abort",
                                           "master_abort"}
    assert set(records["devsel"]) == {"fast", "medium", "slow", "subtractive", "none"}
    # every command code the testbench issues, reserved ones included (master aborted)
    assert {"int_ack", "special", "reserved_4", "reserved_5", "reserved_8", "reserved_9",
            "io_read", "io_write", "mem_read", "mem_write", "config_read", "config_write",
            "mem_read_multiple", "mem_read_line"} <= set(records["command"])
    assert int(records["data_phases"].sum()) == len(words)
    fast = decode_capture(opencores_vcd, Profile([BUS], source="memory"))
    # the capture ends inside a transaction: the fast engine reports it truncated,
    # libsigrokdecode 0.5.3 never flushes it
    assert len(fast.records) == len(records) + 1
    assert str(fast.records["termination"][-1]) == "truncated"
    assert diff_records(fast.records[:-1], records) == []
    assert list(fast.findings["time_ps"]) == list(findings["time_ps"])

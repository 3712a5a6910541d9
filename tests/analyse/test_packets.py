"""Telling the driver's send routine from an interrupt service routine running alongside it
(pcitrace.analyse.csr: _best_instance, send_routines), by hand and on simulated buses
beyond the bundled samples, against the simulator's truth."""

from __future__ import annotations

import numpy as np
import pytest

from pcitrace.analyse import analyse
from pcitrace.analyse import csr, dma
from pcitrace.decode import decode_capture
from pcitrace.sim.scenario import scenario_from_dict, simulate

from .truth import compare

US = 1_000_000          # ps


def _pick(accesses, sig, min_pace_ns):
    """Run _best_instance on (start us, end us, key) rows; returns the chosen row numbers."""
    starts = np.array([round(a[0] * US) for a in accesses], np.int64)
    ends = np.array([round(a[1] * US) for a in accesses], np.int64)
    keys = [a[2] for a in accesses]
    idx = np.arange(len(accesses))
    got = csr._best_instance(idx, list(idx), keys, sig, starts, ends, min_pace_ns * 1000.0)
    return sorted(got)


# Register keys as the analyser sees them with AD: (command, BAR offset)
R8, R3810, RC0 = ("mem_read", 0x8), ("mem_read", 0x3810), ("mem_read", 0xC0)
W3818, W3810, WD0 = ("mem_write", 0x3818), ("mem_write", 0x3810), ("mem_write", 0xD0)
WD8, W2818 = ("mem_write", 0xD8), ("mem_write", 0x2818)
SEND = [R8, R3810, W3818, W3810, WD0]


def test_interleaved_routines_take_turns_isr_first():
    # 33 MHz bus saturated by frame DMA (pro1000_33mhz, packet 5): the interrupt routine reads
    # STATUS and TDH just like the send does, one access before it each time. Both ways to give
    # the send its reads keep the CPU's pace; only one lets the routines alternate, as two CPUs
    # with one register access outstanding each do through one host bridge.
    rows = [(56.415, 56.625, RC0), (57.345, 57.555, R8), (57.615, 57.825, R8),
            (58.545, 58.755, R3810), (58.815, 59.025, R3810), (59.385, 59.445, WD8),
            (59.505, 59.565, W3818), (59.805, 59.865, W2818), (59.925, 59.985, W3810),
            (60.345, 60.405, WD0)]
    assert _pick(rows, SEND, 300) == [2, 4, 6, 8, 9]


def test_interleaved_routines_take_turns_send_first():
    # The same bus shape with the send one access ahead (packet 6): the writes, which differ,
    # show who goes first in each turn.
    rows = [(67.995, 68.205, RC0), (68.925, 69.135, R8), (69.195, 69.405, R8),
            (70.125, 70.335, R3810), (70.395, 70.605, R3810), (70.965, 71.025, W3818),
            (71.085, 71.145, WD8), (71.385, 71.445, W3810), (71.505, 71.565, W2818),
            (71.805, 71.865, WD0)]
    assert _pick(rows, SEND, 300) == [1, 3, 5, 7, 9]


def test_without_ad_routines_are_told_apart_by_shape_and_pace():
    # No AD / C/BE# (control_only, packet 15): a read is an access the NIC answers late, a write
    # one it takes at once. The send (read, read, write x3) and the interrupt routine (read,
    # read, write, write) interleave; the send's accesses follow each other at the CPU's pace
    # (315 ns from end to start), as do the interrupt routine's: no other split does that.
    R, W = ("unknown", 0, 1, "medium", 6, 0), ("unknown", 0, 1, "medium", 1, 0)
    rows = [(167.107, 167.213, R), (167.528, 167.632, R), (167.798, 167.903, R),
            (167.947, 167.977, W), (168.218, 168.322, R), (168.352, 168.382, W),
            (168.637, 168.667, W), (168.697, 168.727, W), (168.982, 169.012, W)]
    assert _pick(rows, [R, R, W, W, W], 300) == [0, 1, 3, 5, 7]


def test_running_routine_keeps_the_earlier_access():
    # No AD, 33 MHz (a simulated bus): frame DMA keeps the bus busy but for the idle clocks
    # before each register access. The send has been running since 102.6 us when the interrupt
    # routine starts; their reads at 105.2 and 105.5 us look alike, and either split keeps both
    # routines at the CPU's pace and alternating. The send was already waiting for the bus, so
    # it had the earlier one.
    R, W = ("unknown", 0, 1, "medium", 6, 0), ("unknown", 0, 1, "medium", 1, 0)
    rows = [(99.495, 99.555, W),                     # the end of an earlier routine
            (102.645, 102.855, R), (105.195, 105.405, R), (105.465, 105.675, R),
            (107.655, 107.715, W), (107.775, 107.985, R), (108.345, 108.405, W),
            (108.615, 108.675, W), (109.035, 109.095, W), (109.305, 109.365, W)]
    starts = np.array([round(r[0] * US) for r in rows], np.int64)
    ends = np.array([round(r[1] * US) for r in rows], np.int64)

    def busy_before(t):
        return t - 99 * US - 60_000 * np.searchsorted(starts, t, side="right")

    idx = np.arange(len(rows))
    got = csr._best_instance(idx, list(idx), [r[2] for r in rows], [R, R, W, W, W], starts, ends,
                            600_000.0, busy_before=(busy_before(starts), busy_before(ends)),
                            step_idle=[870_000.0] * 4)
    assert sorted(got) == [1, 2, 4, 6, 8]


def test_no_candidate_faster_than_the_cpu():
    # Accesses closer than the CPU's pace cannot be one routine's.
    rows = [(0.0, 0.2, R8), (0.25, 0.45, R3810), (0.5, 0.55, W3818), (0.6, 0.65, W3810), (0.7, 0.75, WD0)]
    assert csr._best_instance(np.arange(5), list(range(5)), [r[2] for r in rows], SEND,
                             np.array([round(r[0] * US) for r in rows]),
                             np.array([round(r[1] * US) for r in rows]), 300_000.0) is None


def test_learn_signature_ignores_interrupt_routines_run_into_most_sends():
    # Most of the first sends have the interrupt routine's accesses mixed in; the sequence the
    # sends that ran alone share is the routine.
    isr = [RC0, R8]
    seqs = [SEND, SEND, isr + SEND, [R8, RC0, R3810, R8, W3818, W3810, WD0], isr + SEND,
            [RC0, R8, R8, R3810, W3818, W3810, WD0], isr + SEND, isr + SEND]
    assert csr._learn_signature(seqs) == SEND


def _scenario(ad, mhz, csr_gap, irq_reads, spacing, coalesce, seed, saturated):
    host = {"csr_gap_clocks": csr_gap}
    if saturated:
        # the 370DLE-like bridge: reads stream, but only two cache lines per burst
        host.update(read_initial_waits=3, read_waits_every=0, read_disconnect_bytes=128, write_initial_waits=1)
    nic = {"irq_csr_reads": irq_reads, "coalesce_packets": coalesce[0], "coalesce_us": coalesce[1]}
    bus = {"name": "send", "pc": "a", "kind": "pci", "width": 64, "clock_mhz": mhz, "host": host, "nic": nic}
    if not ad:
        # a SCSI controller sharing the bus, as in the control_only sample
        bus["other"] = [{"rate_per_us": 0.03, "bytes": 512, "command": "mem_write", "address": 0x2A000000}]
    return {"name": "routines", "seed": seed, "duration_us": 300, "mode": "state", "ad": ad,
            "traffic": {"frame_bytes": 1400, "spacing_us": spacing}, "bus": [bus]}


# (AD, MHz, CPU clocks between PIO accesses, ISR reads, spacing us, (coalesce packets, us), seed,
# saturated bridge): interrupt routines run into the next send on most packets in all of these.
SCENARIOS = [
    (True, 33, 9, 2, 11.0, (1, 0.0), 2, True),       # saturated 33 MHz bus, as pro1000_33mhz
    (True, 33, 18, 2, 9.0, (1, 0.0), 1, False),      # transmit backlog, long read bursts
    (True, 33, 9, 2, 11.0, (3, 25.0), 2, False),     # interrupt coalescence
    (True, 33, 9, 3, 9.0, (3, 25.0), 1, False),      # backlog and coalescence
    (True, 66, 18, 3, 13.0, (1, 0.0), 2, True),
    (False, 66, 18, 3, 11.0, (1, 0.0), 2, False),    # control only, as control_only
    (False, 66, 18, 2, 9.0, (1, 0.0), 2, False),     # control only, transmit backlog
    (False, 66, 9, 3, 9.0, (3, 25.0), 2, False),     # control only, coalescence
    (False, 33, 18, 2, 13.0, (1, 0.0), 1, False),    # control only, 33 MHz
    # a status write-back lands right after the doorbell, the fetch comes 1.2 us later: without
    # C/BE# only its shape (a posted write) says it is not the fetch
    (False, 66, 18, 3, 11.0, (1, 0.0), 3, False),
    # long bursts hold the interrupt routine's accesses more than csr_gap apart; the routine
    # before a send and the one after it must not merge into one interrupt group
    (False, 33, 18, 2, 13.0, (1, 0.0), 5, False),
]


@pytest.mark.parametrize("params", SCENARIOS, ids=lambda p: "ad{}-{}mhz-gap{}-isr{}-{}us-coal{}x{}-s{}{}".format(
    int(p[0]), p[1], p[2], p[3], p[4], p[5][0], p[5][1], p[6], "-sat" if p[7] else ""))
def test_simulated_buses_equal_truth(params):
    res = simulate(scenario_from_dict(_scenario(*params)))
    a = analyse(decode_capture(res.capture, res.profile)).buses["send"]
    truth = res.truth
    assert compare(a, truth, "send", tol_ps=truth["buses"]["send"]["period_ps"]) == []
    # ... and the routines did interleave: some send shares its time with an interrupt routine.
    setups = a.groups[a.groups["setup"]]
    others = a.groups[~a.groups["setup"]]
    overlap = [(o["start_ps"] < s["end_ps"]) & (o["end_ps"] > s["start_ps"]) for s in setups for o in others]
    assert any(overlap)


def _stream_without_ad(interleave):
    """No AD / C/BE#, a bridge that cuts every read at 16 data phases (128 bytes): per frame a
    descriptor fetch (2 phases, read: 3 waits), the frame in 4 cut bursts and a 5-phase rest,
    a status write-back (2 phases, posted: 1 wait). ``interleave`` maps frame number to the
    control burst ('fetch' / 'wb') that lands between its second and third data burst."""
    from .builders import txn
    rows, c = [], 100
    fetch = dict(command="unknown", data_phases=2, target_waits=3)
    wb = dict(command="unknown", data_phases=2, target_waits=1)
    cut = dict(command="unknown", data_phases=16, target_waits=3, termination="disconnect_with_data")
    for i in range(6):
        rows.append(txn(c, 6, **fetch))
        t = c + 10
        for k in range(4):
            rows.append(txn(t, 20, **cut))
            t += 22
            if k == 1 and i in interleave:
                rows.append(txn(t, 6 if interleave[i] == "fetch" else 4,
                                **(fetch if interleave[i] == "fetch" else wb)))
                t += 8
        rows.append(txn(t, 9, command="unknown", data_phases=5, target_waits=3))      # the rest
        rows.append(txn(t + 40, 4, **wb))
        c += 400
    return rows


@pytest.mark.parametrize("interleave", [{}, {2: "fetch", 4: "wb"}], ids=["alone", "interleaved"])
def test_without_ad_a_cut_transfer_ends_with_the_rest_of_its_buffer(interleave):
    # Every data burst is cut by the target, so "a cut burst is continued by the next one" would
    # run all frames into one transfer. The NIC's own small transfers away from any cut read
    # show the shapes of its fetches and write-backs; a small burst of another shape that
    # continues a cut read is the rest of the buffer and ends the transfer.
    from pcitrace.analyse.classify import DMA, UNKNOWN_DIR
    from pcitrace.decode.records import records_from_dicts

    from .builders import T_PS
    recs = records_from_dicts(_stream_without_ad(interleave))
    classes = np.full(len(recs), DMA, np.int8)
    dirs = np.full(len(recs), UNKNOWN_DIR, np.int8)
    bursts = dma.dma_bursts(recs, classes, dirs, T_PS, 64)
    t = dma.dma_transfers(recs, classes, bursts, have_ad=False, gap_ps=16 * T_PS, period_ps=T_PS,
                         max_control_bytes=64, descriptor_gap_ps=32 * T_PS)
    data = t[t["kind"] == dma.DATA]
    assert data["bytes"].tolist() == [4 * 128 + 40] * 6
    assert data["bursts"].tolist() == [5] * 6
    # the fetch / write-back amid a frame stays a transfer of its own
    assert (t["kind"] != dma.DATA).sum() == 12 + len(interleave)
    assert (t[t["kind"] != dma.DATA]["bytes"] == 16).all()


# ((AD, MHz, CPU clocks between PIO accesses, ISR reads, spacing us, (coalesce packets, us), seed,
# saturated bridge), UDP bytes per frame): control only on a bus the bridge cuts every read of at
# 128 bytes; the NIC's fetch or write-back lands amid a frame's bursts in most of these
SATURATED_WITHOUT_AD = [
    ((False, 33, 9, 2, 11.0, (1, 0.0), 2, True), 1400),
    ((False, 33, 9, 2, 9.0, (3, 25.0), 3, True), 1400),      # backlog and coalescence
    ((False, 66, 18, 3, 13.0, (1, 0.0), 2, True), 1400),
    # every write-back lands amid the next frame's bursts (never alone), and the frame's last
    # piece (62 bytes: 8 data phases) follows a cut burst like it: only the last piece is ever
    # followed by nothing at once
    ((False, 66, 18, 3, 13.0, (1, 0.0), 2, True), 1300),
    # the frame's last piece (2 data phases) has the descriptor fetch's shape; it is the last
    # piece where no burst follows it at once
    ((False, 66, 18, 3, 13.0, (1, 0.0), 2, True), 1382),
    # the bridge's usual 512-byte cut: a write-back right after a frame's small last piece is
    # not a last piece itself (it does not follow a cut burst)
    ((False, 33, 18, 2, 13.0, (1, 0.0), 3, False), 1010),
]


@pytest.mark.parametrize("case", SATURATED_WITHOUT_AD, ids=lambda c: "{}mhz-gap{}-{}us-coal{}-s{}-{}B".format(
    c[0][1], c[0][2], c[0][4], c[0][5][0], c[0][6], c[1]))
def test_saturated_bus_without_ad_equals_truth(case):
    params, frame_bytes = case
    sc = _scenario(*params)
    sc["traffic"]["frame_bytes"] = frame_bytes
    res = simulate(scenario_from_dict(sc))
    a = analyse(decode_capture(res.capture, res.profile)).buses["send"]
    assert compare(a, res.truth, "send", tol_ps=res.truth["buses"]["send"]["period_ps"]) == []
    # ... and frames' bursts were interleaved with the NIC's small transfers
    b = a.bursts
    inside = 0
    for tr in np.flatnonzero(a.transfers["kind"] == dma.DATA):
        mine = np.flatnonzero(b["transfer"] == tr)
        inside += int(((b["transfer"][mine[0]:mine[-1]] != tr)
                       & (a.transfers["kind"][b["transfer"][mine[0]:mine[-1]]] != dma.DATA)).sum())
    assert inside > 0


def test_without_cbe_a_write_back_sooner_than_the_nic_reacts_is_not_the_fetch():
    # control_only (no AD / C/BE#, the bridge answers reads and takes writes with the same
    # waits, so fetches and write-backs look alike), 900 us: at 806.7 us a write-back lands 5
    # clocks after a send's doorbell, before the fetch. The NIC reacts to a doorbell 10 clocks
    # later in every send with one small transfer in reach, so that one was asked for before it.
    import tomllib
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "samples" / "control_only.scenario.toml"
    sc = tomllib.loads(path.read_text())
    sc["duration_us"] = 900.0
    sc["bus"] = [b for b in sc["bus"] if b["name"] == "send"]
    res = simulate(scenario_from_dict(sc))
    a = analyse(decode_capture(res.capture, res.profile)).buses["send"]
    assert compare(a, res.truth, "send", tol_ps=res.truth["buses"]["send"]["period_ps"]) == []
    # ... and that write-back did land between the doorbell and the fetch
    recs = res.truth["records"]
    kinds = [r["purpose"] for r in recs if r["bus"] == "send" and 806_600_000 < r["start_ps"] < 807_600_000]
    assert kinds == ["csr_write", "status_write", "data_read", "desc_fetch"]


def test_without_ad_a_last_piece_followed_at_once_by_the_next_frame():
    # 32-bit bus at 33 MHz, the bridge cutting every read at 128 bytes, a send every 9 us: the
    # NIC reads frames back to back, so every frame's last piece (20 bytes: 5 data phases) is
    # followed at once by the next frame's first burst, just like a fetch amid a frame is
    # followed by the frame's next burst. Fetches and write-backs move whole 16-byte
    # descriptors, the last piece does not: frames stay apart. (Which write-back and interrupt
    # belong to which frame is not settled on so busy a bus; only the frames are checked.)
    from .truth import expected_packets
    sc = _scenario(False, 33, 18, 2, 9.0, (1, 0.0), 2, True)
    sc["traffic"]["frame_bytes"] = 1255
    sc["bus"][0]["width"] = 32
    res = simulate(scenario_from_dict(sc))
    a = analyse(decode_capture(res.capture, res.profile)).buses["send"]
    exp = expected_packets(res.truth, "send")
    assert len(a.packets) == len(exp) > 15
    assert a.packets["data_bytes"].tolist() == [e["data_bytes"] for e in exp]
    assert a.packets["data_start_ps"].tolist() == [e["data_start_ps"] for e in exp]


def test_without_cbe_only_the_first_small_transfer_after_a_doorbell_is_its_fetch():
    # Direction unknown (no C/BE#): after each doorbell (a CSR write) two small transfers come
    # within descriptor_gap; the first is the descriptor fetch, the second a write-back.
    from pcitrace.analyse.classify import CSR, UNKNOWN_DIR
    from pcitrace.analyse.dma import DESCRIPTOR, STATUS, TRANSFER_DTYPE
    from pcitrace.analyse.packets import _unknown_direction_kinds
    from pcitrace.decode.records import records_from_dicts

    from .builders import T_PS, txn

    doorbells = [100 + 1000 * i for i in range(4)]
    records = records_from_dicts([txn(c, 4, command="unknown") for c in doorbells])
    classes = np.full(len(records), CSR, np.int8)
    starts = sorted([c + 10 for c in doorbells] + [c + 14 for c in doorbells] + [c + 50 for c in doorbells])
    t = np.zeros(len(starts), TRANSFER_DTYPE)
    t["start_ps"] = np.array(starts) * T_PS
    t["end_ps"] = t["start_ps"] + 2 * T_PS
    t["direction"] = UNKNOWN_DIR
    t["kind"] = np.where(np.arange(len(starts)) % 3 == 2, dma.DATA, STATUS)
    ds = t["start_ps"][t["kind"] == dma.DATA]
    routines, sends = _unknown_direction_kinds(t, np.zeros(0, csr.GROUP_DTYPE), None, records, classes, None, ds,
                                               period_ps=T_PS, have_ad=False, csr_gap_ps=2e6,
                                               descriptor_gap_ps=32 * T_PS)
    assert routines is None and sends
    assert t["kind"].tolist() == [DESCRIPTOR, STATUS, dma.DATA] * 4


def test_host_interrupt_latency_is_where_the_times_to_the_next_routine_crowd():
    from pcitrace.analyse.packets import host_interrupt_latency, min_interrupt_delay

    last = np.arange(10) * 20e6
    istart = last + 2e6 + (np.arange(10) % 3) * 50e3          # 2 us, the host's jitter
    assert host_interrupt_latency(istart, last) == (2e6, False)
    assert min_interrupt_delay(istart, last, 5e6, 15000) == 2e6 - 15000
    # no crowd (too few routines): the option's limit stays
    assert host_interrupt_latency(istart[:3], last[:3]) == (None, False)
    assert min_interrupt_delay(istart[:3], last[:3], 5e6, 15000) == 5e6


def test_packets_faster_than_the_host_leave_the_latency_a_guess():
    from pcitrace.analyse.packets import host_interrupt_latency

    # a packet every 4 us, each routine 6 us after its packet: 2, 6 and 10 us all crowd
    last = np.arange(20) * 4e6
    latency, ambiguous = host_interrupt_latency(last + 6e6, last)
    assert latency == 6e6 and ambiguous

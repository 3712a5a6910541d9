"""pcitrace/analyse/dma.py parts tested on their own (hand-built records, tests/analyse/builders.py)."""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.classify import UNKNOWN_DIR
from pcitrace.analyse.dma import _group_bursts, resumed
from pcitrace.decode.records import records_from_dicts

from .builders import T_PS, txn


def _nic_ended_frames(frames: int = 3):
    """Without AD: each frame read as 256 + 256 + 64 bytes the NIC ended itself, 4 clocks apart,
    frames 400 clocks apart."""
    rows = []
    for f in range(frames):
        c = 100 + 400 * f
        for nbytes in (256, 256, 64):
            phases = nbytes // 8
            rows.append(txn(c, phases + 2, command="unknown", data_phases=phases))
            c += phases + 2 + 4
    rec = records_from_dicts(rows)
    return rec, np.full(len(rec), UNKNOWN_DIR, np.int8)


def _bursts_of(rec):
    b = np.zeros(len(rec), [("start_ps", np.int64), ("end_ps", np.int64), ("direction", np.int8)])
    b["start_ps"], b["end_ps"] = rec["start_ps"], rec["end_ps"]
    return b


def test_resumed_is_the_next_burst_in_its_direction_within_the_gap():
    rec, d = _nic_ended_frames(2)
    b = _bursts_of(rec)
    b["direction"] = d
    assert resumed(b, T_PS, None, 16 * T_PS).tolist() == [True, True, False, True, True, False]


def test_bursts_the_nic_ends_at_its_burst_size_stay_one_transfer_without_ad():
    rec, d = _nic_ended_frames()
    kw = dict(have_ad=False, gap_ps=16 * T_PS, period_ps=T_PS, max_control_bytes=64)
    grouped = _group_bursts(rec, d, rec["start_ps"], rec["end_ps"], nic_burst=256, **kw)
    assert grouped.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # without the NIC's burst size every master-ended burst ends its transfer
    alone = _group_bursts(rec, d, rec["start_ps"], rec["end_ps"], **kw)
    assert len(set(alone.tolist())) > 3


def test_with_ad_a_burst_continues_the_transfer_at_its_next_address():
    rows = [txn(100, 34, command="mem_read", address=0x1000, data_phases=32),
            txn(140, 34, command="mem_read", address=0x1100, data_phases=32),
            txn(500, 34, command="mem_read", address=0x1200, data_phases=32)]   # long after: a new buffer
    rec = records_from_dicts(rows)
    d = np.zeros(len(rec), np.int8)
    grouped = _group_bursts(rec, d, rec["start_ps"], rec["end_ps"], have_ad=True, gap_ps=16 * T_PS,
                            period_ps=T_PS, max_control_bytes=64)
    assert grouped.tolist() == [0, 0, 1]


def test_pcix_a_read_asking_for_the_mmrbc_goes_on_however_late_its_next_request():
    # 1000-byte buffer read as a 512-byte split request and a 488-byte one 2 us later (the NIC
    # waited behind other traffic); the next buffer's first request is not at its address
    rows = [txn(100, 3, command="mem_read_block", address=0x1000, data_phases=0, termination="split_response"),
            txn(140, 66, command="split_completion", address=0x1000, data_phases=64),
            txn(340, 3, command="mem_read_block", address=0x1200, data_phases=0, termination="split_response"),
            txn(380, 63, command="split_completion", address=0x1200, data_phases=61)]
    for r, bc in zip(rows, (512, 512, 488, 488)):
        r.update(byte_count=bc, tag=1, requester=0x100)
    rec = records_from_dicts(rows)
    d = np.zeros(len(rec), np.int8)
    kw = dict(have_ad=True, gap_ps=16 * T_PS, period_ps=T_PS, max_control_bytes=64)
    assert _group_bursts(rec, d, rec["start_ps"], rec["end_ps"], **kw).tolist() == [0, 0, 0, 0]
    # a request for less than the largest ends its buffer: 2 us later is a new one
    rows[0]["byte_count"] = rows[1]["byte_count"] = 488
    rows[2]["byte_count"] = rows[3]["byte_count"] = 600
    rows[2]["address"] = rows[3]["address"] = 0x1000 + 488
    rec = records_from_dicts(rows)
    assert _group_bursts(rec, d, rec["start_ps"], rec["end_ps"], **kw).tolist() == [0, 0, 1, 1]

"""pcitrace.records: the one serialiser, the bus summary, command names."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from pcitrace.records import (COMMAND_SHORT_NAMES, FINDING_DTYPE, PCI_LISTS, READ_COMMANDS, WRITE_COMMANDS,
                              BusSummary, record_to_dict, records_from_dicts, records_from_jsonl,
                              short_command, to_csv, to_jsonl, write_csv, write_jsonl)

ROWS = [dict(bus="send", start_ps=10, end_ps=40, command="mem_read", address=2**63 + 5, dac=True, bytes=8),
        dict(bus="recv", start_ps=50, end_ps=90, command="mem_write", address=0xF000, bytes=4)]


def test_jsonl_round_trip_keeps_every_field():
    recs = records_from_dicts(ROWS)
    text = to_jsonl(recs)
    assert json.loads(text.splitlines()[0])["address"] == 2**63 + 5
    assert (records_from_jsonl(text) == recs).all()
    assert record_to_dict(recs[1]) == json.loads(text.splitlines()[1])


def test_csv_has_a_header_and_one_row_per_record():
    recs = records_from_dicts(ROWS)
    rows = list(csv.reader(io.StringIO(to_csv(recs))))
    assert rows[0] == list(recs.dtype.names)
    assert rows[1][rows[0].index("dac")] == "True" and rows[2][0] == "recv"


def test_streamed_parts_write_what_the_whole_array_writes():
    recs = records_from_dicts(ROWS * 3)
    buf = io.StringIO()
    write_csv(buf, [recs[:2], recs[2:2], recs[2:]], recs.dtype.names)
    assert buf.getvalue() == to_csv(recs)
    buf = io.StringIO()
    write_jsonl(buf, [recs[:1], recs[1:]])
    assert buf.getvalue() == to_jsonl(recs)


def test_csv_columns_formats_and_line_ends_are_the_callers():
    f = np.zeros(1, FINDING_DTYPE)
    f["time_ps"], f["kind"] = 7, "late"
    buf = io.StringIO()
    write_csv(buf, [f], ("kind", "time_ps"), formats={"time_ps": lambda v: f"{v} ps"}, lineterminator="\r\n")
    assert buf.getvalue() == "kind,time_ps\r\nlate,7 ps\r\n"


def test_bus_summary_with_clock_measures_a_missing_rate():
    s = BusSummary("b", clocks=11, start_ps=0, end_ps=300_000)
    assert s.with_clock().clock_hz == 1e12 * 10 / 300_000
    assert BusSummary("b").with_clock().clock_hz == 33e6
    fixed = BusSummary("b", clock_hz=66e6, clocks=10)
    assert fixed.with_clock() is fixed and fixed.duration_ps == 10 * 1e12 / 66e6


def test_every_command_has_a_short_name_and_one_direction_at_most():
    names = {n for table in (PCI_LISTS.PCI_COMMANDS, PCI_LISTS.PCIX_COMMANDS) for n, _ in table.values()}
    assert {n for n in names if not n.startswith("reserved")} <= set(COMMAND_SHORT_NAMES)
    assert not READ_COMMANDS & WRITE_COMMANDS and (READ_COMMANDS | WRITE_COMMANDS) <= names
    assert short_command("mem_read") == "MemRd" and short_command("reserved_4") == "reserved_4"

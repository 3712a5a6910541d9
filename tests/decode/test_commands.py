"""`pcitrace decode`: formats, bus selection, findings, atomic output, user errors."""

from __future__ import annotations

import csv
import io
import json
import numpy as np
import pytest

from pcitrace.capture import write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.cli import main
from pcitrace.decode import decode_capture
from pcitrace.decode.engine import decode_clocks
from pcitrace.decode.records import FIELD_NAMES, records_from_dicts, diff_records

from .helpers import random_bus


@pytest.fixture(scope="module")
def capture_path(tmp_path_factory):
    """A state-mode .sr with the usual channel names (auto-detected, no profile needed)."""
    rng = np.random.default_rng(5)
    sig, _ = random_bus(rng, 2500, ad=True, cbe=True, par=True, w64=False, gnt=False, busy=0.5)
    arrays = {"FRAME#": sig["frame_n"], "IRDY#": sig["irdy_n"], "TRDY#": sig["trdy_n"],
              "STOP#": sig["stop_n"], "DEVSEL#": sig["devsel_n"], "PAR": sig["par"]}
    for i in range(32):
        arrays[f"AD{i}"] = ((sig["ad"] >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)
    for i in range(4):
        arrays[f"C/BE{i}#"] = ((sig["cbe_n"] >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)
    path = tmp_path_factory.mktemp("cli") / "bus.sr"
    write_sr(Capture.from_arrays(arrays, TimeBase.state(clock_hz=33e6)), path)
    return path


def run(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_piped_default_is_jsonl_equal_to_the_api(capture_path, capsys):
    rc, out, _ = run(["decode", str(capture_path)], capsys)
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert list(rows[0]) == list(FIELD_NAMES)
    expected = decode_capture(str(capture_path)).records
    assert len(expected) > 50
    assert diff_records(expected, records_from_dicts(rows)) == []


def test_csv_and_parquet_files(capture_path, tmp_path, capsys):
    expected = decode_capture(str(capture_path)).records
    out_csv = tmp_path / "r.csv"
    assert run(["decode", str(capture_path), "-o", str(out_csv)], capsys)[0] == 0
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert len(rows) == len(expected)
    assert rows[0]["command"] == expected["command"][0]
    assert int(rows[-1]["start_ps"]) == int(expected["start_ps"][-1])
    pq = pytest.importorskip("pyarrow.parquet")
    out_pq = tmp_path / "r.parquet"
    assert run(["decode", str(capture_path), "--format", "parquet", "-o", str(out_pq)], capsys)[0] == 0
    table = pq.read_table(out_pq)
    assert table.num_rows == len(expected)
    assert table.column("bytes").to_pylist() == expected["bytes"].tolist()


def test_findings_output(capture_path, capsys):
    rc, out, _ = run(["decode", str(capture_path), "--findings", "--format", "jsonl"], capsys)
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = decode_capture(str(capture_path)).findings
    assert [r["kind"] for r in rows] == expected["kind"].tolist()
    assert any(r["kind"] == "parity_error" for r in rows)


def test_table_file_has_every_row(capture_path, tmp_path, capsys):
    out = tmp_path / "t.txt"
    assert run(["decode", str(capture_path), "-o", str(out)], capsys)[0] == 0
    text = out.read_text()
    n = len(decode_capture(str(capture_path)).records)
    assert "termination" in text and "transactions" in text
    assert text.count("0x") >= n            # one address per row


def test_terminal_table_is_limited(capture_path, capsys, monkeypatch):
    rc, out, err = run(["decode", str(capture_path), "--format", "table", "--limit", "3"], capsys)
    assert rc == 0
    assert "more rows" in out
    assert "transactions" in err            # the per-bus summary goes to stderr


def test_user_errors_exit_2_without_traceback(capture_path, tmp_path, capsys):
    rc, _, err = run(["decode", str(capture_path), "-o", str(tmp_path / "x.foo")], capsys)
    assert rc == 2 and "extension" in err and "Traceback" not in err
    rc, _, err = run(["decode", str(capture_path), "--bus", "nope"], capsys)
    assert rc == 2 and "no bus named 'nope'" in err
    rc, _, err = run(["decode", str(tmp_path / "missing.sr")], capsys)
    assert rc == 2 and "missing.sr" in err
    rc, _, err = run(["decode", str(capture_path), "--format", "parquet"], capsys)
    assert rc == 2 and "-o" in err


def test_output_is_atomic(capture_path, tmp_path, monkeypatch):
    out = tmp_path / "r.parquet"
    out.write_text("previous\n")
    import pcitrace.decode.commands as commands

    def half_written(arr, path):
        with open(path, "w") as fh:
            fh.write("PAR1 half")
        raise OSError("disk full")
    monkeypatch.setattr(commands, "write_parquet", half_written)
    with pytest.raises(OSError):
        main(["decode", str(capture_path), "-o", str(out)])
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]


def test_streamed_parquet_is_the_records_and_leaves_arrows_pool_as_it_was(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from pcitrace.decode.commands import write_parquet

    rng = np.random.default_rng(4)
    sig, _ = random_bus(rng, 3000, ad=True, cbe=True, par=True, w64=False, gnt=False, busy=0.5)
    t = np.arange(3000, dtype=np.int64) * 15000
    recs = decode_clocks(sig, t)[0]
    before = pa.default_memory_pool().backend_name
    write_parquet(iter([recs[:10], recs[10:]]), tmp_path / "r.parquet")
    assert pa.default_memory_pool().backend_name == before
    back = pq.read_table(tmp_path / "r.parquet")
    assert back.num_rows == len(recs)
    assert back.column("start_ps").to_pylist() == recs["start_ps"].tolist()
    assert back.column("termination").to_pylist() == recs["termination"].tolist()

"""`pcitrace report` end to end on the bundled samples: formats, batches, failures, parallel runs."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from pcitrace.analyse import analyse
from pcitrace.cli import main
from pcitrace.decode import decode_capture
from tests.conftest import SAMPLES

REQUIRED = {"occupancy", "occupancy_by", "clock_mhz", "width", "packets", "csr_setup_us", "dma_burst_bytes",
            "dma_burst_us", "interrupt_delay_us", "packets_per_interrupt", "throughput_mbit_s", "efficiency",
            "classification_rule"}
DIST_KEYS = {"count", "min", "median", "p90", "p99", "max"}


def _copy(tmp_path, *names):
    for n in names:
        for suffix in (".sr", ".profile.toml"):
            shutil.copy(SAMPLES / f"{n}{suffix}", tmp_path / f"{n}{suffix}")
    return tmp_path


def test_json_has_the_documented_keys_and_the_analysers_figures(tmp_path, capsys):
    rc = main(["report", str(SAMPLES / "reqresp_64_1400.sr")])
    assert rc == 0
    captured = capsys.readouterr()
    assert captured.err == ""          # not a terminal: no progress bar, nothing on stderr
    doc = json.loads(captured.out)
    assert doc["schema"] == "pcitrace-report/1"
    assert doc["errors"] == []
    (cap,) = doc["captures"]
    assert "series" not in cap
    buses = {b["name"]: b for b in cap["buses"]}
    assert set(buses) == {"a", "b"}
    ref = analyse(decode_capture(SAMPLES / "reqresp_64_1400.sr"))
    for name, b in buses.items():
        assert REQUIRED <= set(b)
        for key in ("csr_setup_us", "dma_burst_bytes", "dma_burst_us", "interrupt_delay_us", "packets_per_interrupt"):
            assert set(b[key]) == DIST_KEYS
        assert set(b["occupancy_by"]) == {"data", "wait", "address", "retry", "stray"}
        r = ref.buses[name]
        assert b["packets"] == len(r.packets)
        assert b["occupancy"] == pytest.approx(r.occupancy, abs=1e-6)
        assert sum(b["occupancy_by"].values()) == pytest.approx(b["occupancy"], abs=1e-5)
        assert b["dma_burst_bytes"]["count"] == len(r.bursts)
        assert b["csr_setup_us"]["median"] == pytest.approx(r.distributions["csr_setup_us"].median, abs=1e-4)
        assert b["clock_mhz"] == pytest.approx(66.6667, abs=1e-3)
        assert b["width"] == 64
        assert b["classification_rule"] == "gnt+bar"
        h = b["histograms"]["dma_burst_bytes"]
        assert sum(h["counts"]) == len(r.bursts) and len(h["edges"]) == len(h["counts"]) + 1
        assert b["limits"]["dma_burst_ideal_us"]["max"] == pytest.approx(
            r.bursts["bytes"].max() * b["limits"]["bus_us_per_byte"], rel=1e-3)


def test_csv_and_markdown_one_row_per_capture_and_bus(tmp_path):
    d = _copy(tmp_path, "reqresp_64_1400", "pro1000_66mhz")
    out_csv, out_md = tmp_path / "r.csv", tmp_path / "r.md"
    assert main(["report", str(d), "-o", str(out_csv)]) == 0
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    # one row per capture and bus, then one per probed link (kind gbe_probe)
    assert [(r["capture"].rsplit("/", 1)[-1], r["bus"]) for r in rows if r["kind"] != "gbe_probe"] == [
        ("pro1000_66mhz.sr", "send"), ("pro1000_66mhz.sr", "recv"), ("reqresp_64_1400.sr", "a"),
        ("reqresp_64_1400.sr", "b")]
    assert [(r["capture"].rsplit("/", 1)[-1], r["bus"]) for r in rows if r["kind"] == "gbe_probe"] == [
        ("pro1000_66mhz.sr", "a_to_b"), ("reqresp_64_1400.sr", "a_to_b"), ("reqresp_64_1400.sr", "b_to_a")]
    send = next(r for r in rows if r["bus"] == "send")
    assert float(send["occupancy"]) == pytest.approx(0.42, abs=0.03)
    assert main(["report", str(d), "--format", "md", "-o", str(out_md)]) == 0
    md = out_md.read_text().splitlines()
    assert md[0].startswith("| capture | bus |")
    bus_table = md[:md.index("")]          # the bus table; the link table follows a blank line
    assert len([line for line in bus_table if line.startswith("| `")]) == 4
    assert len([line for line in md if line.startswith("| `") and " -> " in line]) == 3
    # Atomic writes leave no temporary files behind.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_bad_capture_is_reported_and_the_batch_completes(tmp_path, capsys):
    d = _copy(tmp_path, "reqresp_64_1400")
    (d / "broken.sr").write_bytes(b"PK\x03\x04 this is not a sigrok session")
    (d / "empty.vcd").write_text("")
    out = tmp_path / "out.json"
    rc = main(["report", str(d), "-o", str(out)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "broken.sr" in err and "empty.vcd" in err
    doc = json.loads(out.read_text())
    assert [c["capture"].rsplit("/", 1)[-1] for c in doc["captures"]] == ["reqresp_64_1400.sr"]
    assert sorted(e["capture"].rsplit("/", 1)[-1] for e in doc["errors"]) == ["broken.sr", "empty.vcd"]
    assert all(e["error"] for e in doc["errors"])


def test_missing_path_is_a_user_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.sr")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_jobs_give_the_same_report(tmp_path):
    d = _copy(tmp_path, "reqresp_64_1400", "violations", "control_only")
    a, b = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["report", str(d), "-o", str(a), "--jobs", "1"]) == 0
    assert main(["report", str(d), "-o", str(b), "--jobs", "2"]) == 0
    strip = lambda doc: [{k: v for k, v in c.items() if k != "seconds"} for c in doc["captures"]]  # noqa: E731
    assert strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))


@pytest.mark.slow
def test_dask_local_cluster_on_loopback(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    d = _copy(tmp_path, "reqresp_64_1400", "violations")
    (d / "broken.vcd").write_text("$timescale 1ps $end\n garbage")
    ref, out = tmp_path / "ref.json", tmp_path / "dask.json"
    assert main(["report", str(d), "-o", str(ref)]) == 1
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert main(["report", str(d), "-o", str(out), "--dask", cluster.scheduler_address]) == 1
    strip = lambda doc: [{k: v for k, v in c.items() if k != "seconds"} for c in doc["captures"]]  # noqa: E731
    got, want = json.loads(out.read_text()), json.loads(ref.read_text())
    assert strip(got) == strip(want)
    assert [e["capture"] for e in got["errors"]] == [e["capture"] for e in want["errors"]]


def test_unreachable_dask_scheduler_is_a_user_error(capsys):
    pytest.importorskip("dask.distributed")
    rc = main(["report", str(SAMPLES / "reqresp_64_1400.sr"), "--dask", "tcp://127.0.0.1:9"])
    assert rc == 2
    assert "Dask scheduler" in capsys.readouterr().err


def test_directory_of_vcd_and_vcd_gz_captures_with_sidecar_profiles(tmp_path):
    import gzip

    from pcitrace.capture import open_capture, write_vcd
    write_vcd(open_capture(SAMPLES / "reqresp_64_1400.sr"), tmp_path / "plain.vcd")
    (tmp_path / "packed.vcd.gz").write_bytes(gzip.compress((tmp_path / "plain.vcd").read_bytes()))
    for stem in ("plain", "packed"):
        shutil.copy(SAMPLES / "reqresp_64_1400.profile.toml", tmp_path / f"{stem}.profile.toml")
    ref = tmp_path / "ref.json"
    out = tmp_path / "vcd.json"
    assert main(["report", str(SAMPLES / "reqresp_64_1400.sr"), "-o", str(ref)]) == 0
    assert main(["report", str(tmp_path), "-o", str(out)]) == 0
    want = json.loads(ref.read_text())["captures"][0]["buses"]
    got = json.loads(out.read_text())["captures"]
    assert [c["capture"].rsplit("/", 1)[-1] for c in got] == ["packed.vcd.gz", "plain.vcd"]
    for c in got:
        assert c["profile"].endswith(".profile.toml")
        assert c["buses"] == want

"""`pcitrace report` on captures with probed links: the wire-to-PCI chain per link."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from pcitrace.cli import main

from tests.conftest import SAMPLES


def _report(tmp_path, fmt, *names):
    out = tmp_path / f"r.{fmt}"
    rc = main(["report", *[str(Path(SAMPLES) / f"{n}.sr") for n in names], "--format", fmt, "-o", str(out)])
    assert rc == 0
    return out.read_text()


def test_json_has_the_chain_distributions_per_link(tmp_path):
    doc = json.loads(_report(tmp_path, "json", "pro1000_66mhz", "reqresp_64_1400"))
    caps = {Path(c["capture"]).stem: c for c in doc["captures"]}
    (link,) = caps["pro1000_66mhz"]["links"]
    assert link["name"] == "a_to_b" and (link["send_bus"], link["recv_bus"]) == ("send", "recv")
    truth = json.loads((Path(SAMPLES) / "pro1000_66mhz.truth.json").read_text())
    s2r = sorted(q["send_to_recv_ps"] * 1e-6 for q in truth["packets"]
                 if q.get("send_to_recv_ps") is not None and q["send_to_recv_ps"] >= 0)
    assert link["frames"]["matched"] == link["frames"]["frames"] == len(s2r)
    assert abs(link["pci_to_pci_us"]["median"] - s2r[len(s2r) // 2]) < 0.016   # one 66 MHz clock
    assert abs(link["wire_time_us"]["median"] - 11.63) < 0.01                   # 1446 bytes + preamble
    for key in ("send_pci_to_wire_us", "wire_to_recv_pci_us", "pci_to_pci_us", "wire_time_us"):
        assert set(link[key]) >= {"count", "min", "median", "p90", "p99", "max"}
    rr = {lk["name"]: lk for lk in caps["reqresp_64_1400"]["links"]}
    assert (rr["a_to_b"]["send_bus"], rr["a_to_b"]["recv_bus"]) == ("a", "b")
    assert (rr["b_to_a"]["send_bus"], rr["b_to_a"]["recv_bus"]) == ("b", "a")


def test_csv_and_markdown_have_a_row_per_link(tmp_path):
    rows = list(csv.DictReader(io.StringIO(_report(tmp_path, "csv", "pro1000_66mhz"))))
    link = [r for r in rows if r["kind"] == "gbe_probe"]
    assert [r["bus"] for r in link] == ["a_to_b"]
    assert float(link[0]["wire_time_us_median"]) > 11.6
    md = _report(tmp_path, "md", "pro1000_66mhz")
    assert "| `" in md and "a_to_b" in md and "send -> recv" in md


def test_html_draws_a_waterfall_per_link(tmp_path):
    html = _report(tmp_path, "html", "pro1000_66mhz")
    start = html.index("<h3>link a_to_b</h3>")
    assert "data:image/png;base64," in html[start:]
    assert "send PCI -&gt; receive PCI" in html[start:] or "send PCI -> receive PCI" in html[start:]

"""JSON, CSV and Markdown writers of a batch report (HTML lives in pcitrace.report.html).

Every writer returns text; the command writes it atomically. CSV and Markdown have one row per
capture and bus, and one row per capture that failed (with its error).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json

from pcitrace.report.summary import SCHEMA

# CSV column -> how to get it from a bus figures dict.
_COLUMNS: list[tuple[str, tuple]] = [
    ("kind", ("kind",)), ("width", ("width",)), ("clock_mhz", ("clock_mhz",)),
    ("classification_rule", ("classification_rule",)),
    ("occupancy", ("occupancy",)),
    ("occupancy_data", ("occupancy_by", "data")), ("occupancy_wait", ("occupancy_by", "wait")),
    ("occupancy_address", ("occupancy_by", "address")), ("occupancy_retry", ("occupancy_by", "retry")),
    ("occupancy_nic", ("occupancy_by_initiator", "nic")), ("occupancy_host", ("occupancy_by_initiator", "host")),
    ("occupancy_peak", ("occupancy_peak",)),
    ("efficiency", ("efficiency",)), ("dma_efficiency", ("dma_efficiency",)),
    ("throughput_mbit_s", ("throughput_mbit_s",)),
    ("packets", ("packets",)), ("packets_tx", ("packets_by_direction", "tx")),
    ("packets_rx", ("packets_by_direction", "rx")),
    ("packets_unknown", ("packets_by_direction", "unknown")),   # no C/BE#: direction unknown
    ("csr_setup_us_median", ("csr_setup_us", "median")), ("csr_setup_us_p90", ("csr_setup_us", "p90")),
    ("csr_setup_us_max", ("csr_setup_us", "max")),
    ("descriptor_fetch_us_median", ("descriptor_fetch_us", "median")),
    ("data_dma_us_median", ("data_dma_us", "median")), ("data_dma_us_max", ("data_dma_us", "max")),
    ("data_dma_ideal_us_median", ("limits", "data_dma_ideal_us", "median")),
    ("status_writeback_us_median", ("status_writeback_us", "median")),
    ("interrupt_delay_us_median", ("interrupt_delay_us", "median")),
    ("interrupt_delay_us_p90", ("interrupt_delay_us", "p90")),
    ("packets_per_interrupt_median", ("packets_per_interrupt", "median")),
    ("packet_period_us_median", ("packet_period_us", "median")),
    ("packet_occupancy_median", ("packet_occupancy", "median")),
    ("dma_burst_bytes_median", ("dma_burst_bytes", "median")), ("dma_burst_bytes_max", ("dma_burst_bytes", "max")),
    ("dma_burst_us_median", ("dma_burst_us", "median")), ("dma_burst_us_max", ("dma_burst_us", "max")),
    ("dma_bursts", ("dma_bursts",)), ("pauses", ("pauses", "count")),
    ("bus_mbit_s", ("limits", "bus_mbit_s")),
]


def _get(d: dict, path: tuple):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def rows(results: list[dict]) -> list[dict]:
    """Flat rows: one per capture and bus; one per failed capture."""
    out = []
    for r in results:
        if "error" in r:
            out.append({"capture": r["capture"], "bus": "", "error": r["error"]})
            continue
        if not r.get("buses"):
            out.append({"capture": r["capture"], "bus": "", "findings": r.get("findings"),
                        "error": "no PCI bus in this capture"})
            continue
        for b in r["buses"]:
            row = {"capture": r["capture"], "bus": b["name"]}
            for col, path in _COLUMNS:
                row[col] = _get(b, path)
            row["findings"] = r.get("findings")
            row["error"] = ""
            out.append(row)
        for lk in r.get("links", []):
            row = {"capture": r["capture"], "bus": lk["name"], "kind": "gbe_probe"}
            for col, path in _LINK_COLUMNS:
                row[col] = _get(lk, path)
            row["findings"] = r.get("findings")
            row["error"] = ""
            out.append(row)
    return out


# Probed links get their own rows (bus = link name, kind = gbe_probe) with these columns.
_LINK_COLUMNS: list[tuple[str, tuple]] = [
    ("send_bus", ("send_bus",)), ("recv_bus", ("recv_bus",)),
    ("frames", ("frames", "frames")), ("frames_matched", ("frames", "matched")),
    ("frames_no_send_dma", ("frames", "no_send_dma")), ("frames_no_recv_dma", ("frames", "no_recv_dma")),
    ("send_pci_to_wire_us_median", ("send_pci_to_wire_us", "median")),
    ("wire_time_us_median", ("wire_time_us", "median")),
    ("wire_to_recv_pci_us_median", ("wire_to_recv_pci_us", "median")),
    ("pci_to_pci_us_median", ("pci_to_pci_us", "median")), ("pci_to_pci_us_p90", ("pci_to_pci_us", "p90")),
]

CSV_FIELDS = (["capture", "bus"] + [c for c, _ in _COLUMNS] + [c for c, _ in _LINK_COLUMNS]
              + ["findings", "error"])


def to_csv(results: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in rows(results):
        w.writerow({k: ("" if row.get(k) is None else row.get(k, "")) for k in CSV_FIELDS})
    return buf.getvalue()


def document(results: list[dict], options: dict | None = None) -> dict:
    captures = [{k: v for k, v in r.items() if k not in ("series", "link_series")}
                for r in results if "error" not in r]
    errors = [{"capture": r["capture"], "error": r["error"]} for r in results if "error" in r]
    return {
        "schema": SCHEMA,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "options": options or {},
        "captures": captures,
        "errors": errors,
    }


def to_json(results: list[dict], options: dict | None = None) -> str:
    return json.dumps(document(results, options), indent=2) + "\n"


def _fmt(v, digits=3) -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"


MD_HEADER = ["capture", "bus", "bus width/clock", "rule", "occupancy", "data / wait / addr / retry",
             "packets", "CSR setup µs (median, p90)", "data DMA µs (median; ideal)", "interrupt delay µs (median)",
             "pkts/interrupt", "burst bytes (median, max)", "Mbit/s", "efficiency"]


def to_markdown(results: list[dict]) -> str:
    lines = ["| " + " | ".join(MD_HEADER) + " |", "|" + "---|" * len(MD_HEADER)]
    errors = []
    for r in results:
        if "error" in r:
            errors.append(r)
            continue
        for b in r.get("buses", []):
            ob = b["occupancy_by"]
            cells = [
                f"`{r['capture']}`", b["name"], f"{b['width']}-bit {_fmt(b['clock_mhz'], 1)} MHz",
                b["classification_rule"], _pct(b["occupancy"]),
                " / ".join(_pct(ob[k]) for k in ("data", "wait", "address", "retry")),
                str(b["packets"]),
                f"{_fmt(b['csr_setup_us']['median'])}, {_fmt(b['csr_setup_us']['p90'])}",
                f"{_fmt(b['data_dma_us']['median'])}; {_fmt(b['limits']['data_dma_ideal_us']['median'])}",
                _fmt(b["interrupt_delay_us"]["median"], 2),
                _fmt(b["packets_per_interrupt"]["median"], 1),
                f"{_fmt(b['dma_burst_bytes']['median'], 0)}, {_fmt(b['dma_burst_bytes']['max'], 0)}",
                _fmt(b["throughput_mbit_s"], 1), _fmt(b["efficiency"], 3),
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    text = "\n".join(lines) + "\n"
    links = [(r, lk) for r in results if "error" not in r for lk in r.get("links", [])]
    if links:
        text += ("\n| capture | link | send bus -> recv bus | frames (matched) | send PCI -> wire µs | "
                 "wire µs | wire -> recv PCI µs | PCI -> PCI µs (median, p90) |\n|" + "---|" * 8 + "\n")
        for r, lk in links:
            fr = lk["frames"]
            text += (f"| `{r['capture']}` | {lk['name']} | {lk['send_bus'] or '–'} -> {lk['recv_bus'] or '–'} | "
                     f"{fr['frames']} ({fr['matched']}) | {_fmt(lk['send_pci_to_wire_us']['median'], 2)} | "
                     f"{_fmt(lk['wire_time_us']['median'], 2)} | {_fmt(lk['wire_to_recv_pci_us']['median'], 2)} | "
                     f"{_fmt(lk['pci_to_pci_us']['median'], 2)}, {_fmt(lk['pci_to_pci_us']['p90'], 2)} |\n")
    if errors:
        text += "\n**Captures that could not be analysed**\n\n"
        for r in errors:
            text += (f"- {r['error']}\n" if r["error"].startswith(r["capture"])
                     else f"- `{r['capture']}`: {r['error']}\n")
    return text

"""JSON, CSV and Markdown writers of a batch report (HTML lives in pcitrace.report.html).

Every writer returns text; the command writes it atomically. CSV and Markdown have one row per
capture and bus, and one row per capture that failed (with its error).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json

from pcitrace.analyse.metrics import BUS_FIGURES, FIGURES, LINK_FIGURES, csv_columns, header
from pcitrace.report.summary import SCHEMA

# CSV column -> how to get it from a bus figures dict (pcitrace/analyse/metrics.py).
_COLUMNS: list[tuple[str, tuple]] = csv_columns(BUS_FIGURES)


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
_LINK_COLUMNS: list[tuple[str, tuple]] = csv_columns(LINK_FIGURES)

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


def _stats(figure: str, statistics: tuple[str, ...], digits: int, named: bool = True):
    """A Markdown column: header and cell (the figure's statistics, comma-separated; the header
    names them if ``named``, else only where there are several)."""
    def cell(b: dict) -> str:
        d = _get(b, FIGURES[figure].where)
        return ", ".join(_fmt(d[s], digits) for s in statistics)
    return header(figure, statistics if named or len(statistics) > 1 else ()), cell


def _data_dma(b: dict) -> str:
    return f"{_fmt(b['data_dma_us']['median'])}; {_fmt(_get(b, FIGURES['data_dma_ideal_us'].where)['median'])}"


_SPLIT = ("occupancy_data", "occupancy_wait", "occupancy_address", "occupancy_retry")

# Markdown bus table: (header, cell of a bus figures dict).
_MD_COLUMNS = [
    ("bus width/clock", lambda b: f"{b['width']}-bit {_fmt(b['clock_mhz'], 1)} MHz"),
    (header("classification_rule"), lambda b: b["classification_rule"]),
    (header("occupancy"), lambda b: _pct(b["occupancy"])),
    (" / ".join(FIGURES[n].label for n in _SPLIT), lambda b: " / ".join(_pct(_get(b, FIGURES[n].where)) for n in _SPLIT)),
    (header("packets"), lambda b: str(b["packets"])),
    _stats("csr_setup_us", ("median", "p90"), 3),
    (header("data_dma_us", ("median; ideal",)), _data_dma),
    _stats("interrupt_delay_us", ("median",), 2),
    _stats("packets_per_interrupt", ("median",), 1),
    _stats("dma_burst_bytes", ("median", "max"), 0),
    (header("throughput_mbit_s"), lambda b: _fmt(b["throughput_mbit_s"], 1)),
    (header("efficiency"), lambda b: _fmt(b["efficiency"], 3)),
]
MD_HEADER = ["capture", "bus"] + [h for h, _ in _MD_COLUMNS]
# Markdown link table: the delays' statistics.
_MD_LINK_COLUMNS = [_stats(f.name, ("median", "p90") if f.name == "pci_to_pci_us" else ("median",), 2, named=False)
                    for f in LINK_FIGURES if f.distribution]


def to_markdown(results: list[dict]) -> str:
    lines = ["| " + " | ".join(MD_HEADER) + " |", "|" + "---|" * len(MD_HEADER)]
    errors = []
    for r in results:
        if "error" in r:
            errors.append(r)
            continue
        for b in r.get("buses", []):
            cells = [f"`{r['capture']}`", b["name"]] + [cell(b) for _, cell in _MD_COLUMNS]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    text = "\n".join(lines) + "\n"
    links = [(r, lk) for r in results if "error" not in r for lk in r.get("links", [])]
    if links:
        head = ["capture", "link", "send bus -> recv bus", "frames (matched)"] + [h for h, _ in _MD_LINK_COLUMNS]
        text += "\n| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
        for r, lk in links:
            fr = lk["frames"]
            cells = [f"`{r['capture']}`", lk["name"], f"{lk['send_bus'] or '–'} -> {lk['recv_bus'] or '–'}",
                     f"{fr['frames']} ({fr['matched']})"] + [cell(lk) for _, cell in _MD_LINK_COLUMNS]
            text += "| " + " | ".join(cells) + " |\n"
    warned = [r for r in results if r.get("warnings")]
    if warned:
        text += "\n**Warnings**\n\n"
        for r in warned:
            text += "".join(f"- `{r['capture']}`: {w}\n" for w in r["warnings"])
    if errors:
        text += "\n**Captures that could not be analysed**\n\n"
        for r in errors:
            text += (f"- {r['error']}\n" if r["error"].startswith(r["capture"])
                     else f"- `{r['capture']}`: {r['error']}\n")
    return text

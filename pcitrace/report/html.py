"""A self-contained HTML report: overview table, then per capture and bus the key figures beside
their physical limits and three plots (occupancy over time, DMA burst sizes, per-packet breakdown),
embedded as PNG so the file can be mailed or archived on its own.
"""

from __future__ import annotations

import base64
import html
import io

from pcitrace.analyse.metrics import BUS_FIGURES, FIGURES, LINK_FIGURES, header
from pcitrace.report.summary import BREAKDOWN
from pcitrace.report.writers import _fmt as _f
from pcitrace.report.writers import _get, _pct, document

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#1d2430;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:2px solid #d7dde6;padding-bottom:4px;margin-top:1.8em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
.meta{color:#5b6675;font-size:.92em}
table{border-collapse:collapse;font-size:.9em;margin:.4em 0 1em}
th,td{border:1px solid #d7dde6;padding:4px 8px;text-align:right;white-space:nowrap}
th{background:#eef2f7;text-align:center}td.l{text-align:left}
tr:nth-child(even) td{background:#f8fafc}
.err{color:#a4161a}.plots{display:flex;flex-wrap:wrap;gap:10px}
.plots img{border:1px solid #e3e7ee;max-width:100%}
.kv{display:inline-block;margin:0 18px 6px 0}.kv b{font-size:1.3em;color:#0b3d91}
"""


def _e(s) -> str:
    return html.escape(str(s))


def _png(fig, alt: str = "plot") -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _plots(bus: dict, series: dict) -> str:
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    imgs = []
    # Occupancy over time.
    fig, ax = plt.subplots(figsize=(3.9, 2.6))
    t, occ = series["rolling_t_us"], series["rolling_occupancy"]
    if t:
        ax.plot(t, [100 * (o or 0) for o in occ], lw=1.2, color="#0b3d91", label="rolling")
    if bus["occupancy"] is not None:
        ax.axhline(100 * bus["occupancy"], color="#c1121f", ls="--", lw=1, label=f"whole {_pct(bus['occupancy'])}")
    ax.set_ylim(0, 100)
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("occupancy (%)")
    ax.set_title(f"Bus occupancy, {_f(bus['occupancy_window_us'], 1)} µs window", fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=.3)
    imgs.append(_png(fig))

    # DMA burst sizes.
    fig, ax = plt.subplots(figsize=(3.9, 2.6))
    bb = series["burst_bytes"]
    if bb:
        ax.hist(bb, bins=min(40, max(5, len(set(bb)))), color="#2a9d8f", edgecolor="white")
    else:
        ax.text(0.5, 0.5, "no NIC DMA", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("bytes per DMA burst")
    ax.set_ylabel("bursts")
    ax.set_title(f"DMA burst lengths ({bus['dma_bursts']} bursts)", fontsize=10)
    ax.grid(alpha=.3)
    imgs.append(_png(fig))

    # Per-packet breakdown: stacked bars for the first packets.
    fig, ax = plt.subplots(figsize=(3.9, 2.6))
    n = min(len(series["packet_t_us"]), 60)
    if n:
        bottom = [0.0] * n
        colors = ["#e76f51", "#f4a261", "#2a9d8f", "#264653"]
        for (label, _), c in zip(BREAKDOWN.items(), colors):
            vals = [v or 0.0 for v in series["breakdown_us"][label][:n]]
            ax.bar(range(n), vals, bottom=bottom, color=c, label=label, width=0.85)
            bottom = [a + b for a, b in zip(bottom, vals)]
        ax.legend(fontsize=7, loc="upper right", ncol=2)
        ax.set_ylim(0, max(bottom) * 1.45 if max(bottom) > 0 else 1)
    else:
        ax.text(0.5, 0.5, "no packets found", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("packet")
    ax.set_ylabel("µs")
    ax.set_title("Per-packet bus time (first 60 packets)", fontsize=10)
    ax.grid(alpha=.3, axis="y")
    imgs.append(_png(fig))
    return '<div class="plots">' + "".join(imgs) + "</div>"


def _figures_table(b: dict) -> str:
    rows = ["<tr><th>figure</th><th>unit</th><th>count</th><th>min</th><th>median</th><th>p90</th>"
            "<th>p99</th><th>max</th><th>physical limit (median)</th></tr>"]
    for f in BUS_FIGURES:
        if not f.html:
            continue
        d = _get(b, f.where)
        lim = _get(b, FIGURES[f.limit].where)["median"] if f.limit else None
        cells = [d["count"], _f(d["min"]), _f(d["median"]), _f(d["p90"]), _f(d["p99"]), _f(d["max"])]
        rows.append(f'<tr><td class="l">{_e(f.label)}</td><td class="l">{_e(f.unit)}</td>'
                    + "".join(f"<td>{_e(c)}</td>" for c in cells) + f"<td>{_e(_f(lim))}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _bus_section(r: dict, b: dict) -> str:
    ob, oi = b["occupancy_by"], b["occupancy_by_initiator"]
    lim = b["limits"]
    head = (
        f'<div class="kv">occupancy <b>{_pct(b["occupancy"])}</b></div>'
        f'<div class="kv">peak ({_f(b["occupancy_window_us"], 1)} µs) <b>{_pct(b["occupancy_peak"])}</b></div>'
        f'<div class="kv">packets <b>{b["packets"]}</b></div>'
        f'<div class="kv">frame data <b>{_f(b["throughput_mbit_s"], 1)}</b> Mbit/s'
        f' (bus limit {_f(lim["bus_mbit_s"], 0)})</div>'
        f'<div class="kv">efficiency <b>{_f(b["efficiency"], 3)}</b></div>'
    )
    split = (f'<p class="meta">{b["width"]}-bit, {_f(b["clock_mhz"], 2)} MHz ({b["mode"]}), '
             f'{_f(lim["bus_us_per_byte"], 5)} µs/byte on the bus, '
             f'{lim["link_us_per_byte"]} µs/byte on the link. Busy clocks: data {_pct(ob["data"])}, wait {_pct(ob["wait"])}, '
             f'address/termination {_pct(ob["address"])}, retry {_pct(ob["retry"])}{(", stray IRDY# " + _pct(ob["stray"])) if ob.get("stray") else ""}; by initiator: NIC '
             f'{_pct(oi["nic"])}, host (CSR) {_pct(oi["host"])}, other {_pct(oi["other"])}. '
             f'Classification rule: <code>{_e(b["classification_rule"])}</code>. '
             f'Pauses: {b["pauses"]["count"]}.</p>')
    series = (r.get("series") or {}).get(b["name"])
    plots = _plots(b, series) if series else ""
    return f'<h3>bus {_e(b["name"])}</h3>{head}{split}{plots}{_figures_table(b)}'


# Waterfall bars: (label, from, to, colour).
_WATERFALL = [
    ("CSR setup", "csr_setup_start", "send_first_dma", "#e9c46a"),
    ("descriptor / queued", "send_first_dma", "send_first_word", "#ced4da"),
    ("send DMA", "send_first_word", "send_dma_end", "#2a9d8f"),
    ("on the wire", "wire_start", "wire_end", "#264653"),
    ("receive DMA", "recv_first_word", "recv_dma_end", "#e76f51"),
]


def _waterfall(lk: dict, s: dict) -> str:
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    n = len(s["frame"])
    fig, ax = plt.subplots(figsize=(8.2, 0.9 + 0.16 * max(n, 4)))
    for i in range(n):
        for _, a, b, colour in _WATERFALL:
            x0, x1 = s[a][i], s[b][i]
            if x0 is not None and x1 is not None and x1 >= x0:
                ax.barh(i, x1 - x0, left=x0, height=0.7, color=colour)
        irq = s["recv_interrupt"][i]
        if irq is not None:
            ax.plot([irq], [i], marker="|", color="#6a040f", ms=7, mew=2)
    ax.invert_yaxis()
    ax.set_xlabel("time from capture start (µs)")
    ax.set_ylabel("frame")
    ax.set_title(f"Link {lk['name']}: {lk['send_bus'] or '?'} bus -> wire -> {lk['recv_bus'] or '?'} bus, "
                 f"first {n} matched frames", fontsize=10)
    handles = [Patch(color=c, label=l) for l, _, _, c in _WATERFALL]
    handles.append(plt.Line2D([], [], color="#6a040f", marker="|", ls="", ms=7, mew=2, label="receive interrupt"))
    ax.legend(handles=handles, fontsize=7, loc="lower right", ncol=6, frameon=False,
              bbox_to_anchor=(1.0, 1.06))
    ax.grid(alpha=.3, axis="x")
    return '<div class="plots">' + _png(fig, "waterfall") + "</div>"


def _link_section(r: dict, lk: dict) -> str:
    fr = lk["frames"]
    meta = (f'<p class="meta">send bus <code>{_e(lk["send_bus"])}</code>, receive bus '
            f'<code>{_e(lk["recv_bus"])}</code>, matched by {_e(lk["matching"])}: {fr["frames"]} frames, '
            f'{fr["matched"]} matched on both buses, {fr["no_send_dma"]} without a send DMA, '
            f'{fr["no_recv_dma"]} without a receive DMA (dropped or past the end), {fr.get("control", 0)} '
            f'MAC control; {fr["unmatched_send_dmas"]} send and {fr["unmatched_recv_dmas"]} receive DMAs '
            f'with no frame on the probe.</p>')
    rows = ["<tr><th>delay</th><th>count</th><th>min</th><th>median</th><th>p90</th><th>p99</th><th>max</th></tr>"]
    for f in LINK_FIGURES:
        if not f.html:
            continue
        d = _get(lk, f.where)
        rows.append(f'<tr><td class="l">{_e(f.label)} ({_e(f.unit)})</td>'
                    + "".join(f"<td>{_e(c)}</td>" for c in (d["count"], _f(d["min"]), _f(d["median"]),
                                                           _f(d["p90"]), _f(d["p99"]), _f(d["max"])))
                    + "</tr>")
    series = (r.get("link_series") or {}).get(lk["name"])
    plot = _waterfall(lk, series) if series and series["frame"] else ""
    return f'<h3>link {_e(lk["name"])}</h3>{meta}<table>{"".join(rows)}</table>{plot}'


def _median(name: str, digits: int = 3):
    return lambda b: _f(_get(b, FIGURES[name].where)["median"], digits)


# Overview table: (header, cell of a bus figures dict), each column's two halves in one place.
_OVERVIEW = [
    ("width / clock", lambda b: f'{b["width"]}-bit {_f(b["clock_mhz"], 1)} MHz'),
    (header("occupancy"), lambda b: _pct(b["occupancy"])),
    (header("packets"), lambda b: str(b["packets"])),
    (header("csr_setup_us"), _median("csr_setup_us")),
    (header("data_dma_us"), _median("data_dma_us")),
    (header("interrupt_delay_us"), _median("interrupt_delay_us", 2)),
    (header("packets_per_interrupt"), _median("packets_per_interrupt", 1)),
    (header("throughput_mbit_s"), lambda b: _f(b["throughput_mbit_s"], 1)),
]


def to_html(results: list[dict], options: dict | None = None, title: str = "pcitrace report") -> str:
    doc = document(results, options)
    ok = [r for r in results if "error" not in r]
    bad = [r for r in results if "error" in r]
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
             f'<p class="meta">{len(ok)} captures analysed, {len(bad)} failed · generated {doc["generated"]} · '
             f'schema {doc["schema"]}</p>']
    # Overview.
    heads = ["capture", "bus"] + [h for h, _ in _OVERVIEW]
    ov = ["<tr>" + "".join(f"<th>{_e(h)}</th>" for h in heads) + "</tr>"]
    for r in ok:
        for b in r.get("buses", []):
            ov.append(f'<tr><td class="l">{_e(r["capture"])}</td><td class="l">{_e(b["name"])}</td>'
                      + "".join(f"<td>{_e(cell(b))}</td>" for _, cell in _OVERVIEW) + "</tr>")
    parts.append("<h2>Overview</h2><table>" + "".join(ov) + "</table>")
    if bad:
        parts.append('<h2 class="err">Captures that could not be analysed</h2><ul>'
                     + "".join(f'<li><span class="err">{_e(r["error"])}</span></li>' if r["error"].startswith(r["capture"])
                               else f'<li><code>{_e(r["capture"])}</code>: <span class="err">{_e(r["error"])}</span></li>'
                               for r in bad) + "</ul>")
    for r in ok:
        parts.append(f'<h2>{_e(r["capture"])}</h2><p class="meta">profile: {_e(r.get("profile"))} · '
                     f'protocol findings: {r.get("findings", 0)}'
                     + (" (" + ", ".join(f"{_e(k)} {v}" for k, v in r.get("finding_kinds", {}).items()) + ")"
                        if r.get("finding_kinds") else "") + "</p>")
        parts.extend(f'<p class="err">warning: {_e(w)}</p>' for w in r.get("warnings", []))
        if not r.get("buses"):
            parts.append('<p class="err">no PCI bus in this capture</p>')
        for b in r.get("buses", []):
            parts.append(_bus_section(r, b))
        for lk in r.get("links", []):
            parts.append(_link_section(r, lk))
    parts.append("</body></html>\n")
    return "".join(parts)

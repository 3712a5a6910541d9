"""Compare an analysed bus with a simulator truth file (NAME.truth.json, pcitrace.sim.output)."""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.classify import READ, WRITE


def expected_packets(truth: dict, bus: str) -> list[dict]:
    """Per packet that moved data on ``bus``: what the analyser must find (times in ps)."""
    recs = truth["records"]
    out = []

    def status_end(indices):
        st = [recs[i] for i in indices if recs[i]["purpose"] == "status_write"]
        return st[-1]["end_ps"] if st else None

    def data_of(indices, purposes):
        rs = [recs[i] for i in indices if recs[i]["purpose"] in purposes]
        # Bytes as the decoder counts them (width/8 per data phase when C/BE# is not captured).
        return (min(r["start_ps"] for r in rs), sum(r["bytes"] for r in rs)) if rs else (None, 0)

    for pk in truth["packets"]:
        if pk["send_bus"] == bus and pk["tx_bytes"] > 0:
            start, nbytes = data_of(pk["tx_dma_records"], ("data_read", "data_completion"))
            out.append({"seq": pk["seq"], "dir": READ, "data_start_ps": start, "data_bytes": nbytes,
                        "csr_setup_ps": pk["csr_setup_ps"] if pk["csr_setup_ps"] >= 0 else None,
                        "csr_group_end_ps": pk["csr_end_ps"], "csr_start_ps": pk["csr_start_ps"],
                        "status_end_ps": status_end(pk["tx_dma_records"]),
                        "interrupt_delay_ps": pk["tx_interrupt_delay_ps"] if pk["tx_interrupt_delay_ps"] >= 0 else None,
                        "irq_start_ps": pk["tx_irq_csr_start_ps"]})
        if pk["recv_bus"] == bus and pk["rx_bytes"] > 0 and not pk["lost"]:
            start, nbytes = data_of(pk["rx_dma_records"], ("data_write",))
            out.append({"seq": pk["seq"], "dir": WRITE, "data_start_ps": start, "data_bytes": nbytes,
                        "csr_setup_ps": None,
                        "status_end_ps": status_end(pk["rx_dma_records"]),
                        "interrupt_delay_ps": pk["rx_interrupt_delay_ps"] if pk["rx_interrupt_delay_ps"] >= 0 else None,
                        "irq_start_ps": pk["rx_irq_csr_start_ps"]})
    out.sort(key=lambda e: e["data_start_ps"])
    return out


def compare(bus_analysis, truth: dict, bus: str, *, tol_ps: float, check_direction: bool = True,
            check_occupancy: bool = True) -> list[str]:
    """Differences between the analysis of ``bus`` and the truth (empty = agrees).

    Counts and bytes must be exact; times within ``tol_ps`` (one bus clock)."""
    problems = []
    occ = truth["occupancy"][bus] if check_occupancy else {}
    s = bus_analysis.split
    got = {"busy": s.busy_clocks, "data": s.data, "wait": s.wait, "address": s.address, "retry": s.retry,
           "stray": s.stray}
    for k, v in got.items():
        if occ and v != occ[k]:
            problems.append(f"occupancy {k}: {v} != truth {occ[k]}")
    if occ and s.total_clocks != occ["clocks"]:
        problems.append(f"clocks: {s.total_clocks} != truth {occ['clocks']}")
    for k, v in s.by_initiator.items():
        if occ and v != occ["by_initiator"].get(k, 0):
            problems.append(f"by_initiator {k}: {v} != truth {occ['by_initiator'].get(k, 0)}")

    exp = expected_packets(truth, bus)
    p = bus_analysis.packets
    if len(p) != len(exp):
        problems.append(f"{len(p)} packets != truth {len(exp)}")
        return problems
    # Truth may end before the capture records a packet's interrupt; ignore those the capture cut.
    def close(a, b):
        return b is None or (np.isfinite(a) and abs(a - b) <= tol_ps)
    for i, e in enumerate(exp):
        row = p[i]
        where = f"packet {i} (seq {e['seq']}, data at {e['data_start_ps']} ps)"
        if check_direction and truth.get("ad", True) and row["direction"] != e["dir"]:
            problems.append(f"{where}: direction {row['direction']} != {e['dir']}")
        if int(row["data_bytes"]) != e["data_bytes"]:
            problems.append(f"{where}: data bytes {int(row['data_bytes'])} != {e['data_bytes']}")
        if abs(int(row["data_start_ps"]) - e["data_start_ps"]) > tol_ps:
            problems.append(f"{where}: data start {int(row['data_start_ps'])} != {e['data_start_ps']}")
        if e["csr_setup_ps"] is not None and not close(row["csr_setup_ps"], e["csr_setup_ps"]):
            problems.append(f"{where}: csr setup {row['csr_setup_ps']} != {e['csr_setup_ps']}")
        if e["csr_setup_ps"] is not None:
            span = e["csr_group_end_ps"] - e["csr_start_ps"] + truth["buses"][bus]["period_ps"]
            if not close(row["csr_group_ps"], span):
                problems.append(f"{where}: csr group {row['csr_group_ps']} != {span}")
        if e["status_end_ps"] is not None and not close(row["last_dma_end_ps"], e["status_end_ps"]):
            problems.append(f"{where}: last DMA end {row['last_dma_end_ps']} != status end {e['status_end_ps']}")
        if e["interrupt_delay_ps"] is not None and not close(row["interrupt_delay_ps"], e["interrupt_delay_ps"]):
            problems.append(f"{where}: interrupt delay {row['interrupt_delay_ps']} != {e['interrupt_delay_ps']}")
        if len(problems) > 30:
            break
    # Packets per interrupt: the packets that share one interrupt service routine in the truth
    # must share one interrupt group here, and no others.
    known = [(i, e["irq_start_ps"]) for i, e in enumerate(exp)
             if e["irq_start_ps"] is not None and e["irq_start_ps"] >= 0]
    if known:
        mine = {i: int(p["interrupt_group"][i]) for i, _ in known}
        pairs_truth = {}
        for i, start in known:
            pairs_truth.setdefault(start, set()).add(mine[i])
        by_group = {}
        for i, start in known:
            by_group.setdefault(mine[i], set()).add(start)
        split = [s for s, gs in pairs_truth.items() if len(gs) != 1 or -1 in gs]
        merged = [g for g, ss in by_group.items() if len(ss) != 1]
        if split or merged:
            problems.append(f"interrupt grouping differs: truth interrupts {split[:5]} split/missed, "
                            f"groups {merged[:5]} merge several")
    return problems

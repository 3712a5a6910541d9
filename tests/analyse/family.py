"""The measuring stick of issue 17: the analysis of NIC-family scenarios scored against their truth.

``score(n)`` simulates ``family_scenario(n)``, runs the pipeline on the capture and compares,
per truth packet, each per-packet figure with the truth within one bus clock:

- ``data_dma``: the packet's data transfer (first data burst's start, bytes);
- ``csr_setup``: send setup group start to the packet's first DMA (transmit packets);
- ``descriptor_fetch``: the span of the descriptor fetches the truth gives the packet;
- ``status_writeback``: the end of the packet's last DMA (its status write-back);
- ``interrupt_delay``: last DMA end to the start of the interrupt routine serving it;
- ``packets_per_interrupt``: the packets sharing its interrupt routine are the truth's;
- ``wire_delays``: send first word -> wire start and wire end -> receive first word.

Each figure of each packet is ``right``, ``wrong`` or ``ambiguous`` (the analysis flagged the
packet ambiguous, or the truth packet has no analysed packet on a bus that warns); figures the
truth does not have (no interrupt in the capture, no probe) are not counted. Per bus the packet
count is ``right``, ``warned`` (wrong with a warning) or ``silent`` (wrong without one).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .truth import expected_packets

FIGURES = ("data_dma", "csr_setup", "descriptor_fetch", "status_writeback", "interrupt_delay",
           "packets_per_interrupt", "wire_delays")
OUTCOMES = ("right", "wrong", "ambiguous")
COUNTS = ("right", "warned", "silent")


@dataclasses.dataclass
class Score:
    """Tallies over scenarios: figure -> outcome -> packets; bus packet counts by outcome."""

    figures: dict = dataclasses.field(default_factory=lambda: {f: dict.fromkeys(OUTCOMES, 0) for f in FIGURES})
    counts: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    wrong: list = dataclasses.field(default_factory=list)      # (scenario, bus, figure) of each wrong one

    def add(self, other: "Score") -> None:
        for f in FIGURES:
            for o in OUTCOMES:
                self.figures[f][o] += other.figures[f][o]
        for c in COUNTS:
            self.counts[c] += other.counts[c]
        self.wrong += other.wrong

    def share(self, figure: str, outcome: str = "right") -> float:
        t = self.figures[figure]
        n = sum(t.values())
        return t[outcome] / n if n else 1.0

    def table(self) -> str:
        rows = [f"{'figure':<22} {'packets':>8} {'right':>8} {'wrong':>8} {'ambiguous':>10}"]
        for f in FIGURES:
            t = self.figures[f]
            n = sum(t.values())
            rows.append(f"{f:<22} {n:>8} " + " ".join(
                f"{100 * t[o] / n if n else 0:>{8 if o != 'ambiguous' else 10}.1f}" for o in OUTCOMES))
        c = self.counts
        rows.append(f"bus packet counts: {c['right']} right, {c['warned']} wrong with a warning, "
                    f"{c['silent']} wrong without one")
        return "\n".join(rows)


def _records_span(truth: dict, indices, purposes: tuple[str, ...]):
    rs = [truth["records"][i] for i in indices if truth["records"][i]["purpose"] in purposes]
    return (min(r["start_ps"] for r in rs), max(r["end_ps"] for r in rs)) if rs else None


def _truth_rows(truth: dict, bus: str) -> list[dict]:
    """expected_packets with the descriptor fetch span added (from the packet's DMA records)."""
    exp = expected_packets(truth, bus)
    by_key = {}
    for pk in truth["packets"]:
        by_key[(pk["seq"], "tx")] = pk
        by_key[(pk["seq"], "rx")] = pk
    for e in exp:
        pk = by_key[(e["seq"], "tx" if e["dir"] == 1 else "rx")]
        recs = pk["tx_dma_records"] if e.get("csr_start_ps") is not None else pk["rx_dma_records"]
        e["fetch"] = _records_span(truth, recs, ("desc_fetch", "desc_completion"))
    return exp


def _match(got_start: np.ndarray, exp: list[dict], tol: float) -> list[int]:
    """Per truth packet the analysed packet whose data starts within ``tol`` of it (-1: none)."""
    out = []
    for e in exp:
        k = int(np.searchsorted(got_start, e["data_start_ps"] - tol))
        out.append(k if k < got_start.size and abs(int(got_start[k]) - e["data_start_ps"]) <= tol else -1)
    return out


def _close(a, b, tol) -> bool:
    return b is None or (a is not None and np.isfinite(a) and abs(a - b) <= tol)


def _figures_of(row, e: dict, tol: float, period: float) -> dict:
    """figure -> True/False for one matched packet (figures the truth lacks are left out)."""
    out = {"data_dma": int(row["data_bytes"]) == e["data_bytes"]
           and abs(int(row["data_start_ps"]) - e["data_start_ps"]) <= tol}
    if e["csr_setup_ps"] is not None:
        out["csr_setup"] = _close(row["csr_setup_ps"], e["csr_setup_ps"], tol)
    if e["fetch"] is not None:
        span = e["fetch"][1] - e["fetch"][0] + period
        out["descriptor_fetch"] = _close(row["descriptor_fetch_ps"], span, tol)
    if e["status_end_ps"] is not None:
        out["status_writeback"] = _close(float(row["last_dma_end_ps"]), e["status_end_ps"], tol)
    if e["interrupt_delay_ps"] is not None:
        out["interrupt_delay"] = _close(row["interrupt_delay_ps"], e["interrupt_delay_ps"], tol)
    return out


def _per_interrupt(p: np.ndarray, exp: list[dict], match: list[int]) -> dict[int, bool]:
    """truth packet index -> whether the packets sharing its interrupt are the truth's."""
    known = [i for i, e in enumerate(exp) if e["irq_start_ps"] is not None and e["irq_start_ps"] >= 0]
    truth_sets, mine_sets = {}, {}
    for i in known:
        truth_sets.setdefault(exp[i]["irq_start_ps"], set()).add(i)
        if match[i] >= 0 and p["interrupt_group"][match[i]] >= 0:
            mine_sets.setdefault(int(p["interrupt_group"][match[i]]), set()).add(i)
    out = {}
    for i in known:
        g = int(p["interrupt_group"][match[i]]) if match[i] >= 0 else -1
        out[i] = g >= 0 and mine_sets[g] == truth_sets[exp[i]["irq_start_ps"]]
    return out


def _wire_rows(truth: dict, chains: dict, tol: float) -> dict[int, tuple]:
    """seq -> (send_pci_to_wire, wire_to_recv_pci) the analysis found for the frame at that
    truth packet's wire start, within ``tol`` (None when no chain row is there)."""
    rows = [c.chain for c in chains.values()]
    starts = np.concatenate([r["wire_start_ps"] for r in rows]) if rows else np.zeros(0, np.int64)
    allrows = np.concatenate(rows) if rows else None
    out = {}
    for pk in truth["packets"]:
        if pk["wire_start_ps"] < 0:
            continue
        k = np.flatnonzero(np.abs(starts - pk["wire_start_ps"]) <= tol)
        out[pk["seq"]] = (allrows[k[0]] if k.size else None)
    return out


def score_run(name: str, truth: dict, analysis, chains: dict, probe: bool) -> Score:
    """Score one analysed capture against its truth."""
    s = Score()
    for bus, ba in analysis.buses.items():
        period = truth["buses"][bus]["period_ps"]
        p = ba.packets
        exp = _truth_rows(truth, bus)
        amb = p["ambiguous"] if "ambiguous" in (p.dtype.names or ()) else np.zeros(len(p), bool)
        warned = bool(ba.warnings) or any(bus in c.doubtful_buses for c in chains.values())
        if len(p) == len(exp):
            s.counts["right"] += 1
        else:
            s.counts["warned" if warned else "silent"] += 1
        match = _match(p["data_start_ps"], exp, period)
        ppi = _per_interrupt(p, exp, match)
        for i, e in enumerate(exp):
            j = match[i]
            if j < 0:
                figs = dict.fromkeys(_figures_of(np.zeros(1, p.dtype)[0], e, period, period), False)
                if i in ppi:
                    figs["packets_per_interrupt"] = False
                flagged = warned
            else:
                figs = _figures_of(p[j], e, period, period)
                if i in ppi:
                    figs["packets_per_interrupt"] = ppi[i]
                flagged = bool(amb[j])
            for f, ok in figs.items():
                outcome = "right" if ok else ("ambiguous" if flagged else "wrong")
                s.figures[f][outcome] += 1
                if outcome == "wrong":
                    s.wrong.append((name, bus, f, e["seq"]))
    if probe:
        _score_wire(s, name, truth, analysis, chains)
    return s


def _score_wire(s: Score, name: str, truth: dict, analysis, chains: dict) -> None:
    """Wire delays per truth frame: ambiguous where the analysis flagged the packet the frame
    was matched to, or the frame found no packets on a link that doubts a bus's count."""
    tol = max(b["period_ps"] for b in truth["buses"].values() if b["kind"] in ("pci", "pcix"))
    rows = _wire_rows(truth, chains, tol)
    by_bus = {(c.send_bus, c.recv_bus): c for c in chains.values()}
    doubted = any(c.doubtful_buses for c in by_bus.values())
    for pk in truth["packets"]:
        if pk["wire_start_ps"] < 0 or pk["lost"] or pk["tx_first_word_ps"] < 0 or pk["rx_first_word_ps"] < 0:
            continue
        want = (pk["wire_start_ps"] - pk["tx_first_word_ps"], pk["rx_first_word_ps"] - pk["wire_end_ps"])
        row = rows.get(pk["seq"])
        ok = row is not None and all(abs(int(row[f]) - w) <= tol and int(row[f]) != -1 for f, w in
                                     zip(("send_pci_to_wire_ps", "wire_to_recv_pci_ps"), want))
        flagged = doubted if row is None else _row_flagged(row, analysis, chains, doubted)
        outcome = "right" if ok else ("ambiguous" if flagged else "wrong")
        s.figures["wire_delays"][outcome] += 1
        if outcome == "wrong":
            s.wrong.append((name, "link", "wire_delays", pk["seq"]))


def _row_flagged(row, analysis, chains: dict, doubted: bool) -> bool:
    """Whether a chain row rests on a packet the analysis counted ambiguous (or on none, where
    the link doubts a bus's packet count)."""
    for c in chains.values():
        for side, bus in (("send", c.send_bus), ("recv", c.recv_bus)):
            j = int(row[f"{side}_packet"])
            if bus is None:
                continue
            if j < 0 and doubted:
                return True
            if j >= 0 and analysis.buses[bus].packets["ambiguous"][j]:
                return True
    return False


def score(n: int) -> Score:
    """Simulate family scenario ``n``, run the pipeline and score it."""
    from pcitrace import pipeline
    from pcitrace.sim.scenario import simulate
    from pcitrace.sim.strategies import family_scenario

    sc = family_scenario(n)
    r = simulate(sc)
    run = pipeline.run(r.capture, r.profile, until="link")
    return score_run(sc.name, r.truth, run.analysis, run.chains, sc.link.probe)


def score_many(ns) -> Score:
    total = Score()
    for n in ns:
        total.add(score(n))
    return total

"""The one table of figures: every per-bus, per-packet and per-link figure pcitrace reports.

Each figure is declared once (name, what one value is of, unit, scale, label, the statistics the
tables show, its one-line definition); the analyser summarises the ``field`` of each
distribution from it, and the report (JSON, CSV, Markdown, HTML), the viewer and
docs/report-schema.md read names, labels and units from here (the way scikit-rf's
``Network._func_lookup`` drives computation, labels and docs from one table).

To add a per-packet figure: add its column to packets.PACKET_DTYPE and compute it in
packets.packets, add one ``Figure`` here, and regenerate the docs
(``python -m pcitrace.analyse.metrics --write docs/report-schema.md``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Literal, get_args

Statistic = Literal["count", "min", "median", "p90", "p99", "max"]
# What one value is of: the bus (one value), or one packet, interrupt group, DMA burst, DMA
# transfer, CSR group, or frame on a probed link (a distribution of such values).
Per = Literal["bus", "packet", "interrupt", "burst", "transfer", "group", "frame"]
Unit = Literal["", "µs", "bytes", "bits", "MHz", "Mbit/s"]

STATISTICS: tuple[Statistic, ...] = get_args(Statistic)
# The analyser's distributions, in the report's order: grouped by what they are of.
SOURCES: tuple[Per, ...] = ("packet", "interrupt", "burst", "transfer", "group")


@dataclasses.dataclass(frozen=True)
class Figure:
    name: str                                # key in the report; CSV columns are name_<statistic>
    per: Per
    unit: Unit
    label: str                               # tables, plots and the viewer
    definition: str                          # one line, for docs/report-schema.md
    field: str | None = None                 # the analyser's column of ``per`` it summarises
    scale: float = 1.0                       # field x scale = value in ``unit`` (ps -> µs: 1e-6)
    path: tuple[str, ...] | None = None      # where in the bus / link object, if not (name,)
    statistics: tuple[Statistic, ...] = ()   # distributions: the ones CSV (and Markdown) show
    csv: bool = False                        # a value (per bus): a CSV column
    html: bool = False                       # in the HTML table of distributions
    limit: str | None = None                 # the physical limit (a figure) shown beside it
    short: str | None = None                 # column header where the label is too long

    @property
    def where(self) -> tuple[str, ...]:
        return self.path or (self.name,)

    @property
    def distribution(self) -> bool:
        return self.per != "bus"

    @property
    def heading(self) -> str:
        return self.label if self.short is None else self.short

    def columns(self) -> list[tuple[str, tuple[str, ...]]]:
        """CSV columns: (column name, path into the bus or link object)."""
        if not self.distribution:
            return [(self.name, self.where)] if self.csv else []
        return [(f"{self.name}_{s}", self.where + (s,)) for s in self.statistics]


def _v(name, unit, label, definition, path=None, csv=True):
    return Figure(name, "bus", unit, label, definition, path=path, csv=csv)


US = 1e-6

# Per bus, in CSV column order (distributions between the values they stand beside).
BUS_FIGURES: tuple[Figure, ...] = (
    _v("kind", "", "bus kind", "`pci` or `pcix`"),
    _v("width", "bits", "bus width", "32 or 64"),
    _v("clock_mhz", "MHz", "clock", "the bus clock"),
    _v("classification_rule", "", "rule", "how CSR accesses and NIC DMA were told apart (see Definitions)"),
    _v("occupancy", "", "occupancy", "busy clocks / all clocks over the whole capture"),
    _v("occupancy_data", "", "data", "completed data phases / all clocks", ("occupancy_by", "data")),
    _v("occupancy_wait", "", "wait", "wait states, DEVSEL# decode, STOP# termination clocks / all clocks",
       ("occupancy_by", "wait")),
    _v("occupancy_address", "", "addr", "header clocks of transactions not retried / all clocks",
       ("occupancy_by", "address")),
    _v("occupancy_retry", "", "retry", "every clock of retried transactions / all clocks", ("occupancy_by", "retry")),
    _v("occupancy_nic", "", "NIC", "NIC DMA clocks (PCI-X split completions excluded) / all clocks",
       ("occupancy_by_initiator", "nic")),
    _v("occupancy_host", "", "host", "CSR access and split completion clocks / all clocks",
       ("occupancy_by_initiator", "host")),
    _v("occupancy_peak", "", "peak occupancy", "highest occupancy in one rolling window"),
    _v("efficiency", "", "efficiency", "ideal time of every byte moved (bytes / (width/8 × clock)) / busy time"),
    _v("dma_efficiency", "", "DMA efficiency", "the same over NIC DMA bursts only"),
    Figure("throughput_mbit_s", "bus", "Mbit/s", "frame data", "frame data DMA'd (packets' data bytes) per second "
           "of capture", csv=True, short=""),
    _v("packets", "", "packets", "packets found (one per frame-data DMA transfer)"),
    _v("packets_tx", "", "tx packets", "packets the NIC read (transmit)", ("packets_by_direction", "tx")),
    _v("packets_rx", "", "rx packets", "packets the NIC wrote (receive)", ("packets_by_direction", "rx")),
    _v("packets_unknown", "", "packets, direction unknown", "no C/BE# captured: direction unknown",
       ("packets_by_direction", "unknown")),
    _v("ambiguous", "", "ambiguous packets", "packets whose grouping or routine this capture's evidence could not "
       "decide; the report's `warnings` say why (their figures are counted but may be wrong)"),
    Figure("csr_setup_us", "packet", "µs", "CSR setup", "setup group start → the packet's first DMA",
           "csr_setup_ps", US, statistics=("median", "p90", "max"), html=True),
    Figure("csr_accesses", "packet", "", "CSR accesses per setup", "register accesses in the setup group",
           "csr_accesses", html=True),
    Figure("csr_group_us", "packet", "µs", "setup group",
           "setup group: first clock of its first access → end of its last busy clock", "csr_group_ps", US),
    Figure("csr_to_dma_us", "packet", "µs", "CSR to DMA", "end of the setup group's last busy clock → first DMA",
           "csr_to_dma_ps", US),
    Figure("descriptor_fetch_us", "packet", "µs", "descriptor fetch",
           "the packet's descriptor fetch: first clock → end of its last busy clock", "descriptor_fetch_ps", US,
           statistics=("median",), html=True),
    Figure("data_dma_us", "packet", "µs", "data DMA", "the frame data transfer: first clock → end of its last busy clock",
           "data_dma_ps", US, statistics=("median", "max"), html=True, limit="data_dma_ideal_us"),
    Figure("data_dma_ideal_us", "packet", "µs", "data DMA at the bus limit",
           "the packet's data bytes at the bus limit (bytes × bus µs per byte)", path=("limits", "data_dma_ideal_us"),
           statistics=("median",)),
    Figure("data_bytes", "packet", "bytes", "frame data", "bytes of the frame data transfer", "data_bytes"),
    Figure("data_dma_efficiency", "packet", "", "data DMA efficiency",
           "the frame data's time at the bus limit / its data DMA time (1 = every clock moved a full word)",
           "data_dma_efficiency"),
    Figure("status_writeback_us", "packet", "µs", "status write-back",
           "the packet's status write-back: first clock → end of its last busy clock", "status_writeback_ps", US,
           statistics=("median",), html=True),
    Figure("interrupt_delay_us", "packet", "µs", "interrupt / CSR update delay",
           "end clock of the packet's last DMA → start of the next interrupt group starting at least "
           "`--irq-min-delay-us` later (a routine starting sooner was raised before that DMA)",
           "interrupt_delay_ps", US, statistics=("median", "p90"), html=True, short="interrupt delay"),
    Figure("packets_per_interrupt", "interrupt", "", "packets per interrupt",
           "per interrupt group, the packets whose next interrupt group it is", "packets",
           statistics=("median",), html=True, short="pkts/interrupt"),
    Figure("packet_period_us", "packet", "µs", "packet period",
           "the packet's anchor (setup group start, else first DMA) → the next packet's", "period_ps", US,
           statistics=("median",), html=True),
    Figure("packet_busy_us", "packet", "µs", "busy time per packet period", "bus busy time in the packet period",
           "busy_ps", US),
    Figure("packet_occupancy", "packet", "", "occupancy per packet period", "busy time in the packet period / period",
           "occupancy", statistics=("median",), html=True),
    Figure("dma_burst_bytes", "burst", "bytes", "DMA burst", "bytes of one NIC DMA transaction", "bytes",
           statistics=("median", "max"), html=True, short="burst"),
    Figure("dma_burst_us", "burst", "µs", "DMA burst", "clocks × period of one NIC DMA transaction", "duration_ps", US,
           statistics=("median", "max"), html=True, limit="dma_burst_ideal_us"),
    Figure("dma_burst_waits", "burst", "", "DMA burst waits", "initiator + target wait states of one burst", "waits"),
    Figure("dma_burst_efficiency", "burst", "", "DMA burst efficiency",
           "the burst's bytes at the bus limit / its time", "efficiency", html=True),
    Figure("dma_transfer_bytes", "transfer", "bytes", "DMA transfer", "bytes of one DMA transfer (bursts moving one buffer)",
           "bytes"),
    Figure("dma_transfer_us", "transfer", "µs", "DMA transfer",
           "one DMA transfer: first clock → end of its last busy clock", "span_ps", US),
    Figure("csr_group_all_us", "group", "µs", "CSR group", "every CSR group (setup and interrupt): its span",
           "span_ps", US),
    Figure("dma_burst_ideal_us", "burst", "µs", "DMA burst at the bus limit", "each DMA burst's bytes at the bus limit",
           path=("limits", "dma_burst_ideal_us")),
    Figure("wire_us", "packet", "µs", "frame on the wire",
           "each frame's wire time at the probed link's rate (1 Gbit/s unless the profile says): "
           "data + 4 CRC + 8 preamble + 12 inter-frame gap bytes",
           path=("limits", "wire_us"), html=True),
    Figure("pause_us", "packet", "µs", "transmit pause",
           "data DMA → the next packet's data DMA, where longer than 3 × the median", path=("pauses", "us")),
    _v("dma_bursts", "", "DMA bursts", "NIC DMA transactions"),
    _v("pauses", "", "pauses", "transmit gaps (see `pause_us`)", ("pauses", "count")),
    _v("bus_mbit_s", "Mbit/s", "bus limit", "the bus's peak rate (width × clock)", ("limits", "bus_mbit_s")),
)

# Per probed link, in CSV column order.
LINK_FIGURES: tuple[Figure, ...] = (
    _v("send_bus", "", "send bus", "the bus found (or given) to send on this link"),
    _v("recv_bus", "", "receive bus", "the bus found (or given) to receive on this link"),
    _v("frames", "", "frames", "frames on the probe", ("frames", "frames")),
    _v("frames_matched", "", "matched", "frames matched to a DMA on both buses", ("frames", "matched")),
    _v("frames_no_send_dma", "", "no send DMA", "frames without a send DMA", ("frames", "no_send_dma")),
    _v("frames_no_recv_dma", "", "no receive DMA", "frames without a receive DMA (dropped, or past the end)",
       ("frames", "no_recv_dma")),
    Figure("send_pci_to_wire_us", "frame", "µs", "send PCI (first word) -> wire start",
           "wire start - send DMA's first data word", "send_pci_to_wire_ps", US, statistics=("median",),
           html=True, short="send PCI -> wire"),
    Figure("wire_time_us", "frame", "µs", "frame on the wire", "frame-present line asserted (preamble + frame)",
           "wire_time_ps", US, statistics=("median",), html=True, short="wire"),
    Figure("wire_to_recv_pci_us", "frame", "µs", "wire end -> receive PCI (first word)",
           "receive DMA's first data word - wire end", "wire_to_recv_pci_ps", US, statistics=("median",),
           html=True, short="wire -> recv PCI"),
    Figure("pci_to_pci_us", "frame", "µs", "send PCI -> receive PCI",
           "receive first word - send first word (the seed papers' send-PCI to receive-PCI)", "pci_to_pci_ps", US,
           statistics=("median", "p90"), html=True, short="PCI -> PCI"),
)

FIGURES: dict[str, Figure] = {f.name: f for f in BUS_FIGURES + LINK_FIGURES}
assert len(FIGURES) == len(BUS_FIGURES) + len(LINK_FIGURES), "a figure is declared twice"


def analysed() -> list[Figure]:
    """The distributions the analyser computes from its tables, in the report's order."""
    mine = [f for f in BUS_FIGURES if f.field is not None]
    return sorted(mine, key=lambda f: SOURCES.index(f.per))


def packet_figures() -> list[Figure]:
    return [f for f in BUS_FIGURES if f.per == "packet" and f.field is not None]


def link_distributions() -> list[Figure]:
    return [f for f in LINK_FIGURES if f.distribution]


def csv_columns(figures=BUS_FIGURES) -> list[tuple[str, tuple[str, ...]]]:
    return [c for f in figures for c in f.columns()]


def header(name: str, statistics: tuple[str, ...] = ()) -> str:
    """A table column header: label, unit, statistics ('CSR setup µs (median, p90)');
    a figure without a unit is a count or a fraction and shows its label alone."""
    f = FIGURES[name]
    if not f.unit:
        return f.heading
    return f"{f.heading} {f.unit}".strip() + (f" ({', '.join(statistics)})" if statistics else "")


# -- docs/report-schema.md --------------------------------------------------------------------

BEGIN = "<!-- figures: generated from pcitrace/analyse/metrics.py (python -m pcitrace.analyse.metrics --write docs/report-schema.md); do not edit -->"
END = "<!-- end of generated figures -->"


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _where(f: Figure) -> str:
    return "`" + ".".join(f.where) + "`"


def _csv(f: Figure) -> str:
    return ", ".join(f.statistics) if f.distribution else ("yes" if f.csv else "")


def _table(figures, obj: str) -> list[str]:
    rows = [_md_row(["figure", f"in the {obj} object", "one value per", "unit", "csv", "histogram", "definition"]),
            "|---|---|---|---|---|---|---|"]
    return rows + [_md_row([f"`{f.name}`", _where(f), f.per, f.unit, _csv(f), "yes" if f.field and f.per in SOURCES
                            else "", f.definition]) for f in figures]


def markdown() -> str:
    """The figure tables of docs/report-schema.md, between BEGIN and END."""
    intro = ("One value per `bus`: a single value; per anything else: a distribution "
             "`{count, min, median, p90, p99, max}` (null when count is 0). `csv`: the CSV columns, in this "
             "order (a distribution's as `<figure>_<statistic>`). `histogram`: also under `histograms` "
             "as `{counts, edges}` (20 bins over the values, in the figure's unit).")
    lines = [BEGIN, "", intro, "", "Per bus:", ""] + _table(BUS_FIGURES, "bus")
    lines += ["", "Per probed link:", ""] + _table(LINK_FIGURES, "link")
    return "\n".join(lines + ["", END])


def with_generated(doc: str) -> str:
    """``doc`` with its generated figure tables replaced by the current ones."""
    head, sep, rest = doc.partition(BEGIN)
    if not sep or END not in rest:
        raise ValueError("docs/report-schema.md has no generated figures block (BEGIN ... END markers)")
    return head + markdown() + rest.partition(END)[2]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--markdown"]:
        print(markdown())
        return 0
    if argv[:1] == ["--write"] and len(argv) == 2:
        with open(argv[1], encoding="utf-8") as fh:
            text = fh.read()
        with open(argv[1], "w", encoding="utf-8") as fh:
            fh.write(with_generated(text))
        return 0
    print("usage: python -m pcitrace.analyse.metrics --markdown | --write docs/report-schema.md", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

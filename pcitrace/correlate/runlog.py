"""Readers for the outputs of UDP test tools: UDPmon, iperf3, iperf2 and netperf.

Each reader turns one file into a :class:`RunLog`: what tool and mode produced it, the
parameters it states, its summary rows (one per scan step / interval / test), and, when the
tool printed them, the per-packet series (UDPmon ``-G``), lost-packet events (``-L``) and
histograms (``-H``). The formats are the real tools' text, which changes with options and
versions, so the readers key on header lines and column names rather than on line numbers,
and keep unknown trailing columns instead of failing on them.

Times in UDPmon per-packet output are in units of 0.1 us; they are kept here in picoseconds
(the unit of the whole project) so that they line up with capture times without scaling.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcitrace.errors import PcitraceError

PS_PER_TENTH_US = 100_000
PS_PER_US = 1_000_000

# Canonical names of the standard udpmon_bw_mon summary columns, keyed by the header text.
_BW_NAMES = {
    "pkt len": "pkt_len", "num_sent": "num_sent", "num_acks recv": "num_acks_recv",
    "num_timeout": "num_timeout", "time/frame us": "time_per_frame_us",
    "inter-pkt_time us": "inter_pkt_time_us", "send time": "send_time_us",
    "send_user_data_rate mbit": "send_user_data_rate_mbit", "num_recv": "num_recv",
    "num_lost": "num_lost", "num_badorder": "num_badorder", "%lost": "pct_lost",
    "num_lost_innet": "num_lost_innet", "%lost_innet": "pct_lost_innet", "recv time": "recv_time_us",
    "time/recv pkt": "time_per_recv_pkt_us", "recv_user_data_rate mbit": "recv_user_data_rate_mbit",
    "recv_wire_rate mbit": "recv_wire_rate_mbit", "num_in_hist": "num_in_hist", "mean": "hist_mean",
    "sigma": "hist_sigma", "skew": "hist_skew", "kurtosis": "hist_kurtosis", "median": "hist_median",
    "iq25": "hist_iq25", "iq75": "hist_iq75",
}
# What `-q` prints after its five identity fields when no -x is given.
_BW_PLAIN = ["pkt_len", "num_sent", "inter_pkt_time_us", "send_user_data_rate_mbit", "num_recv",
             "num_lost", "num_badorder", "pct_lost", "num_lost_innet", "pct_lost_innet",
             "recv_user_data_rate_mbit", "recv_wire_rate_mbit"]
_REQ_NAMES = {
    "response len bytes": "response_len", "req len": "request_len", "loop_count": "loop_count",
    "num_bad": "num_bad", "time/frame (tod)": "time_per_frame_us", "ave time us": "mean_us",
    "min time": "min_us", "max time": "max_us", "num timeouts": "num_timeouts",
}
_CPU_COLS = ["user", "nice", "kernel", "idle", "iowait", "irq", "softirq"]
_IF_COLS = ["pktsin", "bytesin", "errin", "dropin", "pktsout", "bytesout", "errout", "dropout"]
_SNMP_COLS = ["InReceives", "InDiscards", "OutRequests", "OutDiscards", "UDPInDatagrams",
              "UDPInErrors", "UDPOutDatagrams"]

KINDS = ("udpmon_bw", "udpmon_req", "iperf3", "iperf2", "netperf")


@dataclass
class Histogram:
    """One UDPmon ``-H`` histogram: bin lower edges and counts, and the tool's own statistics."""
    index: int
    title: str
    bins: np.ndarray          # lower edge of each bin, in the histogram's unit (float64)
    counts: np.ndarray        # int64
    stats: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"index": self.index, "title": self.title, "stats": self.stats,
                "bins": self.bins.tolist(), "counts": self.counts.tolist()}


@dataclass
class PacketSeries:
    """Per-packet rows of ``udpmon_bw_mon -G``: one entry per packet sent.

    ``number`` is UDPmon's packet number (its frame number + 1); ``lost`` marks the rows the
    tool filled with zeros because the packet never arrived. Times are picoseconds on the
    sender's and receiver's own clocks; lost rows hold 0.
    """
    number: np.ndarray        # int64
    recv_time_ps: np.ndarray  # int64
    send_time_ps: np.ndarray  # int64
    one_way_us: np.ndarray    # float64
    lost: np.ndarray          # bool

    def __len__(self) -> int:
        return len(self.number)

    @property
    def lost_numbers(self) -> np.ndarray:
        return self.number[self.lost]

    def to_dict(self) -> dict:
        return {"number": self.number.tolist(), "recv_time_ps": self.recv_time_ps.tolist(),
                "send_time_ps": self.send_time_ps.tolist(), "one_way_us": self.one_way_us.tolist(),
                "lost": self.lost.tolist()}


@dataclass
class LostEvents:
    """Rows of ``udpmon_bw_mon -L``: one per lost packet, up to the -L limit."""
    packet: np.ndarray        # int64, the lost packet's number
    recv_time_ps: np.ndarray  # receiver time when the loss was seen
    send_time_ps: np.ndarray
    between: np.ndarray       # packets received since the previous loss

    def __len__(self) -> int:
        return len(self.packet)

    def to_dict(self) -> dict:
        return {"packet": self.packet.tolist(), "recv_time_ps": self.recv_time_ps.tolist(),
                "send_time_ps": self.send_time_ps.tolist(), "between": self.between.tolist()}


@dataclass
class RunLog:
    """What one UDP test tool output says."""
    path: str
    kind: str                          # one of KINDS
    variant: str                       # e.g. 'plain', 'x', 'q', 'scan', 'json', 'text', 'csv', 'TCP_STREAM'
    parameters: dict = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    packets: PacketSeries | None = None
    lost: LostEvents | None = None
    histograms: list[Histogram] = field(default_factory=list)
    extra: list[dict] = field(default_factory=list)   # host-dependent blocks (UDPmon -x), per row
    notes: list[str] = field(default_factory=list)

    def column(self, name: str) -> np.ndarray:
        """One summary column as float64 (NaN where a row lacks it)."""
        if self.rows and not any(name in r for r in self.rows):
            raise KeyError(f"{self.path}: no column {name!r}; columns are {', '.join(self.columns)}")
        return np.array([float(r.get(name, math.nan)) for r in self.rows], dtype=float)

    def to_dict(self, *, with_packets: bool = True) -> dict:
        out = {"path": self.path, "kind": self.kind, "variant": self.variant,
               "parameters": self.parameters, "columns": self.columns, "rows": self.rows,
               "histograms": [h.to_dict() for h in self.histograms], "notes": self.notes}
        if self.extra:
            out["extra"] = self.extra
        if self.packets is not None:
            out["packets"] = self.packets.to_dict() if with_packets else {"count": len(self.packets)}
        if self.lost is not None:
            out["lost"] = self.lost.to_dict()
        return out


# ---------------------------------------------------------------------------------------------
def read_runlog(path: str | Path) -> RunLog:
    """Read any supported tool output; PcitraceError if the file is none of them."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PcitraceError(f"cannot read the run log: {exc.strerror}", path=path,
                            fix="give the path of a UDPmon, iperf or netperf output file") from None
    text = raw.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if not stripped:
        raise PcitraceError("the run log is empty", path=path,
                            fix="give a UDPmon, iperf2/iperf3 or netperf output file")
    if stripped.startswith("{"):
        return _read_iperf3_json(path, stripped)
    lines = text.splitlines()
    if "UDPmon" in text[:2000] or _looks_like_udpmon_q(lines):
        if "udpmon_req" in text[:2000] or re.search(r"response len bytes\s*;", text):
            return _read_udpmon_req(path, lines)
        return _read_udpmon_bw(path, lines)
    if re.search(r"\biperf Done\.", text) or re.search(r"^Connecting to host .*, port \d+", text, re.M):
        return _read_iperf3_text(path, lines)
    if re.search(r"^(Client connecting to|Server listening on) ", text, re.M):
        return _read_iperf2_text(path, lines)
    if _looks_like_iperf2_csv(lines):
        return _read_iperf2_csv(path, lines)
    if "MIGRATED" in text[:500] or re.search(r"^(TCP|UDP) .*TEST from", text, re.M) or _looks_like_netperf(lines):
        return _read_netperf(path, lines)
    raise PcitraceError(
        "not a UDP test tool output: expected UDPmon (udpmon_bw_mon / udpmon_req, plain, -x, -q, -G, "
        "-L, -H or a scan), iperf3 (--json or text), iperf2 (-e or -y C) or a netperf table",
        path=path, where="line 1",
        fix="pass the file the tool wrote to stdout (e.g. `udpmon_bw_mon ... > run.txt`)")


def _num(tok: str) -> float | int | None:
    """The number a tool printed, or None: an int that int64 holds or a finite float. Anything
    else (nan, inf, 10**400, '1.2.3') is not a value of any tool's column."""
    tok = tok.strip()
    if not tok or len(tok) > 40:
        return None
    try:
        v = int(tok)
        return v if -2**63 <= v < 2**63 else None
    except ValueError:
        pass
    try:
        v = float(tok)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _split(line: str) -> list[str]:
    return [t.strip() for t in line.split(";")]


def _bad(path: Path, lineno: int, message: str, fix: str) -> PcitraceError:
    return PcitraceError(message, path=path, where=f"line {lineno}", fix=fix)


# Numbers as the tools print them, bounded so that every match converts (no '1.2.3', no '.',
# no 400-digit integer): the regexes below use these instead of [\d.]+.
_INT = r"\d{1,18}"
_DEC = r"\d{1,18}(?:\.\d{1,18})?"
_SCI = _DEC + r"(?:[eE][-+]?\d{1,2})?"

# --- UDPmon ----------------------------------------------------------------------------------
_CMDLINE = re.compile(r"Command line:\s*(\S+)(.*)$")


def _udpmon_preamble(lines: list[str]) -> dict:
    params: dict = {}
    for line in lines[:40]:
        m = _CMDLINE.search(line)
        if m and "tool" not in params:
            params["tool"] = Path(m.group(1)).name
            args = m.group(2).split()
            params["command_line"] = (m.group(1) + " " + " ".join(args)).strip()
            opts: dict = {}
            i = 0
            while i < len(args):
                a = args[i]
                if a.startswith("-") and len(a) == 2:
                    if i + 1 < len(args) and not (args[i + 1].startswith("-") and len(args[i + 1]) == 2
                                                  and not args[i + 1][1:].isdigit()):
                        v = args[i + 1]
                        n = _num(v)
                        opts[a[1:]] = n if n is not None else v
                        i += 2
                        continue
                    opts[a[1:]] = True
                i += 1
            params["options"] = opts
            params["version"] = (re.search(r"UDPmon Version (\S+)", line) or [None, None])[1]
        m = re.search(rf"CPU speed = ({_DEC})\b", line)
        if m:
            params["cpu_mhz"] = float(m.group(1))
        m = re.search(r"destination IP name: (\S+) IP address: (\S+)", line)
        if m:
            params["destination"] = m.group(2)
        m = re.search(rf"destination UDP port is\s+({_INT})\b", line)
        if m:
            params["port"] = int(m.group(1))
    return params


def _looks_like_udpmon_q(lines: list[str]) -> bool:
    toks = _split(lines[0]) if lines else []
    return (len(toks) >= 17 and toks[0].isdigit() and len(toks[0]) >= 9
            and all(_num(t) is not None for t in toks[5:17]))


def _header_index(lines: list[str], needle: str) -> int | None:
    for i, line in enumerate(lines):
        if needle in line.lower():
            return i
    return None


def _read_udpmon_bw(path: Path, lines: list[str]) -> RunLog:
    params = _udpmon_preamble(lines)
    opts = params.get("options", {})
    log = RunLog(str(path), "udpmon_bw", "plain", params)
    hi = _header_index(lines, "pkt len;")
    if hi is None:
        if _looks_like_udpmon_q(lines):
            return _read_udpmon_q(path, lines, log)
        raise _bad(path, 1, "UDPmon output without the summary header `pkt len; num_sent; ...`",
                   "pass the whole udpmon_bw_mon output, including its table header")
    header = [h for h in _split(lines[hi])]
    while header and header[-1] == "":
        header.pop()
    # Leading named columns are those the tool always prints; -x appends host-dependent
    # blocks whose first label (<L CPU>) marks the end of the fixed part.
    fixed: list[str] = []
    for h in header:
        if h.startswith("<") or h.lower() in ("l if", "r if"):
            break
        fixed.append(_BW_NAMES.get(h.lower(), re.sub(r"\W+", "_", h.lower()).strip("_")))
    log.columns = fixed
    extended = len(fixed) < len(header)
    i = hi + 1
    while i < len(lines):
        toks = _split(lines[i])
        vals = [_num(t) for t in toks[:len(fixed)]]
        if len(toks) < len(fixed) or any(v is None for v in vals):
            break
        log.rows.append(dict(zip(fixed, vals)))
        if extended:
            log.extra.append(_udpmon_extra_blocks(header[len(fixed):], toks[len(fixed):]))
        i += 1
    if not log.rows:
        raise _bad(path, hi + 2, "UDPmon summary header has no numeric rows under it",
                   "the run may have failed; check the tool's output for an error message")
    if extended:
        log.variant = "x"
    if len(log.rows) > 1 or "i" in opts or "e" in opts:
        log.variant = "scan_x" if extended else "scan"
    rest = lines[i:]
    _udpmon_tail(path, rest, i, log)
    if log.packets is not None:
        log.variant = "G"
    elif log.lost is not None:
        log.variant = "L"
    elif log.histograms and log.variant == "plain":
        log.variant = "H"
    return log


def _udpmon_extra_blocks(header: list[str], toks: list[str]) -> dict:
    """Group the -x tail (CPU, interface, SNMP and NIC blocks) into named dicts.

    The number of interfaces and CPUs depends on the host, so the data row is split at its
    own labels (non-numeric tokens), not by the header's positions.
    """
    cpu_names = _CPU_COLS
    # Prefer the tool's own CPU column names when the header spells them.
    for j, h in enumerate(header):
        if h.startswith("<") and len(header) >= j + 8:
            cpu_names = [re.sub(r"\W+", "_", x.lower()).strip("_") for x in header[j + 1:j + 8]]
            break
    nic_names = []
    for j, h in enumerate(header):
        if h.upper().endswith("NIC"):
            nic_names = [x for x in header[j + 2:] if x]
            break
    groups: list[tuple[str, list]] = []
    for t in toks:
        if t == "":
            continue
        v = _num(t)
        if v is None:
            groups.append((t, []))
        elif groups:
            groups[-1][1].append(v)
    out: dict = {"cpu": {}, "interfaces": {}, "snmp": {}, "nic": {}}
    side = "L"
    for label, vals in groups:
        lab = label.rstrip(":").strip()
        if lab.endswith(" if"):
            side = lab.split()[0]
            out["interfaces"].setdefault(side, {})
        elif lab.endswith(" snmp"):
            out["snmp"][lab.split()[0]] = dict(zip(_SNMP_COLS, vals))
        elif lab.endswith(" NIC"):
            side = lab.split()[0]
            out["nic"].setdefault(side, {})
        elif label.endswith(":"):
            target = out["nic"] if side in out["nic"] else out["interfaces"].setdefault(side, {})
            names = nic_names if target is out["nic"] else _IF_COLS
            target.setdefault(side, {}) if target is out["nic"] else None
            if target is out["nic"]:
                target[side][lab] = dict(zip(names, vals))
            else:
                target[lab] = dict(zip(names, vals))
        else:
            out["cpu"][lab] = dict(zip(cpu_names, vals))
    return out


def _read_udpmon_q(path: Path, lines: list[str], log: RunLog) -> RunLog:
    log.variant = "q"
    for n, line in enumerate(lines, 1):
        toks = _split(line)
        while toks and toks[-1] == "":
            toks.pop()
        if not toks:
            continue
        if len(toks) < 17:
            raise _bad(path, n, f"UDPmon -q line has {len(toks)} fields, expected at least 17",
                       "pass the unmodified output of udpmon_bw_mon -q")
        row: dict = {"unix_time": _num(toks[0]), "destination": toks[1], "local_host": toks[2],
                     "local_ip": toks[3], "remote_ip": toks[4]}
        vals = [_num(t) for t in toks[5:]]
        for name, v in zip(_BW_PLAIN, vals):
            row[name] = v
        for j, v in enumerate(vals[len(_BW_PLAIN):]):
            row[f"extra_{j}"] = v
        log.rows.append(row)
    log.columns = ["unix_time", "destination", "local_host", "local_ip", "remote_ip"] + _BW_PLAIN
    log.parameters.setdefault("destination", log.rows[0]["destination"])
    return log


def _udpmon_tail(path: Path, lines: list[str], offset: int, log: RunLog) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        low = line.lower()
        if low.startswith("packet;") and "recv_time" in low:
            i = _read_G(path, lines, i, offset, log)
            continue
        if low.startswith("lost event;"):
            i = _read_L(path, lines, i, offset, log)
            continue
        if line.startswith("Hist "):
            i = _read_hist(path, lines, i, offset, log)
            continue
        m = re.match(rf"\s*num packets skipped =;\s*({_INT})\b", line)
        if m:
            log.parameters["packets_skipped"] = int(m.group(1))
        i += 1


def _numeric_rows(lines: list[str], start: int, ncols: int) -> tuple[np.ndarray, int]:
    """Rows whose first ``ncols`` fields are numbers, from ``start`` until the next non-row
    line (blank lines inside the table are skipped: UDPmon prints one after the first row)."""
    rows = []
    i = start
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        toks = _split(line)
        if len(toks) < ncols:
            break
        vals = [_num(t) for t in toks[:ncols]]
        if any(v is None for v in vals):
            break
        rows.append(vals)
        i += 1
    arr = np.array(rows, dtype=float).reshape(-1, ncols)
    return arr, i


_ROW_START = re.compile(r"\s*-?\d+\s*;")


def _read_G(path: Path, lines: list[str], i: int, offset: int, log: RunLog) -> int:
    arr, end = _numeric_rows(lines, i + 1, 5)
    if len(arr) == 0:
        raise _bad(path, offset + i + 2, "UDPmon -G header with no per-packet rows",
                   "pass the complete output of udpmon_bw_mon -G N")
    # The table ends at the first line that is not a row. A line that starts like a row but does
    # not parse is a damaged or cut row, not the end: reading on would silently drop packets.
    nxt = next((k for k in range(end, len(lines)) if lines[k].strip()), None)
    if nxt is not None and _ROW_START.match(lines[nxt]):
        raise _bad(path, offset + nxt + 1, "UDPmon -G row that is not five numbers (damaged or cut)",
                   "pass the complete, unedited output of udpmon_bw_mon -G N")
    number = arr[:, 0].astype(np.int64)
    if len(number) > 1 and np.any(np.diff(number) != 1):
        k = int(np.flatnonzero(np.diff(number) != 1)[0]) + 1
        raise _bad(path, offset + i + 2, f"UDPmon -G rows are not numbered one after another "
                   f"(row {k} is packet {int(number[k])} after {int(number[k - 1])})",
                   "pass the complete, unedited output of udpmon_bw_mon -G N")
    opts = log.parameters.get("options") or {}
    want, sent = opts.get("G"), opts.get("l")
    if isinstance(want, (int, float)) and not isinstance(want, bool) and want > 0:
        expect = int(min(want, sent)) if isinstance(sent, (int, float)) and sent > 0 else int(want)
        if len(number) < expect:
            raise _bad(path, offset + end, f"UDPmon -G table has {len(number)} rows but the command line "
                       f"(-G {int(want)}{f' -l {int(sent)}' if sent else ''}) promises {expect}: the "
                       "output is cut", "pass the complete output of udpmon_bw_mon")
    recv = np.rint(arr[:, 1] * PS_PER_TENTH_US).astype(np.int64)
    send = np.rint(arr[:, 2] * PS_PER_TENTH_US).astype(np.int64)
    lost = (arr[:, 1] == 0) & (arr[:, 2] == 0)
    log.packets = PacketSeries(number, recv, send, arr[:, 4].copy(), lost)
    return end


def _read_L(path: Path, lines: list[str], i: int, offset: int, log: RunLog) -> int:
    # Row: event; recv; send; diff; one-way; lost packet num; <empty>; d recv; d send; between
    rows = []
    end = i + 1
    while end < len(lines):
        toks = [t for t in _split(lines[end]) if t != ""]
        vals = [_num(t) for t in toks]
        if len(vals) < 6 or any(v is None for v in vals):
            break
        rows.append(vals[:6] + [vals[8] if len(vals) >= 9 else 0])
        end += 1
    arr = np.array(rows, dtype=float).reshape(-1, 7)
    # The tool prints its whole -L buffer; slots never filled are all-zero rows.
    a = arr[np.any(arr[:, 1:6] != 0, axis=1)]
    log.lost = LostEvents(a[:, 5].astype(np.int64), np.rint(a[:, 1] * PS_PER_TENTH_US).astype(np.int64),
                          np.rint(a[:, 2] * PS_PER_TENTH_US).astype(np.int64), a[:, 6].astype(np.int64))
    return end


def _read_hist(path: Path, lines: list[str], i: int, offset: int, log: RunLog) -> int:
    m = re.match(rf"Hist\s+({_INT})\b\s*(.*)$", lines[i])
    if m is None:
        raise _bad(path, offset + i + 1, f"UDPmon histogram header {lines[i][:40]!r} has no histogram number",
                   "pass the unedited output of udpmon -H (headers read `Hist N title`)")
    index, title = int(m.group(1)), m.group(2).strip()
    stats: dict[str, float] = {}
    bins, counts = [], []
    i += 1
    while i < len(lines):
        line = lines[i]
        if line.startswith("Hist "):
            break
        toks = _split(line)
        count = _num(toks[1]) if len(toks) >= 2 else None
        if _num(toks[0]) is not None and isinstance(count, int) and not line.startswith(" "):
            bins.append(float(toks[0]))
            counts.append(count)
        elif line.strip():
            # "counts 198 mean 202.23 underflows 0 overflows 2", "median 16; 25-quartile 15; ..."
            words = line.replace(";", " ").split()
            for k in range(len(words) - 1):
                v = _num(words[k + 1])
                if v is not None and _num(words[k]) is None:
                    stats[words[k].replace("-", "_")] = v
        i += 1
    log.histograms.append(Histogram(index, title, np.array(bins, float), np.array(counts, np.int64), stats))
    return i


def _read_udpmon_req(path: Path, lines: list[str]) -> RunLog:
    params = _udpmon_preamble(lines)
    log = RunLog(str(path), "udpmon_req", "plain", params)
    hi = _header_index(lines, "response len bytes")
    if hi is None:
        raise _bad(path, 1, "udpmon_req output without its `response len bytes; Req len; ...` header",
                   "pass the whole udpmon_req output")
    header = [h for h in _split(lines[hi]) if h]
    log.columns = [_REQ_NAMES.get(h.lower(), re.sub(r"\W+", "_", h.lower()).strip("_")) for h in header]
    arr, end = _numeric_rows(lines, hi + 1, len(log.columns))
    if len(arr) == 0:
        raise _bad(path, hi + 2, "udpmon_req header with no result rows", "the run may have failed")
    for r in arr:
        log.rows.append({c: (int(v) if float(v).is_integer() and c not in ("time_per_frame_us", "mean_us",
                                                                              "min_us", "max_us") else float(v))
                         for c, v in zip(log.columns, r)})
    if len(log.rows) > 1:
        log.variant = "scan"
    _udpmon_tail(path, lines[end:], end, log)
    if log.histograms:
        log.variant = "H" if log.variant == "plain" else log.variant + "_H"
    return log


# --- iperf3 ----------------------------------------------------------------------------------
# Row column <- iperf3's key in an interval's or the end's sum object.
_IPERF3_SUM = [("start_s", "start"), ("end_s", "end"), ("seconds", "seconds"), ("bytes", "bytes"),
               ("bits_per_second", "bits_per_second"), ("packets", "packets"), ("jitter_ms", "jitter_ms"),
               ("lost_packets", "lost_packets"), ("lost_percent", "lost_percent")]


class _Json:
    """Typed reads of iperf3 JSON: a key of the wrong type is the pcitrace error naming its
    path in the document; a missing key reads as empty (iperf3 leaves out what does not apply)."""

    def __init__(self, path: Path):
        self.path = path

    def _wrong(self, where: str, key: str, value, want: str) -> PcitraceError:
        name = f"{where}.{key}" if where and key else (where or key or "top level")
        return PcitraceError(f"`{name}` is {str(value)[:40]!r}, not {want}", path=self.path, where=name,
                             fix="pass the unedited output of iperf3 --json")

    def obj(self, d: dict, key: str, where: str) -> dict:
        v = d.get(key) or {}
        if not isinstance(v, dict):
            raise self._wrong(where, key, v, "an object")
        return v

    def is_obj(self, v, where: str) -> dict:
        if not isinstance(v, dict):
            raise self._wrong(where, "", v, "an object")
        return v

    def array(self, d: dict, key: str, where: str) -> list:
        v = d.get(key) or []
        if not isinstance(v, list):
            raise self._wrong(where, key, v, "an array")
        return v

    def num(self, d: dict, key: str, where: str) -> int | float | bool | None:
        v = d.get(key)
        if v is None or isinstance(v, bool):
            return v
        if not isinstance(v, (int, float)) or _num(str(v)) is None:
            raise self._wrong(where, key, v, "a number")
        return v

    def text(self, d: dict, key: str, where: str) -> str | None:
        v = d.get(key)
        if v is not None and not isinstance(v, str):
            raise self._wrong(where, key, v, "a string")
        return v


def _read_iperf3_json(path: Path, text: str) -> RunLog:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PcitraceError(f"invalid JSON: {exc.msg}", path=path, where=f"line {exc.lineno}",
                            fix="pass the complete output of iperf3 --json") from None
    if not isinstance(d, dict) or "start" not in d or "end" not in d:
        raise PcitraceError("JSON without iperf3's `start` / `end` objects", path=path, where="top level",
                            fix="pass the output of iperf3 --json")
    if "error" in d:
        raise PcitraceError(f"iperf3 reported an error: {d['error']}", path=path, where="top level",
                            fix="rerun the test")
    j = _Json(path)
    start = j.obj(d, "start", "")
    ts = j.obj(start, "test_start", "start")
    connecting = j.obj(start, "connecting_to", "start")
    params = {"version": j.text(start, "version", "start"), "protocol": j.text(ts, "protocol", "start.test_start"),
              "blksize": j.num(ts, "blksize", "start.test_start"), "duration": j.num(ts, "duration", "start.test_start"),
              "num_streams": j.num(ts, "num_streams", "start.test_start"),
              "target_bitrate": j.num(ts, "target_bitrate", "start.test_start") if "target_bitrate" in ts
              else j.num(start, "target_bitrate", "start"),
              "reverse": j.num(ts, "reverse", "start.test_start"),
              "timesecs": j.num(j.obj(start, "timestamp", "start"), "timesecs", "start.timestamp")}
    if connecting:
        params["host"] = j.text(connecting, "host", "start.connecting_to")
        params["port"] = j.num(connecting, "port", "start.connecting_to")
    log = RunLog(str(path), "iperf3", "json", params)
    cols = ["start_s", "end_s", "seconds", "bytes", "bits_per_second", "packets"]
    for k, iv in enumerate(j.array(d, "intervals", "")):
        s = j.obj(j.is_obj(iv, f"intervals[{k}]"), "sum", f"intervals[{k}]")
        log.rows.append({"row": "interval", **{c: j.num(s, key, f"intervals[{k}].sum") for c, key in _IPERF3_SUM[:6]}})
    end = j.obj(d, "end", "")
    for key in ("sum_sent", "sum_received", "sum"):
        s = j.obj(end, key, "end")
        if s:
            log.rows.append({"row": key, **{c: j.num(s, k, f"end.{key}") for c, k in _IPERF3_SUM}})
    log.columns = ["row"] + cols + ["jitter_ms", "lost_packets", "lost_percent"]
    return log


_IPERF3_LINE = re.compile(
    rf"^\[\s*(?P<id>\w+)\]\s+(?P<start>{_DEC})-(?P<end>{_DEC})\s+sec\s+(?P<xfer>{_DEC})\s+(?P<xu>\w?Bytes)"
    rf"\s+(?P<rate>{_DEC})\s+(?P<ru>\w?bits/sec)(?P<rest>.*)$")
_UNIT = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BYTE_UNIT = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


def _rate(v: str, unit: str) -> float:
    return float(v) * _UNIT[unit[0] if unit[0] in "KMGT" else ""]


def _bytes(v: str, unit: str) -> float:
    return float(v) * _BYTE_UNIT[unit[0] if unit[0] in "KMGT" else ""]


def _read_iperf3_text(path: Path, lines: list[str]) -> RunLog:
    log = RunLog(str(path), "iperf3", "text")
    for line in lines:
        m = re.match(rf"Connecting to host (\S+), port ({_INT})\b", line)
        if m:
            log.parameters.update(host=m.group(1), port=int(m.group(2)))
        m = _IPERF3_LINE.match(line)
        if not m:
            continue
        rest = m.group("rest")
        row = {"row": "interval", "stream": m.group("id"), "start_s": float(m.group("start")),
               "end_s": float(m.group("end")), "bytes": _bytes(m.group("xfer"), m.group("xu")),
               "bits_per_second": _rate(m.group("rate"), m.group("ru"))}
        lm = re.search(rf"({_DEC})\s+ms\s+({_INT})/({_INT})\s+\(({_SCI})%\)\s*(sender|receiver)?", rest)
        if lm:
            row.update(jitter_ms=float(lm.group(1)), lost_packets=int(lm.group(2)),
                       packets=int(lm.group(3)), lost_percent=float(lm.group(4)),
                       row=lm.group(5) or "summary")
        else:
            pm = re.match(rf"\s+({_INT})\s*$", rest)
            if pm:
                row["packets"] = int(pm.group(1))
        log.rows.append(row)
    if not log.rows:
        raise _bad(path, 1, "iperf3 text output without interval lines",
                   "pass the complete iperf3 client output (or use iperf3 --json)")
    log.columns = ["row", "stream", "start_s", "end_s", "bytes", "bits_per_second", "packets",
                   "jitter_ms", "lost_packets", "lost_percent"]
    return log


# --- iperf2 ----------------------------------------------------------------------------------
_IPERF2_LINE = re.compile(
    rf"^\[\s*(?P<id>\w+)\]\s+(?P<start>{_DEC})\s*-\s*(?P<end>{_DEC})\s+sec\s+(?P<xfer>{_DEC})\s+(?P<xu>\w?Bytes)"
    rf"\s+(?P<rate>{_DEC})\s+(?P<ru>\w?bits/sec)(?P<rest>.*)$")


def _read_iperf2_text(path: Path, lines: list[str]) -> RunLog:
    log = RunLog(str(path), "iperf2", "text")
    role = None
    section = "interval"
    for line in lines:
        if line.startswith("Client connecting to"):
            role = "client"
            m = re.match(rf"Client connecting to (\S+), (\w+) port ({_INT})\b", line)
            if m:
                log.parameters.update(host=m.group(1), protocol=m.group(2), port=int(m.group(3)))
        elif line.startswith("Server listening on"):
            role = "server"
            m = re.match(rf"Server listening on (\w+) port ({_INT})\b", line)
            if m:
                log.parameters.update(protocol=m.group(1), port=int(m.group(2)))
        m = re.search(rf"Sending ({_INT}) byte datagrams(?:, IPG target: ({_DEC}) us)?", line)
        if m:
            log.parameters["datagram_bytes"] = int(m.group(1))
            if m.group(2):
                log.parameters["ipg_target_us"] = float(m.group(2))
        m = re.search(rf"Sent ({_INT}) datagrams", line)
        if m:
            log.parameters["datagrams_sent"] = int(m.group(1))
        if "Server Report:" in line:
            section = "server_report"
        m = _IPERF2_LINE.match(line)
        if not m:
            continue
        rest = m.group("rest")
        row = {"row": section, "stream": m.group("id"), "start_s": float(m.group("start")),
               "end_s": float(m.group("end")), "bytes": _bytes(m.group("xfer"), m.group("xu")),
               "bits_per_second": _rate(m.group("rate"), m.group("ru"))}
        lm = re.search(rf"({_DEC})\s+ms\s+(-?{_INT})/\s*({_INT})\s+\(({_SCI})%\)", rest)
        if lm:
            row.update(jitter_ms=float(lm.group(1)), lost_packets=int(lm.group(2)),
                       packets=int(lm.group(3)), lost_percent=float(lm.group(4)))
            tm = re.search(rf"\)\s+({_DEC})/({_DEC})/({_DEC})/({_DEC})\s+ms", rest)
            if tm:
                row.update(latency_avg_ms=float(tm.group(1)), latency_min_ms=float(tm.group(2)),
                           latency_max_ms=float(tm.group(3)), latency_stdev_ms=float(tm.group(4)))
        else:
            wm = re.match(rf"\s+({_INT})/({_INT})", rest)
            if wm:
                row.update(writes=int(wm.group(1)), write_errors=int(wm.group(2)))
        pm = re.search(rf"({_INT})\s+pps", rest)
        if pm:
            row["pps"] = int(pm.group(1))
        log.rows.append(row)
    log.parameters["role"] = role
    log.variant = "e" if any("pps" in r for r in log.rows) else "plain"
    if not log.rows:
        raise _bad(path, 1, "iperf2 output without report lines",
                   "pass the complete iperf2 output (run with -i 1 for intervals)")
    log.columns = ["row", "stream", "start_s", "end_s", "bytes", "bits_per_second", "writes",
                   "write_errors", "pps", "jitter_ms", "lost_packets", "packets", "lost_percent",
                   "latency_avg_ms", "latency_min_ms", "latency_max_ms", "latency_stdev_ms"]
    return log


_CSV_COLS = ["timestamp", "local_ip", "local_port", "remote_ip", "remote_port", "id", "interval",
             "bytes", "bits_per_second", "jitter_ms", "lost_packets", "packets", "lost_percent",
             "out_of_order"]


def _looks_like_iperf2_csv(lines: list[str]) -> bool:
    rows = [ln for ln in lines if ln.strip()]
    if not rows:
        return False
    toks = rows[0].split(",")
    return len(toks) in (9, 14) and re.fullmatch(r"\d{14}(\.\d+)?", toks[0].strip()) is not None


def _read_iperf2_csv(path: Path, lines: list[str]) -> RunLog:
    log = RunLog(str(path), "iperf2", "csv")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        toks = [t.strip() for t in line.split(",")]
        if len(toks) not in (9, 14):
            raise _bad(path, n, f"iperf2 -y C line with {len(toks)} fields, expected 9 (TCP / UDP client) "
                       "or 14 (UDP with server report)", "pass the unmodified iperf2 -y C output")
        row: dict = {}
        for name, t in zip(_CSV_COLS, toks):
            v = _num(t)
            row[name] = v if v is not None and name not in ("timestamp", "interval", "local_ip", "remote_ip") else t
        m = re.fullmatch(rf"({_DEC})-({_DEC})", row["interval"])
        if m is None:
            raise _bad(path, n, f"iperf2 -y C interval {row['interval'][:40]!r} is not START-END seconds",
                       "pass the unmodified iperf2 -y C output")
        row["start_s"], row["end_s"] = float(m.group(1)), float(m.group(2))
        log.rows.append(row)
    log.columns = _CSV_COLS[:max(len(r) - 2 for r in log.rows)] + ["start_s", "end_s"]
    return log


# --- netperf ---------------------------------------------------------------------------------
_NETPERF_COLS = {
    "TCP_STREAM": [["recv_socket_bytes", "send_socket_bytes", "send_message_bytes", "elapsed_s",
                    "throughput"]],
    "UDP_STREAM": [["socket_bytes", "message_bytes", "elapsed_s", "messages_ok", "messages_errors",
                    "throughput"],
                   ["socket_bytes", "elapsed_s", "messages_ok", "throughput"]],
    "RR": [["send_socket_bytes", "recv_socket_bytes", "request_bytes", "response_bytes", "elapsed_s",
            "transactions_per_s"], ["send_socket_bytes", "recv_socket_bytes"]],
}


def _looks_like_netperf(lines: list[str]) -> bool:
    rows = [ln.split() for ln in lines if ln.strip()]
    if not rows or len(rows) > 4:
        return False
    shapes = [len(r) for r in rows]
    numeric = all(_num(t) is not None for r in rows for t in r)
    return numeric and shapes[0] in (5, 6) and all(s in (2, 4) for s in shapes[1:])


def _read_netperf(path: Path, lines: list[str]) -> RunLog:
    log = RunLog(str(path), "netperf", "table")
    test = _netperf_banner(log, lines)
    if _netperf_omni(log, lines, test):
        return log
    data, unit = _netperf_rows(lines)
    if not data:
        raise _bad(path, 1, "netperf output without a numeric result row",
                   "pass the netperf output (classic table, -P 0 or omni -o selectors)")
    if test is None:  # no banner (-P 0): the row shapes tell the test
        test = _netperf_test_from_shape(log, path, data)
    log.variant = test
    log.parameters["test"] = test
    if unit:
        log.parameters["throughput_unit"] = unit
    cols = _NETPERF_COLS["RR" if test.endswith("_RR") else test] if test in _NETPERF_COLS or test.endswith("_RR") else None
    if cols is None:
        cols = [[f"c{j}" for j in range(len(data[0][1]))]]
    names_all = []
    for k, (n, vals) in enumerate(data):
        names = cols[min(k, len(cols) - 1)]
        if len(vals) != len(names):
            raise _bad(path, n, f"netperf {test} row has {len(vals)} numbers, expected {len(names)}",
                       "pass the unmodified netperf output")
        row = {"side": "local" if k == 0 else "remote"}
        row.update(zip(names, vals))
        # netperf's default unit is 10^6bits/sec (-f m); a table without banner states none.
        if "throughput" in row and (unit is None or "10^6bits" in unit):
            row["throughput_mbit_s"] = row["throughput"]
        log.rows.append(row)
        names_all += [c for c in row if c not in names_all]
    log.columns = names_all
    return log


def _netperf_banner(log: RunLog, lines: list[str]) -> str | None:
    """The "... TEST from ... to host (...)" banner into the log's parameters; the test it names
    (TCP_STREAM, UDP_RR, ...; None without a banner or a test named there)."""
    banner = next((ln for ln in lines if "TEST from" in ln), None)
    test = None
    if banner:
        log.parameters["banner"] = banner.strip()
        m = re.search(r"(TCP|UDP) (STREAM|REQUEST/RESPONSE|MAERTS|SENDFILE)", banner)
        if m:
            test = f"{m.group(1)}_{'RR' if m.group(2) == 'REQUEST/RESPONSE' else m.group(2)}"
        m = re.search(r"to (\S+) \(", banner)
        if m:
            log.parameters["host"] = m.group(1)
    return test


def _netperf_omni(log: RunLog, lines: list[str], test: str | None) -> bool:
    """omni output selectors: a CSV header line and a CSV value line, read into the log as its
    one row. False when there are none."""
    for n in range(len(lines) - 1):
        if "," in lines[n] and "," in lines[n + 1]:
            names = [t.strip() for t in lines[n].split(",")]
            vals = [_num(t) for t in lines[n + 1].split(",")]
            if len(names) == len(vals) and all(v is not None for v in vals) and any(_num(x) is None for x in names):
                log.variant = (test or "omni") + "_omni"
                log.columns = [re.sub(r"\W+", "_", x.lower()).strip("_") for x in names]
                log.rows.append(dict(zip(log.columns, vals)))
                log.parameters["test"] = test
                return True
    return False


def _netperf_rows(lines: list[str]) -> tuple[list[tuple[int, list]], str | None]:
    """The all-numeric lines, as (line number, numbers), and the first throughput unit named."""
    data = []
    unit = None
    for n, line in enumerate(lines, 1):
        toks = line.split()
        if toks and all(_num(t) is not None for t in toks):
            data.append((n, [_num(t) for t in toks]))
        um = re.search(r"(10\^\d+bits/sec|10\^\d+bytes/sec|[KMG]?bytes/sec|[KMG]?bits/sec)\s*$", line)
        if um and unit is None:
            unit = um.group(1)
    return data, unit


def _netperf_test_from_shape(log: RunLog, path: Path, data: list[tuple[int, list]]) -> str:
    """The test a table without banner is, from how many numbers its rows hold."""
    first, second = len(data[0][1]), (len(data[1][1]) if len(data) > 1 else 0)
    if first == 5 and second == 0:
        return "TCP_STREAM"
    if first == 6 and second == 4:
        return "UDP_STREAM"
    if first == 6 and second == 2:
        log.notes.append("no banner: TCP_RR and UDP_RR tables look alike; guessed from socket sizes")
        return "UDP_RR" if data[0][1][0] >= 200000 else "TCP_RR"
    raise _bad(path, data[0][0], f"netperf row of {first} numbers matches no known test table",
               "keep netperf's banner (omit -P 0) so the test type is known")

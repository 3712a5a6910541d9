"""`pcitrace decode`: transactions (or probe frames, or findings) as a table, CSV, JSON lines or Parquet."""

from __future__ import annotations

import contextlib
import os
import sys

import click
import numpy as np

from pcitrace import buses as bus_kinds
from pcitrace import pipeline
from pcitrace.capture.commands import echo_warnings
from pcitrace.errors import PcitraceError
from pcitrace.records import RECORD_DTYPE, to_csv, to_jsonl, write_csv, write_jsonl

FORMATS = ("table", "csv", "jsonl", "parquet")
_EXT = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
        ".pq": "parquet", ".txt": "table"}
TERMINAL_ROWS = 200


def write_parquet(arr, path) -> None:
    """Write records (one array, or an iterable of arrays written as they come) as Parquet."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise PcitraceError("Parquet output needs the Python package pyarrow", path=path,
                            fix="pip install pyarrow (or pip install 'pcitrace[dev]'), or use --format csv") from None
    if isinstance(arr, np.ndarray):
        pq.write_table(pa.table({n: arr[n] for n in arr.dtype.names}), path)
        return
    schema = pa.table({n: np.zeros(0, RECORD_DTYPE)[n] for n in RECORD_DTYPE.names}).schema
    # pyarrow's default pool (mimalloc) keeps much of what a long stream of chunks frees, and
    # the writer's encoders take from the default pool whatever pool it is given: a 100 M-clock
    # decode peaked at 188 MiB with it, 161 MiB with the system allocator as the default
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        with pq.ParquetWriter(path, schema) as w:
            for part in arr:
                w.write_table(pa.table({n: part[n] for n in part.dtype.names}, schema=schema))
    finally:
        pa.set_memory_pool(previous)


def _fmt_cell(name: str, v) -> str:
    if name == "address" or name == "value":
        return f"0x{int(v):08x}"
    if name == "byte_enables":
        return f"0x{int(v):x}"
    if name in ("start_ps", "end_ps", "time_ps"):
        return f"{int(v) / 1e6:.6f}"
    if isinstance(v, bool):
        return "yes" if v else ""
    return str(v)


# Columns worth a terminal's width; the files carry every field.
_TABLE_COLS = {
    "records": ("bus", "start_ps", "clocks", "command", "address", "data_phases", "bytes", "devsel",
                "termination", "initiator_waits", "target_waits", "width", "parity_error"),
    "findings": ("time_ps", "bus", "kind", "message"),
}
_HEAD = {"start_ps": "start µs", "time_ps": "time µs", "end_ps": "end µs", "data_phases": "phases",
         "initiator_waits": "i.waits", "target_waits": "t.waits", "parity_error": "PERR"}


def print_table(arr: np.ndarray, what: str, limit: int | None, console, title: str | None = None) -> None:
    from rich.table import Table

    names = [n for n in _TABLE_COLS.get(what, arr.dtype.names) if n in arr.dtype.names]
    if what == "records":
        if len(arr) and (arr["tag"] >= 0).any():
            names += ["tag", "requester", "byte_count"]
        if len(arr) and len(np.unique(arr["bus"])) == 1:
            names.remove("bus")
        # a narrow terminal gets the columns that say what happened; files get them all
        if console.width < 150:
            names = [n for n in names if n not in ("tag", "requester", "byte_count", "parity_error")]
        if console.width < 120:
            names = [n for n in names if n not in ("clocks", "initiator_waits", "target_waits", "width")]
    table = Table(title=title, header_style="bold", pad_edge=False, box=None)
    for n in names:
        if n == "initiator_waits":
            table.add_column("waits i/t", justify="right", no_wrap=True)
        elif n != "target_waits":
            table.add_column(_HEAD.get(n, n), justify="left" if arr.dtype[n].kind in "US" else "right",
                             no_wrap=n != "message", overflow="ellipsis" if n != "message" else "fold")
    shown = arr if limit is None else arr[:limit]
    cols = {n: shown[n].tolist() for n in names}
    for i in range(len(shown)):
        cells = []
        for n in names:
            if n == "initiator_waits":
                cells.append(f"{cols[n][i]}/{cols['target_waits'][i]}")
            elif n != "target_waits":
                cells.append(_fmt_cell(n, cols[n][i]))
        table.add_row(*cells)
    console.print(table)
    if limit is not None and len(arr) > limit:
        console.print(f"[dim]... {len(arr) - limit} more rows; use --limit 0, --format or -o FILE for all[/dim]", highlight=False)


def _summary_line(res) -> str:
    parts = []
    for b in res.buses.values():
        mhz = f"{b.clock_hz / 1e6:.2f} MHz" if b.clock_hz else "? MHz"
        nrec = int(np.count_nonzero(res.records["bus"] == b.name)) if len(res.records) else 0
        if not bus_kinds.kind(b.kind).transactions:
            parts.append(f"{b.name}: probe link, {len(res.frames.get(b.name, ()))} frames")
        else:
            parts.append(f"{b.name}: {b.kind} {b.width}-bit {mhz}, {b.clocks} clocks, {nrec} transactions")
    kinds = {}
    for k in res.findings["kind"].tolist():
        kinds[k] = kinds.get(k, 0) + 1
    line = "; ".join(parts)
    if kinds:
        line += "\nfindings: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    return line


@click.command("decode")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("--profile", "profile", type=click.Path(dir_okay=False), default=None,
              help="Channel profile (TOML). Default: NAME.profile.toml beside the capture, else auto-detect.")
@click.option("--bus", "buses", multiple=True, help="Only this bus (repeatable). A probe link lists its frames.")
@click.option("--engine", type=click.Choice(["fast", "sigrok"]), default="fast", show_default=True,
              help="fast: numpy engine; sigrok: the reference decoder through sigrok-cli (slow; for cross-checks).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format. Default: from -o's extension; else a table on a terminal, JSON lines when piped.")
@click.option("--findings", "show_findings", is_flag=True, help="Output the protocol findings instead of the transactions.")
@click.option("--limit", type=int, default=None,
              help=f"Rows in a terminal table (default {TERMINAL_ROWS}; 0 = all). Files always get every row.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write to FILE (atomically).")
def decode(capture, profile, buses, engine, fmt, show_findings, limit, output):
    """Decode PCI / PCI-X transactions (or probe frames) of CAPTURE (.sr, .vcd, .vcd.gz).

    On a terminal it prints a table of transactions and a one-line summary per bus; piped, it
    writes one JSON object per transaction (the record fields of docs/records.md). With -o
    the format follows the extension (.csv, .jsonl, .parquet, .txt) unless --format is given.
    """
    from rich.console import Console

    if fmt is None:
        if output:
            ext = os.path.splitext(output)[1].lower()
            fmt = _EXT.get(ext)
            if fmt is None:
                raise PcitraceError(f"cannot tell the output format from the extension {ext!r}",
                                    path=output, fix="use .csv, .jsonl, .parquet or .txt, or pass --format")
        else:
            fmt = "table" if sys.stdout.isatty() else "jsonl"
    if fmt == "parquet" and not output:
        raise PcitraceError("Parquet is a binary format and needs a file", fix="add -o FILE.parquet")

    err = Console(stderr=True)
    opened = pipeline.run(capture, profile, until="profile")
    cap, prof = opened.capture, opened.profile
    rc = _decode_opened(capture, cap, prof, buses, engine, fmt, show_findings, limit, output, err)
    # after the decode: a damaged chunk shows only when it is read
    echo_warnings(capture, cap.metadata.get("warnings", []))
    return rc


def _decode_opened(capture, cap, prof, buses, engine, fmt, show_findings, limit, output, err) -> int:
    """The records (or frames, or findings) of an opened capture, in ``fmt``, to ``output`` or
    standard output."""
    from rich.console import Console

    if engine == "fast" and not show_findings and fmt in ("csv", "jsonl", "parquet"):
        selected = [prof.bus(b) for b in buses] if buses else list(prof.buses)
        if not buses or any(b.is_pci for b in selected):
            # records go out chunk by chunk: memory stays bounded however long the capture
            _stream(cap, prof, list(buses) or None, fmt, output, err)
            return 0
    res = _run(cap, prof, list(buses) or None, engine, err)

    probe_names = [b for b in (buses or ()) if res.buses.get(b) is not None
                   and not bus_kinds.kind(res.buses[b].kind).transactions]
    if show_findings:
        arr, what = res.findings, "findings"
    elif probe_names and len(probe_names) == len(buses):
        arr = np.concatenate([res.frames[b] for b in probe_names])
        what = "frames"
    else:
        arr, what = res.records, "records"

    if fmt == "table":
        if output:
            from pcitrace.capture._atomic import atomic_path
            with atomic_path(output) as tmp, open(tmp, "w", encoding="utf-8") as fh:
                con = Console(file=fh, width=200, no_color=True)
                print_table(arr, what, None, con)
                con.print(_summary_line(res))
        else:
            con = Console()
            lim = TERMINAL_ROWS if limit is None else (None if limit <= 0 else limit)
            print_table(arr, what, lim, con, title=f"{os.path.basename(capture)} ({res.engine} engine)")
            err.print(_summary_line(res), highlight=False)
        return 0
    if fmt == "parquet":
        from pcitrace.capture._atomic import atomic_path
        with atomic_path(output) as tmp:
            write_parquet(arr, tmp)
        return 0
    text = to_csv(arr) if fmt == "csv" else to_jsonl(arr)
    if output:
        from pcitrace.capture._atomic import atomic_path
        with atomic_path(output) as tmp:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def _record_chunks(cap, profile, buses, err_console):
    """The records chunk by chunk, through the pipeline's streamed decode stage (its error
    policy), with a progress bar on a terminal."""
    if not err_console.is_terminal:
        yield from pipeline.stream_records(cap, profile, buses=buses)[1]
        return
    with _progress(err_console) as advance:
        yield from pipeline.stream_records(cap, profile, buses=buses, progress=advance)[1]


@contextlib.contextmanager
def _progress(err_console):
    """A transient 'decoding ... clocks' bar; yields the pipeline's progress callback."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    # buses x clocks is only known once decoding is done
    with Progress(TextColumn("decoding"), BarColumn(), TextColumn("{task.completed:,} clocks"),
                  TimeElapsedColumn(), console=err_console, transient=True) as prog:
        task = prog.add_task("decode", total=None)
        yield lambda stage, k: prog.advance(task, k)


def _stream(cap, profile, buses, fmt, output, err_console) -> None:
    """Write the records as they are decoded (csv / jsonl / parquet; a file or stdout)."""
    from pcitrace.capture._atomic import atomic_path

    chunks = _record_chunks(cap, profile, buses, err_console)
    if fmt == "parquet":
        with atomic_path(output) as tmp:
            write_parquet(chunks, tmp)
        return

    def write_all(fh) -> None:
        if fmt == "csv":
            write_csv(fh, chunks, RECORD_DTYPE.names)
        else:
            write_jsonl(fh, chunks)

    if output:
        with atomic_path(output) as tmp:
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                write_all(fh)
    else:
        write_all(sys.stdout)
        sys.stdout.flush()


def _run(cap, profile, buses, engine, err_console):
    """The decoded capture (through the pipeline), with a progress bar on a terminal."""
    if not err_console.is_terminal:
        return pipeline.run(cap, profile, until="decode", buses=buses, engine=engine).decoded
    with _progress(err_console) as advance:
        return pipeline.run(cap, profile, until="decode", buses=buses, engine=engine, progress=advance).decoded

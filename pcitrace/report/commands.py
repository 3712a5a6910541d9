"""`pcitrace report`: batch occupancy / CSR / DMA report of captures and directories."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from pcitrace.analyse import AnalysisOptions
from pcitrace.analyse.classify import RULES
from pcitrace.capture.commands import echo_warnings
from pcitrace.errors import PcitraceError

FORMATS = ("json", "csv", "md", "html")
_SUFFIX_FORMAT = {".json": "json", ".csv": "csv", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}


def render(results: list[dict], fmt: str, options: AnalysisOptions) -> str:
    from pcitrace.report import writers
    opts = dataclasses.asdict(options)
    if fmt == "json":
        return writers.to_json(results, opts)
    if fmt == "csv":
        return writers.to_csv(results)
    if fmt == "md":
        return writers.to_markdown(results)
    from pcitrace.report.html import to_html
    return to_html(results, opts)


def write_text_atomic(path: str | Path, text: str) -> None:
    from pcitrace.capture._atomic import atomic_path
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


@click.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--profile", "profile", type=click.Path(exists=True, dir_okay=False, path_type=str),
              help="Channel profile for every capture (default: NAME.profile.toml beside each, else auto-detect).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: from the -o suffix, else json).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Output file (written atomically); default standard output.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Captures analysed in parallel (local process pool).")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Run the batch on a Dask distributed scheduler, e.g. tcp://host:8786 (pip install 'pcitrace[dist]').")
@click.option("--csr-gap-us", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True,
              help="CSR accesses closer than this form one CSR group.")
@click.option("--classify", "rule", type=click.Choice(RULES), default="auto", show_default=True,
              help="CSR / DMA classification rule (auto picks gnt+bar, gnt, bar or length from what was captured).")
@click.option("--window-us", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Rolling occupancy window (default: 10 µs, longer for long captures).")
@click.option("--max-control-bytes", type=click.IntRange(min=0), default=64, show_default=True,
              help="DMA transfers up to this size are descriptor fetches / status write-backs; larger ones frame data.")
@click.option("--irq-min-delay-us", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Host interrupt latency: a service routine starting sooner after a DMA was raised before it.")
def report(paths, profile, fmt, output, jobs, dask_address, csr_gap_us, rule, window_us, max_control_bytes,
           irq_min_delay_us):
    """Analyse CAPTURE files and every .sr / .vcd / .vcd.gz in DIR arguments: bus occupancy (split by
    data / wait / address / retry), CSR setup times, DMA bursts, per-packet timing, interrupt delays.

    A capture that cannot be read is reported and the others still complete; the exit status is
    then 1.
    """
    from pcitrace.report.batch import find_captures, run_batch, stderr_is_terminal, warning_lines

    if fmt is None:
        suffix = Path(output).suffix.lower() if output else ""
        if output and suffix not in _SUFFIX_FORMAT:
            raise PcitraceError(f"cannot tell the report format from {suffix or 'a name without a suffix'!r}",
                                path=output, fix="name it .json, .csv, .md or .html, or give --format")
        fmt = _SUFFIX_FORMAT[suffix] if output else "json"
    if output and not Path(output).parent.exists():
        raise PcitraceError(f"the directory {Path(output).parent} does not exist", path=output,
                            fix="create it or choose another -o path")
    options = AnalysisOptions(csr_gap_us=csr_gap_us, classification=rule, window_us=window_us,
                              max_control_bytes=max_control_bytes, irq_min_delay_us=irq_min_delay_us)
    tasks = find_captures(paths, profile)
    with_series = fmt == "html"

    def warn(r: dict) -> None:
        echo_warnings(r["capture"], r.get("warnings", []))
        if "error" in r:
            click.echo(f"pcitrace: error: {r['error'] if r['error'].startswith(r['capture']) else r['capture'] + ': ' + r['error']}",
                       err=True)

    if stderr_is_terminal():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        console = Console(stderr=True)
        with Progress(TextColumn("[bold]report"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      TextColumn("{task.description}"), console=console, transient=True) as bar:
            tid = bar.add_task("", total=len(tasks))

            def step(r: dict) -> None:
                for line in warning_lines(r):
                    console.print(line, highlight=False, markup=False)
                if "error" in r:
                    console.print(f"[red]failed[/red] {r['capture']}: {r['error']}", highlight=False)
                bar.update(tid, advance=1, description=Path(r["capture"]).name)
            results = run_batch(tasks, options, jobs=jobs, dask_address=dask_address, with_series=with_series,
                                on_done=step)
    else:
        results = run_batch(tasks, options, jobs=jobs, dask_address=dask_address, with_series=with_series,
                            on_done=warn)

    text = render(results, fmt, options)
    if output:
        write_text_atomic(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    failed = sum(1 for r in results if "error" in r)
    if failed:
        click.echo(f"pcitrace: {failed} of {len(results)} captures could not be analysed", err=True)
        return 1
    return 0

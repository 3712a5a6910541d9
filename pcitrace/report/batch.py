"""Batches of captures: find them, analyse each one in isolation, gather the results.

One capture = one task (``report_one``), a plain top-level function of plain arguments that
returns plain data, so the same task runs in-process, in a local process pool or on a Dask
cluster. A capture that fails becomes an error entry; it never stops the batch.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pcitrace import pipeline
from pcitrace.analyse import AnalysisOptions
from pcitrace.analyse.checks import capture_warnings
from pcitrace.capture.formats import format_of
from pcitrace.errors import PcitraceError, describe_bug, warning_line
from pcitrace.report.summary import bus_figures, bus_series, link_figures, link_series

@dataclasses.dataclass(frozen=True)
class Task:
    capture: str
    profile: str | None   # explicit profile; None = NAME.profile.toml beside it, else auto-detect


def _is_capture(p: Path) -> bool:
    return p.is_file() and format_of(p) is not None


def find_captures(paths: Sequence[str | os.PathLike], profile: str | None = None) -> list[Task]:
    """Captures named directly, and every .sr / .vcd / .vcd.gz inside named directories (recursively)."""
    tasks: list[Task] = []
    seen = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if _is_capture(q))
            if not found:
                raise PcitraceError("no captures (.sr, .vcd, .vcd.gz) in this directory", path=p,
                                    fix="point pcitrace report at capture files or a directory holding them")
        elif p.exists():
            found = [p]
        else:
            raise PcitraceError("no such file or directory", path=p, fix="check the path")
        for q in found:
            key = os.path.abspath(q)
            if key not in seen:
                seen.add(key)
                tasks.append(Task(str(q), profile))
    return tasks


def report_one(capture: str, profile: str | None, options: AnalysisOptions, with_series: bool = True) -> dict:
    """Decode and analyse one capture; any failure becomes {"capture", "error"} instead of raising."""
    t0 = time.perf_counter()
    try:
        run = pipeline.run(capture, profile, options=options)
        out = _report(capture, run, with_series)
    except PcitraceError as exc:
        out = {"capture": capture, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a bug on one file must not stop a batch (as in a worker)
        out = {"capture": capture, "error": describe_bug(exc)}
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


def _report(capture: str, run: pipeline.Run, with_series: bool) -> dict:
    result, analysis, prof = run.decoded, run.analysis, run.profile
    out = {
        "capture": capture,
        "profile": prof.describe(),
        "findings": int(len(result.findings)),
        "finding_kinds": _kinds(result.findings),
        "buses": [bus_figures(b) for b in analysis.buses.values()],
        "links": [link_figures(lc) for lc in run.chains.values()],
        # what the reader could not read (a file cut short), then what the analysis could not tell
        "warnings": list(run.capture.metadata.get("warnings", [])) + capture_warnings(result, analysis, run.chains),
    }
    if with_series:
        out["series"] = {name: bus_series(b) for name, b in analysis.buses.items()}
        t0 = min((b.facts.start_ps for b in analysis.buses.values()), default=0)
        out["link_series"] = {name: link_series(lc, t0) for name, lc in run.chains.items()}
    return out


def _kinds(findings) -> dict:
    if findings is None or len(findings) == 0:
        return {}
    import numpy as np
    k, c = np.unique(findings["kind"], return_counts=True)
    return {str(a): int(b) for a, b in zip(k, c)}


def _pool_context():
    import multiprocessing as mp
    # fork: workers start with everything already imported (a forkserver or spawn start costs
    # seconds of imports per batch on a busy machine). Workers only run report_one, so the
    # progress-bar thread of the parent does not matter to them.
    return mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")


def run_batch(tasks: Sequence[Task], options: AnalysisOptions, *, jobs: int = 1, dask_address: str | None = None,
              with_series: bool = True, on_done: Callable[[dict], None] | None = None) -> list[dict]:
    """Results in the order of ``tasks``; ``on_done(result)`` is called as each one finishes."""
    results: list[dict | None] = [None] * len(tasks)

    def done(i: int, r: dict):
        results[i] = r
        if on_done:
            on_done(r)

    if dask_address:
        for i, r in _run_dask(tasks, options, dask_address, with_series):
            done(i, r)
    elif jobs <= 1 or len(tasks) <= 1:
        for i, t in enumerate(tasks):
            done(i, report_one(t.capture, t.profile, options, with_series))
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_pool_context()) as pool:
            futs = {pool.submit(report_one, t.capture, t.profile, options, with_series): i
                    for i, t in enumerate(tasks)}
            for fut in as_completed(futs):
                i = futs[fut]
                try:
                    r = fut.result()
                except Exception as exc:  # noqa: BLE001 - a worker died (e.g. killed): report, go on
                    r = {"capture": tasks[i].capture, "error": f"worker failed: {type(exc).__name__}: {exc}"}
                done(i, r)
    return [r for r in results if r is not None]


def _run_dask(tasks, options, address: str, with_series: bool) -> Iterable[tuple[int, dict]]:
    try:
        from dask.distributed import Client, as_completed
    except ModuleNotFoundError as exc:
        raise PcitraceError(f"--dask needs the Python package {exc.name!r}",
                            fix="pip install 'pcitrace[dist]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        # OSError / TimeoutError: nobody answers; ValueError / TypeError: not an address at all
        raise PcitraceError(f"cannot reach the Dask scheduler at {address}: {exc}",
                            fix="start it (dask scheduler) or check the address, e.g. tcp://host:8786") from None
    try:
        # Workers may run elsewhere on a shared file system: hand them absolute paths.
        futs = client.map(report_one, [os.path.abspath(t.capture) for t in tasks],
                          [os.path.abspath(t.profile) if t.profile else None for t in tasks],
                          [options] * len(tasks), [with_series] * len(tasks), pure=False)
        index = {f.key: i for i, f in enumerate(futs)}
        for fut in as_completed(futs):
            i = index[fut.key]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001
                r = {"capture": tasks[i].capture, "error": f"dask worker failed: {type(exc).__name__}: {exc}"}
            r["capture"] = tasks[i].capture
            yield i, r
    finally:
        client.close()


def warning_lines(r: dict) -> list[str]:
    """A result's warnings as stderr lines."""
    return [warning_line(r["capture"], w) for w in r.get("warnings", [])]


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False

"""Viewer speed on a 50 M-sample capture: first paint after the file is chosen, and repaint
time at several zooms, against the targets (first paint <= 2 s, median repaint <= 16 ms).

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bench_gui.py [--samples 50000000]
        [--sample control_only] [--dir /tmp/pcitrace-bench] [--repeats 15]

The capture is a bundled sample tiled to --samples and written once as .sr (kept in --dir for
the next run). "First paint" is measured the way a user meets it: ``open_path`` on the window
(worker thread) until the signal rows have been painted once. Rows fill in while the file is
read (snapshots after 1, 2, 4 ... chunks), so the first paint shows the first 4 M samples of
every signal and the time axis of the whole capture; the time until every row is complete and
until the decoded rows arrive are printed too. A repaint is one synchronous repaint of the timeline viewport
(all rows, axis, cursors) at a given view, timed with the wall clock, over --repeats positions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
FIRST_PAINT_TARGET_S = 2.0
REPAINT_TARGET_S = 0.016


def tiled_capture(sample: Path, n: int):
    """The sample repeated to n samples, streamed (never n samples in memory)."""
    from pcitrace.capture import open_capture
    from pcitrace.capture.model import Capture, Chunk

    src = open_capture(sample)
    data = src.read()
    m = src.num_samples

    def source(names, start, stop, chunk):
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            idx = np.arange(s, e) % m
            yield Chunk(s, {k: data[k][idx] for k in names})

    tb = src.timebase
    return Capture(src.channels, tb, n, source, metadata=dict(src.metadata))


def build(sample_name: str, n: int, out_dir: Path) -> Path:
    from pcitrace.capture import write_sr

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{sample_name}_x{n}.sr"
    prof = out_dir / f"{sample_name}_x{n}.profile.toml"
    if not path.exists():
        t = time.perf_counter()
        write_sr(tiled_capture(ROOT / "samples" / f"{sample_name}.sr", n), path)
        print(f"built {path} ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    shutil.copy(ROOT / "samples" / f"{sample_name}.profile.toml", prof)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=50_000_000)
    ap.add_argument("--sample", default="control_only")
    ap.add_argument("--dir", default="/tmp/pcitrace-bench")
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args(argv)

    path = build(a.sample, a.samples, Path(a.dir))
    session = path.with_name(path.name[:-3] + ".pcitrace-session.json")
    if session.exists():
        session.unlink()

    from PyQt5 import QtCore, QtWidgets
    from pcitrace.gui.window import MainWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    settings = QtCore.QSettings(str(Path(a.dir) / "bench-settings.ini"), QtCore.QSettings.IniFormat)
    win = MainWindow(settings=settings)
    win.resize(1600, 1000)
    win.show()
    app.processEvents()
    item = win.timeline.rows_item
    state = {"ready": None, "painted": None, "complete": None, "decoded": None, "failed": None}
    win.documentReady.connect(lambda: state.__setitem__("ready", time.perf_counter()))
    win.signalsComplete.connect(lambda: state.__setitem__("complete", time.perf_counter()))
    win.decodeReady.connect(lambda: state.__setitem__("decoded", time.perf_counter()))
    win.loadFailed.connect(lambda m: state.__setitem__("failed", m))

    t0 = time.perf_counter()
    win.open_path(str(path))
    while state["failed"] is None and state["painted"] is None:
        app.processEvents(QtCore.QEventLoop.AllEvents, 20)
        if state["ready"] is not None and item.last_paint_s > 0:
            state["painted"] = time.perf_counter()
    if state["failed"]:
        print("load failed:", state["failed"])
        return 1
    first = state["painted"] - t0
    while state["decoded"] is None and state["failed"] is None:
        app.processEvents(QtCore.QEventLoop.AllEvents, 50)
    decoded = state["decoded"] - t0
    doc = win.doc
    n_rec = len(doc.result.records)

    tl = win.timeline
    vp = tl.plot.viewport()
    span_all = doc.end_ps - doc.start_ps
    zooms = [("whole capture", span_all), ("10 ms", 10e9), ("1 ms", 1e9), ("100 us", 100e6),
             ("10 us", 10e6), ("1 us", 1e6)]
    rng = np.random.default_rng(1)
    print(f"capture: {doc.capture.num_samples:,} samples, {len(doc.capture.channels)} channels, "
          f"{doc.capture.timebase.mode} mode, {n_rec:,} transactions, "
          f"{sum(getattr(r.lod, 'changes', 0) for r in doc.rows):,} signal changes")
    print(f"first paint after the file is chosen: {first:.2f} s  (target {FIRST_PAINT_TARGET_S} s, "
          f"ratio {first / FIRST_PAINT_TARGET_S:.2f})")
    print(f"every signal row read after:          {state['complete'] - t0:.2f} s  (rows fill in from the first paint on)")
    print(f"decoded rows and table ready after:   {decoded:.2f} s  (decode_capture + analyse, worker thread)")
    print(f"{'zoom':>14} {'median repaint':>15} {'rows paint':>11} {'max':>8}  ratio to {REPAINT_TARGET_S * 1e3:.0f} ms")
    worst = 0.0
    for name, span in zooms:
        span = min(span, span_all)
        walls, items = [], []
        for _ in range(a.repeats):
            start = doc.start_ps + rng.random() * max(span_all - span, 0)
            tl.set_view(start, start + span)
            app.processEvents()
            t = time.perf_counter()
            vp.repaint()
            walls.append(time.perf_counter() - t)
            items.append(item.last_paint_s)
        med = statistics.median(walls)
        worst = max(worst, med)
        print(f"{name:>14} {med * 1e3:12.2f} ms {statistics.median(items) * 1e3:8.2f} ms "
              f"{max(walls) * 1e3:6.1f} ms  {med / REPAINT_TARGET_S:.2f}")
    print(f"worst median repaint {worst * 1e3:.2f} ms: ratio {worst / REPAINT_TARGET_S:.2f} to the target")
    win.doc = None
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

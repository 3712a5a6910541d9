""".sr writing: the threaded ISA-L writer against the reference path (zipfile, zlib level 6).

    python bench/bench_write_sr.py [--clocks N] [--mode state|timing] [--repeat R]

The capture is the simulator's pro1000_66mhz sample (two 64-bit/66 MHz buses and the link
probe: 170 one-bit lines, 22 bytes a sample in state mode) stretched to N clocks per bus, as
bench_sim.py stretches it. Each path writes it R times, alternating (best of R counts: the
machine is shared); prints CPU and wall seconds of each, their ratios, the file sizes, and
checks that both files hold the same members (names, sizes and CRC-32 from the directory).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_capture(clocks: float, mode: str):
    from pcitrace.sim.output import simulate
    from pcitrace.sim.scenario import load_scenario

    sc = load_scenario(ROOT / "samples" / "pro1000_66mhz.scenario.toml")
    sc.mode = mode
    sc.link.gmii = sc.link.gmii and mode == "timing"
    sc.duration_us = clocks * sc.buses[0].period_ps / 1e6
    return simulate(sc).capture


def timed(fn) -> tuple[float, float]:
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def members(path) -> list[tuple[str, int, int]]:
    with zipfile.ZipFile(path) as zf:
        return [(i.filename, i.file_size, i.CRC) for i in zf.infolist()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clocks", type=float, default=2e6)
    ap.add_argument("--mode", choices=("state", "timing"), default="state")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from pcitrace._memory import keep_freed_memory, no_huge_pages

    keep_freed_memory()                 # as `pcitrace simulate` does
    no_huge_pages()
    from pcitrace.capture._zipwrite import DEFLATE, ISAL_LEVEL, ZLIB_LEVEL
    from pcitrace.capture.sr import _workers, write_sr

    cap = make_capture(args.clocks, args.mode)
    lines = sum(c.width for c in cap.channels)
    raw = cap.num_samples * ((lines + 7) // 8)
    print(f"{cap.num_samples:,} samples x {lines} lines ({raw / 1e6:.0f} MB of samples), {args.mode} mode; "
          f"fast path: {DEFLATE} level {ISAL_LEVEL if DEFLATE == 'isal' else ZLIB_LEVEL}, {_workers()} worker threads")
    best = {"reference": (float("inf"), float("inf")), "fast": (float("inf"), float("inf"))}
    with tempfile.TemporaryDirectory() as d:
        paths = {"reference": Path(d) / "ref.sr", "fast": Path(d) / "fast.sr"}
        for _ in range(max(1, args.repeat)):
            for name in best:
                cpu, wall = timed(lambda: write_sr(cap, paths[name], reference=name == "reference"))
                best[name] = (min(best[name][0], cpu), min(best[name][1], wall))
        sizes = {k: os.path.getsize(p) for k, p in paths.items()}
        same = members(paths["reference"]) == members(paths["fast"])
    for name, (cpu, wall) in best.items():
        print(f"  {name:9s} cpu {cpu:6.2f} s  wall {wall:6.2f} s  ({raw / wall / 1e6:5.0f} MB/s)  "
              f"file {sizes[name] / 1e6:7.2f} MB")
    (rc, rw), (fc, fw) = best["reference"], best["fast"]
    print(f"ratio reference/fast: cpu {rc / fc:.1f}x, wall {rw / fw:.1f}x; "
          f"size fast/reference {sizes['fast'] / sizes['reference']:.3f}")
    print(f"same members (names, sizes, CRC-32): {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""`pcitrace report` on 100 captures: --jobs 2 against --jobs 1 (the reference), one run each.

The captures are the bundled samples, linked 100 times into a temporary directory (with their
profiles), so the batch is realistic in size and mix. Prints both wall times and the ratio
(jobs 2 / jobs 1; 0.5 would be perfect scaling on two cores).

    python bench/bench_report_jobs.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def make_batch(dest: Path, n: int) -> None:
    names = sorted(p.name[: -len(".sr")] for p in SAMPLES.glob("*.sr"))
    for i in range(n):
        name = names[i % len(names)]
        os.symlink(SAMPLES / f"{name}.sr", dest / f"c{i:03d}_{name}.sr")
        os.symlink(SAMPLES / f"{name}.profile.toml", dest / f"c{i:03d}_{name}.profile.toml")


def timed(args: list[str]) -> float:
    from pcitrace.cli import main
    t0 = time.perf_counter()
    rc = main(args)
    dt = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"pcitrace {' '.join(args)} exited {rc}")
    return dt


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "captures"
        d.mkdir()
        make_batch(d, n)
        t1 = timed(["report", str(d), "-o", str(Path(tmp) / "one.json"), "--jobs", "1"])
        t2 = timed(["report", str(d), "-o", str(Path(tmp) / "two.json"), "--jobs", "2"])
    load = os.getloadavg()[0]
    print(f"{n} captures: --jobs 1 {t1:.1f} s, --jobs 2 {t2:.1f} s, ratio jobs2/jobs1 = {t2 / t1:.2f} "
          f"(speed-up {t1 / t2:.2f}x on {os.cpu_count()} CPUs; load average {load:.1f}: on a busy "
          "machine the pool cannot get a second free core)")


if __name__ == "__main__":
    main()

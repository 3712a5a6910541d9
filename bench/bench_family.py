"""Analysis accuracy on the NIC family (issue 17): per-packet figures against the simulator's truth.

    python bench/bench_family.py [--count N] [--start K] [--worst M]

Simulates scenarios K .. K+N-1 of ``family_scenario`` (a fixed seed set: PCI 33/66 MHz 32/64-bit
and PCI-X 133, with and without AD/C/BE#, the probe, INTA#), runs the pipeline on each capture
and compares, per packet, data DMA, CSR setup, descriptor fetch, status write-back, interrupt
delay, packets per interrupt and wire delays with the truth within one bus clock
(tests/analyse/family.py). Prints per figure the share of packets right, wrong and counted
ambiguous, per bus whether the packet count is right or wrong with / without a warning, the
scenarios with the most wrong figures, and the time taken. tests/analyse/test_family.py runs
the first 40 in CI.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--worst", type=int, default=10, help="list the scenarios with the most wrong figures")
    args = ap.parse_args()

    from tests.analyse.family import Score, score

    t0 = time.perf_counter()
    total = Score()
    for n in range(args.start, args.start + args.count):
        total.add(score(n))
    dt = time.perf_counter() - t0
    print(f"NIC family scenarios {args.start}..{args.start + args.count - 1}: {dt:.1f} s")
    print(total.table())
    worst = collections.Counter(w[0] for w in total.wrong).most_common(args.worst)
    if worst:
        print("most wrong figures: " + ", ".join(f"{name} {k}" for name, k in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())

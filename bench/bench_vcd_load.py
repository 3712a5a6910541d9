"""VCD loading cost against pywellen alone, on the OpenCores conformance trace.

    python bench/bench_vcd_load.py [VCD_OR_VCD_GZ] [--repeat N]

Reference: pywellen parsing the (uncompressed) file and streaming every value change to a
no-op callback. Measured: ``pcitrace.capture.open_capture`` on the same file (pywellen parse,
identifier check, x/z rule, numpy change lists), and for information open + clocked view
(one sample per PCI clock) and open + every ``bus_clocks`` chunk of the detected bus.
Runs alternate between the two and the best of N is kept, so a busy machine hurts both alike.
The target is a load ratio of at most 2.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT = ROOT / "tests" / "data" / "conformance" / "opencores-pci" / "pci_bus.vcd.gz"
TARGET = 2.0


def pywellen_alone(path: str) -> None:
    import pywellen
    w = pywellen.Waveform(path, stream_only=True)

    def noop(t, s, v):
        pass

    w.stream_changes(noop, w.all_vars())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vcd", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from pcitrace.capture import open_capture
    from pcitrace.capture.clocked import clocked_view, find_clocks
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.capture.profile import detect_profile

    with tempfile.TemporaryDirectory() as tmp:
        plain = args.vcd
        if plain.endswith(".gz"):
            plain = os.path.join(tmp, "trace.vcd")
            with gzip.open(args.vcd, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 4 << 20)
        size = os.path.getsize(plain)
        ref, ours, view, clocks = [], [], [], []
        for _ in range(args.repeat):
            gc.collect()
            t = time.perf_counter()
            pywellen_alone(plain)
            ref.append(time.perf_counter() - t)
            gc.collect()
            t = time.perf_counter()
            cap = open_capture(plain)
            ours.append(time.perf_counter() - t)
            clk = find_clocks(cap)[0].channel
            t = time.perf_counter()
            v = clocked_view(cap, clk)
            view.append(time.perf_counter() - t)
            bus = detect_profile(cap).buses[0]
            t = time.perf_counter()
            n = sum(len(c) for c in bus_clocks(cap, bus))
            clocks.append(time.perf_counter() - t)
            del cap, v

    r, o = min(ref), min(ours)
    print(f"file             {args.vcd} ({size / 1e6:.1f} MB uncompressed)")
    print(f"pywellen alone   {r:.3f} s  (parse + stream every change to a no-op callback)")
    print(f"open_capture     {o:.3f} s")
    print(f"clocked view     {min(view):.3f} s  (after loading)")
    print(f"bus_clocks       {min(clocks):.3f} s  ({n} clocks, after loading)")
    ratio = o / r
    print(f"load ratio       {ratio:.2f}  (target <= {TARGET:g}: {'met' if ratio <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

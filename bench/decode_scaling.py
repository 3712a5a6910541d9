"""Peak RSS and time of the fast engine for 1 M, 10 M and 100 M-clock captures.

    .venv/bin/python bench/decode_scaling.py [--sizes 1e6,1e7,1e8] [--full] [--format parquet]
                                             [--in-memory]

Each size runs in its own process (so ru_maxrss is that decode's peak). The capture is a
streaming state-mode Capture whose chunk source tiles NIC-like traffic on the fly, so the
input never sits in memory whole. Measured: the path of `pcitrace decode CAPTURE -o FILE`
(records written chunk by chunk as they are decoded, the issue's bounded-memory target), and
with --in-memory also `decode_capture`, which holds every record and data word by design
(for information: it grows with the record count). Prints clocks/s (CPU time), records,
peak RSS and the 100 M / 10 M RSS ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from decode_vs_sigrok import CLOCK_HZ, CONTROL, FULL, NAMES, nic_traffic  # noqa: E402


def streaming_capture(base: dict[str, np.ndarray], n: int):
    from pcitrace.capture.model import Capture, ChannelInfo, Chunk, TimeBase
    from pcitrace.capture.profile import BusProfile, Profile

    period = len(base["frame_n"])
    chans = [ChannelInfo(NAMES[k], 64 if k == "ad" else 8 if k == "cbe_n" else 1) for k in base]
    by_name = {NAMES[k]: v for k, v in base.items()}

    def source(names, start, stop, chunk):
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            idx = np.arange(s, e) % period
            yield Chunk(s, {nm: by_name[nm][idx] for nm in names})

    cap = Capture(chans, TimeBase.state(clock_hz=CLOCK_HZ), n, source)
    prof = Profile([BusProfile("pci", "pci", signals={k: NAMES[k] for k in base}, width=64)], source="bench")
    return cap, prof


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(n: int, full: bool, how: str, fmt: str) -> dict:
    import tempfile

    from rich.console import Console

    from pcitrace.decode import decode_capture
    from pcitrace.decode.commands import _stream

    from pcitrace._memory import keep_freed_memory

    keep_freed_memory()                  # as the pcitrace command does
    base = nic_traffic(n_txns=1500, seed=2, spacing=40)
    base = {k: v for k, v in base.items() if k in (FULL if full else CONTROL)}
    cap, prof = streaming_capture(base, n)
    t0, w0 = cpu(), time.perf_counter()
    if how == "memory":
        res = decode_capture(cap, prof)
        records, words = len(res.records), len(res.words)
    else:
        with tempfile.TemporaryDirectory(prefix="decode-scaling-") as tmp:
            out = os.path.join(tmp, f"records.{fmt}")
            _stream(cap, prof, None, fmt, out, Console(stderr=True, quiet=True))
            size = os.path.getsize(out)
        records, words = None, None
    dt, wall = cpu() - t0, time.perf_counter() - w0
    r = {"clocks": n, "seconds": dt, "wall": wall, "records": records, "words": words,
         "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if how != "memory":
        r["file_mib"] = size / 2**20
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--full", action="store_true", help="64-bit AD + C/BE# + parity (default: control lines)")
    ap.add_argument("--format", default="parquet", choices=("parquet", "csv", "jsonl"),
                    help="output format of the streamed path (csv/jsonl spend most time formatting text)")
    ap.add_argument("--in-memory", action="store_true", help="also measure decode_capture (holds every record)")
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--how", default="stream", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(int(args.one), args.full, args.how, args.format)))
        return 0
    sizes = [int(float(x)) for x in args.sizes.split(",")]
    for how in ("stream", "memory") if args.in_memory else ("stream",):
        label = (f"pcitrace decode -o FILE.{args.format} (streamed)" if how == "stream"
                 else "decode_capture (every record in memory, for information)")
        print(label, flush=True)
        rows = []
        for size in sizes:
            cmd = [sys.executable, __file__, "--one", str(size), "--how", how, "--format", args.format]
            cmd += ["--full"] if args.full else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            rows.append(r)
            what = (f"{r['records']:>10,} records, {r['words']:>11,} words" if how == "memory"
                    else f"{r['file_mib']:8.1f} MiB written")
            print(f"  {r['clocks']:>12,} clocks: {r['clocks'] / r['seconds'] / 1e6:6.1f} M clocks/s "
                  f"(CPU), {what}, peak RSS {r['rss_mib']:7.0f} MiB", flush=True)
        by = {r["clocks"]: r for r in rows}
        if 10_000_000 in by and 100_000_000 in by:
            print(f"  RSS 100 M / 10 M = {by[100_000_000]['rss_mib'] / by[10_000_000]['rss_mib']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory of streaming an .sr file does not grow with its length.

    python bench/bench_sr_stream.py [--samples N] [--channels C]

Writes two captures of N and 8N samples (C 1-bit channels, written in a stream too), then
reads every chunk (256 K samples, so even the short one spans several) of every channel of
each under tracemalloc (numpy reports its buffers to
it). Prints the peak of each, their ratio (target: about 1, whatever the length ratio), the
peak of the naive path (read the whole capture into arrays) for contrast, and the read speed.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def synthetic(n: int, channels: int):
    """A capture whose samples are generated chunk by chunk (never all in memory)."""
    from pcitrace.capture.model import Capture, ChannelInfo, Chunk, TimeBase
    names = ["CLK", "FRAME#"] + [f"D{i}" for i in range(channels - 2)]

    def source(want, start, stop, chunk):
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            idx = np.arange(s, e)
            data = {}
            for k, nm in enumerate(want):
                if nm == "CLK":
                    data[nm] = (idx & 1).astype(np.uint8)
                else:
                    data[nm] = ((idx // (3 + names.index(nm))) & 1).astype(np.uint8)
            yield Chunk(s, data)

    return Capture([ChannelInfo(nm) for nm in names], TimeBase.timing(100e6), n, source)


def measure(fn):
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    t = time.perf_counter()
    result = fn()
    dt = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, dt, result


CHUNK = 1 << 18


def stream_all(path):
    from pcitrace.capture import open_capture
    cap = open_capture(path)
    ones = 0
    for ch in cap.iter_chunks(chunk_samples=CHUNK):
        for v in ch.data.values():
            ones += int(v.sum())
    return cap.num_samples, ones


def read_whole(path):
    from pcitrace.capture import open_capture
    cap = open_capture(path)
    data = cap.read()
    return cap.num_samples, sum(int(v.sum()) for v in data.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=float, default=2e6)
    ap.add_argument("--channels", type=int, default=16)
    args = ap.parse_args()
    from pcitrace.capture import write_sr

    n = int(args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for mult in (1, 8):
            p = Path(tmp) / f"c{mult}.sr"
            write_sr(synthetic(n * mult, args.channels), p)
            paths[mult] = p
        short_peak, short_t, (ns, ones_s) = measure(lambda: stream_all(paths[1]))
        long_peak, long_t, (nl, ones_l) = measure(lambda: stream_all(paths[8]))
        naive_peak, _, (_, ones_n) = measure(lambda: read_whole(paths[1]))
        assert ones_n == ones_s, "streamed and whole reads disagree"
        size = paths[8].stat().st_size

    print(f"channels          {args.channels} (1-bit), read in chunks of {CHUNK} samples")
    print(f"short capture     {ns:>12,} samples  peak {short_peak / 1e6:7.1f} MB  "
          f"{ns / short_t / 1e6:6.1f} M samples/s")
    print(f"long capture      {nl:>12,} samples  peak {long_peak / 1e6:7.1f} MB  "
          f"{nl / long_t / 1e6:6.1f} M samples/s  ({size / 1e6:.1f} MB file)")
    print(f"naive whole read  {ns:>12,} samples  peak {naive_peak / 1e6:7.1f} MB  (for contrast)")
    ratio = long_peak / short_peak
    print(f"peak ratio long/short {ratio:.2f} for {nl / ns:.0f}x the samples "
          f"({'independent of length' if ratio < 1.5 else 'GROWS with length'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

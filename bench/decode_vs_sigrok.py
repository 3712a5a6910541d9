"""Fast engine vs the reference decoder (sigrok-cli) on the same state-mode .sr captures.

    .venv/bin/python bench/decode_vs_sigrok.py [--clocks 20000000] [--slice 2000000]
                                               [--traffic seed|dense|both] [--repeat 3]
                                               [--timing CLOCKS]

Two kinds of traffic, each tiled to --clocks:
- seed: the send bus of the bundled pro1000_66mhz sample (64-bit/66 MHz, 1400-byte frames
  every 11 us, about 42 % busy: the seed papers' measurement);
- dense: a worst case, NIC-like traffic rendered by pcitrace.sim.bus with little idle time
  (about 90 % busy, a transaction every 25 clocks; `--spacing N` adds idle clocks).
For each:
1. Engine throughput: decoded by the streaming engine in the chunks decode_capture uses (256 k
   clocks), control lines only and with 64-bit AD + C/BE# + PAR/PAR64; best of --repeat runs
   (the machine is shared: the best run is the code's own speed, the median says how noisy it
   was). Two forms of input: as decode_capture gives it from a state .sr (the control lines
   as one code per clock, made from the packed samples; the clocks' times computed where
   read), and as lines plus an array of times (what a timing capture or a VCD gives).
2. End to end on files: the first --slice clocks written as a state-mode .sr, decoded from the
   file by `decode_capture` (fast: best of --repeat processes of its own) and once by
   sigrok-cli with decoders/pci (reference); records and data words must be identical; prints
   clocks/s of each and the ratio.
Rates are clocks per CPU-second (the fast decode's own process, imports excluded; sigrok-cli's
process), so a busy shared machine does not distort the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

from pcitrace.capture import write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.buses.pci import CONTROL_CODE
from pcitrace.capture.profile import BusProfile, Profile
from pcitrace.decode import DEFAULT_CHUNK_CLOCKS, decode_capture
from pcitrace.decode.engine import decode_clocks
from pcitrace.decode.records import diff_records
from pcitrace.sim.bus import TxnSpec, render

CLOCK_HZ = 66_666_667.0
CONTROL = ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n", "gnt_n")
FULL = CONTROL + ("ad", "cbe_n", "par", "par64", "req64_n", "ack64_n")
NAMES = {"frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#", "devsel_n": "DEVSEL#",
         "gnt_n": "GNT#", "ad": "AD", "cbe_n": "C/BE#", "par": "PAR", "par64": "PAR64", "req64_n": "REQ64#",
         "ack64_n": "ACK64#"}


def nic_traffic(n_txns: int = 3000, seed: int = 1, spacing: int = 0) -> dict[str, np.ndarray]:
    """Per-clock signals of a 64-bit bus carrying CSR writes/reads, DMA read bursts with
    target waits and disconnects, descriptor write-backs and retries (about 90 % busy;
    ``spacing`` idle clocks on average more before each transaction make it quieter)."""
    rng = np.random.default_rng(seed)
    specs = []
    for i in range(n_txns):
        kind = rng.integers(0, 10)
        if kind < 3:       # CSR write / read to the NIC's BAR
            specs.append(TxnSpec(0x7 if kind < 2 else 0x6, 0xFEBC0000 + 4 * int(rng.integers(0, 64)),
                                 [int(rng.integers(0, 2**32))], devsel="medium",
                                 idle_before=int(rng.integers(1, 6)), master=1))
        elif kind < 8:     # DMA read burst, 64-bit
            n = int(rng.integers(8, 64))
            term = "disconnect_with_data" if rng.random() < 0.2 else "normal"
            specs.append(TxnSpec(0xC, 0x1F000000 + 64 * int(rng.integers(0, 1 << 16)),
                                 rng.integers(0, 2**63, n).tolist(), req64=True, devsel="fast",
                                 target_waits={0: int(rng.integers(2, 8))}, termination=term,
                                 idle_before=int(rng.integers(1, 4))))
        elif kind < 9:     # status write-back
            specs.append(TxnSpec(0x7, 0x2F000000 + 16 * int(rng.integers(0, 4096)),
                                 rng.integers(0, 2**32, 4).tolist(), devsel="fast", idle_before=2))
        else:              # a retried read
            specs.append(TxnSpec(0x6, 0x1F000000, [], devsel="fast", termination="retry", idle_before=3))
    if spacing:
        extra = rng.integers(0, 2 * spacing + 1, len(specs))
        specs = [dataclasses.replace(sp, idle_before=sp.idle_before + int(x)) for sp, x in zip(specs, extra)]
    rb = render(specs, mode="pci", width=64, clock_hz=CLOCK_HZ, bus="pci", masters=("nic", "host"),
                gnt_master=0, with_ad=True)
    return {k: v for k, v in rb.signals.items() if k in FULL}


def tiled(base: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    reps = -(-n // len(base["frame_n"]))
    return {k: np.tile(v, reps)[:n] for k, v in base.items()}


def cpu() -> float:
    """CPU seconds of this process and its finished children (sigrok-cli): on a shared machine
    wall time measures the neighbours as much as the code."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def as_from_sr(sig: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The signals as bus_clocks gives them from a state .sr: FRAME#..DEVSEL# as one code."""
    out = {k: v for k, v in sig.items() if k not in dict(CONTROL_CODE)}
    out["code"] = np.zeros(len(sig["frame_n"]), np.uint8)
    for name, weight in CONTROL_CODE:
        out["code"] += (sig[name] == 0).view(np.uint8) * np.uint8(weight)
    return out


def engine_rate(sig: dict[str, np.ndarray], chunk: int = DEFAULT_CHUNK_CLOCKS,
                lazy_times: bool = True) -> tuple[float, int]:
    """Clocks per CPU-second of the streaming engine over ``sig``, in the chunks
    decode_capture uses, and the transactions found. ``lazy_times``: the times as a state
    capture of a uniform clock gives them (SampleTimes), else as one int64 array."""
    n = len(next(iter(sig.values())))
    tb = TimeBase.state(clock_hz=CLOCK_HZ)
    times = None if lazy_times else tb.times_ps(0, n)

    def t_of(a, b):
        return tb.lazy_times(a, b) if lazy_times else times[a:b]
    carry, count = None, 0
    t0 = cpu()
    for s in range(0, n, chunk):
        r, _, _, carry = decode_clocks({k: v[s:s + chunk] for k, v in sig.items()}, t_of(s, min(s + chunk, n)),
                                       width=64, carry=carry, final=False)
        count += len(r)
    r, _, _, carry = decode_clocks({k: v[:0] for k, v in sig.items()}, t_of(n, n), width=64, carry=carry)
    count += len(r)
    return n / (cpu() - t0), count


def write_slice(sig: dict[str, np.ndarray], path: str) -> Profile:
    arrays = {NAMES[k]: v for k, v in sig.items()}
    widths = {k: w for k, w in {"AD": 64, "C/BE#": 8}.items() if k in arrays}
    write_sr(Capture.from_arrays(arrays, TimeBase.state(clock_hz=CLOCK_HZ), widths=widths), path)
    # .sr holds 1-bit channels: a vector X is stored as X0..X{n-1}
    signals = {k: ([f"{NAMES[k]}{i}" for i in range(widths[NAMES[k]])] if NAMES[k] in widths else NAMES[k])
               for k in sig}
    return Profile([BusProfile("pci", "pci", signals=signals, width=64)], source="bench")


_FRESH = """
import resource, sys
import numpy as np
from pcitrace._memory import keep_freed_memory
from pcitrace.decode import decode_capture
import pcitrace.capture.profile, pcitrace.capture.sr, pcitrace.decode.engine, pcitrace.decode.probe
keep_freed_memory()                      # as the pcitrace command does
ru = lambda: sum(getattr(resource.getrusage(resource.RUSAGE_SELF), f) for f in ("ru_utime", "ru_stime"))
t0 = ru()
res = decode_capture(sys.argv[1])
t = ru() - t0
np.save(sys.argv[2], res.records)
np.save(sys.argv[2] + ".words.npy", res.words)
print(t)
"""


def fast_in_fresh_process(path: str, prof: Profile, tmp: str) -> tuple[float, np.ndarray, np.ndarray]:
    """CPU time of decode_capture in a process of its own, as `pcitrace decode` runs it
    (with its memory policy; its output arrays take fresh memory pages, which this kind of
    machine makes costly), imports excluded; and its records and data words."""
    from pcitrace.capture.profile import save_profile

    save_profile(prof, path[:-3] + ".profile.toml")
    out = os.path.join(tmp, "fast.npy")
    done = subprocess.run([sys.executable, "-c", _FRESH, path, out], check=True,
                          capture_output=True, text=True)
    return float(done.stdout.split()[-1]), np.load(out), np.load(out + ".words.npy")


def seed_traffic() -> dict[str, np.ndarray]:
    """Per-clock signals of the pro1000_66mhz sample's send bus."""
    from pathlib import Path

    from pcitrace.capture import open_capture
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.capture.profile import resolve_profile

    cap = open_capture(Path(__file__).resolve().parents[1] / "samples" / "pro1000_66mhz.sr")
    parts = list(bus_clocks(cap, resolve_profile(cap, None).bus("send")))
    return {k: np.concatenate([p.sig[k] for p in parts]) for k in FULL}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clocks", type=int, default=20_000_000)
    ap.add_argument("--slice", type=int, default=2_000_000)
    ap.add_argument("--traffic", choices=("seed", "dense", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-sigrok", action="store_true")
    ap.add_argument("--spacing", type=int, default=0, help="dense: mean extra idle clocks before each transaction")
    ap.add_argument("--timing", type=int, default=0, metavar="CLOCKS",
                    help="also a timing-mode .sr with CLK (two buses, this many clocks each) against sigrok-cli")
    args = ap.parse_args(argv)
    from pcitrace._memory import keep_freed_memory

    keep_freed_memory()                  # as the pcitrace command does
    print("rates in CPU time: one core")
    for kind in (("seed", "dense") if args.traffic == "both" else (args.traffic,)):
        base = seed_traffic() if kind == "seed" else nic_traffic(spacing=args.spacing)
        run(kind, base, args)
    if args.timing:
        timing_capture(args.timing, args.repeat)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB")
    return 0


def run(kind: str, base: dict[str, np.ndarray], args) -> None:
    busy = np.mean((base["frame_n"] == 0) | (base["irdy_n"] == 0))
    print(f"{kind} traffic: {len(base['frame_n']):,} clocks, {busy:.0%} busy, tiled to {args.clocks:,}")
    big = tiled(base, args.clocks)
    for label, keys in (("control-only", CONTROL), ("64-bit AD+C/BE#", FULL)):
        lines = {k: big[k] for k in keys}
        for form, sig, lazy in (("as from a state .sr", as_from_sr(lines), True),
                                ("lines, time array", lines, False)):
            rates = []
            for _ in range(max(args.repeat, 1)):
                rate, count = engine_rate(sig, lazy_times=lazy)
                rates.append(rate)
            print(f"  engine {label:16s} ({form:19s}): {max(rates) / 1e6:6.1f} M clocks/s best of {len(rates)} "
                  f"(median {np.median(rates) / 1e6:.1f}; {count:,} transactions)")
    del big
    if args.no_sigrok:
        return

    sl = tiled(base, args.slice)
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        for label, keys in (("control-only", CONTROL), ("64-bit AD+C/BE#", FULL)):
            path = os.path.join(tmp, f"{label[:4]}.sr")
            prof = write_slice({k: sl[k] for k in keys}, path)
            compare_file(path, prof, f"file {label:16s}", args.slice, args.repeat, tmp)


def compare_file(path: str, prof: Profile, label: str, clocks: int, repeat: int, tmp: str) -> None:
    """Decode ``path`` fast (best of ``repeat`` fresh processes) and with sigrok-cli; print
    the rates per bus clock, the ratio and whether the records (and words) are identical."""
    runs = [fast_in_fresh_process(path, prof, tmp) for _ in range(max(repeat, 1))]
    t_fast = min(r[0] for r in runs)
    fast_records, fast_words = runs[0][1], runs[0][2]
    t0 = cpu()
    ref = decode_capture(path, prof, engine="sigrok")
    t_ref = cpu() - t0
    diff = []
    for bus in dict.fromkeys(ref.records["bus"].tolist()):
        a, r = fast_records[fast_records["bus"] == bus], ref.records[ref.records["bus"] == bus]
        if len(a) == len(r) + 1 and a["termination"][-1] == "truncated":
            a = a[:-1]                 # libsigrokdecode never flushes the one cut by the end
        diff += diff_records(r, a)
    if len(prof.buses) == 1 and not diff:
        w = fast_words[fast_words["record"] < len(ref.records)]
        if not np.array_equal(w, ref.words):
            diff = [f"data words differ ({len(w):,} vs {len(ref.words):,})"]
    print(f"  {label}: fast {clocks / t_fast / 1e6:7.1f} M clocks/s, sigrok-cli "
          f"{clocks / t_ref / 1e6:6.3f} M clocks/s, ratio {t_ref / t_fast:6.0f}x, "
          f"records{' and words' if len(prof.buses) == 1 else ''} "
          f"{'identical' if not diff else 'DIFFER: ' + diff[0]} ({len(ref.records):,})")


def timing_capture(clocks: int, repeat: int) -> None:
    """A timing-mode .sr as a logic analyser records it: the pro1000_66mhz sample's scenario
    (two 64-bit/66 MHz buses with CLK, sampled at 400 MHz, about 6 samples per clock)
    stretched to ``clocks`` bus clocks per bus."""
    from pathlib import Path

    from pcitrace.capture.profile import load_profile
    from pcitrace.sim.output import simulate, write_outputs
    from pcitrace.sim.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[1] / "samples" / "pro1000_66mhz.scenario.toml")
    sc.link.gmii = False
    sc.duration_us = clocks * sc.buses[0].period_ps / 1e6
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        path = os.path.join(tmp, "timing.sr")
        write_outputs(simulate(sc), path)
        prof = load_profile(path[:-3] + ".profile.toml")
        pci = Profile([b for b in prof.buses if b.is_pci], source=prof.source)
        total = clocks * len(pci.buses)
        print(f"timing capture: {len(pci.buses)} buses x {clocks:,} clocks, "
              f"{os.path.getsize(path) / 1e6:.0f} MB .sr (rates per bus clock, all buses)")
        compare_file(path, pci, "file timing, 64-bit  ", total, repeat, tmp)


if __name__ == "__main__":
    sys.exit(main())

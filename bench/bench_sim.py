"""Simulator throughput: generate a 10 M-clock capture and compare with the 5 M clocks/s target.

    python bench/bench_sim.py [--clocks N] [--mode state|timing] [--write] [--reference N]

The scenario is the bundled pro1000_66mhz sample (two 64-bit/66 MHz buses and the link probe,
about one transaction per 25 bus clocks) stretched to N clocks per bus. Prints the time of each
stage (event model, bus rendering straight from the model's transactions, capture + truth
assembly, the cyclic collector's walk over what the run left; with --write the .sr file and
the truth + profile files) so the slow one is visible, then clocks/s and the ratio to the
target, by wall time and by CPU time (on a shared machine the CPU time shows what an idle one
would do), and the CPU time split into user and system (system time here is mostly the first
touch of fresh memory pages, which this kind of VM makes expensive). The rates count the
simulation only; with --write they count the writing too.

``--reference N`` also times, in the same run, N clocks through the reference paths the fast ones
are tested against (numpy's Generator for the model's draws, the Python event engine for the
compiled one, TxnSpec objects and ``render`` for the buses) and the fast paths on the same N clocks, and prints the ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 5e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clocks", type=float, default=10e6)
    ap.add_argument("--mode", choices=("state", "timing"), default="state")
    ap.add_argument("--write", action="store_true", help="also write the .sr file (capture layer)")
    ap.add_argument("--reference", type=float, default=0,
                    help="also compare with the reference paths on this many clocks (0: no)")
    args = ap.parse_args()
    from pcitrace._memory import keep_freed_memory, no_huge_pages

    keep_freed_memory()                  # as `pcitrace simulate` does
    no_huge_pages()

    import pcitrace.sim.output as out
    from pcitrace.sim.scenario import load_scenario

    sc = load_scenario(ROOT / "samples" / "pro1000_66mhz.scenario.toml")
    sc.mode = args.mode
    sc.link.gmii = sc.link.gmii and args.mode == "timing"
    period = sc.buses[0].period_ps
    sc.duration_us = args.clocks * period / 1e6

    stages = {"model": 0.0, "render": 0.0}
    system = {"model": 0.0, "render": 0.0}
    real_run, real_render = out.run_model, out.render_txns

    def timed(name, fn):
        def run(*a, **k):
            t, s = time.process_time(), os.times().system
            r = fn(*a, **k)
            stages[name] += time.process_time() - t
            system[name] += os.times().system - s
            return r
        return run

    timed_run, timed_render = timed("model", real_run), timed("render", real_render)

    out.run_model, out.render_txns = timed_run, timed_render
    t0, c0, r0 = time.perf_counter(), time.process_time(), os.times()
    result = out.simulate(sc)
    # What the run leaves the cyclic collector to walk is paid by the next allocation after it
    # (in the pcitrace command: while writing), so it is counted here, as a stage of its own.
    cg = time.process_time()            # (a float: no allocation the collector counts)
    gc.collect(0)
    collector = time.process_time() - cg
    total = time.perf_counter() - t0
    cpu = time.process_time() - c0
    r1 = os.times()
    stages["capture + truth"] = cpu - sum(stages.values()) - collector
    system["capture + truth"] = (r1.system - r0.system) - sum(system.values())
    stages["collector after"] = collector
    clocks = int(result.truth["occupancy"][sc.buses[0].name]["clocks"])
    if args.write:
        real_write = out.write_capture
        sr = {}

        def timed_write(*a, **k):
            t = time.process_time()
            real_write(*a, **k)
            sr["cpu"] = time.process_time() - t

        out.write_capture = timed_write
        with tempfile.TemporaryDirectory() as d:
            t, c = time.perf_counter(), time.process_time()
            out.write_outputs(result, Path(d) / "bench.sr")
            total += time.perf_counter() - t
            written = time.process_time() - c
        out.write_capture = real_write
        stages["write .sr"] = sr["cpu"]
        stages["write truth, profile"] = written - sr["cpu"]
        cpu += written
    import pcitrace.sim.model as model
    print(f"event engine: {'compiled' if model.Model.engine is model.FastEngine else 'Python (the compiled one is not built)'}")
    print(f"{clocks:,} clocks per bus x {len(sc.buses)} buses, {len(result.truth['records']):,} transactions, "
          f"{result.capture.num_samples:,} samples ({args.mode} mode)")
    for k, v in stages.items():
        sy = f" (system {system[k]:.2f} s)" if k in system else ""
        print(f"  {k:16s} {v:7.2f} s cpu{sy}")
    rate, cpu_rate = clocks / total, clocks / cpu
    print(f"wall {total:.2f} s: {rate / 1e6:.2f} M clocks/s; target {TARGET / 1e6:.0f} M clocks/s; "
          f"ratio {rate / TARGET:.2f}")
    print(f"cpu  {cpu:.2f} s: {cpu_rate / 1e6:.2f} M clocks/s; ratio {cpu_rate / TARGET:.2f}")
    # The system part is mostly first touches of fresh memory pages, which some VMs make very
    # dear (tens of microseconds a page): user time is the simulator's own work.
    user, system = r1.user - r0.user, r1.system - r0.system
    print(f"simulate: user {user:.2f} s ({clocks / max(user, 1e-9) / 1e6:.2f} M clocks/s), "
          f"system {system:.2f} s")
    if args.reference:
        out.run_model, out.render_txns = real_run, real_render
        ref, fast = reference_ratio(sc, args.reference * period / 1e6)
        print(f"reference paths on {args.reference:,.0f} clocks: {ref:.2f} s cpu, fast paths {fast:.2f} s cpu: "
              f"{ref / max(fast, 1e-9):.1f}x")
    return 0


def reference_ratio(sc, duration_us: float) -> tuple[float, float]:
    """CPU seconds of simulate() through the reference paths, then through the fast ones."""
    import dataclasses

    import pcitrace.sim.model as model
    import pcitrace.sim.output as out
    import pcitrace.sim.specs as specs
    from pcitrace.sim.output import truth_json

    sc = dataclasses.replace(sc, duration_us=duration_us)
    columns = specs._render_columns

    def irregular(*a, **k):
        raise specs._Irregular

    engine = model.Model.engine
    model.Model.draws, model.Model.engine, specs._render_columns = model.NumpyDraws, model.Engine, irregular
    try:
        t = time.process_time()
        ref = out.simulate(sc)
        t_ref = time.process_time() - t
    finally:
        model.Model.draws, model.Model.engine, specs._render_columns = model.Draws, engine, columns
    t = time.process_time()
    fast = out.simulate(sc)
    t_fast = time.process_time() - t
    if truth_json(ref.truth) != truth_json(fast.truth):
        raise SystemExit("the fast paths' truth differs from the reference paths'")
    return t_ref, t_fast


if __name__ == "__main__":
    sys.exit(main())

"""`pcitrace simulate`: run a scenario, write the capture, its profile and its truth."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pcitrace.errors import PcitraceError


@click.command("simulate")
@click.argument("scenario", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Capture to write: NAME.sr or NAME.vcd (NAME.profile.toml and NAME.truth.json go beside it).")
@click.option("--mode", type=click.Choice(["timing", "state"]), default=None,
              help="Override the scenario's capture mode (timing: CLK channels; state: one sample per clock).")
@click.option("--no-ad", is_flag=True, help="Control-only capture: leave out AD, C/BE#, PAR and PAR64.")
@click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
@click.option("--duration-us", type=float, default=None, help="Override the capture length in microseconds.")
def simulate(scenario, output, mode, no_ad, seed, duration_us):
    """Simulate NIC, buses and link from SCENARIO.toml; write a capture and its truth."""
    from pcitrace._memory import no_huge_pages
    from pcitrace.sim.output import output_paths
    from pcitrace.sim.scenario import load_scenario, simulate as run, write_outputs

    sc = load_scenario(scenario)
    if mode:
        if mode == "state" and len({b.period_ps for b in sc.buses}) > 1:
            raise PcitraceError("--mode state needs one clock for all buses", path=scenario,
                                where="bus.clock_mhz", fix="use --mode timing or give the buses one clock")
        if mode == "state" and sc.faults.glitches:
            raise PcitraceError("--mode state cannot show glitches (they are shorter than a clock)",
                                path=scenario, where="faults.glitches",
                                fix="use --mode timing or set glitches = 0")
        sc.mode = mode
    if no_ad:
        sc.ad = False
    if seed is not None:
        if seed < 0:
            raise PcitraceError(f"--seed {seed} is negative", fix="give a seed >= 0")
        sc.seed = seed
    if duration_us is not None:
        if not 1.0 <= duration_us <= 1e6:
            raise PcitraceError(f"--duration-us {duration_us} is out of range", fix="use 1 .. 1000000")
        sc.duration_us = duration_us
    output_paths(output)          # reject a bad extension before the work
    no_huge_pages()               # gigabytes of per-clock temporaries: see pcitrace._memory
    if sys.stderr.isatty():
        from rich.console import Console
        with Console(stderr=True).status(f"simulating {sc.name} ({sc.duration_us:g} us)"):
            result = run(sc)
            paths = write_outputs(result, output)
    else:
        result = run(sc)
        paths = write_outputs(result, output)
    t = result.truth
    occ = ", ".join(f"{name} {o['fraction'] * 100:.1f}% busy" for name, o in t["occupancy"].items())
    click.echo(f"{paths[0]}: {len(t['records'])} transactions, {len(t['frames'])} frames, "
               f"{len(t['packets'])} packets; {occ}")
    click.echo(f"{paths[1]}")
    click.echo(f"{paths[2]}")

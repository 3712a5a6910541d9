"""The `pcitrace` command: a thin shell over the library.

Each subcommand lives beside the code it drives (``pcitrace/<stage>/commands.py``) and is
imported only when it runs, so `pcitrace --help` stays fast and one stage's heavy imports
(Qt, Dask) never slow another. A PcitraceError anywhere becomes one line on stderr and
exit status 2, without a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from pcitrace.errors import PcitraceError

# name -> (module, attribute, one-line help). Help is repeated here so that listing the
# commands does not import every stage.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "info": ("pcitrace.capture.commands", "info", "Show a capture's channels, time base, clock and buses."),
    "convert": ("pcitrace.capture.commands", "convert", "Convert a capture between .sr and VCD."),
    "decode": ("pcitrace.decode.commands", "decode", "Decode PCI / PCI-X transactions (or probe frames)."),
    "decoders": ("pcitrace.decode.sigrok", "decoders", "Locate or install the sigrok decoders."),
    "simulate": ("pcitrace.sim.commands", "simulate", "Simulate NIC, buses and link; write a capture and its truth."),
    "report": ("pcitrace.report.commands", "report", "Batch occupancy / CSR / DMA report of captures."),
    "runlog": ("pcitrace.correlate.commands", "runlog", "Read a UDPmon / iperf / netperf / pcap run log."),
    "correlate": ("pcitrace.correlate.commands", "correlate", "Align a capture with a UDP test run."),
    "sweep": ("pcitrace.correlate.commands", "sweep", "Throughput and occupancy against packet spacing."),
    "gui": ("pcitrace.gui.commands", "gui", "Open the timeline viewer."),
    "capture": ("pcitrace.acquire.commands", "capture", "Capture from a SUMP / OLS logic analyser."),
    "emulate-sump": ("pcitrace.acquire.commands", "emulate_sump", "Serve a capture as an emulated SUMP analyser on a pty."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, attr, short = entry
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(module.rsplit(".", 1)[0]):
                return _unavailable(name, short, f"{module} is not built yet")
            return _unavailable(name, short, f"needs the Python package {exc.name!r}")
        cmd = getattr(mod, attr)
        cmd.short_help = cmd.short_help or short
        return cmd

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str, short: str, why: str) -> click.Command:
    def run():
        raise PcitraceError(f"`pcitrace {name}` is unavailable: {why}.",
                            fix="install pcitrace with the matching extra, e.g. pip install 'pcitrace[gui,dist]'")
    return click.Command(name, callback=run, help=f"{short} (unavailable: {why})")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pcitrace")
def cli():
    """pcitrace: PCI / PCI-X bus captures to transactions, CSR setup times, DMA bursts,
    bus occupancy and wire-to-PCI delays."""


def main(argv: list[str] | None = None) -> int:
    try:
        rc = cli.main(args=argv, prog_name="pcitrace", standalone_mode=False)
    except PcitraceError as exc:
        click.echo(f"pcitrace: error: {exc}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("pcitrace: aborted", err=True)
        return 130
    except click.UsageError as exc:
        # One line, like every other input error: what was wrong and where to look.
        cmd = exc.ctx.command_path if exc.ctx is not None else "pcitrace"
        click.echo(f"pcitrace: error: {exc.format_message()} Fix: see `{cmd} --help`.", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"pcitrace: error: {exc.format_message()}", err=True)
        return exc.exit_code if exc.exit_code else 2
    except KeyboardInterrupt:
        click.echo("pcitrace: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    # Commands signal a non-zero status (e.g. a batch with a bad capture) by returning it.
    return rc if isinstance(rc, int) else 0


def run() -> None:
    from pcitrace._memory import keep_freed_memory

    keep_freed_memory()
    sys.exit(main())


if __name__ == "__main__":
    run()

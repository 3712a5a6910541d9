"""Run the pcitrace commands one fuzz input goes through, in this (limited) process.

    python -m tests.fuzz.child KIND INPUT OUTDIR [JSON OPTIONS]

Prints one JSON line per command: its argv, exit status and stderr, or the exception that escaped
the CLI (which is a crash: the CLI must turn every user error into PcitraceError). The parent
(tests/fuzz/harness.py) sets the time and address-space limits and judges the outcome.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
CORPUS = ROOT / "tests" / "data" / "fuzz-corpus"


def commands(kind: str, path: Path, out: Path, options: dict) -> list[list[str]]:
    """The command lines an input of KIND goes through (what the campaign ran it through)."""
    if kind in ("sr", "vcd"):
        profile = path.parent / "in.profile.toml"
        extra = ["--profile", str(profile)] if profile.exists() else []
        return _capture_commands(path, extra, out, convert=options.get("convert", False))
    if kind == "profile":
        name = options.get("capture_path") or options["capture"]
        capture = SAMPLES / name if (SAMPLES / name).exists() else CORPUS / name   # (an absolute path stays)
        return _capture_commands(capture, ["--profile", str(path)], out, convert=False)
    if kind in ("runlog", "pcap"):
        return [["runlog", str(path)], ["runlog", str(path), "--format", "json", "-o", str(out / "run.json")]]
    if kind in ("scenario", "scenario_valid"):
        suffix = ".vcd" if options.get("vcd") else ".sr"
        return [["simulate", str(path), "-o", str(out / f"sim{suffix}"),
                 "--duration-us", str(options.get("max_us", 20.0))]]
    raise SystemExit(f"unknown fuzz kind {kind!r}")


def _capture_commands(capture: Path, extra: list[str], out: Path, convert: bool) -> list[list[str]]:
    cap = str(capture)
    cmds = [["info", cap, *extra],
            ["decode", cap, *extra, "--format", "jsonl", "-o", str(out / "records.jsonl")],
            ["report", cap, *extra, "--format", "json", "-o", str(out / "report.json")]]
    if convert:
        target = out / ("converted.sr" if capture.name.endswith((".vcd", ".vcd.gz")) else "converted.vcd")
        cmds.append(["convert", cap, str(target)])
    return cmds


def run_one(argv: list[str]) -> dict:
    from pcitrace.cli import main

    err = io.StringIO()
    result: dict = {"argv": argv}
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            result["rc"] = main(argv)
        except SystemExit as exc:              # click's own exits
            result["rc"] = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:          # noqa: BLE001 - what escapes is exactly what we look for
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{Path(f.filename).name}:{f.name}:{f.lineno}" for f in reversed(tb)
                          if "pcitrace" in f.filename), "?")
            result.update(rc=None, exception=type(exc).__name__, where=where, message=str(exc)[:300])
    result["stderr"] = err.getvalue()
    return result


def main() -> None:
    kind, path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    out.mkdir(parents=True, exist_ok=True)
    for argv in commands(kind, path, out, options):
        print(json.dumps(run_one(argv)), flush=True)
    print(json.dumps({"peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}), flush=True)


if __name__ == "__main__":
    main()

"""Run one fuzz input in a child process with a time and an address-space limit, and judge it.

The promise under test: every input ends in success or in ONE line of the pcitrace error with
exit status 2 (a batch report lists a bad capture and exits 1), within the limits. Anything else
is a finding: a crash (an exception escaped the CLI), a hang (over the time limit), an abort
(killed by a signal, e.g. out of memory under the limit), a multi-line message, or a report
that calls its own failure a bug ("please report this").
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIME_LIMIT_S = 10.0
MEMORY_LIMIT = 2 << 30                     # bytes of address space


@dataclass
class Outcome:
    verdict: str                           # ok | error | crash | hang | abort | multiline | selfbug
    detail: str = ""
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    commands: list[dict] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.verdict in ("ok", "error")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_input(kind: str, path: Path, out: Path, options: dict | None = None,
              time_limit: float = TIME_LIMIT_S) -> Outcome:
    argv = [sys.executable, "-m", "tests.fuzz.child", kind, str(path), str(out), json.dumps(options or {})]
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, preexec_fn=_limit_memory)
    try:
        stdout, stderr = proc.communicate(timeout=time_limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return Outcome("hang", f"over {time_limit:.0f} s", time.monotonic() - start)
    seconds = time.monotonic() - start
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    outcome = judge(proc.returncode, [r for r in lines if "argv" in r], stderr)
    outcome.peak_rss_mb = next((r["peak_rss_kb"] / 1024 for r in lines if "peak_rss_kb" in r), 0.0)
    outcome.seconds = seconds
    return outcome


def judge(returncode: int, results: list[dict], stderr: str) -> Outcome:
    if returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or [""]
        return Outcome("abort", f"child exit {returncode}: {tail[0][:200]}", commands=results)
    for r in results:
        cmd = " ".join(r["argv"][:1])
        if r.get("exception"):
            return Outcome("crash", f"{cmd}: {r['exception']} at {r['where']}: {r['message']}", commands=results)
        lines = r["stderr"].strip().splitlines()
        if "please report" in r["stderr"] or "Traceback" in r["stderr"]:
            return Outcome("selfbug", f"{cmd}: {lines[:2]}", commands=results)
        if r["rc"] == 2 and len(lines) != 1:
            return Outcome("multiline", f"{cmd}: {len(lines)} lines: {lines[:3]}", commands=results)
        if r["rc"] == 2 and not lines[0].startswith("pcitrace: error: "):
            return Outcome("multiline", f"{cmd}: not our error: {lines[0][:200]}", commands=results)
        if r["rc"] == 1 and not (cmd == "report" and all(l.startswith("pcitrace:") for l in lines)):
            return Outcome("crash", f"{cmd}: exit 1: {lines[:2]}", commands=results)
        if r["rc"] not in (0, 1, 2):
            return Outcome("crash", f"{cmd}: exit {r['rc']}: {lines[:2]}", commands=results)
    errors = [r for r in results if r["rc"] != 0]
    return Outcome("error" if errors else "ok", errors[0]["stderr"].strip() if errors else "", commands=results)

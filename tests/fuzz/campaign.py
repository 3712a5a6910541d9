"""A fuzz campaign over every input kind pcitrace reads.

    python bench/fuzz.py --inputs 200000 --jobs 2          # the long run (prints a table per kind)
    python bench/fuzz.py --inputs 600 --seed 1             # what CI runs (tests/fuzz/test_campaign.py)

Seeds are small real inputs: captures simulated from the bundled scenarios (timing with AD and
probes, state control-only; .sr and VCD), their profiles, the bundled scenarios, and the real
UDP tool outputs and pcaps in tests/data/udp-tools. Each input is one seed mutated by its kind's
structured mutator (tests/fuzz/mutators.py) from a seed derived from (campaign seed, kind,
index), so any finding is reproduced by its index alone. A worker imports pcitrace once and
forks a child per input; the child has a time limit (SIGALRM) and an address-space limit
(RLIMIT_AS), runs the input's commands in-process and reports through a pipe. The verdicts are
tests/fuzz/harness.py's. Failing inputs are kept in --keep DIR with their case.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import multiprocessing
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz.harness import MEMORY_LIMIT, TIME_LIMIT_S, Outcome, judge  # noqa: E402
from tests.fuzz.mutators import MUTATORS  # noqa: E402

KINDS = ("sr", "vcd", "profile", "scenario", "runlog", "pcap")
SUFFIX = {"sr": ".sr", "vcd": ".vcd", "profile": ".toml", "scenario": ".toml", "runlog": ".txt", "pcap": ".pcap"}
SCENARIOS = ("pro1000_66mhz", "control_only", "pcix133_mmrbc512")


@dataclass(frozen=True)
class Seed:
    kind: str
    path: Path
    options: dict


def make_seeds(where: Path) -> dict[str, list[Seed]]:
    """Small real inputs of every kind, written under ``where``."""
    from pcitrace.cli import main

    seeds: dict[str, list[Seed]] = collections.defaultdict(list)
    for name in SCENARIOS:
        scenario = ROOT / "samples" / f"{name}.scenario.toml"
        seeds["scenario"].append(Seed("scenario", scenario, {"max_us": 10.0}))
        for suffix in (".sr", ".vcd"):
            out = where / f"{name}{suffix}"
            with contextlib.redirect_stdout(io.StringIO()):
                rc = main(["simulate", str(scenario), "-o", str(out), "--duration-us", "8"])
            assert rc == 0, f"seed {out} not written"
            seeds[suffix[1:]].append(Seed(suffix[1:], out, {"convert": suffix == ".vcd"}))
        profile = where / f"{name}.profile.toml"
        seeds["profile"].append(Seed("profile", profile, {"capture_path": str(where / f"{name}.sr")}))
    for path in sorted((ROOT / "tests" / "data" / "udp-tools").iterdir()):
        seeds["runlog"].append(Seed("runlog", path, {}))
    seeds["pcap"] = [Seed("pcap", p, {}) for p in _pcap_seeds(where)]
    return seeds


def _pcap_seeds(where: Path) -> list[Path]:
    """A UDPmon stream as a nanosecond and a microsecond pcap, and an iperf3 stream as pcapng."""
    import struct

    import dpkt
    import numpy as np

    from pcitrace.correlate.pcap import udpmon_payload, write_pcap

    t = np.arange(12, dtype=np.int64) * 11_000_000
    frames = [udpmon_payload(i, 110 * i, 200) for i in range(12)]
    write_pcap(where / "ns.pcap", t, frames)
    write_pcap(where / "us.pcap", t, frames, nanosecond=False)
    with open(where / "i3.pcapng", "wb") as f:
        idb = dpkt.pcapng.InterfaceDescriptionBlockLE(linktype=dpkt.pcap.DLT_EN10MB)
        w = dpkt.pcapng.Writer(f, shb=dpkt.pcapng.SectionHeaderBlockLE(), idb=idb)
        for i in range(12):
            udp = dpkt.udp.UDP(sport=40001, dport=5201, data=struct.pack(">IIq", 1, 2, i + 1) + b"x" * 64)
            udp.ulen = 8 + len(udp.data)
            ip = dpkt.ip.IP(src=b"\n\0\0\1", dst=b"\n\0\0\2", p=dpkt.ip.IP_PROTO_UDP, data=udp)
            ip.len = 20 + udp.ulen
            eth = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            ns = 1_795_319_048_000_000_000 + i * 117_765
            w.writepkt(dpkt.pcapng.EnhancedPacketBlockLE(pkt_data=bytes(eth), ts_high=ns >> 32,
                                                         ts_low=ns & 0xFFFFFFFF))
    return [where / "ns.pcap", where / "us.pcap", where / "i3.pcapng"]


def mutated_input(seed: Seed, campaign_seed: int, index: int, workdir: Path) -> tuple[Path, dict]:
    """Write input ``index`` of its kind into ``workdir``; the capture a profile is applied to
    and a capture's profile stay the seed's own."""
    rng = random.Random(f"{campaign_seed}-{seed.kind}-{index}")
    data = MUTATORS[seed.kind](seed.path.read_bytes(), rng)
    suffix = seed.path.suffix if seed.kind in ("runlog", "pcap", "vcd", "sr") else SUFFIX[seed.kind]
    path = workdir / f"in{suffix}"
    path.write_bytes(data)
    profile = seed.path.with_name(seed.path.name.split(".")[0] + ".profile.toml")
    if seed.kind in ("sr", "vcd") and profile.exists():
        shutil.copy(profile, workdir / "in.profile.toml")
    return path, dict(seed.options)


def run_forked(kind: str, path: Path, out: Path, options: dict, time_limit: float = TIME_LIMIT_S,
               memory_limit: int = MEMORY_LIMIT) -> Outcome:
    """Run one input's commands in a forked child under the limits and judge them."""
    from tests.fuzz.child import commands, run_one

    out.mkdir(parents=True, exist_ok=True)
    argvs = commands(kind, path, out, options)
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:                                           # the child: limits, commands, results
        code = 0
        try:
            os.close(r)
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, int(time_limit)))
            with os.fdopen(w, "w") as pipe:
                for argv in argvs:
                    pipe.write(json.dumps(run_one(argv)) + "\n")
                    pipe.flush()
        except BaseException:                              # noqa: BLE001 - the parent sees a short report
            code = 70
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as pipe:
        text = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    results = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        verdict = "hang" if sig == signal.SIGALRM else "abort"
        outcome = Outcome(verdict, f"killed by {signal.Signals(sig).name}", commands=results)
    else:
        outcome = judge(os.WEXITSTATUS(status), results, "")
    outcome.seconds = seconds
    outcome.peak_rss_mb = usage.ru_maxrss / 1024
    return outcome


# --- the campaign ------------------------------------------------------------------------------
_SEEDS: dict[str, list[Seed]] = {}
_STATE: dict = {}


def _worker_init(seeds: dict[str, list[Seed]], campaign_seed: int, keep: str | None) -> None:
    import importlib

    from pcitrace.cli import COMMANDS

    # every command's module (and what it imports) once here, not in every forked child
    for name in ("info", "decode", "report", "runlog", "simulate"):
        importlib.import_module(COMMANDS[name][0])

    _SEEDS.update(seeds)
    _STATE.update(seed=campaign_seed, keep=keep, tmp=Path(tempfile.mkdtemp(prefix="pcitrace-fuzz-")))
    _warm_up(seeds, _STATE["tmp"] / "warm")


def _warm_up(seeds: dict[str, list[Seed]], where: Path) -> None:
    """Run every kind's commands once on its seeds here, so that what the first run of a
    command loads or compiles (lazy imports, regexes, numpy's first calls) is in every forked
    child already instead of being paid again by each."""
    from tests.fuzz.child import commands, run_one

    for kind, kind_seeds in seeds.items():
        if kind == "vcd":       # pywellen's thread pool, once started, does not survive a fork (children hang)
            continue
        for seed in kind_seeds:
            for argv in commands(kind, seed.path, where, seed.options):
                run_one(argv)
    shutil.rmtree(where, ignore_errors=True)


def _one(task: tuple[str, int]) -> tuple[str, int, str, str, float, float]:
    kind, index = task
    seeds = _SEEDS[kind]
    seed = seeds[index % len(seeds)]
    work = _STATE["tmp"] / f"{kind}-{index}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        path, options = mutated_input(seed, _STATE["seed"], index, work)
        outcome = run_forked(kind, path, work / "out", options)
        if not outcome.clean and _STATE["keep"]:
            _keep(Path(_STATE["keep"]), kind, index, work, path, options, outcome)
        return kind, index, outcome.verdict, outcome.detail[:300], outcome.seconds, outcome.peak_rss_mb
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keep(keep: Path, kind: str, index: int, work: Path, path: Path, options: dict, outcome: Outcome) -> None:
    dest = keep / kind / f"{outcome.verdict}_{index}"
    dest.mkdir(parents=True, exist_ok=True)
    for f in work.iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)
    (dest / "case.json").write_text(json.dumps({"kind": kind, "input": path.name, "options": options,
                                                "seen": {"outcome": outcome.verdict, "detail": outcome.detail}},
                                               indent=1))


def campaign(inputs: int, *, seed: int = 1, jobs: int = 2, kinds=KINDS, keep: str | None = None,
             progress=None) -> list[tuple]:
    """Run ``inputs`` inputs spread evenly over ``kinds``; return one row per input."""
    with tempfile.TemporaryDirectory(prefix="pcitrace-fuzz-seeds-") as tmp:
        seeds = make_seeds(Path(tmp))
        tasks = [(kind, i) for i in range((inputs + len(kinds) - 1) // len(kinds)) for kind in kinds][:inputs]
        rows = []
        # Workers come from a fork server, not from this process: a child's address-space limit
        # must measure the child, not whatever the caller (pytest with Qt, say) had mapped.
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_init,
                                 initargs=(seeds, seed, keep)) as pool:
            for row in pool.map(_one, tasks, chunksize=16):
                rows.append(row)
                if progress:
                    progress(len(rows), len(tasks))
        return rows


VERDICTS = ("ok", "error", "crash", "hang", "abort", "multiline", "selfbug")


def table(rows: list[tuple]) -> str:
    by_kind: dict[str, list[tuple]] = collections.defaultdict(list)
    for row in rows:
        by_kind[row[0]].append(row)
    head = (f"{'kind':9} {'inputs':>7} " + " ".join(f"{v:>9}" for v in VERDICTS)
            + f" {'mean s':>7} {'max s':>6} {'max MB':>7}")
    lines = [head]
    for kind in sorted(by_kind, key=KINDS.index):
        rs = by_kind[kind]
        counts = collections.Counter(r[2] for r in rs)
        lines.append(f"{kind:9} {len(rs):7d} " + " ".join(f"{counts[v]:9d}" for v in VERDICTS)
                     + f" {sum(r[4] for r in rs) / len(rs):7.3f} {max(r[4] for r in rs):6.2f} {max(r[5] for r in rs):7.0f}")
    counts = collections.Counter(r[2] for r in rows)
    lines.append(f"{'all':9} {len(rows):7d} " + " ".join(f"{counts[v]:9d}" for v in VERDICTS)
                 + f" {sum(r[4] for r in rows) / len(rows):7.3f} {max(r[4] for r in rows):6.2f} {max(r[5] for r in rows):7.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="pcitrace fuzz campaign: every input kind, forked and limited")
    ap.add_argument("--inputs", type=int, default=6000, help="inputs in all, spread over the kinds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    ap.add_argument("--keep", help="directory for failing inputs (with their case.json)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    last = [0.0]

    def progress(done, total):
        now = time.monotonic()
        if now - last[0] > 30 or done == total:
            last[0] = now
            print(f"  {done}/{total} inputs, {now - started:.0f} s", file=sys.stderr, flush=True)

    rows = campaign(args.inputs, seed=args.seed, jobs=args.jobs, kinds=tuple(args.kinds.split(",")),
                    keep=args.keep, progress=progress)
    print(table(rows))
    bad = [r for r in rows if r[2] not in ("ok", "error")]
    for r in bad[:20]:
        print(f"{r[0]} #{r[1]}: {r[2]}: {r[3]}")
    print(f"{len(rows)} inputs in {time.monotonic() - started:.0f} s, {len(bad)} findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Hand-written PCI bus activity, clock by clock, written as .sr for the sigrok decoder tests.

A test lists the bus clocks it wants (what every line reads at each rising CLK edge) and gets
a state-mode .sr (one sample per clock) or a timing-mode .sr (CLK channel, several samples
per clock, lines changing a quarter period after the rising edge, as docs/records.md says the
simulator writes them). Unlisted lines idle: control lines deasserted (1), AD 0, C/BE# 0xF.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from pcitrace.capture import write_sr
from pcitrace.capture.model import Capture, TimeBase

DECODERS = Path(__file__).resolve().parents[2] / "decoders"

CONTROL = ("FRAME", "IRDY", "TRDY", "STOP", "DEVSEL")
SCALARS = CONTROL + ("PAR", "PAR64", "REQ64", "ACK64", "GNT")
IDLE = {"FRAME": 1, "IRDY": 1, "TRDY": 1, "STOP": 1, "DEVSEL": 1, "PAR": 0, "PAR64": 0,
        "REQ64": 1, "ACK64": 1, "GNT": 1, "AD": 0, "CBE": 0xF}


def parity(*values) -> int:
    return sum(bin(int(v)).count("1") for v in values) & 1


class Bus:
    """Clock-level bus activity. ``clock(F=1, I=0, ...)`` appends one clock; F/I/T/S/D are
    *asserted* flags (1 = asserted = electrical 0); AD, CBE (electrical, C/BE# as on the bus),
    GNT (asserted flag), REQ64/ACK64 (asserted flags) may be given."""

    def __init__(self, width: int = 32, auto_par: bool = True):
        self.width = width
        self.clocks: list[dict] = []
        self.auto_par = auto_par

    def clock(self, F=0, I=0, T=0, S=0, D=0, AD=None, CBE=None, GNT=None, REQ64=0, ACK64=0,
              PAR=None, PAR64=None, n=1):
        for _ in range(n):
            prev = self.clocks[-1] if self.clocks else IDLE
            c = dict(IDLE)
            c.update(FRAME=1 - F, IRDY=1 - I, TRDY=1 - T, STOP=1 - S, DEVSEL=1 - D,
                     REQ64=1 - REQ64, ACK64=1 - ACK64)
            c["AD"] = prev["AD"] if AD is None else AD
            c["CBE"] = prev["CBE"] if CBE is None else CBE
            c["GNT"] = prev["GNT"] if GNT is None else 1 - GNT
            c["PAR"] = PAR
            c["PAR64"] = PAR64
            self.clocks.append(c)
        return self

    def idle(self, n=1, **kw):
        return self.clock(n=n, **kw)

    def arrays(self) -> dict[str, np.ndarray]:
        n = len(self.clocks)
        out = {k: np.array([c[k] if c[k] is not None else 0 for c in self.clocks]) for k in SCALARS}
        ad = np.array([c["AD"] for c in self.clocks], dtype=np.uint64)
        cbe = np.array([c["CBE"] for c in self.clocks], dtype=np.uint64)
        if self.auto_par:
            # PAR on clock n+1 covers AD[31:0], C/BE#[3:0] of clock n (even parity) unless given.
            par = np.zeros(n, np.uint8)
            par64 = np.zeros(n, np.uint8)
            for i in range(1, n):
                p = self.clocks[i - 1]
                par[i] = parity(p["AD"] & 0xFFFFFFFF, p["CBE"] & 0xF)
                par64[i] = parity(p["AD"] >> 32, p["CBE"] >> 4)
            for i, c in enumerate(self.clocks):
                if c["PAR"] is not None:
                    par[i] = c["PAR"]
                if c["PAR64"] is not None:
                    par64[i] = c["PAR64"]
            out["PAR"], out["PAR64"] = par, par64
        out["AD"] = ad
        out["CBE"] = cbe
        return out

    def capture(self, timing: bool = False, samples_per_clock: int = 8, clock_hz: float = 33e6,
                channels=None) -> Capture:
        arr = self.arrays()
        names = list(channels) if channels is not None else list(SCALARS) + ["AD", "CBE"]
        widths = {"AD": self.width, "CBE": self.width // 8}
        arr = {k: arr[k] for k in names}
        if not timing:
            return Capture.from_arrays(arr, TimeBase.state(clock_hz=clock_hz), widths=widths)
        k = samples_per_clock
        n = len(self.clocks)
        # Lead-in of one idle-valued clock period so the first clock is a real rising edge;
        # lines take clock i's values a quarter period after edge i-1 + ... i.e. they are
        # stable across edge i and change k/4 samples after it.
        total = (n + 1) * k
        idx = np.arange(total)
        clk = ((idx % k) < k // 2).astype(np.uint8)  # high in the first half of each period
        clk[: k] = 0                                  # no edge at sample 0
        # edge of clock i is at sample (i + 1) * k; values of clock i hold from
        # i * k + k // 4 + 1 to (i + 1) * k + k // 4.
        out = {"CLK": clk}
        for name, a in arr.items():
            pos = np.clip((idx - k // 4 - 1) // k, 0, n - 1)
            v = a[pos]
            first = idx < k // 4 + 1
            v = v.copy()
            v[first] = IDLE[name] if name in IDLE and IDLE[name] is not None else 0
            out[name] = v
        widths["CLK"] = 1
        return Capture.from_arrays(out, TimeBase.timing(clock_hz * k), widths=widths)

    def write(self, path, **kw) -> Path:
        write_sr(self.capture(**kw), path)
        return Path(path)


def channel_map(width: int = 32, timing: bool = False, control_only: bool = False,
                extra=()) -> str:
    m = {"frame": "FRAME", "irdy": "IRDY", "trdy": "TRDY", "stop": "STOP", "devsel": "DEVSEL"}
    if timing:
        m["clk"] = "CLK"
    if not control_only:
        for i in range(width):
            m[f"ad{i}"] = f"AD{i}"
        for i in range(width // 8):
            m[f"cbe{i}"] = f"CBE{i}"
        m["par"] = "PAR"
        if width == 64:
            m["par64"] = "PAR64"
    for e in extra:
        m[e] = e.upper()
    return ":".join(f"{k}={v}" for k, v in m.items())


def run_decoder(sigrok_cli: str, sr: Path, channels: str, options: str = "") -> tuple[list, list, list]:
    """Run sigrok-cli with the pci decoder; (transactions, words, findings) from the JSON lines."""
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS))
    spec = "pci:" + channels + (":" + options if options else "")
    proc = subprocess.run([sigrok_cli, "-i", str(sr), "-P", spec, "-B", "pci=json"],
                          capture_output=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr and b"srd:" not in proc.stderr, proc.stderr.decode()
    txns, words, findings = [], [], []
    for line in proc.stdout.decode().splitlines():
        obj = json.loads(line)
        if "finding" in obj:
            findings.append(obj["finding"])
        elif "word" in obj:
            words.append(obj["word"])
        else:
            txns.append(obj)
    return txns, words, findings

"""Run the reference decoder on clock arrays, for the differential tests.

Writes a state-mode .sr whose channels carry the sigrok decoder's channel ids, runs real
sigrok-cli with ``-B pci=json`` and parses the JSON lines (records, words, findings). Going
through the capture layer's .sr writer is part of what is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from pcitrace.capture import write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.decode.records import records_from_dicts

DECODERS = Path(__file__).resolve().parents[2] / "decoders"
BITS = {"ad": ("ad", 64), "cbe_n": ("cbe", 8)}
ONE = {"frame_n": "frame", "irdy_n": "irdy", "trdy_n": "trdy", "stop_n": "stop", "devsel_n": "devsel",
       "par": "par", "par64": "par64", "req64_n": "req64", "ack64_n": "ack64", "gnt_n": "gnt"}


def clocks_to_capture(sig: dict, clock_hz: float, ad_bits: int = 64, cbe_bits: int = 8) -> Capture:
    arrays = {}
    for k, v in sig.items():
        if k in ONE:
            arrays[ONE[k]] = np.asarray(v, np.uint8)
        elif k in BITS:
            prefix, _ = BITS[k]
            nb = ad_bits if k == "ad" else cbe_bits
            for i in range(nb):
                arrays[f"{prefix}{i}"] = ((np.asarray(v, np.uint64) >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)
    return Capture.from_arrays(arrays, TimeBase.state(clock_hz=clock_hz))


def run_sigrok_clocks(exe: str, sig: dict, path: Path, *, mode="pci", width=32, bus="pci",
                      clock_hz=33_333_333.0, ad_bits=64, cbe_bits=8):
    cap = clocks_to_capture(sig, clock_hz, ad_bits, cbe_bits)
    write_sr(cap, path)
    opts = ":".join(f"{c}={c}" for c in cap.channel_names)
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS))
    cmd = [exe, "-i", str(path), "-P", f"pci:{opts}:clock=none:mode={mode}:width={width}:bus={bus}",
           "-B", "pci=json"]
    out = subprocess.run(cmd, capture_output=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"sigrok-cli failed ({out.returncode}): {out.stderr.decode()[-2000:]}")
    recs, words, finds = [], [], []
    for line in out.stdout.decode().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        if "word" in obj:
            words.append(obj["word"])
        elif "finding" in obj:
            finds.append(obj["finding"])
        else:
            recs.append(obj)
    return records_from_dicts(recs), words, finds, out.stderr.decode()

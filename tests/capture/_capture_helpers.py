"""Helpers for the capture tests: random captures and reading sigrok-cli's bit dump."""

from __future__ import annotations

import subprocess

import numpy as np
from hypothesis import strategies as st

from pcitrace.capture.model import Capture, TimeBase

# Rates whose sample period is an exact VCD timescale, so sigrok's VCD import (one sample
# per timescale tick) can be compared sample by sample (after dividing by the tick ratio).
SIGROK_RATES = [1_000_000, 10_000_000, 25_000_000, 100_000_000]
ANY_RATES = SIGROK_RATES + [33_000_000, 66_666_667, 133_333_333, 3_000]


@st.composite
def captures(draw, rates=ANY_RATES, max_samples=300, allow_state=True, allow_vectors=True):
    n = draw(st.integers(1, max_samples))
    nch = draw(st.integers(1, 10))
    arrays, widths = {}, {}
    names = draw(st.lists(st.sampled_from(
        ["CLK", "FRAME#", "IRDY#", "AD", "C/BE#", "PAR", "send.FRAME#", "recv.TRDY#", "x", "y_n",
         "sig", "bus.AD", "probe.RXD", "D", "E"]), min_size=nch, max_size=nch, unique=True))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    for name in names:
        w = draw(st.sampled_from([1, 1, 1, 4, 8, 32, 64])) if allow_vectors else 1
        if w == 1:
            # mostly runs (like real lines) with some toggling
            p = draw(st.sampled_from([0.02, 0.3, 0.5]))
            flips = rng.random(n) < p
            arrays[name] = (np.cumsum(flips) & 1).astype(np.uint8)
        else:
            hi = (1 << w) - 1
            arrays[name] = rng.integers(0, hi, n, dtype=np.uint64, endpoint=True)
            widths[name] = w
    # a vector X must not clash with a 1-bit channel X0..: the .sr rule would duplicate names
    mode = draw(st.sampled_from(["timing", "state"])) if allow_state else "timing"
    rate = draw(st.sampled_from(rates))
    tb = TimeBase.timing(rate) if mode == "timing" else TimeBase.state(clock_hz=rate)
    return Capture.from_arrays(arrays, tb, widths=widths)


def bit_columns(capture: Capture) -> dict[str, np.ndarray]:
    """The capture as .sr sees it: every vector split into X0..X{n-1}."""
    data = capture.read()
    out = {}
    for c in capture.channels:
        a = data[c.name]
        if c.width == 1:
            out[c.name] = a.astype(np.uint8)
        else:
            for i in range(c.width):
                out[f"{c.name}{i}"] = ((a >> np.uint64(i)) & np.uint64(1)).astype(np.uint8)
    return out


def sigrok_bits(exe: str, path, *extra: str) -> list[tuple[str, np.ndarray]]:
    """Run sigrok-cli on a file and return (channel name, samples) in its channel order."""
    r = subprocess.run([exe, "-i", str(path), *extra, "-O", "bits:width=1000000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        if ":" not in line or line.startswith(("libsigrok", "Acquisition", "META")):
            continue
        name, _, bits = line.rpartition(":")
        bits = bits.replace(" ", "")
        if bits and set(bits) <= {"0", "1"}:
            out.append((name, np.frombuffer(bits.encode(), dtype=np.uint8) - ord("0")))
    return out

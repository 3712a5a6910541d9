"""Fixtures for the acquisition tests: captures to play back and emulated SUMP analysers on real ptys."""

from __future__ import annotations

import numpy as np
import pytest

from pcitrace.acquire.emulator import SumpEmulator
from pcitrace.capture.model import Capture, TimeBase

# What a client sends before it may configure anything: reset x5, identify, metadata.
IDENTIFY_BYTES = b"\x00" * 5 + b"\x02\x04"


def random_capture(n: int = 6000, lines: int = 12, rate: float = 10e6, seed: int = 1, p_change: float = 0.3):
    """Lines that toggle at random (p_change per sample), so every sample position matters."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for i in range(lines):
        flips = rng.random(n) < p_change
        arrays[f"L{i}"] = (np.cumsum(flips) & 1).astype(np.uint8)
    return Capture.from_arrays(arrays, TimeBase.timing(rate)), arrays


def probe_words(arrays: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    w = np.zeros(len(next(iter(arrays.values()))), np.uint32)
    for k, name in enumerate(names):
        w |= arrays[name].astype(np.uint32) << np.uint32(k)
    return w


@pytest.fixture
def emulator():
    """Factory: emulator(capture, **options) -> a started SumpEmulator, stopped after the test."""
    started = []

    def make(capture, **kw):
        emu = SumpEmulator(capture, **kw).start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        emu.stop()

"""Building bus clocks by hand: one string per clock naming the asserted control lines."""

from __future__ import annotations

import numpy as np

LETTERS = {"F": "frame_n", "I": "irdy_n", "T": "trdy_n", "S": "stop_n", "D": "devsel_n",
           "R": "req64_n", "A": "ack64_n", "G": "gnt_n"}


def clocks(spec: list[str], ad=None, cbe=None, *, extra: str = "", period_ps: int = 30000):
    """``spec``: e.g. ["", "F", "FI", "FITD", "ITD", ""]; ``extra``: letters of optional lines
    to include (deasserted when not named), e.g. "RAG". Returns (sig, times)."""
    n = len(spec)
    names = ["F", "I", "T", "S", "D"] + [c for c in extra]
    sig = {LETTERS[c]: np.array([0 if c in clk else 1 for clk in spec], np.uint8) for c in names}
    if ad is not None:
        sig["ad"] = np.array(ad, np.uint64)
    if cbe is not None:
        sig["cbe_n"] = np.array(cbe, np.uint64)
    return sig, np.arange(n, dtype=np.int64) * period_ps


def even_par(ad, cbe, hi=False):
    """PAR (or PAR64) values that make every clock's parity even, placed one clock later."""
    ad = np.asarray(ad, np.uint64)
    cbe = np.asarray(cbe, np.uint64)
    if hi:
        ones = np.bitwise_count(ad >> np.uint64(32)) + np.bitwise_count((cbe >> np.uint64(4)) & np.uint64(0xF))
    else:
        ones = np.bitwise_count(ad & np.uint64(0xFFFFFFFF)) + np.bitwise_count(cbe & np.uint64(0xF))
    par = np.zeros(len(ad), np.uint8)
    par[1:] = (ones[:-1] & 1).astype(np.uint8)
    return par


def random_bus(rng: np.random.Generator, n: int, *, ad: bool, cbe: bool, par: bool, w64: bool,
               gnt: bool, busy: float = 0.5):
    """Random but bus-like clocks: control lines change in runs, FRAME# in transaction-like runs.

    Not legal PCI: the point is to reach every corner of the rules (odd terminations, glitches,
    IRDY# without FRAME#), where a fast engine and a literal reading could disagree."""
    def runs(p_assert: float, mean_run: float):
        out = np.ones(n, np.uint8)
        i = 0
        while i < n:
            length = int(rng.geometric(1.0 / mean_run))
            out[i:i + length] = 0 if rng.random() < p_assert else 1
            i += length
        return out

    sig = {"frame_n": runs(busy, 4), "irdy_n": runs(busy, 3), "trdy_n": runs(0.5, 2),
           "stop_n": runs(0.2, 2), "devsel_n": runs(0.6, 4)}
    if ad:
        sig["ad"] = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)
    if cbe:
        codes = rng.integers(0, 256, n, dtype=np.uint64)
        # make DACs (0xD) common enough to matter
        codes = np.where(rng.random(n) < 0.15, (codes & np.uint64(0xF0)) | np.uint64(0xD), codes)
        sig["cbe_n"] = codes
    if par and ad and cbe:
        p = even_par(sig["ad"], sig["cbe_n"])
        flip = rng.random(n) < 0.03
        sig["par"] = p ^ flip.astype(np.uint8)
        if w64:
            p64 = even_par(sig["ad"], sig["cbe_n"], hi=True)
            sig["par64"] = p64 ^ (rng.random(n) < 0.03).astype(np.uint8)
    if w64:
        sig["req64_n"] = runs(0.5, 3)
        sig["ack64_n"] = runs(0.5, 3)
    if gnt:
        sig["gnt_n"] = runs(0.5, 5)
    times = np.cumsum(rng.integers(29000, 31000, n)).astype(np.int64)
    return sig, times

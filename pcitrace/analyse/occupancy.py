"""Bus occupancy: busy clocks / all clocks, over any window.

A busy clock has FRAME# or IRDY# asserted (DOMAIN.md). Nearly all of them belong to a record;
IRDY# asserted outside any transaction (a protocol violation) is busy too: the decoder counts
those clocks on the bus and the split reports them as ``stray``.

A transaction ends when the bus goes idle (docs/records.md), so the busy clocks of a bus are
exactly the sum of its records' ``clocks``, and record i keeps the bus busy over
[start_ps, start_ps + clocks * T). Windows are answered with a cumulative busy-time function,
so any number of windows costs one searchsorted, never a loop over clocks.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcitrace.analyse.classify import CSR, DMA, OTHER


@dataclasses.dataclass(frozen=True)
class BusyTime:
    """Cumulative busy time of one bus; ``at(t)`` = busy ps in [origin, t)."""

    starts: np.ndarray   # float64 ps, sorted
    durations: np.ndarray  # float64 ps
    cumulative: np.ndarray  # float64 ps, cumsum of durations

    @classmethod
    def of(cls, records: np.ndarray, period_ps: float) -> "BusyTime":
        starts = records["start_ps"].astype(np.float64)
        order = np.argsort(starts, kind="stable")
        starts = starts[order]
        durations = records["clocks"][order].astype(np.float64) * period_ps
        return cls(starts, durations, np.cumsum(durations))

    def at(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        if self.starts.size == 0:
            return np.zeros(t.shape)
        k = np.searchsorted(self.starts, t, side="right")
        km1 = np.maximum(k - 1, 0)
        before = np.where(k > 0, self.cumulative[km1] - self.durations[km1], 0.0)
        partial = np.where(k > 0, np.clip(t - self.starts[km1], 0.0, self.durations[km1]), 0.0)
        return before + partial

    def between(self, t0, t1) -> np.ndarray:
        return self.at(t1) - self.at(t0)


@dataclasses.dataclass(frozen=True)
class OccupancySplit:
    busy_clocks: int
    total_clocks: int
    data: int
    wait: int
    address: int
    retry: int
    by_initiator: dict  # 'nic' / 'host' / 'other' -> busy clocks of transactions
    stray: int = 0      # busy clocks outside every transaction (IRDY# with no transaction)

    @property
    def occupancy(self) -> float:
        return self.busy_clocks / self.total_clocks if self.total_clocks else 0.0

    def fractions(self) -> dict:
        n = self.total_clocks or 1
        return {"data": self.data / n, "wait": self.wait / n, "address": self.address / n,
                "retry": self.retry / n, "stray": self.stray / n}

    def initiator_fractions(self) -> dict:
        n = self.total_clocks or 1
        return {k: v / n for k, v in self.by_initiator.items()}


def split_clocks(records: np.ndarray, classes: np.ndarray, total_clocks: int, mode: str = "pci",
                 bus_busy_clocks: int | None = None) -> OccupancySplit:
    """Busy clocks and what they did.

    data = completed data phases; address = the header clocks of every transaction that was not
    retried (address phase, + second DAC phase, + PCI-X attribute phase); retry = every clock of a
    transaction the target retried (it moved nothing); wait = the rest of the busy clocks
    (initiator / target wait states, DEVSEL# decode, STOP# termination clocks). The four parts add
    up to the busy clocks of the transactions; ``bus_busy_clocks`` (FRAME# or IRDY# counted on the
    bus, when the decoder gives it) adds the stray ones outside every transaction.

    By initiator: nic = NIC DMA (split completions excluded: the host bridge drives them), host =
    CSR accesses and split completions, other = the remaining transactions.
    """
    clocks = records["clocks"].astype(np.int64)
    retry = records["termination"] == "retry"
    busy = int(clocks.sum())
    r = int(clocks[retry].sum())
    data = int(records["data_phases"][~retry].sum())
    header = 1 + records["dac"].astype(np.int64) + (1 if mode == "pcix" else 0)
    address = int(np.minimum(header, clocks)[~retry].sum())
    wait = busy - r - data - address
    completion = records["command"] == "split_completion"
    nic = (classes == DMA) & ~completion
    host = (classes == CSR) | ((classes == DMA) & completion)
    by = {"nic": int(clocks[nic].sum()), "host": int(clocks[host].sum()),
          "other": int(clocks[classes == OTHER].sum())}
    stray = max(0, int(bus_busy_clocks) - busy) if bus_busy_clocks is not None else 0
    return OccupancySplit(busy + stray, int(total_clocks), data, wait, address, r, by, stray)


def rolling(busy: BusyTime, t0_ps: float, t1_ps: float, window_ps: float,
            step_ps: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Occupancy in windows [t, t + window) for t = t0, t0 + step, ... while t + window <= t1.

    Returns (window centre times in ps, occupancy 0..1). A capture shorter than one window
    gives a single window over the whole capture.
    """
    step_ps = step_ps or window_ps
    span = t1_ps - t0_ps
    if span <= 0:
        return np.zeros(0), np.zeros(0)
    if span <= window_ps:
        starts = np.array([t0_ps])
        window_ps = span
    else:
        starts = t0_ps + np.arange(int((span - window_ps) // step_ps) + 1) * step_ps
    occ = busy.between(starts, starts + window_ps) / window_ps
    return starts + window_ps / 2, occ

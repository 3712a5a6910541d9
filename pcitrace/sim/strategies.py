"""Hypothesis strategies: legal PCI / PCI-X bus activity with its truth, and activity with faults.

For the decoders' property tests::

    @given(captures_with_truth(mode="pcix", width=64))
    def test_x(ct):
        capture, profile, records, words = ct      # or ct.findings as well

``bus_activity`` draws lists of :class:`~pcitrace.sim.bus.TxnSpec` that obey the PCI rules
(every command, every termination, initiator/target waits, 64-bit, DAC, PCI-X attributes,
split responses followed by their split completions, fast back-to-back, several masters).
``faulty_activity`` adds faults (glitches, TRDY#/STOP# without DEVSEL#, IRDY# outside a
transaction, C/BE# changing in a wait, excessive initial latency, parity errors, DEVSEL# after the
subtractive decode slot) and says which findings they must cause.

Whole scenarios: ``nic_family_scenarios`` draws NICs of the family (issue 17: NIC-ended bursts,
retried CSR accesses, routine shapes, descriptor batching, a limited transmit ring, coalescence,
INTA#, other masters) on PCI 33/66 MHz 32/64-bit and PCI-X 133, with and without AD/C/BE#, the
probe and INTA#; ``family_scenario(n)`` gives scenario n of a fixed seed set from the same table.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from pcitrace.decode.facts import PCIX_DWORD_COMMANDS
from pcitrace.decode.records import FINDING_DTYPE
from pcitrace.sim.bus import CaptureTruth, RenderedBus, TxnSpec, crop, is_read, render, to_capture

PCI_CLOCKS = (33_333_333.0, 66_666_667.0)
PCIX_CLOCKS = (66_666_667.0, 100_000_000.0, 133_333_333.0)
ADB = 128   # PCI-X allowable disconnect boundary (bytes)

_MEMORY = {"pci": (0x6, 0x7, 0xC, 0xE, 0xF), "pcix": (0x6, 0x7, 0x8, 0x9, 0xE, 0xF)}


def _commands(mode: str) -> list[int]:
    return [c for c in range(16) if c != 0xD]


@st.composite
def txn_specs(draw, *, mode: str = "pci", width: int = 32, masters: int = 1, prev: TxnSpec | None = None,
              max_phases: int = 16, first: bool = False) -> TxnSpec:
    """One legal transaction (``prev``: the one before it on the bus, for fast back-to-back)."""
    pcix = mode == "pcix"
    cmd = draw(st.sampled_from(_commands(mode)))
    read = is_read(cmd, mode)
    memory = cmd in _MEMORY[mode]
    dword = pcix and cmd in PCIX_DWORD_COMMANDS
    wide = width == 64 and memory and not dword and draw(st.booleans())
    ack64 = draw(st.booleans()) if wide and draw(st.integers(0, 4)) == 0 else None  # mostly acknowledged
    bpp = 8 if (wide and ack64 is not False) else 4
    term = draw(st.sampled_from(_terminations(mode, cmd, read, dword)))
    P = _draw_phases(draw, term, 1 if dword else max_phases, bpp)
    address, dac = _draw_address(draw, term, memory, P, bpp)

    vmax = (1 << 64) - 1 if bpp == 8 else (1 << 32) - 1
    data = draw(st.lists(st.integers(0, vmax), min_size=P, max_size=P))
    bemax = 0xFF if bpp == 8 else 0xF
    if draw(st.booleans()):
        be = draw(st.lists(st.integers(0, bemax), min_size=P, max_size=P))
    else:
        be = None
    if dword and term in ("retry", "split_response", "master_abort", "target_abort") and P == 0:
        be = draw(st.integers(0, 0xF))        # the DWORD byte enables ride in the attribute phase

    iw, tw, stop_early = _draw_waits(draw, pcix, term, P)
    devsel = "none" if term == "master_abort" else draw(st.sampled_from(
        ["fast", "fast", "medium", "slow", "subtractive"]))
    master_done = draw(st.booleans()) if term in ("retry", "disconnect_with_data", "disconnect_without_data",
                                                  "target_abort", "master_abort") else None

    master = draw(st.integers(0, masters - 1))
    fb2b_ok = (not pcix and prev is not None and prev.master == master and not is_read(prev.command, mode))
    idle = draw(st.integers(0 if fb2b_ok else 1, 4))
    if first:
        idle = max(idle, 2)
    kw = _draw_pcix_fields(draw, term, dword, P, bpp) if pcix else {}
    return TxnSpec(command=cmd, address=address, data=data, byte_enables=be, dac=dac, req64=wide,
                   ack64=ack64, devsel=devsel, initiator_waits=iw, target_waits=tw, termination=term,
                   master_done=master_done, stop_phases=draw(st.integers(1, 3)), stop_early=stop_early,
                   idle_before=idle,
                   master=master, **kw)


def _terminations(mode: str, cmd: int, read: bool, dword: bool) -> list[str]:
    """The terminations command ``cmd`` may see, weighted by repetition."""
    if cmd == 0x1:   # special cycles are broadcast: nobody claims them
        return ["master_abort"]
    if mode != "pcix":
        return ["normal"] * 4 + ["retry", "disconnect_with_data", "disconnect_without_data", "target_abort",
                                 "master_abort"]
    terms = ["normal"] * 4 + ["retry", "target_abort", "master_abort"]
    if read or cmd in (0x3, 0xB):          # non-posted: may be split
        terms += ["split_response"] * 2
    if not dword:
        terms += ["disconnect_adb", "single_phase_disconnect", "disconnect_with_data",
                  "disconnect_without_data"]
    return terms


def _draw_phases(draw, term: str, maxp: int, bpp: int) -> int:
    """The completed data phases of a transaction ending in ``term`` (``bpp``: bytes a phase)."""
    if term in ("retry", "split_response", "master_abort"):
        return 0
    if term == "target_abort":
        return draw(st.integers(0, maxp))
    if term == "single_phase_disconnect":
        return 1
    if term == "disconnect_adb":
        return draw(st.integers(1, min(maxp, ADB // bpp)))
    return draw(st.integers(1, maxp))


def _draw_address(draw, term: str, memory: bool, P: int, bpp: int) -> tuple[int, bool | None]:
    """(address, dac): DAC for memory above 4 GiB (or forced with a low address now and then);
    a disconnect at the ADB ends its ``P`` phases on the boundary."""
    if term == "disconnect_adb":
        base = draw(st.integers(0, (1 << 25) - 1)) * ADB
        return base + ADB - P * bpp, None
    if memory and draw(st.integers(0, 4)) == 0:
        return draw(st.integers(1 << 32, (1 << 64) - 1)) & ~(bpp - 1), None
    address = draw(st.integers(0, (1 << 32) - 1)) & ~(bpp - 1 if memory else 0)
    return address, (True if memory and draw(st.integers(0, 9)) == 0 else None)


def _draw_waits(draw, pcix: bool, term: str, P: int) -> tuple[dict, dict, int]:
    """(initiator waits, target waits, stop_early) of a transaction ending in ``term`` after
    ``P`` completed phases, with a legal initial latency."""
    stop_slot = term in ("retry", "disconnect_without_data", "target_abort")
    slots = P + 1 if stop_slot else max(P, 1)
    if pcix:
        return {}, {0: draw(st.integers(0, 6))}, 0
    iw = draw(st.dictionaries(st.integers(0, slots - 1), st.integers(1, 3), max_size=3))
    tw = draw(st.dictionaries(st.integers(0, slots - 1), st.integers(1, 3), max_size=3))
    # keep the initial latency legal (<= 16 clocks to the first data phase)
    if iw.get(0, 0) + tw.get(0, 0) > 10:
        tw[0] = 0
    stop_early = 0
    if term in ("retry", "disconnect_with_data", "disconnect_without_data") and draw(st.booleans()):
        # the target stops while the initiator is still waiting (STOP# before IRDY#)
        final = slots - 1
        iw[final] = max(iw.get(final, 0), draw(st.integers(1, 3)))
        stop_early = draw(st.integers(1, iw[final]))
        if iw.get(0, 0) + tw.get(0, 0) > 10:
            iw[0] = 3
    return iw, tw, stop_early


def _draw_pcix_fields(draw, term: str, dword: bool, P: int, bpp: int) -> dict:
    """A PCI-X transaction's requester, tag, byte count and attribute bits."""
    bus_no, dev, fn = draw(st.integers(0, 255)), draw(st.integers(0, 31)), draw(st.integers(0, 7))
    if term in ("normal", "single_phase_disconnect") and not dword:
        bc = max(1, min(4096, P * bpp - draw(st.integers(0, 3))))
    else:
        bc = draw(st.integers(max(1, P * bpp), 4096)) if P * bpp <= 4096 else 4096
    return dict(requester=bus_no << 8 | dev << 3 | fn, tag=draw(st.integers(0, 31)),
                byte_count=bc, relaxed_ordering=draw(st.booleans()), no_snoop=draw(st.booleans()))


def split_completion(req: TxnSpec, data: list[int], *, master: int, idle: int = 1, wide: bool = False) -> TxnSpec:
    """The split completion answering ``req``: the completer writes the data back to the requester."""
    bus_no, devfn = req.requester >> 8, req.requester & 0xFF
    address = (req.tag & 0x1F) << 24 | bus_no << 16 | devfn << 8 | (req.address & 0x7F)
    return TxnSpec(command=0xC, address=address, data=data, req64=wide, devsel="fast",
                   target_waits={0: 0}, termination="normal", requester=req.requester, tag=req.tag,
                   byte_count=req.byte_count, relaxed_ordering=req.relaxed_ordering, idle_before=idle,
                   master=master)


@st.composite
def bus_activity(draw, *, mode: str = "pci", width: int = 32, with_ad: bool = True, masters: int = 1,
                 min_txns: int = 1, max_txns: int = 8, max_phases: int = 16) -> list[TxnSpec]:
    """A legal sequence of transactions on one bus (``with_ad`` is accepted for symmetry: the
    activity is the same, only what a capture shows of it differs)."""
    n = draw(st.integers(min_txns, max_txns))
    specs: list[TxnSpec] = []
    while len(specs) < n:
        s = draw(txn_specs(mode=mode, width=width, masters=masters, prev=specs[-1] if specs else None,
                           max_phases=max_phases, first=not specs))
        specs.append(s)
        if s.termination == "split_response" and len(specs) < n + 2 and draw(st.booleans()):
            # the completer answers later with a split completion carrying the data
            wide = width == 64 and s.req64 and draw(st.booleans())
            nw = max(1, min(max_phases, -(-int(s.byte_count or 4) // (8 if wide else 4))))
            data = draw(st.lists(st.integers(0, (1 << (64 if wide else 32)) - 1), min_size=nw, max_size=nw))
            specs.append(split_completion(s, data, master=draw(st.integers(0, masters - 1)),
                                          idle=draw(st.integers(1, 3)), wide=wide))
    return specs


@st.composite
def rendered_buses(draw, *, mode: str | None = None, width: int | None = None, with_ad: bool | None = None,
                   masters: int | None = None, max_txns: int = 8, bus: str = "pci") -> RenderedBus:
    mode = draw(st.sampled_from(["pci", "pcix"])) if mode is None else mode
    width = draw(st.sampled_from([32, 64])) if width is None else width
    with_ad = draw(st.booleans()) if with_ad is None else with_ad
    masters = draw(st.integers(1, 3)) if masters is None else masters
    specs = draw(bus_activity(mode=mode, width=width, with_ad=with_ad, masters=masters, max_txns=max_txns))
    clock = draw(st.sampled_from(PCIX_CLOCKS if mode == "pcix" else PCI_CLOCKS))
    gnt_master = draw(st.sampled_from([None] + list(range(masters))))
    names = tuple(["nic", "host", "other"][:masters])
    return render(specs, mode=mode, width=width, clock_hz=clock, bus=bus, masters=names,
                  gnt_master=gnt_master, with_ad=with_ad)


@st.composite
def cropped(draw, rb: RenderedBus) -> RenderedBus:
    """A window of ``rb`` as a capture started and stopped at arbitrary clocks would show it:
    a transaction under way at the start is not recorded, one busy at the end is truncated."""
    F = rb.signals["frame_n"] == 0
    I_ = rb.signals["irdy_n"] == 0
    starts = set(rb.start_clock.tolist())
    ok = [c for c in range(rb.clocks - 1) if not (F[c] and not I_[c]) or c in starts]
    start = draw(st.sampled_from(ok))
    stop = draw(st.integers(start + 1, rb.clocks))
    return crop(rb, start, stop)


@st.composite
def captures_with_truth(draw, *, mode: str | None = None, width: int | None = None,
                        with_ad: bool | None = None, timing: bool | None = None, bits: bool | None = None,
                        masters: int | None = None, max_txns: int = 8,
                        window: bool | None = False) -> CaptureTruth:
    """A capture (state or timing mode) of legal activity, its profile and its truth.

    Unpack as ``capture, profile, records, words = ct``; ``ct.findings`` is empty for legal
    activity. ``window`` (None = drawn): the capture starts and stops at arbitrary clocks, so
    records may be ``truncated`` and a transaction under way at the start is left out.
    """
    rb = draw(rendered_buses(mode=mode, width=width, with_ad=with_ad, masters=masters, max_txns=max_txns))
    window = draw(st.booleans()) if window is None else window
    if window:
        rb = draw(cropped(rb))
    timing = draw(st.booleans()) if timing is None else timing
    bits = draw(st.booleans()) if bits is None else bits
    spc = draw(st.integers(4, 8)) if timing else None
    return to_capture(rb, samples_per_clock=spc, bits=bits)


# -- faults ----------------------------------------------------------------------------------------

FAULT_KINDS = ("glitch", "trdy_without_devsel", "stop_without_devsel", "irdy_without_transaction",
               "byte_enables_changed_in_wait", "initial_latency", "parity_error", "frame_reasserted",
               "devsel_late")


@dataclasses.dataclass
class FaultyCapture:
    """A capture with injected faults: its truth (records, words, findings) and the faults."""

    truth: CaptureTruth
    faults: list[tuple[str, int]]     # (finding kind, time_ps) each fault must cause

    def __iter__(self):
        return iter(self.truth)


def _host(kind: str, mode: str, width: int) -> TxnSpec:
    """A transaction shaped so that ``kind`` can be injected into it without changing its record
    (except as documented in _inject)."""
    if kind in ("trdy_without_devsel", "stop_without_devsel"):
        return TxnSpec(0x7, 0x1000, [0x11111111, 0x22222222], devsel="slow", idle_before=2)
    if kind == "irdy_without_transaction":
        return TxnSpec(0x6, 0x2000, [0x33333333], devsel="fast", idle_before=4)
    if kind == "byte_enables_changed_in_wait":
        return TxnSpec(0x7, 0x3000, [0x44444444], byte_enables=[0x0], target_waits={0: 3}, idle_before=2)
    if kind == "initial_latency":
        return TxnSpec(0x6, 0x4000, [0x55555555], target_waits={0: 20}, idle_before=2)
    if kind == "parity_error":
        return TxnSpec(0x7, 0x5000, [0x66666666, 0x77777777], idle_before=2, req64=width == 64)
    if kind == "devsel_late":
        # subtractive decode (DEVSEL# on H+4) with target waits H+1..H+6, first data phase H+7:
        # DEVSEL# can be moved to H+5 or H+6 and those clocks stay target waits
        return TxnSpec(0x7, 0x8000, [0xDDDDDDDD, 0xEEEEEEEE], devsel="subtractive", target_waits={0: 6},
                       idle_before=2)
    if kind == "frame_reasserted":
        return TxnSpec(0x7, 0x7000, [0xBBBBBBBB], termination="abandoned", target_waits={1: 2}, idle_before=2)
    return TxnSpec(0x7, 0x6000, [0x88888888, 0x99999999, 0xAAAAAAAA], idle_before=2)   # glitch host


@st.composite
def faulty_activity(draw, *, mode: str = "pci", width: int = 32, timing: bool | None = None,
                    kinds: tuple[str, ...] | None = None, max_txns: int = 4) -> FaultyCapture:
    """Legal activity with one or more faults injected; ``.faults`` lists the findings they cause.

    Records stay exactly those of the truth (a fault that changes what a decoder must count
    - STOP# without DEVSEL# turns a wait into a termination clock - is reflected in it)."""
    timing = draw(st.booleans()) if timing is None else timing
    avail = [k for k in FAULT_KINDS if timing or k != "glitch"]
    if kinds is None:
        kinds = tuple(draw(st.lists(st.sampled_from(avail), min_size=1, max_size=3, unique=True)))
    specs = draw(bus_activity(mode=mode, width=width, max_txns=max_txns))
    index = _insert_hosts(draw, specs, kinds, mode, width)
    clock = draw(st.sampled_from(PCIX_CLOCKS if mode == "pcix" else PCI_CLOCKS))
    rb = render(specs, mode=mode, width=width, clock_hz=clock)
    times = rb.times_ps()
    per_clock: list[tuple[str, int]] = []
    glitches = []
    for k in kinds:
        _inject(draw, rb, k, index[k], mode, per_clock, glitches)
    for k in ("initial_latency", "parity_error", "frame_reasserted"):
        if k in kinds:
            t = index[k]
            for f in rb.findings:
                if f["kind"] == k and rb.records["start_ps"][t] <= f["time_ps"] <= rb.records["end_ps"][t]:
                    per_clock.append((k, int(np.searchsorted(times, f["time_ps"]))))
    extra = [(int(times[c]), rb.bus, k, f"injected {k}") for k, c in per_clock
             if k not in ("initial_latency", "parity_error", "frame_reasserted")]
    if extra:
        rb.findings = np.sort(np.concatenate((rb.findings, np.array(extra, FINDING_DTYPE))), order="time_ps")
    ct = to_capture(rb, samples_per_clock=draw(st.integers(6, 8)) if timing else None, glitches=glitches)
    faults = [(k, int(ct.findings["time_ps"][i])) for i, k in enumerate(ct.findings["kind"])]
    return FaultyCapture(ct, [(str(k), t) for k, t in faults])


def _insert_hosts(draw, specs: list[TxnSpec], kinds, mode: str, width: int) -> dict[str, int]:
    """Insert each fault kind's host transaction into ``specs`` at a drawn place; returns kind ->
    its host's index."""
    hosts = {}
    for k in kinds:
        pos = draw(st.integers(0, len(specs)))
        h = _host(k, mode, width)
        if k == "parity_error":
            h.parity_error = draw(st.sampled_from([-1, 0, 1]))
            if width == 64 and h.parity_error >= 0 and draw(st.booleans()):
                h.parity_lane = "par64"
        specs.insert(pos, h)
        hosts[k] = h
    if "frame_reasserted" in hosts:
        # The transaction after the abandoned one cuts in while its final phase is pending,
        # whatever its idle clocks say: it must be a plain one, not another fault's host.
        i = next(i for i, sp in enumerate(specs) if sp is hosts["frame_reasserted"])
        if i + 1 == len(specs) or any(specs[i + 1] is h for h in hosts.values()):
            specs.insert(i + 1, TxnSpec(0x6, 0x7100, [0xCCCCCCCC]))
    index = {k: next(i for i, s in enumerate(specs) if s is h) for k, h in hosts.items()}
    host_at = set(index.values())
    specs[0] = dataclasses.replace(specs[0], idle_before=max(2, specs[0].idle_before))
    for i in range(1, len(specs)):   # a host's shape must not depend on a fast back-to-back neighbour
        if specs[i].idle_before == 0 and (i in host_at or i - 1 in host_at):
            specs[i] = dataclasses.replace(specs[i], idle_before=1)
    return index


def _inject(draw, rb: RenderedBus, k: str, t: int, mode: str, per_clock: list, glitches: list) -> None:
    """Fault ``k`` into the signals of host transaction ``t`` (the truth adjusted where the fault
    changes what a decoder counts); appends its (kind, clock) findings to ``per_clock`` or the
    glitch to ``glitches``. The renderer's own faults (initial latency, parity, FRAME#
    reasserted) need nothing here."""
    sig = rb.signals
    A, E = int(rb.start_clock[t]), int(rb.end_clock[t])
    H = A + (1 if mode == "pcix" else 0)
    if k == "trdy_without_devsel":
        sig["trdy_n"][H + 1] = 0          # a target wait (IRDY#, no DEVSEL#) with TRDY#: still a wait
        per_clock.append((k, H + 1))
    elif k == "stop_without_devsel":
        sig["stop_n"][H + 1] = 0          # STOP# makes the wait a termination clock
        rb.records["target_waits"][t] -= 1
        per_clock.append((k, H + 1))
    elif k == "irdy_without_transaction":
        sig["irdy_n"][A - 2] = 0          # idle clocks on both sides
        per_clock.append((k, A - 2))
    elif k == "byte_enables_changed_in_wait":
        c = H + 2                          # waits H+1..H+3, data phase H+4
        sig["cbe_n"][c] ^= 0x1
        sig["par"][c + 1] ^= 1             # PAR stays right for the changed clock
        per_clock.append((k, c))           # changed ...
        per_clock.append((k, c + 1))       # ... and changed back, both within the wait
    elif k == "devsel_late":
        late = draw(st.integers(5, 6))
        assert rb.records["devsel"][t] == "subtractive" and int(rb.devsel_clock[t]) == H + 4
        sig["devsel_n"][H + 4:H + late] = 1   # claimed after the slot where the master aborts
        rb.devsel_clock[t] = H + late
        per_clock.append((k, H + late))
    elif k == "glitch":
        line = draw(st.sampled_from(["frame_n", "irdy_n", "trdy_n", "devsel_n", "stop_n"]))
        glitches.append((rb.bus, line, draw(st.integers(A, E))))


# -- the NIC family: whole scenarios ------------------------------------------------------

# The buses a family scenario runs on (kind, width, clock MHz): conventional PCI 32/64-bit at
# 33/66 MHz and PCI-X 64-bit at 133 MHz.
FAMILY_BUSES = (("pci", 32, 33), ("pci", 64, 33), ("pci", 32, 66), ("pci", 64, 66), ("pcix", 64, 133))
# Every NIC setting a family scenario draws, with its choices: the seed papers' values among them
# (PRO/1000 and SysKonnect: 256 / 512-byte bursts, many STOP# retries on the CSRs, coalescence
# 64 x 1.024 us). Settings only conventional PCI has come from FAMILY_PCI_NIC.
FAMILY_NIC = {
    "max_burst_bytes": (0, 0, 128, 256, 512),
    "csr_retries": (0, 0, 1, 3, 8),
    "csr_retry_path": ("both", "send", "irq"),
    "send_csr_reads": (0, 1, 2),
    "send_csr_writes": (1, 2, 3),
    "irq_csr_reads": (0, 1, 2, 4),
    "irq_csr_writes": (0, 1, 2),
    "irq_order": ("reads_first", "writes_first", "interleaved"),
    "icr_read": ("first", "last"),
    "tx_desc_every": (1, 1, 4),
    "rx_desc_every": (1, 4, 8),
    "tx_ring": (0, 4, 16),
    "coalesce_packets": (1, 1, 4),
    "coalesce_us": (0.0, 0.0, 20.0, 65.536),
    "desc_bytes": (16, 16, 0),
    "status_bytes": (16, 16, 4, 0),
}
FAMILY_PCI_NIC = {
    "latency_timer_clocks": (0, 0, 32, 64),
    "read_command": ("mem_read_multiple", "mem_read_line", "by_length"),
    "write_command": ("mem_write", "mem_write_invalidate"),
    "csr_disconnect": (False, False, True),
}
FAMILY_HOST = {
    "posted_write_gap_clocks": (0, 0, 2),
    "csr_gap_clocks": (6, 18),
    "irq_latency_us": (2.0, 6.0),
    "read_initial_waits": (2, 9),
}
FAMILY_TRAFFIC = {
    "frame_bytes": (64, 512, 1000, 1400, 1472),
    "spacing_us": (4.0, 11.0, 20.0),
    "pattern": ("stream", "stream", "request_response"),
}
FAMILY_TOP = {
    "duration_us": (40.0, 80.0, 150.0, 300.0),
    "mode": ("state", "timing"),
    "ad": (True, False),
    "gnt": (True, False),
    "inta": (True, False),
    "probe": (True, False),
    "other": (False, True),
}
FAMILY_SEED = 17          # family_scenario(n)'s seed set: the draws of Generator([FAMILY_SEED, n])


def family_scenario_dict(pick) -> dict:
    """A scenario (as a dict for scenario_from_dict) of the NIC family, each setting taken by
    ``pick(name, choices)``: the same draws for hypothesis and for a plain seeded generator."""
    top = {k: pick(k, v) for k, v in FAMILY_TOP.items()}
    kind, width, mhz = pick("bus", FAMILY_BUSES)
    nic = {k: pick(k, v) for k, v in FAMILY_NIC.items()}
    if kind == "pci":
        nic.update({k: pick(k, v) for k, v in FAMILY_PCI_NIC.items()})
    host = {k: pick(k, v) for k, v in FAMILY_HOST.items()}
    traffic = {k: pick(k, v) for k, v in FAMILY_TRAFFIC.items()}
    traffic["response_bytes"] = traffic["frame_bytes"]
    buses = []
    for name, pc in (("send", "a"), ("recv", "b")):
        bus = {"name": name, "pc": pc, "kind": kind, "width": width, "clock_mhz": mhz,
               "nic": dict(nic), "host": dict(host)}
        if top["other"]:
            bus["other"] = [{"rate_per_us": 0.05, "bytes": 128, "command": "mem_write"}]
        buses.append(bus)
    return {"name": "family", "seed": pick("seed", range(1 << 16)), "duration_us": top["duration_us"],
            "mode": top["mode"], "ad": top["ad"], "gnt": top["gnt"], "inta": top["inta"],
            "traffic": traffic, "link": {"probe": top["probe"], "rate_gbps": 10 if kind == "pcix" else 1},
            "bus": buses}


def family_scenario(n: int):
    """Scenario ``n`` of the NIC family's fixed seed set (for a bench or CI loop without
    hypothesis): the same n gives the same scenario."""
    from pcitrace.sim.scenario import scenario_from_dict

    rng = np.random.default_rng([FAMILY_SEED, n])
    sc = scenario_from_dict(family_scenario_dict(lambda _name, choices: choices[int(rng.integers(len(choices)))]))
    sc.name = f"family_{n}"
    return sc


@st.composite
def nic_family_scenarios(draw):
    """A random scenario of the NIC family (:func:`family_scenario_dict`): PCI 33/66 MHz 32/64-bit
    or PCI-X 133, with and without AD/C/BE#, the link probe, INTA#, GNT#, other masters; tens to
    a few hundred microseconds, so that hundreds simulate in a test."""
    from pcitrace.sim.scenario import scenario_from_dict

    return scenario_from_dict(family_scenario_dict(lambda _name, choices: draw(st.sampled_from(choices))))

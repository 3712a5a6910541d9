"""Cross-checks and ambiguity: where the capture's evidence does not decide, say so.

Every check gives plain sentences (warnings) naming the evidence, never a silent guess:

- ``profile_warnings``: the profile against the capture - a PCI-X bus whose memory writes
  carry no attribute phase (the byte count an attribute phase would give does not match the
  bytes moved), a 64-bit bus on which no transaction moved 64 bits (REQ64#/ACK64# never both
  asserted).
- ``direction_warnings`` (wire.py): a link whose buses look the wrong way round.
- ``ambiguous_packets``: per packet, whether its grouping could not be told from this capture
  (see ``ambiguity_reasons``), with the bus's warning lines.
"""

from __future__ import annotations

import numpy as np

from pcitrace.analyse.dma import DATA
from pcitrace.analyse.packets import host_interrupt_latency

# A PCI-X capture decoded right shows the attribute phase's byte count on (almost) every
# normally ended memory write; one decoded from a conventional PCI bus reads the first data
# word there instead.
PCIX_BYTE_COUNT_AGREEMENT = 0.5
CLOCK_DISAGREEMENT = 0.03      # a profile clock this far from the measured one is warned about (66 vs 66.67 MHz is 1 %)
# Bursts of one size the NIC ended itself, followed at once by the next burst: enough of them
# that the NIC (not the target) cuts its buffers into bursts of that size.
NIC_ENDED_SHARE = 0.2
NIC_WENT_ON = 0.8
# Frame data is most of what a NIC moves: packets holding less than this share of the DMA bytes
# were not found as the buffers they are.
DATA_SHARE = 0.5
NO_PACKET_BURSTS = 3


def profile_warnings(decoded) -> list[str]:
    """The profile's bus clock, mode and width against what the decoded capture shows."""
    out = []
    r = decoded.records
    for name, s in decoded.buses.items():
        if s.clock_hz and s.measured_clock_hz and abs(s.clock_hz / s.measured_clock_hz - 1) > CLOCK_DISAGREEMENT:
            out.append(f"bus {name}: the profile says a {s.clock_hz / 1e6:.6g} MHz clock but the capture's clock "
                       f"runs at {s.measured_clock_hz / 1e6:.6g} MHz; every time-based figure uses the profile's: "
                       "correct clock_hz or leave it out")
        if s.kind not in ("pci", "pcix") or not len(r):
            continue
        mine = r[r["bus"] == name]
        if s.kind == "pcix" and s.have_ad:
            w = mine[(mine["command"] == "mem_write") & (mine["termination"] == "normal")]
            if len(w) >= 8:
                agree = float((w["byte_count"] == w["bytes"]).mean())
                if agree < PCIX_BYTE_COUNT_AGREEMENT:
                    out.append(f"bus {name}: the profile says PCI-X but the capture shows no attribute phases: "
                               f"the attribute byte count matches the bytes moved on {agree:.0%} of "
                               f"{len(w)} memory writes (PCI-X: all); decode it as conventional PCI (kind = \"pci\")")
        if s.width == 64 and len(mine) >= 8 and not (mine["width"] == 64).any():
            out.append(f"bus {name}: the profile says 64-bit but none of its {len(mine)} transactions moved "
                       "64 bits (REQ64# and ACK64# never both asserted): check the bus width")
    return out


def nic_ended_size(bursts: np.ndarray, resumed: np.ndarray, max_control_bytes: int) -> int:
    """The burst size at which the NIC ends its own bursts (0 = none seen): the most common
    size of master-ended bursts larger than a control transfer that the NIC followed at once
    with another such burst, when the NIC went on at once (with the buffer's next burst or its
    last small piece) after nearly every burst of that size, and those are a large enough share
    of its bursts (a buffer that just fits one burst ends there now and then; frames of one
    size sent back to back under a backlog do not always follow at once; a whole frame followed
    by its write-back is never followed by a large burst at once)."""
    own = (bursts["termination"] == "normal") & (bursts["bytes"] > max_control_bytes)
    # ... with another large burst (a status write-back may follow a whole frame at once)
    next_large = np.zeros(len(bursts), bool)
    d = bursts["direction"]
    for dv in np.unique(d).tolist():
        sel = np.flatnonzero(d == dv)
        next_large[sel[:-1]] = bursts["bytes"][sel[1:]] > max_control_bytes
    went_on = own & resumed & next_large
    if went_on.sum() < 4:
        return 0
    sizes, counts = np.unique(bursts["bytes"][went_on], return_counts=True)
    k = int(np.argmax(counts))
    size = int(sizes[k])
    of_size = own & (bursts["bytes"] == size)
    # the NIC went on at once after nearly every burst of that size (with the buffer's next
    # burst, or its last small piece)
    went = int((of_size & resumed).sum())
    if went >= NIC_ENDED_SHARE * len(bursts) and went >= NIC_WENT_ON * of_size.sum():
        return size
    return 0


def interrupt_lag_unknown(packets: np.ndarray, groups: np.ndarray) -> bool:
    """Whether the packets come faster than the host answers their interrupts, so that which
    routine serves which packet is a guess (host_interrupt_latency: more than one plausible
    latency)."""
    inter = groups["start_ps"][~groups["setup"]] if len(groups) else np.zeros(0, np.int64)
    return bool(len(inter) and len(packets) and host_interrupt_latency(inter, packets["last_dma_end_ps"])[1])


def ambiguous_packets(packets: np.ndarray, transfers: np.ndarray, bursts: np.ndarray, groups: np.ndarray, *,
                      have_ad: bool, gnt: bool, nic_burst: int, bus: str) -> tuple[np.ndarray, list[str]]:
    """(per packet whether it is ambiguous, the bus's warnings)."""
    amb = np.zeros(len(packets), bool)
    warnings = []
    if not len(packets):
        moved = int(bursts["bytes"].sum())
        if len(bursts) >= NO_PACKET_BURSTS:
            warnings.append(f"bus {bus}: no packet found although the NIC's DMA moved {moved} bytes in "
                            f"{len(bursts)} bursts: every burst was taken for a descriptor fetch or write-back "
                            "(bursts the NIC ends at a cache line or less?)")
        return amb, warnings
    if interrupt_lag_unknown(packets, groups):
        amb[:] = True
        warnings.append(f"bus {bus}: packets come faster than the host answers their interrupts and the times "
                        "from each packet to the routines fit more than one interrupt latency (1-10 us): which "
                        f"routine served which packet is a guess without INTA#, all {len(packets)} packets "
                        "counted ambiguous")
    data_t = np.flatnonzero(transfers["kind"] == DATA)
    moved = int(bursts["bytes"].sum())
    in_packets = int(packets["data_bytes"].sum())
    if moved and in_packets < DATA_SHARE * moved:
        amb[:] = True
        warnings.append(f"bus {bus}: the packets hold {in_packets} of the {moved} bytes the NIC's DMA moved "
                        f"({in_packets / moved:.0%}): most of its bursts were taken for descriptor fetches and "
                        "write-backs (bursts the NIC ends at a cache line or less?), the packet count is "
                        f"doubtful, all {len(packets)} packets counted ambiguous")
    if nic_burst and not have_ad:
        # Without AD nothing shows where one buffer ends and the next begins when the NIC
        # itself ends its bursts: a packet ending on a burst of that size may go on.
        last_bytes = np.zeros(len(transfers), np.int64)
        order = np.argsort(bursts["start_ps"], kind="stable")
        last_bytes[bursts["transfer"][order]] = bursts["bytes"][order]
        amb |= last_bytes[data_t][: len(packets)] == nic_burst
        warnings.append(f"bus {bus}: the NIC ends its own bursts at {nic_burst} bytes and goes on at once; "
                        "without AD the buffers are told apart by the pause between them only, "
                        f"{int(amb.sum())} packets ambiguous")
    if not gnt:
        # Without REQ#/GNT# another master's DMA looks like the NIC's: a data transfer that no
        # descriptor fetch, write-back or send setup ties to the NIC may be someone else's.
        tied = (np.isfinite(packets["descriptor_fetch_ps"]) | np.isfinite(packets["status_writeback_ps"])
                | (packets["setup_group"] >= 0))
        loose = ~tied
        if loose.any() and tied.any():
            amb |= loose
            warnings.append(f"bus {bus}: no GNT# captured and {int(loose.sum())} packets have no descriptor fetch, "
                            "write-back or send setup tying them to the NIC: they may be another master's DMA "
                            "(counted ambiguous; capture the NIC's GNT#)")
    return amb, warnings


def capture_warnings(decoded, analysis, chains: dict) -> list[str]:
    """Every warning of one capture: the profile against the capture, each bus's ambiguity,
    each link's direction."""
    out = profile_warnings(decoded) if decoded is not None else []
    for b in analysis.buses.values():
        out += b.warnings
    for c in chains.values():
        out += c.warnings
    return out


__all__ = ["profile_warnings", "ambiguous_packets", "nic_ended_size", "capture_warnings"]

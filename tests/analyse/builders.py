"""Hand-built bus timelines with known answers (records per docs/records.md, no decoder involved)."""

from __future__ import annotations

from pcitrace.records import BusSummary
from pcitrace.decode.records import records_from_dicts

T_PS = 20_000          # 50 MHz: every clock is exactly 20 ns, so expected times are exact
CLOCK_HZ = 50e6
BAR = (0xF000_0000, 0xF001_FFFF)
DESC = 0x1000_0000
BUF = 0x2000_0000


def txn(clock: int, clocks: int, *, command: str, address: int = 0, data_phases: int = 1,
        nbytes: int | None = None, gnt: int = -1, termination: str = "normal", target_waits: int | None = None,
        width: int = 64, bus: str = "pci") -> dict:
    nbytes = data_phases * width // 8 if nbytes is None else nbytes
    if target_waits is None:
        target_waits = max(clocks - 1 - data_phases, 0)
    return dict(bus=bus, start_ps=clock * T_PS, end_ps=(clock + clocks - 1) * T_PS, clocks=clocks,
                command=command, address=address, data_phases=data_phases, bytes=nbytes,
                devsel="fast", termination=termination, initiator_waits=0, target_waits=target_waits,
                width=width, gnt=gnt, tag=-1, requester=-1, byte_count=-1, data_index=0)


SPACING = 550           # clocks between packets (11 us)
PACKETS = 12
INTERRUPT_EVERY = 4


def send_stream(*, with_gnt=True, with_ad=True, packets=PACKETS, pause_after: int | None = None):
    """A transmit stream: per packet 3 CSR writes, a descriptor fetch, the frame read in two
    bursts, a status write-back; an interrupt CSR group after every 4th packet."""
    rows = []
    c = 100
    for i in range(packets):
        g = 0 if with_gnt else -1
        cmd_w, cmd_r = ("mem_write", "mem_read") if with_ad else ("unknown", "unknown")
        a = (lambda x: x) if with_ad else (lambda x: 0)
        for k in range(3):
            rows.append(txn(c + 10 * k, 4, command=cmd_w, address=a(BAR[0] + 0x3818 + 4 * k), nbytes=4,
                            gnt=g))
        gd = 1 if with_gnt else -1
        rows.append(txn(c + 30, 5, command=cmd_r, address=a(DESC + 16 * i), data_phases=2, gnt=gd))
        buf = BUF + 0x1000 * i
        rows.append(txn(c + 60, 92, command=cmd_r, address=a(buf), data_phases=88, gnt=gd,
                        termination="disconnect_with_data"))
        rows.append(txn(c + 155, 91, command=cmd_r, address=a(buf + 704), data_phases=87, gnt=gd))
        rows.append(txn(c + 300, 4, command=cmd_w, address=a(DESC + 16 * i + 8), data_phases=2, gnt=gd))
        if i % INTERRUPT_EVERY == INTERRUPT_EVERY - 1:
            # The interrupt service routine, 9.9 us after the status write-back: during the
            # next packet, between its data DMA and its write-back.
            rows.append(txn(c + 800, 4, command="mem_read" if with_ad else "unknown",
                            address=a(BAR[0] + 0xC0), nbytes=4, gnt=g))
            rows.append(txn(c + 810, 4, command=cmd_w, address=a(BAR[0] + 0xD0), nbytes=4, gnt=g))
        c += SPACING
        if pause_after is not None and i == pause_after:
            c += 10 * SPACING
    return records_from_dicts(rows)


def facts(total_clocks: int, width: int = 64, name: str = "pci") -> BusSummary:
    return BusSummary(name=name, width=width, clock_hz=CLOCK_HZ, clocks=total_clocks, start_ps=0,
                    end_ps=(total_clocks - 1) * T_PS)

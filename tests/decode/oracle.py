"""A slow, literal, clock-by-clock reading of docs/records.md, used only to check the fast engine.

It is deliberately written in the opposite style to pcitrace.decode.engine (a Python loop over
clocks with explicit state, no numpy tricks), so the two share no mistakes of technique.
"""

from __future__ import annotations

from pcitrace.decode import facts
from pcitrace.decode.records import records_from_dicts


def _bits(x: int) -> int:
    return bin(x).count("1")


def oracle_decode(sig: dict, times: list[int], *, mode: str = "pci", width: int = 32, bus: str = "pci"):
    """Return (records array, list of word tuples (record, time, value, be), list of parity times)."""
    n = len(times)
    g = {k: [int(v) for v in sig[k]] for k in sig}
    A = lambda name, c: g[name][c] == 0  # noqa: E731  asserted (active low)
    has_ad, has_cbe, has_par = "ad" in g, "cbe_n" in g, "par" in g
    pcix = mode == "pcix"

    starts = []
    for c in range(n):
        f = A("frame_n", c)
        if c == 0:
            if f and not A("irdy_n", 0):
                starts.append(0)
        elif f and not A("frame_n", c - 1):
            starts.append(c)

    recs, words, parity_times = [], [], []
    for si, s in enumerate(starts):
        # end: the first later clock that is idle or a new address phase
        end, truncated = None, True
        for c in range(s + 1, n):
            idle = not A("frame_n", c) and not A("irdy_n", c)
            if idle or c in starts[si + 1:si + 2]:
                end, truncated = c - 1, False
                break
        if truncated:
            end = n - 1
        cb = lambda c: g["cbe_n"][c] if has_cbe and c < n else None  # noqa: E731
        dac = has_cbe and (cb(s) & 0xF) == 0xD and s + 1 < n
        H = s + (1 if dac else 0) + (1 if pcix else 0)
        code = cb(s + 1 if dac else s) & 0xF if has_cbe else None
        table = facts.PCIX_COMMANDS if pcix else facts.PCI_COMMANDS
        command = table[code][0] if code is not None else facts.COMMAND_UNKNOWN
        address = 0
        if has_ad:
            address = g["ad"][s] & 0xFFFFFFFF
            if dac:
                address |= (g["ad"][s + 1] & 0xFFFFFFFF) << 32

        first_d = None
        dps = iw = tw = 0
        dp_clocks = []
        for c in range(H + 1, end + 1):
            I, T, S, D = A("irdy_n", c), A("trdy_n", c), A("stop_n", c), A("devsel_n", c)
            if D and first_d is None:
                first_d = c
            if I and T and D:
                dps += 1
                dp_clocks.append(c)
            elif S:
                pass
            elif not I:
                iw += 1
            else:
                tw += 1
        if "req64_n" in g and "ack64_n" in g:
            w = 64 if (A("req64_n", s) and first_d is not None and A("ack64_n", first_d)) else 32
        else:
            w = width
        nbytes = 0
        for c in dp_clocks:
            if has_cbe:
                mask = 0xFF if w == 64 else 0xF
                nbytes += (8 if w == 64 else 4) - _bits(g["cbe_n"][c] & mask)
            else:
                nbytes += w // 8
        if first_d is None:
            devsel = "none"
        else:
            devsel = facts.DEVSEL_SPEEDS[min(first_d - H, 4) - 1]

        def any_clock(pred, lo, hi):
            return any(pred(c) for c in range(lo, hi + 1))

        if truncated:
            term = "truncated"
        elif first_d is None:
            term = "master_abort"
        elif pcix and any_clock(lambda c: A("stop_n", c) and A("trdy_n", c) and not A("devsel_n", c), H + 1, end):
            term = "split_response"
        elif any_clock(lambda c: A("stop_n", c) and not A("devsel_n", c), first_d + 1, end):
            term = "target_abort"
        else:
            k = next((c for c in range(H + 1, end + 1) if A("stop_n", c) and A("devsel_n", c)), None)
            if k is None:
                term = "normal"
            elif A("trdy_n", k) and A("irdy_n", k):
                term = "disconnect_with_data"
            elif not any(c < k for c in dp_clocks):
                term = "retry"
            else:
                term = "disconnect_without_data"

        perr = False
        if has_ad and has_cbe and has_par:
            def bad(c, hi=False):
                if c + 1 >= n:
                    return False
                if hi:
                    if "par64" not in g:
                        return False
                    return (_bits(g["ad"][c] >> 32) + _bits((g["cbe_n"][c] >> 4) & 0xF) + g["par64"][c + 1]) % 2 == 1
                return (_bits(g["ad"][c] & 0xFFFFFFFF) + _bits(g["cbe_n"][c] & 0xF) + g["par"][c + 1]) % 2 == 1
            checks = [(s, False)] + ([(s + 1, False)] if dac else [])
            for c in dp_clocks:
                checks.append((c, False))
                if w == 64:
                    checks.append((c, True))
            for c, hi in checks:
                if bad(c, hi):
                    perr = True
                    parity_times.append(times[c])

        gnt = -1
        if "gnt_n" in g:
            gnt = 1 if s >= 1 and A("gnt_n", s - 1) else 0
        tag = requester = byte_count = -1
        ro = ns = False
        a = s + (1 if dac else 0) + 1
        if pcix and has_ad and has_cbe and a < n:
            ad_a, cbe_a = g["ad"][a], g["cbe_n"][a] & 0xF
            tag = (ad_a >> 24) & 0x1F
            requester = ((ad_a >> 16) & 0xFF) << 8 | ((ad_a >> 11) & 0x1F) << 3 | ((ad_a >> 8) & 0x7)
            ns, ro = bool(ad_a >> 29 & 1), bool(ad_a >> 30 & 1)
            if code in facts.PCIX_DWORD_COMMANDS:
                byte_count = 4 - _bits(cbe_a)
            else:
                byte_count = (ad_a & 0xFF) | (cbe_a << 8) or 4096
        rec_index = len(recs)
        data_index = len(words)
        for c in dp_clocks:
            value = g["ad"][c] if has_ad else 0
            be = g["cbe_n"][c] if has_cbe else 0
            if w != 64:
                value &= 0xFFFFFFFF
                be &= 0xF
            else:
                be &= 0xFF
            words.append((rec_index, times[c], value, be))
        recs.append(dict(bus=bus, start_ps=times[s], end_ps=times[end], clocks=end - s + 1,
                         command=command, dac=dac, address=address, data_phases=dps, bytes=nbytes,
                         devsel=devsel, termination=term, initiator_waits=iw, target_waits=tw,
                         parity_error=perr, width=w, gnt=gnt, tag=tag, requester=requester,
                         byte_count=byte_count, relaxed_ordering=ro, no_snoop=ns, data_index=data_index))
    return records_from_dicts(recs), words, sorted(parity_times)

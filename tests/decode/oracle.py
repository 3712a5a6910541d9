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
    phases_before = 0
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
        dac = has_cbe and (cb(s) & 0xF) == 0xD
        # header clocks are consumed one by one while the transaction lasts
        header = (["dac"] if dac else []) + (["attr"] if pcix else [])
        H = s
        code = cb(s) & 0xF if has_cbe else None
        address = g["ad"][s] & 0xFFFFFFFF if has_ad else 0
        attr_clock = None
        checks = [(s, False)]
        for c in range(s + 1, min(s + 1 + len(header), end + 1)):
            what = header[c - s - 1]
            H = c
            if what == "dac":
                code = cb(c) & 0xF
                if has_ad:
                    address |= (g["ad"][c] & 0xFFFFFFFF) << 32
            else:
                attr_clock = c
            checks.append((c, False))
        table = facts.PCIX_COMMANDS if pcix else facts.PCI_COMMANDS
        command = table[code][0] if code is not None else facts.COMMAND_UNKNOWN

        first_d = None
        dps = iw = tw = 0
        dp_clocks = []
        stop_k = None
        with_stop = split = abort = False
        for c in range(H + 1, end + 1):
            I, T, S, D = A("irdy_n", c), A("trdy_n", c), A("stop_n", c), A("devsel_n", c)
            seen = first_d is not None          # DEVSEL# on an earlier data clock
            split_clk = pcix and T and not D and seen
            if D and first_d is None:
                first_d = c
            if I and T and D:
                dps += 1
                dp_clocks.append(c)
                with_stop = with_stop or S
            elif S or split_clk:
                pass
            elif not I:
                iw += 1
            else:
                tw += 1
            if S and D and stop_k is None:
                stop_k = dps - (1 if (I and T and D) else 0)
            split = split or split_clk
            abort = abort or (S and not D and seen)
        if "req64_n" in g and "ack64_n" in g:
            w = 64 if (A("req64_n", s) and first_d is not None and A("ack64_n", first_d)) else 32
        else:
            w = width
        nbytes = 0
        for c in dp_clocks:
            if has_cbe:
                lo4 = 4 - _bits(g["cbe_n"][c] & 0xF)
                nbytes += lo4 + (4 - _bits((g["cbe_n"][c] >> 4) & 0xF) if w == 64 else 0)
            else:
                nbytes += w // 8
        if first_d is None:
            devsel = "none"
        else:
            devsel = facts.DEVSEL_SPEEDS[min(first_d - H, 4) - 1]

        if truncated:
            term = "truncated"
        elif first_d is None:
            term = "master_abort"
        elif split:
            term = "split_response"
        elif abort:
            term = "target_abort"
        elif stop_k is None:
            term = "normal"
        elif with_stop:
            term = "disconnect_with_data"
        elif stop_k == 0:
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
            for c in dp_clocks:
                checks.append((c, True))
            for c, data in checks:
                hit = bad(c) or (data and w == 64 and bad(c, True))
                if hit:
                    perr = True
                    parity_times.append(times[c])

        gnt = -1
        if "gnt_n" in g:
            gnt = 1 if s >= 1 and A("gnt_n", s - 1) else 0
        tag = requester = byte_count = -1
        ro = ns = False
        if attr_clock is not None and has_ad and has_cbe:
            ad_a, cbe_a = g["ad"][attr_clock], g["cbe_n"][attr_clock] & 0xF
            src = g["ad"][s] if code == 0xC else ad_a      # split completion: from the address
            tag = (src >> 24) & 0x1F
            requester = ((src >> 16) & 0xFF) << 8 | ((src >> 11) & 0x1F) << 3 | ((src >> 8) & 0x7)
            ro = bool(src >> 30 & 1)
            ns = bool(ad_a >> 29 & 1) and code != 0xC
            if code in facts.PCIX_DWORD_COMMANDS:
                byte_count = 4 - _bits(cbe_a)
            else:
                byte_count = (ad_a & 0xFF) | (cbe_a << 8) or 4096
        rec_index = len(recs)
        data_index = phases_before
        phases_before += dps
        for c in dp_clocks:   # a word per data phase, also without AD and C/BE# (time only)
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

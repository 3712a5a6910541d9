"""Align a capture's packet series with a test run's per-packet series.

The two series come from different clocks (the logic analyser's and the test hosts'), may each
miss packets (the analyser window is short; the receiver loses packets) and may be reordered.
Alignment therefore works on the *shape* of the series: a constant offset (and a small clock
rate difference) that makes the most packets coincide. A regular stream is periodic, so several
offsets one spacing apart fit almost equally well; the right one is the one where the
irregularities (send-time jitter, loss gaps, pauses) coincide too, i.e. the smallest residuals.

When both series carry sequence numbers (payload visible in the capture, UDPmon packet numbers
in the run) the pairs come from the numbers instead, with the time fit as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pcitrace.errors import PcitraceError


@dataclass
class Alignment:
    """Result of :func:`align`. Indices refer to the arrays given to it.

    capture time = run time * (1 + drift_ppm * 1e-6) + offset_ps, for the matched pairs.
    """
    method: str                    # 'interval' or 'sequence'
    offset_ps: int
    drift_ppm: float
    capture_index: np.ndarray      # int64, matched pairs (capture side), in capture time order
    run_index: np.ndarray          # int64, matched pairs (run side)
    residual_ps: np.ndarray        # int64, capture time - predicted capture time, per pair
    capture_unmatched: np.ndarray  # int64 capture indices with no run packet
    run_unmatched: np.ndarray      # int64 run indices with no capture packet (inside the capture window)
    run_outside: np.ndarray        # int64 run indices outside the capture's time window
    reordered: np.ndarray          # int64 capture indices that arrived after a later-numbered packet
    mismatched: int                # pairs whose sequence numbers disagree (0 when no numbers)
    seq_shift: int = 0             # run_seq - capture_seq for matched pairs (sequence method)
    capture_number: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # ^ per capture packet: the run's packet number (matched, or inferred inside a loss gap), -1 unknown
    capture_numbered: bool = False # the capture showed its packets' own sequence numbers

    # An analyser's and a host's clocks differ by tens of ppm; a sender that stalls now and then
    # stretches the fit a little more. A percent means the two series are not the same stream,
    # however well their spacings happen to line up.
    MAX_DRIFT_PPM = 10_000.0

    def doubts(self) -> list[str]:
        """Reasons not to trust this alignment (empty: nothing speaks against it)."""
        out = []
        if abs(self.drift_ppm) > self.MAX_DRIFT_PPM:
            out.append(f"clock drift {self.drift_ppm:.0f} ppm between capture and run (real clocks differ "
                       f"by tens of ppm; more than {self.MAX_DRIFT_PPM:.0f} means different streams)")
        # UDPmon numbers frames from 0 in the payload and rows from 1 in -G: a shift of 0 or 1
        # is the same stream, anything else pairs packets whose own numbers disagree.
        if self.capture_numbered and self.seq_shift not in (0, 1):
            out.append(f"the capture's own frame numbers are {self.seq_shift} apart from the run's "
                       "packet numbers")
        return out

    @property
    def matched(self) -> int:
        return len(self.capture_index)

    def summary(self) -> dict:
        r = np.abs(self.residual_ps)
        return {"method": self.method, "offset_ps": int(self.offset_ps), "drift_ppm": round(self.drift_ppm, 4),
                "matched": self.matched, "capture_unmatched": len(self.capture_unmatched),
                "run_unmatched": len(self.run_unmatched), "run_outside_capture": len(self.run_outside),
                "reordered": len(self.reordered), "mismatched": int(self.mismatched),
                "seq_shift": int(self.seq_shift),
                "residual_us_median": float(np.median(r) / 1e6) if len(r) else None,
                "residual_us_max": float(r.max() / 1e6) if len(r) else None,
                "doubts": self.doubts()}


def _as_times(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise PcitraceError(f"{name} must be one-dimensional, got shape {a.shape}")
    return a.astype(np.int64)


def _anchor_candidates(cap: np.ndarray, run: np.ndarray, rnum: np.ndarray, tol: float,
                       limit: int = 5) -> list[tuple[int, int]]:
    """Plausible (capture index, run index) pairs to start tracking from.

    - the first capture packet against every run packet, scored by how well the next few
      capture intervals fit the run (vectorised; the best few are kept);
    - stream start against stream start (a capture that saw the whole test);
    - the numbering that makes the capture's packets cover the most run numbers.
    """
    cands: list[tuple[int, int]] = []
    head_n = int(min(len(cap), 24))
    m = len(run)
    n_cap = len(cap)
    starts = sorted(set([0, 1, 2] + [int(x) for x in np.linspace(0, max(n_cap - head_n, 0), 6).round()]))
    for i0 in [x for x in starts if x < n_cap]:
        rel = cap[i0:i0 + head_n] - cap[i0]
        scores = np.empty(m)
        chunk = max(1, 2_000_000 // max(head_n, 1))
        for a in range(0, m, chunk):
            js = np.arange(a, min(m, a + chunk))
            pred = run[js][:, None] + rel[None, :]
            pos = np.clip(np.searchsorted(run, pred), 1, m - 1)
            res = np.minimum(np.abs(pred - run[pos - 1]), np.abs(pred - run[pos]))
            scores[js] = np.minimum(res, tol).sum(axis=1)
        for j in np.argsort(scores, kind="stable")[:limit if i0 < 3 else 2]:
            cands.append((i0, int(j)))
    cands.append((0, int(np.argmin(run))))
    # Numbering cover: capture i <-> number n0 + i, n0 chosen so most numbers are observed.
    lo, hi = int(rnum.min()), int(rnum.max())
    if hi - lo < 10 * (len(cap) + m):
        present = np.zeros(hi - lo + len(cap) + 1, np.int64)
        present[rnum - lo] = 1
        csum = np.concatenate([[0], np.cumsum(present)])
        starts = np.arange(0, hi - lo + 1)
        cover = csum[np.minimum(starts + len(cap), len(present))] - csum[starts]
        n0 = lo + int(np.argmax(cover))
        order = np.argsort(rnum)
        first_obs = int(np.searchsorted(rnum[order], n0))
        if first_obs < m:
            j = int(order[first_obs])
            i = int(rnum[j]) - n0
            if 0 <= i < len(cap):
                cands.append((i, j))
    seen, out = set(), []
    for c in cands:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def _close_mask(cap: np.ndarray) -> np.ndarray:
    """Capture packets much closer to their predecessor than the stream's spacing: not packets
    of the stream (a frame's DMA split in two, another device's transfer); they take no number."""
    gaps = np.diff(cap)
    if len(gaps) == 0:
        return np.zeros(len(cap), bool)
    return np.concatenate([[False], gaps < 0.4 * float(np.median(gaps))])


class _RunNumbers:
    """The run's packets by number (run times and numbers as given: ascending times)."""

    def __init__(self, run: np.ndarray, rnum: np.ndarray):
        self.run, self.rnum = run, rnum
        self.index = {int(v): j for j, v in enumerate(rnum)}       # number -> run packet
        order_n = np.argsort(rnum, kind="stable")
        nums_sorted, times_by_num = rnum[order_n], run[order_n].astype(float)
        self.lo, self.hi = int(nums_sorted[0]), int(nums_sorted[-1])
        dn = np.diff(nums_sorted)
        # the run's usual time per number
        self.per_number = (float(np.median(np.diff(times_by_num)[dn > 0] / dn[dn > 0]))
                           if (dn > 0).any() else 0.0)


@dataclass
class _Anchor:
    """Where a walk of :func:`_track` stands. The anchor is the last capture packet given a
    number (a number the run lost anchors at its interpolated time); the last real pair is
    where time differences start."""

    a_i: int                # anchor: capture index ...
    a_n: int                # ... and its number
    last_j: int             # run index of the last real pair ...
    r_i: int                # ... its capture index, number and run time
    r_n: int
    r_t: float
    extra: int = 0          # capture packets skipped as too close since the anchor
    follow: int = 0         # > 0: the capture repeats the run's irregular intervals (a real capture of it)


def _track(cap: np.ndarray, run: np.ndarray, rnum: np.ndarray, tol: float, il: int, jl: int,
           lookahead: int = 4, stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Walk the capture in time order from the pair (il, jl), pairing each packet with the run
    packet that continues the numbering from the last pair, checked against the intervals.

    Interval shape alone cannot tell apart a regular stream shifted by whole packets, and the
    sender's stalls (tens of us in real UDPmon runs) make a single offset drift by several
    spacings across a loss gap. Numbering does not drift: after a pair (i, n), capture packet
    i + k is packet n + k unless the intervals say the capture skipped packets (then a later
    run packet fits the capture interval better) or the run lacks n + k (lost: left unpaired,
    and the interval decides whether the capture shows it or jumps past it).
    """
    rn = _RunNumbers(run, rnum)
    pairs_i, pairs_j = [il], [jl]
    close = _close_mask(cap)
    st = _Anchor(il, int(rnum[jl]), jl, il, int(rnum[jl]), float(run[jl]))
    for i in range(il + 1, len(cap) if stop is None else min(len(cap), stop)):
        if close[i]:
            st.extra += 1
            continue
        dc = float(cap[i] - cap[st.r_i])
        t = st.a_n + (i - st.a_i - st.extra)
        obs, virt = _track_candidates(rn, st, t, dc, float(cap[i] - cap[st.a_i]), lookahead)
        succ_obs = next((o for o in obs if o[1] == t), None)
        if succ_obs is not None:
            best = _pick_beside_successor(rn, st, obs, succ_obs, t, dc, tol, lookahead)
        else:
            best = _pick_without_successor(st, obs, virt, t, dc, tol)
        if best is None:
            continue
        u, j, tu = best
        st.a_i, st.a_n, st.extra = i, u, 0
        if j >= 0:
            if u == st.r_n + 1:
                dr = tu - st.r_t
                if abs(dr - rn.per_number) > tol:
                    st.follow += 1 if abs(dc - dr) <= tol else -1
            pairs_i.append(i)
            pairs_j.append(j)
            st.last_j = j
            st.r_i, st.r_n, st.r_t = i, u, tu
    return np.array(pairs_i, np.int64), np.array(pairs_j, np.int64)


def _track_candidates(rn: _RunNumbers, st: _Anchor, t: int, dc: float, dc_local: float, lookahead: int):
    """Candidates for the capture packet whose numbered successor is t: t, the next few
    numbers (the capture skipped packets) and the next few packets the run has (the capture
    jumped over a loss gap). A number the run has is judged by the exact interval ``dc`` since
    the last real pair: (abs error, number, run index, run time, relative error) in the first
    list; one it lost by the local interval ``dc_local`` at the run's usual spacing:
    (relative error, number) in the second."""
    nexts = [int(rn.rnum[j]) for j in range(st.last_j + 1, min(len(rn.run), st.last_j + 1 + lookahead))]
    obs, virt = [], []
    # Numbers between the last real pair and t come back in when the run has them: that
    # repairs a wrong guess made while the run had no times to check.
    for u in sorted(set(range(max(st.r_n + 1, t - lookahead), t + lookahead + 1)).union(nexts)):
        if not (rn.lo <= u <= rn.hi):
            continue
        j = rn.index.get(u)
        if j is not None:
            if j > st.last_j:
                tu = float(rn.run[j])
                obs.append((abs(dc - (tu - st.r_t)), u, j, tu, _rel(dc, tu - st.r_t)))
        elif u >= t:
            virt.append((_rel(dc_local, (u - st.a_n) * rn.per_number), u))
    return obs, virt


def _pick_beside_successor(rn: _RunNumbers, st: _Anchor, obs: list, succ_obs: tuple, t: int, dc: float,
                           tol: float, lookahead: int) -> tuple[int, int, float]:
    """The run has the successor t: another number only if its time fits clearly better.
    Returns (number, run index or -1 for a number the run lost, run time)."""
    o = min(obs)
    best = o if o[0] < succ_obs[0] - tol / 2 else succ_obs
    if best is succ_obs and succ_obs[0] > tol + 0.03 * dc and st.follow >= 0:
        # The successor's time does not fit. If a number the run lost lies between the
        # last pair and t and fits (counted back from the successor's time), the numbering
        # ran ahead inside a loss gap (a stall there looks like skipped packets): repair.
        here = st.r_t + dc
        # (Only when the capture follows the run's own irregularities: a simulated, regular
        # capture of a real run never does, and there a late successor is a stall.)
        behind = [(abs(here - (succ_obs[3] - (t - u) * rn.per_number)), u)
                  for u in range(max(st.r_n + 1, t - 4 * lookahead), t) if u not in rn.index]
        if behind and min(behind)[0] <= tol:
            return min(behind)[1], -1, 0.0
    return best[1], best[2], best[3]


def _pick_without_successor(st: _Anchor, obs: list, virt: list, t: int, dc: float,
                            tol: float) -> tuple[int, int, float] | None:
    """The run lacks the successor t: a number it has whose time fits, or a lost one that fits
    the local interval (t unless another fits clearly better). None: no candidate fits."""
    succ_v = next((v for v in virt if v[1] == t), None)
    # Exact times: the tolerance, plus 3 % of the elapsed time when the capture does not
    # follow the run's irregularities (a simulated capture of a real run drifts from the
    # sender's stalls over long loss gaps) ...
    fit_obs = [o for o in obs if o[0] <= tol + (0.03 * dc if st.follow < 0 else 0.0)]
    # ... or, when the lost successor does not fit at all (the capture jumped a loss
    # gap), a proportional fit.
    if not fit_obs and st.follow < 0 and (succ_v is None or succ_v[0] > 0.5):
        fit_obs = [o for o in obs if o[4] <= 0.15]
    # A real capture of the run shows the sender's stalls: a long local interval inside
    # a loss gap is then a stall, not skipped packets (the next packet the run has
    # corrects the count if the analyser did miss some).
    fit_virt = [v for v in virt if v[0] <= 0.5 and (st.follow < 0 or v[1] == t)]
    cands = [(o[4], o[1], o[2], o[3]) for o in fit_obs] + [(v[0], v[1], -1, 0.0) for v in fit_virt]
    best = None
    if succ_v is not None:
        other = min((c for c in cands if c[1] != t), default=None)
        best = (succ_v[0], t, -1, 0.0) if other is None or other[0] >= succ_v[0] - 0.15 else other
    elif cands:
        best = min(cands)
    return None if best is None else best[1:]


def _rel(a: float, b: float) -> float:
    m = max(abs(a), abs(b))
    return abs(a - b) / m if m > 0 else 0.0


def _track_both(cap, run, rnum, tol, i0, j0, span: int | None = None):
    """Track forward from the anchor, and backward (the same walk on the reversed, negated
    series) for the capture packets before it; ``span`` limits each walk (for scoring)."""
    ci_f, rj_f = _track(cap, run, rnum, tol, i0, j0, stop=None if span is None else i0 + span)
    if i0 == 0:
        return ci_f, rj_f
    n, m = len(cap), len(run)
    ci_b, rj_b = _track(-cap[::-1], -run[::-1], -rnum[::-1], tol, n - 1 - i0, m - 1 - j0,
                        stop=None if span is None else n - 1 - i0 + span)
    ci_b, rj_b = (n - 1 - ci_b)[::-1], (m - 1 - rj_b)[::-1]
    return np.concatenate([ci_b[:-1], ci_f]), np.concatenate([rj_b[:-1], rj_f])


def _score(cap, run, ci, rj, tol):
    # Pairs whose offset hardly moves from the previous pair's: a true alignment keeps the
    # offset steady except at sender stalls; a whole-packet shift breaks it wherever the
    # intervals are irregular.
    d = (cap[ci] - run[rj]).astype(float)
    steady = int(np.sum(np.abs(np.diff(d)) <= tol / 2)) if len(d) > 1 else 0
    return steady, len(ci)


def _best_track(cap, run, rnum, tol, span: int = 400, finalists: int = 4):
    start = (0, int(np.argmin(run)))
    anchors = _anchor_candidates(cap, run, rnum, tol)
    if len(cap) > 2 * span and len(anchors) > finalists:
        # Long series: rank every anchor on a stretch around it, track the best few fully.
        ranked = sorted(anchors, key=lambda a: _score(cap, run, *_track_both(cap, run, rnum, tol, *a, span=span), tol),
                        reverse=True)
        anchors = ranked[:finalists] + ([start] if start in anchors and start not in ranked[:finalists] else [])
    results = []
    for i0, j0 in anchors:
        ci, rj = _track_both(cap, run, rnum, tol, i0, j0)
        results.append((_score(cap, run, ci, rj, tol), (i0, j0), ci, rj))
    best = max(results, key=lambda r: r[0])
    # A regular stream (a simulator's, or a paced sender's) against a run fits equally well at
    # whole-packet shifts; then the stream's start is the evidence: when the capture and the
    # run both begin with the stream, their first packets pair up.
    for key, anchor, ci, rj in results:
        if anchor == start and key[0] >= 0.98 * best[0][0] and key[1] >= 0.98 * best[0][1]:
            return ci, rj
    return best[2], best[3]


def _fit(run_t: np.ndarray, cap_t: np.ndarray) -> tuple[float, float]:
    """capture = run * (1 + slope) + offset, robust to a few outliers (two passes)."""
    x = (run_t - run_t[0]).astype(float)
    y = (cap_t - run_t).astype(float)
    if len(x) < 3 or np.ptp(x) == 0:
        return float(np.median(y)), 0.0
    keep = np.ones(len(x), bool)
    for _ in range(2):
        a, b = np.polyfit(x[keep], y[keep], 1)
        r = y - (a * x + b)
        mad = np.median(np.abs(r[keep])) + 1.0
        keep = np.abs(r) <= 5 * mad
        if keep.sum() < 3:
            break
    # offset expressed at run time 0
    return float(b - a * run_t[0]), float(a)


def align(capture_times_ps, run_times_ps, capture_seq=None, run_seq=None, *,
          tolerance_ps: float | None = None) -> Alignment:
    """Align capture packets (times in ps on the analyser's clock) with run packets (times in
    ps on the test host's clock; only packets that have a time, e.g. received ones).

    ``capture_seq`` / ``run_seq``: sequence numbers, when known; with both, pairs come from
    the numbers (after learning the constant difference between the two numberings).
    ``tolerance_ps``: how far a capture packet may sit from its predicted time (default: a
    third of the run's median spacing).
    """
    cap = _as_times(capture_times_ps, "capture_times_ps")
    run = _as_times(run_times_ps, "run_times_ps")
    if len(cap) == 0 or len(run) == 0:
        raise PcitraceError(f"nothing to align: the capture has {len(cap)} packets and the run {len(run)}",
                            fix="check that the capture holds the test stream and the run log has per-packet times (-G)")
    cseq = None if capture_seq is None else np.asarray(capture_seq, np.int64)
    rseq = None if run_seq is None else np.asarray(run_seq, np.int64)
    if cseq is not None and len(cseq) != len(cap):
        raise PcitraceError("capture_seq and capture_times_ps differ in length")
    if rseq is not None and len(rseq) != len(run):
        raise PcitraceError("run_seq and run_times_ps differ in length")
    corder = np.argsort(cap, kind="stable")
    rorder = np.argsort(run, kind="stable")
    cap_s, run_s = cap[corder], run[rorder]
    if tolerance_ps is None:
        gaps = np.diff(run_s)
        gaps = gaps[gaps > 0]
        spacing = float(np.median(gaps)) if len(gaps) else 1e6
        tolerance_ps = max(spacing / 3.0, 1.0)
    tol = float(tolerance_ps)

    rnum_s = rseq[rorder] if rseq is not None else np.arange(len(run_s), dtype=np.int64)
    ci, rj = _best_track(cap_s, run_s, rnum_s, tol)
    offset, slope = (_fit(run_s[rj], cap_s[ci]) if len(ci) >= 2 else (float(cap_s[0] - run_s[0]), 0.0))
    offset = offset + slope * run_s[0]  # anchored at run_s[0] below
    method = "interval"
    mismatched = 0
    shift = 0
    if cseq is not None and rseq is not None:
        method = "sequence"
        cs, rs = cseq[corder], rseq[rorder]
        good = cs[ci] >= 0 if len(ci) else np.zeros(0, bool)
        if good.any():
            vals, cnt = np.unique(rs[rj][good] - cs[ci][good], return_counts=True)
            shift = int(vals[np.argmax(cnt)])
        else:
            vals, cnt = np.unique(np.concatenate([rs[:1] - cs, rs - cs[:1]]), return_counts=True)
            shift = int(vals[np.argmax(cnt)])
        time_pairs = set(zip(ci.tolist(), rj.tolist()))
        rpos = {int(s): j for j, s in enumerate(rs)}
        ci2, rj2 = [], []
        for i, s in enumerate(cs):
            j = rpos.get(int(s) + shift) if s >= 0 else None
            if j is not None:
                ci2.append(i)
                rj2.append(j)
        ci = np.array(ci2, np.int64)
        rj = np.array(rj2, np.int64)
        # A number pair the time fit would not have made is a packet whose timing contradicts its number.
        mismatched = sum(1 for p in zip(ci.tolist(), rj.tolist()) if p not in time_pairs)
        if len(ci) >= 2:
            off0, slope = _fit(run_s[rj], cap_s[ci])
            offset = off0 + slope * run_s[0]
    pred = run_s + offset + slope * (run_s - run_s[0])
    resid = cap_s[ci] - pred[rj] if len(ci) else np.zeros(0)

    # Back to the caller's indexing.
    cap_idx = corder[ci]
    run_idx = rorder[rj]
    cap_un = np.setdiff1d(np.arange(len(cap)), cap_idx)
    # Run packets predicted inside the capture's window but not seen are missing from the capture;
    # the rest simply fell outside the analyser's window.
    lo, hi = cap_s[0] - tol, cap_s[-1] + tol
    inside = (pred >= lo) & (pred <= hi)
    run_un_sorted = np.setdiff1d(np.flatnonzero(inside), rj)
    run_out = rorder[np.flatnonzero(~inside)]
    run_un = rorder[run_un_sorted]

    # Reordering: in capture time order, a packet numbered below one already seen.
    if cseq is not None:
        numbers_in_time = np.where(cseq[corder] >= 0, cseq[corder], np.iinfo(np.int64).min)
    elif rseq is not None:
        numbers_in_time = np.full(len(cap_s), np.iinfo(np.int64).min)
        numbers_in_time[ci] = rseq[rorder][rj]
    else:
        numbers_in_time = np.full(len(cap_s), np.iinfo(np.int64).min)
        numbers_in_time[ci] = rj
    known = numbers_in_time != np.iinfo(np.int64).min
    seen_max = np.maximum.accumulate(np.where(known, numbers_in_time, np.iinfo(np.int64).min))
    prev_max = np.concatenate([[np.iinfo(np.int64).min], seen_max[:-1]])
    reordered = corder[np.flatnonzero(known & (numbers_in_time < prev_max))]

    close = _close_mask(cap_s)
    keep = np.flatnonzero(~close)
    pos_in_keep = np.full(len(cap_s), -1, np.int64)
    pos_in_keep[keep] = np.arange(len(keep))
    sel = pos_in_keep[ci] >= 0
    sub = _infer_numbers(len(keep), np.arange(len(keep)), pos_in_keep[ci[sel]], rj[sel], rorder, rseq,
                         None if cseq is None else cseq[corder][keep], shift)
    number_sorted = np.full(len(cap_s), -1, np.int64)
    number_sorted[keep] = sub
    if cseq is not None:
        cs_sorted = cseq[corder]
        number_sorted[close] = np.where(cs_sorted >= 0, cs_sorted + (shift if rseq is not None else 0), -1)[close]
    number = np.full(len(cap), -1, np.int64)
    number[corder] = number_sorted
    return Alignment(method, int(round(offset - slope * run_s[0])), slope * 1e6, cap_idx.astype(np.int64),
                     run_idx.astype(np.int64), np.rint(resid).astype(np.int64), cap_un.astype(np.int64),
                     run_un.astype(np.int64), run_out.astype(np.int64), reordered.astype(np.int64),
                     int(mismatched), shift, number,
                     cseq is not None and bool((cseq >= 0).any()))


def _infer_numbers(n_cap, corder, ci, rj, rorder, rseq, cseq, shift) -> np.ndarray:
    """The run's packet number for every capture packet: matched ones directly; unmatched ones
    between two matched packets get the missing numbers in between when the counts agree (the
    sender's bus shows packets the receiver lost, which the run lists only by number)."""
    out = np.full(n_cap, -1, np.int64)
    if cseq is not None:
        out[:] = np.where(cseq >= 0, cseq + (shift if rseq is not None else 0), -1)
        return out
    if rseq is None or len(ci) == 0:
        return out
    rs = rseq[rorder]
    num_sorted = np.full(n_cap, -1, np.int64)
    num_sorted[ci] = rs[rj]
    nums = rs[rj]
    gaps = np.flatnonzero((np.diff(ci) > 1) & (np.diff(nums) == np.diff(ci)))
    for a in gaps:  # one iteration per loss gap, not per packet
        num_sorted[ci[a] + 1:ci[a + 1]] = np.arange(nums[a] + 1, nums[a + 1])
    # Before the first and after the last pair: count outwards, where the run lacks those
    # numbers (a sender-side capture shows the packets the receiver lost at the ends too).
    observed = set(rs.tolist())
    lo_n, hi_n = int(rs.min()), int(rs.max())
    first_i, last_i = int(ci[0]), int(ci[-1])
    for i in range(first_i - 1, -1, -1):
        n = int(nums[0]) - (first_i - i)
        if n < lo_n or n in observed:
            break
        num_sorted[i] = n
    for i in range(last_i + 1, n_cap):
        n = int(nums[-1]) + (i - last_i)
        if n > hi_n or n in observed:
            break
        num_sorted[i] = n
    out[corder] = num_sorted
    return out

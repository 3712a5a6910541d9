"""CSR groups and the driver's send routine, from one bus's classified records.

The definitions (CSR group, send routine, setup and interrupt groups) are in
pcitrace/analyse/packets.py, which puts CSR routines, DMA transfers and packets together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pcitrace.analyse.classify import CSR, DMA
from pcitrace.analyse.occupancy import BusyTime

GROUP_DTYPE = np.dtype([
    ("start_ps", np.int64), ("end_ps", np.int64), ("span_ps", np.float64), ("accesses", np.int64),
    ("retries", np.int64), ("first_record", np.int64), ("last_record", np.int64), ("setup", np.bool_),
    ("packets", np.int64),
])

def csr_groups(records: np.ndarray, classes: np.ndarray, gap_ps: float, period_ps: float,
               breaks: np.ndarray | None = None, split_factor: float = 3.0,
               busy: BusyTime | None = None) -> np.ndarray:
    """CSR groups; ``breaks`` marks records that end a group when they fall inside one (frame
    data DMA; default every NIC DMA). Small DMA (a late status write-back) may land in the
    middle of the driver's register accesses without splitting them. With ``busy`` only the
    clocks the bus was idle count towards the gap between two accesses (an access held up
    behind other transactions does not end a routine): the windows send routines are searched in."""
    idx = np.flatnonzero(classes == CSR)
    if idx.size == 0:
        return np.zeros(0, GROUP_DTYPE)
    start = records["start_ps"][idx]
    end = records["end_ps"][idx]
    dma_before = np.cumsum(classes == DMA if breaks is None else breaks)
    gaps = start[1:] - end[:-1]
    if busy is not None and gaps.size:
        gaps = gaps - busy.between(end[:-1], start[1:])
    retried = records["termination"][idx[:-1]] == "retry"
    brk = np.ones(idx.size, bool)
    brk[1:] = (gaps >= gap_ps) | (dma_before[idx[1:]] != dma_before[idx[:-1]])
    if split_factor > 0:
        # The CPU paces one routine's register accesses evenly; a pause several times its usual
        # spacing inside a csr_gap window starts another routine (e.g. the interrupt service
        # routine just before the next send). A retried access is repeated, not a new one.
        inner = ~brk[1:] & ~retried
        if inner.sum() >= 2:
            usual = float(np.median(gaps[inner]))
            brk[1:] |= inner & (gaps > split_factor * max(usual, period_ps))
    gid = np.cumsum(brk) - 1
    heads = np.flatnonzero(brk)
    tails = np.r_[heads[1:] - 1, idx.size - 1]
    g = np.zeros(heads.size, GROUP_DTYPE)
    g["start_ps"] = start[heads]
    g["end_ps"] = end[tails]
    g["span_ps"] = g["end_ps"] - g["start_ps"] + period_ps
    g["accesses"] = np.bincount(gid, minlength=heads.size)
    g["retries"] = np.bincount(gid, weights=(records["termination"][idx] == "retry").astype(np.float64), minlength=heads.size)
    g["first_record"] = idx[heads]
    g["last_record"] = idx[tails]
    return g


def _access_keys(records: np.ndarray, idx: np.ndarray, have_ad: bool = True) -> list[tuple]:
    """What tells one register access from another: command and address; without AD the
    access's shape (data phases, DEVSEL# speed, wait states: a NIC answers a register read
    later than it takes a write)."""
    keys = zip(records["command"][idx].tolist(), records["address"][idx].tolist())
    if have_ad:
        return list(keys)
    shape = zip(records["data_phases"][idx].tolist(), records["devsel"][idx].tolist(),
                records["target_waits"][idx].tolist(), records["initiator_waits"][idx].tolist())
    return [k + s for k, s in zip(keys, shape)]


def _suffix_match(keys: list, sig: list) -> int:
    """Index where ``sig`` starts when matched backwards as a subsequence ending at the last
    access of ``keys`` (so the routine's last access is the sequence's last), or -1."""
    if not sig:
        return len(keys)
    if not keys or keys[-1] != sig[-1]:
        return -1
    j = len(sig) - 1
    for i in range(len(keys) - 1, -1, -1):
        if keys[i] == sig[j]:
            j -= 1
            if j < 0:
                return i
    return -1


def _learn_signature(seqs: list[list[tuple]], first: int = 8, share: float = 0.4) -> list[tuple]:
    """The driver's send routine, learnt from the first ``first`` sends of the capture.

    Before the first interrupt the driver has nothing else to do, so the first sends show the
    routine alone; later ones may have an interrupt service routine in front of or interleaved
    with it. The most common sequence (seen twice at least, found in the first) is taken if at
    least ``share`` of the sequences contain it as a subsequence. Otherwise the routine's last access is the most common last access; it then grows one access
    to the front at a time: the access most often found right in front of the part matched so
    far, as long as the extended routine still matches (as a subsequence ending with the
    sequence's last access) the first send and at least ``share`` of the sequences.
    """
    seqs = [s for s in seqs if s][:first]
    need = max(2.0, share * len(seqs))
    # Sends that ran alone show the routine exactly: the most common sequence (seen twice at
    # least, found in the first send; of equally common ones the shortest), if enough others
    # contain it, is the routine (when interrupt service routines ran into most of the first
    # sends, votes would pick up their accesses).
    seen: dict = {}
    for keys in seqs:
        seen[tuple(keys)] = seen.get(tuple(keys), 0) + 1
    def contains(keys, sub):
        it = iter(keys)
        return all(any(k == x for k in it) for x in sub)

    twice = sorted((-n, len(k), k) for k, n in seen.items() if n >= 2 and contains(seqs[0], k))
    for _, _, k in twice:
        # (an interrupt routine's access may come after the send's last one, before the DMA)
        if sum(contains(keys, k) for keys in seqs) >= need:
            return list(k)
    sig: list = []
    while True:
        votes: dict = {}
        for keys in seqs:
            pos = _suffix_match(keys, sig)
            if pos > 0:
                votes[keys[pos - 1]] = votes.get(keys[pos - 1], 0) + 1
        if not votes:
            return sig
        best = max(votes.items(), key=lambda kv: kv[1])[0]
        n = sum(_suffix_match(keys, [best] + sig) >= 0 for keys in seqs)
        if n < need or _suffix_match(seqs[0], [best] + sig) < 0:
            return sig
        sig = [best] + sig


MAX_EMBEDDINGS = 4096
MAX_WINDOW = 32              # accesses searched for send routines at once


class _Window:
    """One window of register accesses as plain lists (a window is a handful of accesses, and
    picking them out of Python lists costs less than numpy indexing): keys, starts, ends and the
    bus busy time before each start and end."""

    def __init__(self, idx, free, keys, starts, ends, busy_before):
        rl = [idx[p] for p in free]
        self.keys = [keys[r] for r in rl]
        self.s = [starts[r] for r in rl]
        self.e = [ends[r] for r in rl]
        if busy_before is not None:
            self.bs = [busy_before[0][r] for r in rl]
            self.be = [busy_before[1][r] for r in rl]
        else:
            self.bs = self.be = [0.0] * len(free)

    def idle(self, a: int, b: int) -> float:
        """Bus idle time from the end of access a to the start of access b."""
        return self.s[b] - self.e[a] - (self.bs[b] - self.be[a])


def _lowest_positions(keys: list, sig: list) -> list[int] | None:
    """Per step of the signature, the first position it can sit at (sig[:j] must fit in front
    of it); None if the window does not hold the signature at all."""
    lowest = []
    q = 0
    for key in sig:
        while q < len(keys) and keys[q] != key:
            q += 1
        if q == len(keys):
            return None
        lowest.append(q)
        q += 1
    return lowest


def _embeddings(w: _Window, sig: list, lowest: list[int], limits: list[float], min_pace: float) -> list[list[int]]:
    """Every way (up to MAX_EMBEDDINGS) to pick the signature's accesses in order from the
    window, with no two closer than the CPU's pace or further apart than the step's idle limit;
    each as positions in the window, built from the last access backwards."""
    cands: list[list[int]] = []
    picked: list[int] = []

    def extend(j: int, hi: int):
        # place sig[j] before position hi
        if len(cands) >= MAX_EMBEDDINGS:
            return
        key = sig[j]
        for q in range(hi - 1, lowest[j] - 1, -1):
            if picked:
                nxt = picked[-1]
                if w.idle(q, nxt) > limits[j]:
                    return            # earlier accesses are further still
                if w.s[nxt] - w.e[q] < min_pace:
                    continue
            if w.keys[q] != key:
                continue
            if j == 0:
                cands.append([q] + picked[::-1])
            else:
                picked.append(q)
                extend(j - 1, q)
                picked.pop()

    extend(len(sig) - 1, len(w.keys))
    return cands


def _score(w: _Window, c: list[int], min_pace: float, running: float) -> tuple:
    """How well candidate c fits (lower is better; see _best_instance for the order)."""
    n = len(w.keys)
    mine = set(c)
    lo_t, hi_t = w.s[c[0]], w.s[c[-1]]
    # the other accesses from the one before the candidate's first to the one after its last
    rest = [q for q in range(n) if q not in mine and lo_t <= w.s[q] <= hi_t]
    before = [q for q in range(c[0] - 1, -1, -1) if q not in mine][:1]
    after = [q for q in range(c[-1] + 1, n) if q not in mine][:1]
    near = before + rest + after
    slow = sum(1 for a, b in zip(near[:-1], near[1:]) if w.s[b] - w.e[a] < min_pace)
    turns = 0
    if rest:
        # Where both run: from the first other access inside the span (or the candidate's
        # first, if the other routine was already running: its access before came at the
        # CPU's pace) to the last (or the candidate's last, if the other routine goes on).
        lo_q, hi_q = rest[0], rest[-1]
        if before and w.idle(before[0], rest[0]) <= running:
            lo_q = c[0]
        if after and w.idle(rest[-1], after[0]) <= running:
            hi_q = c[-1]
        seq = [q in mine for q in range(lo_q, hi_q + 1)]
        turns = sum(1 for a, b in zip(seq[:-1], seq[1:]) if a == b)
    # A routine already running was waiting for the bus before a new one started: of two
    # accesses nothing else tells apart, it had the earlier one (the newcomer starts late).
    newcomer = max(lo_t, w.s[rest[0]]) if rest else lo_t
    return (slow, turns, -newcomer, hi_t - lo_t, -hi_t)


def _best_instance(idx: np.ndarray, free: list[int], keys: list, sig: list, starts: np.ndarray,
                   ends: np.ndarray, min_pace: float, max_idle: float = 2e6,
                   busy_before: tuple[np.ndarray, np.ndarray] | None = None,
                   step_idle: list[float] | None = None) -> list[int] | None:
    """Positions (into ``idx``) of the send routine's accesses among ``free``, or None.

    Every way to pick the routine's accesses in order (a subsequence of ``free`` with the
    signature's keys) is a candidate, unless two of its accesses follow closer than the CPU's
    pace (``min_pace``, ps from end to next start) or further apart than ``max_idle`` ps of bus
    idle time (``busy_before``: per record, busy ps before its start and before its end;
    ``step_idle[j]``: the limit between the routine's
    j-th and next access, if known). Of the candidates the one is taken that
    1. leaves the other accesses around it (the interrupt service routine) at the CPU's pace too;
    2. lets the two routines take turns where they overlap: each CPU has one register access
       outstanding at a time and the host bridge serves them in order, so while both run on a
       busy bus their accesses alternate;
    3. leaves the earlier of two interchangeable accesses to the routine already running (it
       was waiting for the bus before the other started);
    4. is the most compact (a routine runs at the CPU's pace), then the one ending last.
    """
    if len(free) < len(sig):
        return None
    w = _Window(idx, free, keys, starts, ends, busy_before)
    lowest = _lowest_positions(w.keys, sig)
    if lowest is None:
        return None
    limits = [max_idle] * len(sig) if step_idle is None else step_idle
    cands = _embeddings(w, sig, lowest, limits, min_pace)
    if not cands:
        return None
    if len(cands) == 1:
        # the common case (a send alone, or beside an interrupt routine it cannot be mixed
        # with): nothing to choose between
        return [free[q] for q in cands[0]]
    # the other routine is still running if its next access comes at the CPU's pace
    running = max(step_idle) if step_idle else max_idle
    best = min(cands, key=lambda c: _score(w, c, min_pace, running))
    return [free[q] for q in best]


def match_sends(routines: np.ndarray, first_dma: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Setup group (index into ``routines``) per packet, -1 none.

    In ring order (the driver posts descriptors in order): each ``eligible`` packet takes the
    earliest unused send routine that ended before its first DMA; under a transmit backlog the
    send routine runs long before the NIC gets to the frame."""
    inst = np.flatnonzero(routines["setup"])
    setup_of = np.full(first_dma.size, -1, np.int64)
    inst_order = inst[np.argsort(routines["end_ps"][inst], kind="stable")]
    pos = 0
    for i in np.flatnonzero(eligible):
        if pos < inst_order.size and routines["end_ps"][inst_order[pos]] < first_dma[i]:
            setup_of[i] = inst_order[pos]
            pos += 1
    return setup_of


def _keys_by_record(records: np.ndarray, csr_idx: np.ndarray, have_ad: bool) -> tuple[list, list]:
    """Per record, the key its register access is matched by (None for other records), and the
    key a retried attempt is matched to its accepted access by (the register; without AD, the
    access's shape)."""
    keys_all: list = [None] * len(records)
    retry_keys: list = [None] * len(records)
    for r, key in zip(csr_idx.tolist(), _access_keys(records, csr_idx, have_ad)):
        keys_all[r] = key
    for r, key in zip(csr_idx.tolist(), _access_keys(records, csr_idx)):
        retry_keys[r] = key
    return keys_all, retry_keys


def _members(groups: np.ndarray, csr_idx: np.ndarray) -> list[np.ndarray]:
    """The register accesses (record indices) of each group."""
    lo = np.searchsorted(csr_idx, groups["first_record"], side="left")
    hi = np.searchsorted(csr_idx, groups["last_record"], side="right")
    return [csr_idx[a:b] for a, b in zip(lo.tolist(), hi.tolist())]


def _learning_sends(records: np.ndarray, csr_idx: np.ndarray, accepted: np.ndarray, learn_groups: np.ndarray,
                    ok: np.ndarray, first_dma: np.ndarray, prompt_gap_ps: float) -> list[list[int]] | None:
    """Per send learnt from, the accepted accesses leading up to its first DMA: in the group
    that holds the last of them, since the previous packet's first DMA (a window may hold
    several sends); sends the NIC acted on at once (no transmit backlog) preferred. None with
    fewer than two."""
    csr_end = records["end_ps"][csr_idx]
    k = np.searchsorted(csr_end, first_dma, side="left") - 1
    cand = ok & (k >= 0)
    last = np.where(k >= 0, csr_idx[np.maximum(k, 0)], -1)
    prompt = cand & (first_dma - records["end_ps"][np.maximum(last, 0)] <= prompt_gap_ps)
    use = prompt if prompt.sum() >= 2 else cand
    lasts = np.unique(last[use])
    if lasts.size < 2:
        return None
    holder = np.searchsorted(learn_groups["first_record"], lasts, side="right") - 1
    since: dict = {}
    for lr, t in zip(last[use].tolist(), np.r_[-np.inf, first_dma[:-1]][use].tolist()):
        since[lr] = min(since.get(lr, np.inf), t)
    # The accepted accesses of the holding window from the first one after ``since`` to the
    # send's last: one slice of the accepted accesses, found for all sends at once.
    starts = records["start_ps"]
    csr_acc = csr_idx[accepted[csr_idx]]
    after = np.searchsorted(starts[csr_acc], np.array([since[lr] for lr in lasts.tolist()]), side="right")
    lo = np.maximum(np.searchsorted(csr_acc, learn_groups["first_record"][holder], side="left"), after)
    hi = np.searchsorted(csr_acc, np.minimum(lasts, learn_groups["last_record"][holder]), side="right")
    acc_l = csr_acc.tolist()
    return [acc_l[a:b] for a, b in zip(lo.tolist(), hi.tolist())]


def _cpu_pace(clean: list[list[int]], starts: np.ndarray, ends: np.ndarray, period_ps: float,
              busy: BusyTime | None) -> tuple[float, list[float] | None]:
    """From sends that ran alone (exactly the routine's accesses): the CPU's pace, the shortest
    time from the end of one access to the start of the next, less one clock of arbitration (no
    routine issues its accesses faster; -1 when no send ran alone); and per step the longest bus
    idle time between its j-th and next access: elsewhere the routine may wait for the bus, but
    not stand idle much longer than that (a few clocks of arbitration, a quarter more for the
    CPU's own jitter)."""
    paces = [starts[b] - ends[a] for recs in clean for a, b in zip(recs[:-1], recs[1:])]
    min_pace = float(min(paces)) - period_ps if paces else -1.0
    step_idle = None
    if clean and busy is not None:
        a_end = np.array([[ends[r] for r in recs[:-1]] for recs in clean], np.float64)
        b_start = np.array([[starts[r] for r in recs[1:]] for recs in clean], np.float64)
        idle_steps = b_start - a_end - busy.between(a_end, b_start)
        step_idle = (idle_steps.max(axis=0) * 1.25 + 4 * period_ps).tolist()
    return min_pace, step_idle


def _search_windows(members: list[np.ndarray], starts: np.ndarray, ends: np.ndarray,
                    accepted: np.ndarray) -> list[np.ndarray]:
    """Windows of at most MAX_WINDOW accepted accesses (the retried attempts before each go with
    it: a NIC that retries every access eight times still runs a five-access routine): a longer
    one (a bus busy for long) is cut where the time between two accesses is longest (least
    likely inside one routine)."""
    windows = []
    todo = list(members)
    while todo:
        idx = todo.pop()
        if int(accepted[idx].sum()) <= MAX_WINDOW:
            windows.append(idx)
            continue
        k = int(np.argmax(starts[idx[1:]] - ends[idx[:-1]])) + 1
        todo += [idx[:k], idx[k:]]
    return sorted(windows, key=lambda w: int(w[0]))


@dataclass
class _Search:
    """What every window is searched with: the signature, the per-record keys and times as
    lists, and the CPU's pace."""
    sig: list
    keys_all: list
    retry_keys: list
    accepted: list
    starts: list
    ends: list
    min_pace: float
    step_idle: list[float] | None
    busy_before: tuple[list, list] | None
    prompt_gap_ps: float


def _label_instances(rows: list[int], sr: _Search) -> tuple[list[int], int]:
    """Label each access of a window: k > 0 for the k-th send routine found in it, 0 for the
    others. A retried attempt goes with the accepted access it repeats (the next one with its key)."""
    n = len(rows)
    label = [0] * n
    free = [p for p in range(n) if sr.accepted[rows[p]]]
    n_free = len(free)
    n_inst = 0
    while len(free) >= len(sr.sig):
        hit = _best_instance(rows, free, sr.keys_all, sr.sig, sr.starts, sr.ends, sr.min_pace,
                             max_idle=sr.prompt_gap_ps, step_idle=sr.step_idle, busy_before=sr.busy_before)
        if hit is None:
            break
        n_inst += 1
        for p in hit:
            label[p] = n_inst
        taken = set(hit)
        free = [p for p in free if p not in taken]
    if n_inst and n_free < n:
        pending: dict = {}
        for pos in range(n - 1, -1, -1):
            key = sr.retry_keys[rows[pos]]
            if sr.accepted[rows[pos]]:
                pending[key] = label[pos]
            else:
                label[pos] = pending.get(key, 0)
    return label, n_inst


def _window_parts(rows: list[int], sr: _Search) -> list[tuple[list[int], bool]]:
    """A window's groups: each send routine found (True), and what it leaves grouped again by
    time (an interrupt routine before the send and the next one after it are two)."""
    label, n_inst = _label_instances(rows, sr)
    parts: list[tuple[list[int], bool]] = []
    rest = [r for r, lab in zip(rows, label) if lab == 0]
    if rest:
        head = 0
        for j in range(1, len(rest)):
            if sr.starts[rest[j]] - sr.ends[rest[j - 1]] >= sr.prompt_gap_ps:
                parts.append((rest[head:j], False))
                head = j
        parts.append((rest[head:], False))
    for k in range(n_inst, 0, -1):
        parts.append(([r for r, lab in zip(rows, label) if lab == k], True))
    return parts


def _groups_of_parts(parts: list[tuple[list[int], bool]], records: np.ndarray, period_ps: float) -> np.ndarray:
    """The groups (GROUP_DTYPE) of the parts, sorted by start, 'setup' marking send routines."""
    starts, ends = records["start_ps"], records["end_ps"]
    sizes = np.array([len(part) for part, _ in parts], np.int64)
    flat = np.fromiter((r for part, _ in parts for r in part), np.int64, int(sizes.sum()))
    heads = np.r_[0, np.cumsum(sizes)[:-1]]
    out = np.zeros(len(parts), GROUP_DTYPE)
    if len(parts):
        out["first_record"] = flat[heads]
        out["last_record"] = flat[heads + sizes - 1]
        out["start_ps"] = np.minimum.reduceat(starts[flat], heads)
        out["end_ps"] = np.maximum.reduceat(ends[flat], heads)
        out["accesses"] = sizes
        out["retries"] = np.add.reduceat((records["termination"][flat] == "retry").astype(np.int64), heads)
    out["span_ps"] = out["end_ps"] - out["start_ps"] + period_ps
    is_setup = np.array([sf for _, sf in parts])
    order = np.argsort(out["start_ps"], kind="stable")
    out, is_setup = out[order], is_setup[order]
    # Every send routine is a setup group, even one whose frame the capture ended before.
    out["setup"] = is_setup
    return out


def send_routines(groups: np.ndarray, records: np.ndarray, classes: np.ndarray, ok: np.ndarray,
                  first_dma: np.ndarray, *, search_groups: np.ndarray | None = None,
                  busy: BusyTime | None = None, prompt_gap_ps: float = 2e6, have_ad: bool = True) -> np.ndarray | None:
    """Find the driver's send routine by its register accesses and give each send its own.

    Every send runs the same register accesses before the NIC's first DMA: the same command
    and address, without AD the same shape (see _access_keys). The signature of that routine is
    learnt (_learn_signature) from the accesses leading up to the first DMA of the packets
    ``ok``, preferring those whose last access came within ``prompt_gap_ps`` of the DMA, and
    only since the previous packet's first DMA; so is the CPU's pace in the sends that ran alone
    (the shortest end-to-start time between accesses, and per step the longest bus idle time,
    with ``busy``). Every search group is searched for it, repeatedly (an interrupt service
    routine may run just before, or interleaved on another CPU; two sends may share a group):
    of the ways to pick the routine's accesses, _best_instance takes the one that keeps both
    routines at the CPU's pace and lets them take turns. Each instance becomes a setup group of
    its own; the remaining accesses are grouped again by time (split where one is
    ``prompt_gap_ps``, the CSR gap, or more after the previous). ``search_groups``: the groups to search for instances, if not
    ``groups``: groups by bus idle time (csr_groups with ``busy``), as under a transmit backlog
    the send routine's accesses interleave with data DMA and wait behind long bursts; longer
    than MAX_WINDOW accesses, they are searched in pieces cut at their longest time gaps.
    Returns the groups sorted by start with 'setup' marking the send routines, or None without
    a signature.
    """
    csr_idx = np.flatnonzero(classes == CSR)
    if csr_idx.size < 2:
        return None
    accepted = records["termination"] != "retry"
    keys_all, retry_keys = _keys_by_record(records, csr_idx, have_ad)
    period_ps = float(groups["span_ps"][0] - (groups["end_ps"][0] - groups["start_ps"][0]))
    learn_groups = search_groups if search_groups is not None else groups
    learn_recs = _learning_sends(records, csr_idx, accepted, learn_groups, ok, first_dma, prompt_gap_ps)
    if learn_recs is None:
        return None
    learn = [[keys_all[r] for r in recs] for recs in learn_recs]
    sig = _learn_signature(learn)
    L = len(sig)
    if L == 0:
        return None
    starts, ends = records["start_ps"], records["end_ps"]
    clean = [recs for recs, keys in zip(learn_recs, learn) if keys[-L:] == sig and len(keys) == L]
    min_pace, step_idle = _cpu_pace(clean, starts, ends, period_ps, busy)
    if search_groups is not None:
        members = _search_windows(_members(search_groups, csr_idx), starts, ends, accepted)
    else:
        members = _members(groups, csr_idx)
    busy_before = None
    if busy is not None:
        before_start, before_end = np.zeros(len(records)), np.zeros(len(records))
        before_start[csr_idx] = busy.at(starts[csr_idx])
        before_end[csr_idx] = busy.at(ends[csr_idx])
        busy_before = (before_start.tolist(), before_end.tolist())
    sr = _Search(sig, keys_all, retry_keys, accepted.tolist(), starts.tolist(), ends.tolist(), min_pace,
                 step_idle, busy_before, prompt_gap_ps)
    parts = [part for idx in members for part in _window_parts(idx.tolist(), sr)]
    return _groups_of_parts(parts, records, period_ps)

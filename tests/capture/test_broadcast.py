"""Broadcast: one iterator read by several consumers in step, with bounded memory."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture.model import Broadcast


class Source:
    """Items 0..n-1, counting how many were made (a re-read counts again)."""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.made = n, fail_at, 0

    def __call__(self):
        for i in range(self.n):
            if i == self.fail_at:
                raise ValueError("damaged block")
            self.made += 1
            yield i


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 60), consumers=st.integers(1, 4), max_items=st.integers(1, 8),
       schedule=st.lists(st.integers(0, 3), max_size=400), late=st.booleans())
def test_every_consumer_gets_every_item_in_order(n, consumers, max_items, schedule, late):
    src = Source(n)
    b = Broadcast(src(), src, max_items=max_items)
    branches = [b.branch() for _ in range(consumers)]
    b.seal()
    got = [[] for _ in range(consumers)]
    held = 0
    for c in schedule:                    # any order of reads, even one consumer far ahead
        c %= consumers
        item = next(branches[c], None)
        if item is not None:
            got[c].append(item)
        held = max(held, len(b._buf))
    if late:
        branches.append(b.branch())      # joins after items were dropped: reads on its own
        got.append([])
    for c, br in enumerate(branches):
        got[c].extend(br)
    assert all(g == list(range(n)) for g in got)
    assert held <= max_items + 1
    if not late and n and max_items >= n:
        assert src.made == n             # in step: each item made once for all


def test_in_step_reads_make_each_item_once_and_hold_few():
    src = Source(1000)
    b = Broadcast(src(), src, max_items=4)
    x, y = b.branch(), b.branch()
    b.seal()
    for _ in range(1000):
        next(x), next(y)
        assert len(b._buf) <= 1
    assert list(x) == list(y) == [] and src.made == 1000


def test_before_seal_nothing_is_dropped():
    src = Source(10)
    b = Broadcast(src(), src, max_items=64)
    x = b.branch()
    assert list(itertools.islice(x, 6)) == list(range(6))
    y = b.branch()                        # not sealed yet: joins and shares
    b.seal()
    assert list(y) == list(range(10)) and list(x) == list(range(6, 10))
    assert src.made == 10


def test_an_error_reaches_every_consumer():
    src = Source(10, fail_at=3)
    b = Broadcast(src(), src)
    x, y = b.branch(), b.branch()
    b.seal()
    assert [next(x), next(x), next(x)] == [0, 1, 2]
    with pytest.raises(ValueError):
        next(x)
    assert [next(y), next(y), next(y)] == [0, 1, 2]
    with pytest.raises(ValueError):
        next(y)


@pytest.mark.parametrize("joined_first", [True, False])
def test_memory_stays_bounded_before_the_seal(joined_first):
    # a reader that runs far ahead before the others have started (a bus whose clock starts
    # late in the capture): the items are not all kept for them
    src = Source(500)
    b = Broadcast(src(), src, max_items=5)
    x = b.branch()
    y = b.branch() if joined_first else None
    held = 0
    for _ in range(400):
        next(x)
        held = max(held, len(b._buf))
    if y is None:
        y = b.branch()
    b.seal()
    assert held <= 6
    assert list(y) == list(range(500)) and list(x) == list(range(400, 500))

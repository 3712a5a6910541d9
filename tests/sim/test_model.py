"""model: the random draws equal numpy's Generator call for call."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.sim.model import Draws

CALLS = st.lists(st.one_of(
    st.tuples(st.just("uint32"), st.just(0)),
    st.tuples(st.just("bytes"), st.integers(0, 9000)),
    st.tuples(st.just("random"), st.just(0)),
    st.tuples(st.just("uniform"), st.floats(0.0, 50.0)),
), max_size=60)


def _numpy(rng, call, arg):
    if call == "uint32":
        return int(rng.integers(0, 1 << 32))
    if call == "bytes":
        return rng.bytes(arg)
    if call == "random":
        return rng.random()
    return float(rng.uniform(0, arg))


def _ours(d, call, arg):
    if call == "uint32":
        return d.uint32()
    if call == "bytes":
        return d.bytes(arg)
    if call == "random":
        return d.random()
    return d.uniform(0.0, arg)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 32), calls=CALLS, block=st.sampled_from([1, 3, 64, 4096]))
def test_draws_equal_the_generator(seed, calls, block):
    rng = np.random.default_rng(seed)
    d = Draws(seed)
    d.BLOCK = block          # small blocks: refills in the middle of a draw
    for call, arg in calls:
        want, got = _numpy(rng, call, arg), _ours(d, call, arg)
        assert type(got) is type(want) and got == want, (call, arg)


def test_draws_equal_the_generator_over_a_long_run():
    rng, d = np.random.default_rng(7), Draws(7)
    for i in range(3000):
        call = ("uint32", "bytes", "uniform", "uint32", "random")[i % 5]
        arg = 1 + (i * 37) % 1500 if call == "bytes" else 0.2
        assert _ours(d, call, arg) == _numpy(rng, call, arg), i

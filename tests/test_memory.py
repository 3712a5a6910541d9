"""The process memory policy of pcitrace's own processes."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Decode the same bus twice in chunks, as `pcitrace decode` does; count the page faults of
# the second pass (its temporaries are the sizes the first pass freed).
CODE = """
import resource, sys
import numpy as np
from pcitrace._memory import keep_freed_memory
from pcitrace.decode.engine import decode_clocks
if sys.argv[1] == "on":
    assert keep_freed_memory() is True and keep_freed_memory() is True
# legal bursts of random lengths (random lines would make a finding, a Python string,
# every few clocks: then Python's own allocator, not numpy's temporaries, decides the count)
rng = np.random.default_rng(1)
n = 1 << 21
sig = {k: np.ones(n, np.uint8) for k in ("frame_n", "irdy_n", "trdy_n", "stop_n", "devsel_n")}
c = 0
for phases in rng.integers(1, 40, n // 24):
    if c + phases + 8 > n:
        break
    sig["frame_n"][c:c + phases + 1] = 0      # address phase, then FRAME# until the last phase
    sig["irdy_n"][c + 1:c + phases + 2] = 0
    sig["devsel_n"][c + 1:c + phases + 2] = 0
    sig["trdy_n"][c + 1:c + phases + 2] = 0
    c += phases + 2 + int(rng.integers(1, 6))
t = np.arange(n, dtype=np.int64) * 15000
def once():
    carry = None
    for a in range(0, n, 1 << 19):
        r, w, f, carry = decode_clocks({k: v[a:a + (1 << 19)] for k, v in sig.items()}, t[a:a + (1 << 19)],
                                       carry=carry, final=False)
        del r, w, f
once()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
once()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def test_policy_keeps_freed_pages_for_the_next_chunk():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's mallopt")
    faults = {mode: int(subprocess.run([sys.executable, "-c", CODE, mode], check=True, capture_output=True,
                                       text=True).stdout) for mode in ("off", "on")}
    # by default the chunks' temporaries fault their pages in again; with the policy the
    # heap keeps them
    assert faults["on"] * 4 < faults["off"], faults


def test_only_the_simulator_turns_off_numpys_huge_page_requests():
    # numpy asks for huge pages on arrays of 4 MiB and more unless told not to: that pays for
    # a decode's kept records and costs for the simulator's dropped temporaries
    code = ("from numpy._core.multiarray import _get_madvise_hugepage as g\n"
            "from pcitrace._memory import keep_freed_memory, no_huge_pages\n"
            "before = g(); keep_freed_memory(); kept = g(); no_huge_pages(); print(before, kept, g())")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert out[1] == out[0] and out[2] == "False", out     # numpy's default stays for the rest


def test_the_pcitrace_command_applies_the_policy(monkeypatch):
    import pcitrace._memory as memory
    import pcitrace.cli as cli

    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(sys, "argv", ["pcitrace", "--version"])
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 0 and calls == [1]

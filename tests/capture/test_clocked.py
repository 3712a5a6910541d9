"""Clocked views, clock detection and resampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture import clocked_view, open_capture, write_sr, write_vcd
from pcitrace.capture.clocked import find_clocks, resample
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.errors import PcitraceError


def reference_view(arrays, clk):
    c = arrays[clk]
    idx = [i for i in range(1, len(c)) if c[i - 1] == 0 and c[i] == 1]
    return idx, {k: [int(v[i - 1]) for i in idx] for k, v in arrays.items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 500), seed=st.integers(0, 2**31), chunk=st.integers(1, 64))
def test_clocked_view_sr_and_vcd_agree_with_reference(tmp_path, n, seed, chunk):
    rng = np.random.default_rng(seed)
    arrays = {"CLK": (np.cumsum(rng.random(n) < 0.5) & 1).astype(np.uint8),
              "F": rng.integers(0, 2, n).astype(np.uint8),
              "AD": rng.integers(0, 2**40, n, dtype=np.uint64)}
    cap = Capture.from_arrays(arrays, TimeBase.timing(50e6), widths={"AD": 40})
    idx, ref = reference_view(arrays, "CLK")
    mem = clocked_view(cap, "CLK")
    from pcitrace.capture.clocked import clocked_view as cv
    small = cv(cap, "CLK", chunk_samples=chunk)
    write_vcd(cap, tmp_path / "c.vcd")
    vcd = clocked_view(open_capture(tmp_path / "c.vcd"), "CLK")
    for view in (mem, small):
        d = view.read()
        assert view.timebase.mode == "state" and view.num_samples == len(idx)
        assert view.times_ps().tolist() == [i * 20_000 for i in idx]
        for k in arrays:
            assert d[k].tolist() == ref[k], k
    dv = vcd.read()
    assert vcd.times_ps().tolist() == [i * 20_000 for i in idx]
    assert dv["F"].tolist() == ref["F"]
    ad = sum(dv[f"AD{i}"].astype(np.uint64) << np.uint64(i) for i in range(40)) if idx else np.zeros(0)
    assert [int(x) for x in ad] == ref["AD"]


def test_clocked_view_of_state_capture_is_refused():
    cap = Capture.from_arrays({"CLK": np.arange(4) % 2}, TimeBase.state(clock_hz=33e6))
    with pytest.raises(PcitraceError, match="state"):
        clocked_view(cap, "CLK")
    vec = Capture.from_arrays({"V": np.arange(4)}, TimeBase.timing(1e6), widths={"V": 4})
    with pytest.raises(PcitraceError, match="vector"):
        clocked_view(vec, "V")
    with pytest.raises(PcitraceError, match="no channel named"):
        clocked_view(vec, "nope")


def test_clocked_view_writes_a_state_sr(tmp_path):
    n = 64
    cap = Capture.from_arrays({"CLK": np.arange(n) % 2, "D": (np.arange(n) // 4) % 2}, TimeBase.timing(66e6))
    view = clocked_view(cap, "CLK")
    assert view.metadata["clock_hz"] == pytest.approx(33e6, rel=1e-5)   # ps-rounded period
    write_sr(view, tmp_path / "s.sr")
    back = open_capture(tmp_path / "s.sr")
    assert back.timebase.mode == "state"
    assert np.array_equal(back.times_ps(), view.times_ps())
    assert np.array_equal(back.read()["D"], view.read()["D"])


def test_find_clocks():
    n = 4000
    rng = np.random.default_rng(0)
    burst = np.zeros(n, np.uint8)
    burst[1000:1200] = np.arange(200) % 2          # regular, but only in a burst
    cap = Capture.from_arrays({"CLK": np.arange(n) % 2, "DATA": rng.integers(0, 2, n), "BURST": burst,
                               "SLOW": (np.arange(n) // 50) % 2,
                               "PKT": (np.arange(n) // 100) % 2},     # steady but 500 kHz: an event
                              TimeBase.timing(100e6))
    found = {c.channel: c for c in find_clocks(cap)}
    assert set(found) == {"CLK", "SLOW"}
    assert found["CLK"].frequency_hz == pytest.approx(50e6)
    assert found["CLK"].rising_edges == 2000
    assert found["SLOW"].frequency_hz == pytest.approx(1e6)
    state = Capture.from_arrays({"CLK": np.arange(10) % 2}, TimeBase.state(clock_hz=1e6))
    assert find_clocks(state) == []


def test_resample_vcd(tmp_path):
    text = """$timescale 1ns $end
$scope module t $end
$var wire 1 ! a $end
$upscope $end
$enddefinitions $end
#0
0!
#25
1!
#50
0!
#100
"""
    (tmp_path / "r.vcd").write_text(text)
    cap = open_capture(tmp_path / "r.vcd")
    r = resample(cap, 100e6)     # 10 ns samples, up to the closing #100
    assert r.timebase.samplerate_hz == 100e6
    assert cap.metadata["end_ps"] == 100_000 and cap.duration_ps == 100_000
    assert r.read()["a"].tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0]
    with pytest.raises(PcitraceError, match="frequency"):
        resample(cap, 0)
    sr = Capture.from_arrays({"a": np.zeros(3)}, TimeBase.timing(1e6))
    with pytest.raises(PcitraceError, match="VCD"):
        resample(sr, 1e6)


@pytest.mark.sigrok
def test_sigrok_written_vcd_resamples_to_its_sr(tmp_path, sigrok_cli):
    """sigrok-cli's own VCD (several changes per line, closing timestamp) reads back exactly."""
    import subprocess
    sr = tmp_path / "d.sr"
    subprocess.run([sigrok_cli, "-d", "demo", "--channels", "D0,D1,D2,D3,D4,D5,D6,D7",
                    "--samples", "300", "-o", str(sr)], check=True, capture_output=True, timeout=60)
    vcd = tmp_path / "d.vcd"
    out = subprocess.run([sigrok_cli, "-i", str(sr), "-O", "vcd"], check=True, capture_output=True,
                         timeout=60).stdout
    vcd.write_bytes(out)
    a = open_capture(sr)
    r = resample(open_capture(vcd), a.timebase.samplerate_hz)
    assert r.num_samples == a.num_samples == 300
    da, dr = a.read(), r.read()
    for k in da:
        assert np.array_equal(da[k], dr[k]), k


def test_find_clocks_on_a_long_capture_probes_its_start(tmp_path):
    n = 5000
    rng = np.random.default_rng(1)
    cap = Capture.from_arrays({"CLK": np.arange(n) % 2, "DATA": rng.integers(0, 2, n),
                               "LATE": np.r_[np.zeros(3 * n // 4), np.arange(n - 3 * n // 4) % 2]},
                              TimeBase.timing(100e6))
    write_sr(cap, tmp_path / "l.sr")
    sr = open_capture(tmp_path / "l.sr")
    whole = {c.channel: c for c in find_clocks(sr)}
    probed = {c.channel: c for c in find_clocks(sr, probe_samples=1000)}
    assert set(whole) == set(probed) == {"CLK"}
    assert probed["CLK"].rising_edges == whole["CLK"].rising_edges == 2500
    assert probed["CLK"].last_ps == whole["CLK"].last_ps

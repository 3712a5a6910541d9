"""The SUMP client against the emulated analyser on a real pty: samples, triggers, RLE, faults, refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import IDENTIFY_BYTES, probe_words, random_capture
from pcitrace.acquire import sump
from pcitrace.acquire.client import CaptureRequest, SumpClient, acquire, check_request, plan_capture
from pcitrace.errors import PcitraceError

OLS = sump.DeviceInfo(name="OLS", probes=32, sample_memory=24 * 1024, max_rate_hz=200_000_000)


def held(a, lo, hi):
    """a[lo:hi] with the first / last sample held outside the capture (what the emulator plays)."""
    return a[np.clip(np.arange(lo, hi), 0, len(a) - 1)]


def names(n, prefix="L"):
    return {i: f"{prefix}{i}" for i in range(n)}


# -- planning (no device) ---------------------------------------------------------------------
def test_plan_counts_groups_and_trigger_position():
    req = CaptureRequest(rate_hz=25e6, samples=1001, channels={0: "a", 9: "b"},
                         stages=[sump.TriggerStage(mask=1, value=0)], pretrigger=0.25)
    plan = plan_capture(req, OLS)
    assert plan.divider == 3 and not plan.demux
    assert plan.flags.groups == (True, True, False, False)
    assert plan.read_quads == 251 and plan.samples == 1004
    assert plan.delay_quads == 251 - 63 and plan.trigger_index == 4 * 63
    assert plan.bytes_expected == 1004 * 2
    cmds = plan.commands()
    assert cmds[:5] == sump.long_command(0xC0, 1)
    assert sump.long_command(sump.CMD_READ_DELAY, (250) | (187 << 16)) in cmds
    assert cmds.endswith(sump.long_command(sump.CMD_FLAGS, (1 << 4) | (1 << 5)))


def test_without_trigger_stage_zero_starts_at_once_and_every_sample_follows_it():
    plan = plan_capture(CaptureRequest(rate_hz=1e6, samples=64, channels={3: "x"}), OLS)
    assert plan.trigger_index is None and plan.delay_quads == plan.read_quads
    assert plan.stages == [sump.TriggerStage(mask=0, value=0, level=0, start=True)]


@pytest.mark.parametrize("req, match", [
    (CaptureRequest(rate_hz=300e6, samples=100, channels={0: "a"}), "outside what the SUMP divider"),
    (CaptureRequest(rate_hz=1, samples=100, channels={0: "a"}), "outside what the SUMP divider"),
    (CaptureRequest(rate_hz=1e6, samples=100, channels={32: "a"}), "probes 0-31"),
    (CaptureRequest(rate_hz=1e6, samples=100, channels={0: "a", 1: "a"}), "more than one probe"),
    (CaptureRequest(rate_hz=1e6, samples=0, channels={0: "a"}), "cannot be requested"),
    (CaptureRequest(rate_hz=1e6, samples=10, channels={0: "a"}, pretrigger=1.0), "pre-trigger"),
    (CaptureRequest(rate_hz=1e6, samples=10, channels={0: "a"}, stages=[sump.TriggerStage()] * 5), "4 stages"),
])
def test_protocol_impossible_requests(req, match):
    with pytest.raises(PcitraceError, match=match):
        check_request(req)


@pytest.mark.parametrize("change, match", [
    (dict(rate_hz=250e6), None),                                  # caught by check_request
    (dict(rate_hz=150e6), "above"),                               # above this device's 100 MHz
    (dict(samples=24 * 1024 + 1), "do not fit"),                  # one group: 24 Ki samples
    (dict(channels={16: "hi"}), "has 16 probes"),
    (dict(rle=True, channels={7: "top"}), None),                  # moves the flag to group 1: fine
    (dict(rle=True, channels={15: "top"}), "count flag"),         # no group left above it
])
def test_device_impossible_requests(change, match):
    dev = dataclasses.replace(OLS, probes=16, max_rate_hz=100_000_000)
    req = dataclasses.replace(CaptureRequest(rate_hz=1e6, samples=1000, channels={0: "a"}), **change)
    if match is None and req.rate_hz <= 200e6:
        plan = plan_capture(req, dev)
        assert plan.flags.groups == (True, True, False, False)
        return
    with pytest.raises(PcitraceError, match=match or "outside"):
        plan_capture(req, dev)


def test_demux_has_only_probes_0_to_15():
    plan = plan_capture(CaptureRequest(rate_hz=200e6, samples=100, channels={0: "a", 15: "b"}), OLS)
    assert plan.demux and plan.flags.encode() & sump.FLAG_DEMUX
    with pytest.raises(PcitraceError, match="demux"):
        plan_capture(CaptureRequest(rate_hz=200e6, samples=100, channels={16: "c"}), OLS)


def test_memory_is_shared_by_the_groups_sent():
    four = {0: "a", 8: "b", 16: "c", 24: "d"}
    assert plan_capture(CaptureRequest(rate_hz=1e6, samples=6144, channels=four), OLS).samples == 6144
    with pytest.raises(PcitraceError, match="at most 6144 samples"):
        plan_capture(CaptureRequest(rate_hz=1e6, samples=6145, channels=four), OLS)


# -- against the emulator ------------------------------------------------------------------
def test_identify_and_metadata(emulator):
    cap, _ = random_capture(lines=12)
    emu = emulator(cap, memory=8192, max_rate_hz=50_000_000)
    with SumpClient(emu.port) as c:
        info = c.connect()
    assert info.name == emu.info.name and info.probes == 16
    assert info.sample_memory == 8192 and info.max_rate_hz == 50_000_000
    assert bytes(emu.received) == IDENTIFY_BYTES


def test_capture_returns_the_played_back_samples(emulator):
    cap, arrays = random_capture(n=6000, lines=12, rate=10e6)
    emu = emulator(cap, memory=16384)
    req = CaptureRequest(rate_hz=10e6, samples=4000, channels=names(12))
    acq = acquire(emu.port, req)
    assert acq.complete and acq.error is None and not acq.interrupted
    got = acq.capture.read()
    for i in range(12):
        assert np.array_equal(got[f"L{i}"], arrays[f"L{i}"][:4000]), f"L{i}"
    assert acq.capture.timebase.samplerate_hz == 10e6
    assert acq.bytes_read == 4000 * 2


def test_capture_of_some_probes_sends_only_their_groups(emulator):
    cap, arrays = random_capture(n=3000, lines=20, rate=10e6)
    emu = emulator(cap, memory=16384)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=2000, channels={17: "L17", 3: "three"}))
    assert acq.plan.flags.groups == (True, False, True, False)
    assert acq.bytes_read == 2000 * 2
    got = acq.capture.read()
    assert acq.capture.channel_names == ["L17", "three"]
    assert np.array_equal(got["three"], arrays["L3"][:2000])
    assert np.array_equal(got["L17"], arrays["L17"][:2000])


def test_extended_counts_for_big_memories(emulator):
    cap, arrays = random_capture(n=300_000, lines=8, rate=10e6, p_change=0.01)
    emu = emulator(cap, memory=1 << 20)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=270_000, channels=names(8)))
    cmds = [c for c, _ in emu.log]
    assert sump.CMD_READ_COUNT in cmds and sump.CMD_DELAY_COUNT in cmds and sump.CMD_READ_DELAY not in cmds
    assert acq.complete and np.array_equal(acq.capture.read()["L5"], arrays["L5"][:270_000])


def test_trigger_position(emulator):
    cap, arrays = random_capture(n=8000, lines=8, rate=10e6, seed=3)
    emu = emulator(cap, memory=8192)
    w = probe_words(arrays, [f"L{i}" for i in range(8)])
    mask, value = 0b1111, 0b1010
    first = int(np.flatnonzero((w & mask) == value)[0])
    stage = sump.TriggerStage(mask=mask, value=value)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=1000, channels=names(8),
                                           stages=[stage], pretrigger=0.3))
    trig = acq.capture.metadata["trigger_sample"]
    assert trig == acq.plan.trigger_index == 300
    got = probe_words(acq.capture.read(), [f"L{i}" for i in range(8)])
    assert (got[trig] & mask) == value
    # window = world[first - 300 : first + 700], holding the first sample before the capture began
    assert first < 300
    assert np.array_equal(got, held(w, first - 300, first + 700))


def test_sequential_trigger_stages(emulator):
    cap, arrays = random_capture(n=8000, lines=8, rate=10e6, seed=4)
    emu = emulator(cap, memory=8192)
    w = probe_words(arrays, [f"L{i}" for i in range(8)])
    a = int(np.flatnonzero((w & 0xF) == 0x3)[0])
    b = a + 1 + int(np.flatnonzero((w[a + 1:] & 0xF0) == 0x50)[0])
    stages = [sump.TriggerStage(mask=0xF, value=0x3, level=0, start=False),
              sump.TriggerStage(mask=0xF0, value=0x50, level=1, start=True)]
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=400, channels=names(8), stages=stages,
                                           pretrigger=0.5))
    got = probe_words(acq.capture.read(), [f"L{i}" for i in range(8)])
    assert np.array_equal(got, held(w, b - 200, b + 200))


def test_serial_trigger(emulator):
    cap, arrays = random_capture(n=8000, lines=8, rate=10e6, seed=5)
    emu = emulator(cap, memory=8192)
    bits = arrays["L2"].astype(np.int64)
    pattern = [1, 0, 1, 1, 0, 0, 1]   # oldest first; newest ends in bit 0 of the shift register
    value = sum(b << (len(pattern) - 1 - j) for j, b in enumerate(pattern))
    win = np.lib.stride_tricks.sliding_window_view(bits, len(pattern))
    end = int(np.flatnonzero((win == pattern).all(axis=1))[0]) + len(pattern) - 1
    stage = sump.TriggerStage(mask=(1 << len(pattern)) - 1, value=value, channel=2, serial=True)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=400, channels=names(8), stages=[stage],
                                           pretrigger=0.5))
    got = acq.capture.read()["L2"]
    assert np.array_equal(got, held(arrays["L2"], end - 200, end + 200))


def test_decimation_to_the_device_rate(emulator):
    cap, arrays = random_capture(n=8000, lines=8, rate=100e6, seed=6)
    emu = emulator(cap, memory=8192)
    acq = acquire(emu.port, CaptureRequest(rate_hz=25e6, samples=1000, channels=names(8)))
    assert acq.plan.divider == 3
    assert np.array_equal(acq.capture.read()["L1"], arrays["L1"][:4000:4])


def test_rle_capture_expands_to_the_played_back_samples(emulator):
    cap, arrays = random_capture(n=40_000, lines=6, rate=10e6, seed=7, p_change=0.01)
    emu = emulator(cap, memory=4096)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=2000, channels=names(6), rle=True))
    assert acq.complete and acq.plan.flags.rle
    n = acq.capture.num_samples
    assert n > 4 * 2000          # quiet lines: far more samples than memory entries
    got = acq.capture.read()
    for i in range(6):
        assert np.array_equal(got[f"L{i}"], arrays[f"L{i}"][:n]), f"L{i}"


def test_unplugged_mid_transfer_keeps_the_newest_samples(emulator):
    cap, arrays = random_capture(n=6000, lines=12, rate=10e6)
    emu = emulator(cap, memory=16384, fault_after=1001, fault_mode="close")
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=4000, channels=names(12)), timeout_s=1.0)
    assert not acq.complete and isinstance(acq.error, PcitraceError)
    assert "went away" in str(acq.error) or "stopped sending" in str(acq.error)
    assert acq.bytes_read == 1001
    kept = acq.capture.read()
    assert acq.capture.num_samples == 500            # whole 2-byte samples only
    # the device sends the last sample first, so what arrived is the end of the window
    assert np.array_equal(kept["L4"], arrays["L4"][3500:4000])
    assert acq.capture.metadata["complete"] is False


def test_silent_device_times_out_and_keeps_what_came(emulator):
    cap, arrays = random_capture(n=6000, lines=8, rate=10e6)
    emu = emulator(cap, memory=16384, fault_after=640, fault_mode="hang")
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=4000, channels=names(8)), timeout_s=0.5)
    assert "stopped sending after 640 of 4000 bytes" in str(acq.error)
    assert np.array_equal(acq.capture.read()["L0"], arrays["L0"][3360:4000])


def test_ctrl_c_while_reading_keeps_what_was_read(emulator):
    cap, arrays = random_capture(n=40_000, lines=8, rate=10e6)
    emu = emulator(cap, memory=65536, bytes_per_s=40_000)    # ~0.75 s for the whole transfer

    def progress(stage, done, total):
        if stage == "read" and done >= 1000:
            raise KeyboardInterrupt

    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=30_000, channels=names(8)), progress=progress)
    assert acq.interrupted and not acq.complete and acq.error is None
    n = acq.capture.num_samples
    assert 1000 <= n < 30_000
    assert np.array_equal(acq.capture.read()["L7"], arrays["L7"][30_000 - n:30_000])
    # the client reset the device: it answers a fresh identify at once
    with SumpClient(emu.port) as c:
        assert c.connect().name == emu.info.name


def test_trigger_that_never_comes_gives_up_after_wait(emulator):
    cap, _ = random_capture(n=2000, lines=4, rate=10e6)
    emu = emulator(cap, memory=8192)
    stage = sump.TriggerStage(mask=1 << 6, value=1 << 6)     # probe 6 is never driven
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=100, channels=names(4), stages=[stage]),
                  wait_s=0.3)
    assert acq.capture is None and "no trigger within 0.3 s" in str(acq.error)


@pytest.mark.parametrize("req, match", [
    (CaptureRequest(rate_hz=20e6, samples=100, channels=names(4)), "above"),          # max 10 MHz
    (CaptureRequest(rate_hz=1e6, samples=4097, channels=names(4)), "do not fit"),     # 4 KiB memory
    (CaptureRequest(rate_hz=1e6, samples=100, channels={9: "nine"}), "has 8 probes"),
])
def test_device_limits_are_refused_before_any_configuration(emulator, req, match):
    cap, _ = random_capture(n=2000, lines=4, rate=10e6)
    emu = emulator(cap, memory=4096, max_rate_hz=10_000_000)
    with pytest.raises(PcitraceError, match=match):
        acquire(emu.port, req)
    assert bytes(emu.received) == IDENTIFY_BYTES     # identification only: nothing configured or armed


def test_protocol_limits_are_refused_before_the_port_is_opened(emulator):
    cap, _ = random_capture(n=2000, lines=4, rate=10e6)
    emu = emulator(cap)
    with pytest.raises(PcitraceError, match="probes 0-31"):
        acquire(emu.port, CaptureRequest(rate_hz=1e6, samples=100, channels={40: "x"}))
    assert bytes(emu.received) == b""


def test_missing_port_is_a_clear_error(tmp_path):
    with pytest.raises(PcitraceError, match="cannot open serial port"):
        acquire(str(tmp_path / "ttyNONE"), CaptureRequest(rate_hz=1e6, samples=100, channels={0: "a"}))


def test_a_port_where_nothing_answers_is_not_a_sump_device():
    import os
    import termios
    import tty

    master, slave = os.openpty()
    tty.setraw(slave, termios.TCSANOW)
    try:
        with pytest.raises(PcitraceError, match="did not answer the identify"):
            acquire(os.ttyname(slave), CaptureRequest(rate_hz=1e6, samples=100, channels={0: "a"}),
                    timeout_s=0.3)
        assert os.read(master, 100) == IDENTIFY_BYTES[:6]     # resets, then identify; no metadata
    finally:
        os.close(slave)
        os.close(master)


def test_rle_capture_with_trigger_finds_the_trigger_sample(emulator):
    cap, arrays = random_capture(n=60_000, lines=6, rate=10e6, seed=11, p_change=0.01)
    emu = emulator(cap, memory=4096)
    w = probe_words(arrays, [f"L{i}" for i in range(6)])
    mask, value = 0b111, 0b101
    first = int(np.flatnonzero((w & mask) == value)[0])
    stage = sump.TriggerStage(mask=mask, value=value)
    acq = acquire(emu.port, CaptureRequest(rate_hz=10e6, samples=1000, channels=names(6), stages=[stage],
                                           pretrigger=0.4, rle=True))
    trig = acq.capture.metadata["trigger_sample"]
    got = probe_words(acq.capture.read(), [f"L{i}" for i in range(6)])
    n = len(got)
    assert trig is not None and trig >= 400                # 400 entries before it: at least 400 samples
    assert (got[trig] & mask) == value and (got[trig - 1] & mask) != value
    assert np.array_equal(got, held(w, first - trig, first - trig + n))


@pytest.fixture(scope="module")
def shared_emulator():
    cap, arrays = random_capture(n=20_000, lines=32, rate=10e6, seed=21, p_change=0.02)
    from pcitrace.acquire.emulator import SumpEmulator

    emu = SumpEmulator(cap, memory=32768).start()
    yield emu, probe_words(arrays, [f"L{i}" for i in range(32)])
    emu.stop()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(probes=st.sets(st.integers(0, 31), min_size=1, max_size=10),
       quads=st.integers(1, 500), pre=st.integers(0, 90), rle=st.booleans(), trig=st.booleans(),
       data=st.data())
def test_any_request_returns_the_world_around_the_trigger(shared_emulator, probes, quads, pre, rle, trig, data):
    """Whatever channels, size, pre-trigger share, trigger and RLE: the samples are the played-back
    world around the trigger, the trigger sample is where the metadata says."""
    emu, w = shared_emulator
    chans = {i: f"L{i}" for i in sorted(probes)}
    stages = []
    if trig:
        bits = data.draw(st.lists(st.sampled_from(sorted(probes)), min_size=1, max_size=3, unique=True))
        mask = sum(1 << b for b in bits)
        value = int(w[data.draw(st.integers(100, 15_000))]) & mask    # a value that does occur
        stages = [sump.TriggerStage(mask=mask, value=value)]
    req = CaptureRequest(rate_hz=10e6, samples=4 * quads, channels=chans, stages=stages, pretrigger=pre / 100, rle=rle)
    try:
        acq = acquire(emu.port, req)
    except PcitraceError as exc:     # RLE with the top probe of the top group and no group left
        assert rle and "count flag" in str(exc)
        return
    assert acq.complete
    arrays = acq.capture.read()
    got = np.zeros(acq.capture.num_samples, np.uint32)
    for i, name in chans.items():
        got |= arrays[name].astype(np.uint32) << np.uint32(i)
    kept = np.uint32(sum(1 << i for i in chans))
    if rle:
        flag = sump.rle_flag_bit(acq.plan.flags.groups)
        assert flag not in chans
    if trig:
        first = int(np.flatnonzero((w & np.uint32(mask)) == value)[0])
        t = acq.capture.metadata["trigger_sample"]
        assert t is not None and (got[t] & mask) == value
        expect = held(w, first - t, first - t + len(got))
    else:
        expect = w[:len(got)]
    assert len(got) >= 4 * quads
    assert np.array_equal(got, expect & kept)

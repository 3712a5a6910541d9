"""The .sr reader and writer: formats, round trips, sigrok-cli agreement, corrupt inputs."""

from __future__ import annotations

import json
import os
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcitrace.capture import open_capture, write_sr
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.capture.sr import EXTRA_MEMBER, format_samplerate, parse_samplerate, read_sr
from pcitrace.errors import PcitraceError

from ._capture_helpers import SIGROK_RATES, bit_columns, captures, sigrok_bits


def make_sr(path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def metadata(probes: list[str], unitsize: int, rate="1 MHz", extra=""):
    lines = ["[global]", "sigrok version=0.5.2", "", "[device 1]", "capturefile=logic-1",
             f"total probes={len(probes)}", f"samplerate={rate}", "total analog=0"]
    lines += [f"probe{i + 1}={p}" for i, p in enumerate(probes)]
    lines += [f"unitsize={unitsize}", extra]
    return "\n".join(lines).encode()


@pytest.mark.parametrize("text,hz", [("33 MHz", 33e6), ("33333333 Hz", 33333333), ("33333333", 33333333),
                                     ("200 kHz", 200e3), ("1 GHz", 1e9), ("66.6 MHz", 66.6e6),
                                     ("100MHz", 100e6)])
def test_samplerate_forms(text, hz):
    assert parse_samplerate(text) == pytest.approx(hz)


@pytest.mark.parametrize("bad", ["fast", "", "-3 MHz", "0 Hz", "3 XHz"])
def test_bad_samplerate_names_the_place(bad):
    with pytest.raises(PcitraceError, match="samplerate|sample rate"):
        parse_samplerate(bad, path="f.sr")


def test_format_samplerate_is_exact():
    assert format_samplerate(33_000_000) == "33 MHz"
    assert format_samplerate(33_333_333) == "33333333 Hz"
    assert format_samplerate(200_000) == "200 kHz"
    assert format_samplerate(1e9) == "1 GHz"


@pytest.mark.parametrize("unitsize,nprobes", [(1, 3), (2, 16), (3, 20), (4, 32), (8, 64), (9, 70)])
def test_reads_any_unitsize(tmp_path, unitsize, nprobes):
    rng = np.random.default_rng(unitsize)
    n = 1000
    raw = rng.integers(0, 256, (n, unitsize), dtype=np.uint8)
    probes = [f"D{i}" for i in range(nprobes)]
    half = n // 2 * unitsize
    make_sr(tmp_path / "a.sr", {"version": b"2", "metadata": metadata(probes, unitsize, "33 MHz"),
                                "logic-1-1": raw.tobytes()[:half], "logic-1-2": raw.tobytes()[half:]})
    cap = open_capture(tmp_path / "a.sr")
    assert cap.num_samples == n
    assert cap.timebase.samplerate_hz == 33e6
    data = cap.read()
    for i in range(nprobes):
        expect = (raw[:, i // 8] >> (i % 8)) & 1
        assert np.array_equal(data[f"D{i}"], expect), i


def test_disabled_probes_keep_their_bit_position(tmp_path):
    # probe2 absent (disabled): probe3 is still bit 2
    meta = b"[device 1]\ncapturefile=logic-1\ntotal probes=3\nsamplerate=1 MHz\nprobe1=A\nprobe3=C\nunitsize=1\n"
    make_sr(tmp_path / "a.sr", {"version": b"2", "metadata": meta, "logic-1-1": bytes([0b100, 0b001, 0b101])})
    d = open_capture(tmp_path / "a.sr").read()
    assert d["A"].tolist() == [0, 1, 1]
    assert d["C"].tolist() == [1, 0, 1]


def test_chunked_reads_agree_with_whole_reads(tmp_path):
    rng = np.random.default_rng(5)
    n = 10_007
    arrays = {f"L{i}": rng.integers(0, 2, n) for i in range(11)}
    cap = Capture.from_arrays(arrays, TimeBase.timing(50e6))
    write_sr(cap, tmp_path / "a.sr", chunk_bytes=3000)   # many chunk members
    back = read_sr(tmp_path / "a.sr")
    assert back.metadata["chunk_members"] > 3
    whole = back.read()
    for k, v in arrays.items():
        assert np.array_equal(whole[k], v)
    # odd chunk sizes and a window that starts and ends inside members
    got = {k: [] for k in arrays}
    for ch in back.iter_chunks(start=1234, stop=9876, chunk_samples=777):
        for k in arrays:
            got[k].append(ch[k])
    for k, v in arrays.items():
        assert np.array_equal(np.concatenate(got[k]), v[1234:9876])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=captures())
def test_write_read_round_trip(tmp_path, cap):
    path = tmp_path / "r.sr"
    write_sr(cap, path)
    back = open_capture(path)
    assert back.timebase.mode == cap.timebase.mode
    assert back.timebase.rate_hz == pytest.approx(cap.timebase.rate_hz)
    assert back.num_samples == cap.num_samples
    want = bit_columns(cap)
    got = back.read()
    assert list(got) == list(want)
    for k in want:
        assert np.array_equal(got[k], want[k]), k


def test_state_capture_with_timestamps_round_trips(tmp_path):
    ts = np.cumsum(np.r_[0, np.full(99, 30_000), 90_000]).astype(np.int64)[:100]
    cap = Capture.from_arrays({"FRAME#": np.arange(100) % 3 == 0}, TimeBase.state(timestamps_ps=ts))
    write_sr(cap, tmp_path / "s.sr")
    back = open_capture(tmp_path / "s.sr")
    assert back.timebase.mode == "state"
    assert np.array_equal(back.timebase.timestamps_ps, ts)
    assert np.array_equal(back.read()["FRAME#"], (np.arange(100) % 3 == 0).astype(np.uint8))


def test_write_is_atomic(tmp_path):
    class Boom(Exception):
        pass

    def source(names, start, stop, chunk):
        yield from ()
        raise Boom()

    from pcitrace.capture.model import ChannelInfo
    cap = Capture([ChannelInfo("A")], TimeBase.timing(1e6), 10, source)
    target = tmp_path / "keep.sr"
    target.write_bytes(b"old")
    with pytest.raises(Boom):
        write_sr(cap, target)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["keep.sr"]


# -- sigrok-cli ----------------------------------------------------------------------------

@pytest.mark.sigrok
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=captures(rates=SIGROK_RATES, max_samples=120))
def test_sigrok_cli_reads_what_we_write(tmp_path, sigrok_cli, cap):
    path = tmp_path / "s.sr"
    write_sr(cap, path)
    got = sigrok_bits(sigrok_cli, path)
    want = bit_columns(cap)
    assert [n for n, _ in got] == list(want)
    for name, bits in got:
        assert np.array_equal(bits, want[name]), name


@pytest.mark.sigrok
def test_sigrok_cli_ignores_our_extras(tmp_path, sigrok_cli):
    """State captures keep mode and timestamps in members sigrok never opens."""
    ts = np.arange(64, dtype=np.int64) * 30_000 + np.repeat([0, 7], 32)
    vals = (np.arange(64) // 3) % 2
    cap = Capture.from_arrays({"FRAME#": vals}, TimeBase.state(timestamps_ps=ts))
    write_sr(cap, tmp_path / "s.sr")
    with zipfile.ZipFile(tmp_path / "s.sr") as zf:
        extra = json.loads(zf.read(EXTRA_MEMBER))
        assert extra["mode"] == "state" and extra["timestamps"]
    got = sigrok_bits(sigrok_cli, tmp_path / "s.sr")
    assert got[0][0] == "FRAME#" and np.array_equal(got[0][1], vals)


@pytest.mark.sigrok
def test_we_read_what_sigrok_writes(tmp_path, sigrok_cli):
    import subprocess
    out = tmp_path / "demo.sr"
    subprocess.run([sigrok_cli, "-d", "demo", "--samples", "300", "-o", str(out)], check=True,
                   capture_output=True, timeout=60)
    cap = open_capture(out)
    assert cap.num_samples == 300
    got = sigrok_bits(sigrok_cli, out)
    data = cap.read()
    for name, bits in got:
        assert np.array_equal(data[name], bits), name


# -- corrupt inputs ------------------------------------------------------------------------

def _valid(tmp_path) -> bytes:
    cap = Capture.from_arrays({"A": np.arange(5000) % 2, "B": np.arange(5000) % 3 == 0},
                              TimeBase.timing(1e6))
    write_sr(cap, tmp_path / "ok.sr")
    return (tmp_path / "ok.sr").read_bytes()


def test_truncated_zip(tmp_path):
    """Cut inside its only chunk: no whole chunk of samples is left."""
    data = _valid(tmp_path)
    bad = tmp_path / "cut.sr"
    bad.write_bytes(data[: data.find(b"logic-1-1") + 20])
    with pytest.raises(PcitraceError) as e:
        open_capture(bad)
    assert "cut.sr" in str(e.value) and "zip" in str(e.value)


def test_missing_metadata(tmp_path):
    make_sr(tmp_path / "m.sr", {"version": b"2", "logic-1-1": b"\0" * 10})
    with pytest.raises(PcitraceError, match="m.sr.*metadata"):
        open_capture(tmp_path / "m.sr")


def test_chunk_not_multiple_of_unitsize(tmp_path):
    make_sr(tmp_path / "u.sr", {"version": b"2", "metadata": metadata([f"D{i}" for i in range(9)], 2),
                                "logic-1-1": b"\0" * 4, "logic-1-2": b"\0" * 7})
    with pytest.raises(PcitraceError) as e:
        open_capture(tmp_path / "u.sr")
    msg = str(e.value)
    assert "u.sr" in msg and "logic-1-2" in msg and "unitsize" in msg


def test_zip_bomb_declared_size(tmp_path):
    """A member whose directory entry claims an absurd size is refused before inflating."""
    path = tmp_path / "bomb.sr"
    make_sr(path, {"version": b"2", "metadata": metadata(["A"], 1), "logic-1-1": b"\0" * 1000})
    data = bytearray(path.read_bytes())
    # patch the uncompressed size of logic-1-1 in its local header and central directory
    name = b"logic-1-1"
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        i = 0
        while True:
            i = data.find(sig, i)
            if i < 0:
                break
            nlen = struct.unpack_from("<H", data, i + (26 if sig == b"PK\x03\x04" else 28))[0]
            hdr = 30 if sig == b"PK\x03\x04" else 46
            if data[i + hdr:i + hdr + nlen] == name:
                struct.pack_into("<I", data, i + off, 0xFFFFFFF0)
            i += 4
    path.write_bytes(bytes(data))
    with pytest.raises(PcitraceError) as e:
        open_capture(path)
    assert "bomb.sr" in str(e.value) and "logic-1-1" in str(e.value) and "zip bomb" in str(e.value)


def test_corrupt_chunk_data_names_member(tmp_path):
    path = tmp_path / "crc.sr"
    rng = np.random.default_rng(1)
    make_sr(path, {"version": b"2", "metadata": metadata(["A"], 1),
                   "logic-1-1": rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()},
            compression=zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    i = data.find(b"logic-1-1") + len(b"logic-1-1") + 100
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    cap = open_capture(path)
    with pytest.raises(PcitraceError, match="crc.sr.*logic-1-1"):
        cap.read()


def test_bad_metadata_values(tmp_path):
    make_sr(tmp_path / "b.sr", {"version": b"2", "metadata": metadata(["A"], 0), "logic-1-1": b""})
    with pytest.raises(PcitraceError, match="unitsize"):
        open_capture(tmp_path / "b.sr")
    make_sr(tmp_path / "c.sr", {"version": b"7", "metadata": metadata(["A"], 1), "logic-1-1": b""})
    with pytest.raises(PcitraceError, match="version"):
        open_capture(tmp_path / "c.sr")


def test_not_a_zip(tmp_path):
    (tmp_path / "t.sr").write_text("hello")
    with pytest.raises(PcitraceError, match="t.sr"):
        open_capture(tmp_path / "t.sr")


def test_corrupt_extras(tmp_path):
    make_sr(tmp_path / "e.sr", {"version": b"2", "metadata": metadata(["A"], 1), "logic-1-1": b"\1\0",
                                EXTRA_MEMBER: b"{not json"})
    with pytest.raises(PcitraceError, match=EXTRA_MEMBER):
        open_capture(tmp_path / "e.sr")


def test_event_timed_capture_cannot_be_written_as_sr(tmp_path):
    cap = Capture.from_arrays({"A": np.array([0, 1, 0])}, TimeBase.events(np.array([0, 5, 7])))
    with pytest.raises(PcitraceError, match="--clock"):
        write_sr(cap, tmp_path / "e.sr")
    assert not (tmp_path / "e.sr").exists()


@pytest.mark.parametrize("bad", ["a\nb", " lead", ""])
def test_unstorable_channel_names(tmp_path, bad):
    cap = Capture.from_arrays({bad: np.zeros(3)}, TimeBase.timing(1e6))
    with pytest.raises(PcitraceError, match="channel name"):
        write_sr(cap, tmp_path / "n.sr")


def test_writing_the_same_capture_twice_gives_identical_bytes(tmp_path):
    # Regenerated samples must not change in git when their content did not:
    # no wall-clock time may end up in the zip members.
    import time

    import numpy as np

    from pcitrace.capture import Capture, TimeBase, write_sr

    cap = Capture.from_arrays({"A": np.array([0, 1, 1, 0] * 50, np.uint8)}, TimeBase.timing(1e6))
    write_sr(cap, tmp_path / "a.sr")
    time.sleep(2.1)   # zip timestamps have a 2-second resolution
    write_sr(cap, tmp_path / "b.sr")
    assert (tmp_path / "a.sr").read_bytes() == (tmp_path / "b.sr").read_bytes()


# -- the packed fast path (Capture.iter_fields) -------------------------------------------------

def _random_sr(tmp_path, rng, unitsize: int, n: int, members: int):
    """A state-mode .sr with random sample bytes and probes at random bit positions."""
    total = unitsize * 8
    nprobes = int(rng.integers(1, total + 1))
    bits = np.sort(rng.choice(total, nprobes, replace=False))
    raw = rng.integers(0, 256, (n, unitsize), dtype=np.uint8)
    meta = ["[global]", "sigrok version=0.5.2", "", "[device 1]", "capturefile=logic-1",
            f"total probes={total}", "samplerate=33 MHz", "total analog=0"]
    meta += [f"probe{b + 1}=L{b}" for b in bits] + [f"unitsize={unitsize}", ""]
    cuts = np.sort(rng.integers(0, n + 1, members - 1)) if members > 1 else []
    parts = np.split(raw, cuts)
    files = {"version": b"2", "metadata": "\n".join(meta).encode(),
             EXTRA_MEMBER: json.dumps({"format": 1, "mode": "state", "clock_hz": 33e6}).encode()}
    files.update({f"logic-1-{i + 1}": p.tobytes() for i, p in enumerate(parts)})
    path = tmp_path / f"r{unitsize}_{n}.sr"
    make_sr(path, files)
    return path, [f"L{b}" for b in bits]


def _generic_fields(cap, fields, chunk):
    """What iter_fields must equal: every line unpacked by iter_chunks and assembled LSB first."""
    names = sorted({c for v in fields.values() for c in ([v] if isinstance(v, str) else v)})
    data = cap.read(names)
    out = {}
    for k, v in fields.items():
        if isinstance(v, str):
            out[k] = data[v]
        else:
            acc = np.zeros(cap.num_samples, np.uint64)
            for i, c in enumerate(v):
                acc |= data[c].astype(np.uint64) << np.uint64(i)
            out[k] = acc
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), unitsize=st.integers(1, 11), n=st.integers(1, 400),
       members=st.integers(1, 3), chunk=st.integers(1, 500))
def test_packed_fields_equal_generic_assembly(tmp_path, seed, unitsize, n, members, chunk):
    rng = np.random.default_rng(seed)
    path, names = _random_sr(tmp_path, rng, unitsize, n, members)
    cap = read_sr(path)
    fields = {}
    for f in range(int(rng.integers(1, 5))):
        kind = rng.integers(0, 3)
        if kind == 0:      # one line
            fields[f"f{f}"] = str(rng.choice(names))
        elif kind == 1:    # consecutive probes (aligned or not), the common wiring
            a = int(rng.integers(0, len(names)))
            b = int(rng.integers(a + 1, min(len(names), a + 64) + 1))
            fields[f"f{f}"] = names[a:b]
        else:              # any order, any subset
            k = int(rng.integers(1, min(len(names), 64) + 1))
            fields[f"f{f}"] = [str(x) for x in rng.choice(names, k, replace=False)]
    want = _generic_fields(cap, fields, chunk)
    it = cap.iter_fields(fields, chunk_samples=chunk)
    assert it is not None
    parts = list(it)
    assert [p.start for p in parts] == sorted(p.start for p in parts)
    assert sum(p.length for p in parts) == n
    # blocks run on across chunk members: every one is chunk_samples long but the last
    assert all(p.length == chunk for p in parts[:-1])
    for k, v in fields.items():
        got = np.concatenate([p[k] for p in parts])
        assert got.dtype == (np.uint8 if isinstance(v, str) else np.uint64)
        np.testing.assert_array_equal(got, want[k], err_msg=f"field {k} = {v}")


def test_packed_fields_cover_all_64_lines_at_every_offset(tmp_path):
    # a 64-line vector starting at each bit of a byte: 8-byte reads unaligned by 0..7 bits
    rng = np.random.default_rng(7)
    for off in range(8):
        unitsize = 10
        raw = rng.integers(0, 256, (33, unitsize), dtype=np.uint8)
        probes = [f"B{i}" for i in range(unitsize * 8)]
        make_sr(tmp_path / f"o{off}.sr", {"version": b"2", "metadata": metadata(probes, unitsize),
                                          "logic-1-1": raw.tobytes()})
        cap = read_sr(tmp_path / f"o{off}.sr")
        fields = {"ad": probes[off:off + 64], "top": probes[-64:]}
        got = {k: np.concatenate([c[k] for c in cap.iter_fields(fields, chunk_samples=8)]) for k in fields}
        want = _generic_fields(cap, fields, 8)
        for k in fields:
            np.testing.assert_array_equal(got[k], want[k])


def test_captures_without_packed_samples_say_so():
    cap = Capture.from_arrays({"A": np.zeros(4, np.uint8)}, TimeBase.state(clock_hz=1e6))
    assert cap.iter_fields({"a": "A"}) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), chunk=st.integers(1, 128),
       inv=st.sets(st.sampled_from(["frame_n", "stop_n", "ad", "cbe_n", "par"])))
def test_bus_clocks_from_packed_samples_equal_the_generic_path(tmp_path, seed, n, chunk, inv):
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.capture.profile import BusProfile

    rng = np.random.default_rng(seed)
    lines = {"FRAME#": 1, "IRDY#": 1, "TRDY#": 1, "STOP#": 1, "DEVSEL#": 1, "PAR": 1,
             "AD": int(rng.choice([8, 32, 33, 64])), "CBE": int(rng.integers(2, 9))}
    sr_names = [nm for nm, w in lines.items() for nm in ([nm] if w == 1 else [f"{nm}{i}" for i in range(w)])]
    order = list(rng.permutation(len(sr_names))) if rng.random() < 0.5 else list(range(len(sr_names)))
    arrays = {sr_names[i]: rng.integers(0, 2, n, dtype=np.uint8) for i in order}
    write_sr(Capture.from_arrays(arrays, TimeBase.state(clock_hz=33e6)), tmp_path / "b.sr")
    cap = read_sr(tmp_path / "b.sr")
    generic = Capture(cap.channels, cap.timebase, cap.num_samples, cap._source, cap.metadata, cap.path)
    assert generic.iter_fields({"x": "PAR"}) is None
    signals = {"frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
               "devsel_n": "DEVSEL#", "par": "PAR", "ad": [f"AD{i}" for i in range(lines["AD"])],
               "cbe_n": [f"CBE{i}" for i in range(lines["CBE"])]}
    bus = BusProfile("b", signals=signals, inverted=set(inv), width=64)
    fast = list(bus_clocks(cap, bus, chunk_clocks=chunk))
    slow = list(bus_clocks(generic, bus, chunk_clocks=chunk))
    assert [len(c) for c in fast] == [len(c) for c in slow]
    for a, b in zip(fast, slow):
        assert a.start_clock == b.start_clock
        np.testing.assert_array_equal(a.times_ps, b.times_ps)
        assert set(a.sig) == set(b.sig)
        for k in a.sig:
            assert a.sig[k].dtype == b.sig[k].dtype, k
            np.testing.assert_array_equal(a.sig[k], b.sig[k], err_msg=k)
    # the control lines as one code per clock, straight from the packed bytes (the lines
    # may share a sample byte or not, in any order; a probe may invert them)
    from pcitrace.buses.pci import CONTROL_CODE

    coded = list(bus_clocks(cap, bus, chunk_clocks=chunk, control_code=True))
    assert [len(c) for c in coded] == [len(c) for c in slow]
    for a, b in zip(coded, slow):
        assert set(a.sig) == set(b.sig) - set(dict(CONTROL_CODE)) | {"code"}
        want = sum(((b.sig[s] == 0) * w).astype(np.uint8) for s, w in CONTROL_CODE)
        assert a.sig["code"].dtype == np.uint8
        np.testing.assert_array_equal(a.sig["code"], want)
        for k in set(a.sig) - {"code"}:
            np.testing.assert_array_equal(a.sig[k], b.sig[k], err_msg=k)
    # a capture without packed samples keeps the lines
    assert all("code" not in c.sig for c in bus_clocks(generic, bus, chunk_clocks=chunk, control_code=True))


def test_bad_metadata_and_long_channel_lists_give_one_line_errors(tmp_path):
    # Found by review: configparser's message ran over three lines, and an unknown channel
    # listed all 180 channels of a capture in one 2,000-character line.
    import zipfile

    import numpy as np

    from pcitrace.capture import Capture, TimeBase, open_capture
    from pcitrace.errors import PcitraceError

    bad = tmp_path / "badmeta.sr"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("version", "2")
        zf.writestr("metadata", "[device 1]\nsamplerate=1 MHz\n[device 1]\nthis line has no equals sign\n")
        zf.writestr("logic-1-1", b"\0" * 8)
    with pytest.raises(PcitraceError) as e:
        open_capture(bad)
    assert "\n" not in str(e.value) and "metadata" in str(e.value)

    cap = Capture.from_arrays({f"CH{i}": np.zeros(4, np.uint8) for i in range(180)}, TimeBase.timing(1e6))
    with pytest.raises(PcitraceError) as e:
        cap.channel("NOPE")
    assert len(str(e.value)) < 400 and "180 in all" in str(e.value)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), unitsize=st.integers(1, 4), nlines=st.integers(1, 8), data=st.data())
def test_line_codes_from_packed_bytes_equal_the_lines(seed, unitsize, nlines, data):
    # shifted groups (lines on neighbouring channels, in code order or not) and the table
    # path (many scattered lines) must both give the sum of the weights of the counted lines
    from pcitrace.capture.model import LineCode
    from pcitrace.capture.sr import _Lines

    nlines = min(nlines, 8 * unitsize)
    bits = data.draw(st.lists(st.integers(0, 8 * unitsize - 1), min_size=nlines, max_size=nlines, unique=True))
    weights = [1 << i for i in data.draw(st.permutations(range(8)))[:nlines]]
    levels = data.draw(st.lists(st.integers(0, 1), min_size=nlines, max_size=nlines))
    raw = np.random.default_rng(seed).integers(0, 256, (300, unitsize), dtype=np.uint8)
    lines = [((raw[:, b >> 3] >> (b & 7)) & 1).astype(np.uint8) for b in bits]
    want = LineCode(tuple(f"L{i}" for i in range(nlines)), tuple(weights), tuple(levels)).of_lines(lines)
    np.testing.assert_array_equal(_Lines(raw).code(bits, weights, levels), want)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), chunk=st.integers(1, 64),
       inv=st.sets(st.sampled_from(["frame_n", "irdy_n", "ad", "par"])), code=st.booleans())
def test_timing_bus_clocks_from_packed_samples_equal_the_generic_path(tmp_path, seed, n, chunk, inv, code):
    # A timing .sr: only the samples at CLK's rising edges are unpacked (edges across read
    # blocks, a clock that starts high, runs of several samples per level, irregular periods).
    from pcitrace.capture.clocked import bus_clocks
    from pcitrace.capture.profile import BusProfile

    rng = np.random.default_rng(seed)
    clk = np.repeat(np.arange(n) % 2, rng.integers(1, 4, n))[:n].astype(np.uint8)
    if rng.random() < 0.5:
        clk ^= 1
    names = ["FRAME#", "IRDY#", "TRDY#", "STOP#", "DEVSEL#", "PAR"] + [f"AD{i}" for i in range(12)]
    arrays = {nm: rng.integers(0, 2, len(clk), dtype=np.uint8) for nm in names}
    arrays["CLK"] = clk
    order = list(rng.permutation(len(arrays)))
    keys = list(arrays)
    # small zip members: reads run across them
    write_sr(Capture.from_arrays({keys[i]: arrays[keys[i]] for i in order}, TimeBase.timing(200e6)), tmp_path / "t.sr",
             chunk_bytes=int(rng.integers(1, 40)) * 3)
    cap = read_sr(tmp_path / "t.sr")
    generic = Capture(cap.channels, cap.timebase, cap.num_samples, cap._source, cap.metadata, cap.path)
    assert cap.iter_fields({"x": "PAR"}, clock="CLK") is not None and generic.iter_fields({"x": "PAR"}) is None
    signals = {"clk": "CLK", "frame_n": "FRAME#", "irdy_n": "IRDY#", "trdy_n": "TRDY#", "stop_n": "STOP#",
               "devsel_n": "DEVSEL#", "par": "PAR", "ad": [f"AD{i}" for i in range(12)]}
    bus = BusProfile("b", signals=signals, inverted=set(inv), width=32)
    fast = list(bus_clocks(cap, bus, chunk_clocks=chunk, read_samples=chunk, control_code=code))
    slow = list(bus_clocks(generic, bus, chunk_clocks=chunk, read_samples=chunk))
    assert [len(c) for c in fast] == [len(c) for c in slow]
    assert sum(len(c) for c in slow) == int(np.count_nonzero((clk[1:] == 1) & (clk[:-1] == 0)))
    from pcitrace.buses.pci import CONTROL_CODE
    for a, b in zip(fast, slow):
        assert a.start_clock == b.start_clock
        np.testing.assert_array_equal(a.times_ps, b.times_ps)
        if code:
            want = sum(((b.sig[s] == 0) * w).astype(np.uint8) for s, w in CONTROL_CODE)
            np.testing.assert_array_equal(a.sig["code"], want)
        for k in set(a.sig) - {"code"}:
            assert a.sig[k].dtype == b.sig[k].dtype, k
            np.testing.assert_array_equal(a.sig[k], b.sig[k], err_msg=k)


# -- the threaded writer ------------------------------------------------------------------------

def _layout_arrays(rng, n):
    """Channels of mixed types as a source may give them, with bits above each width set."""
    kinds = [(np.uint8, 1), (np.bool_, 1), (np.uint8, 8), (np.uint8, 5), (np.int16, 12), (np.dtype(">u4"), 32),
             (np.uint32, 17), (np.uint64, 64), (np.uint64, 33), (np.int64, 64), (np.uint16, 16)]
    arrays, widths = {}, {}
    for k in range(int(rng.integers(1, 12))):
        dt, w = kinds[int(rng.integers(0, len(kinds)))]
        dt = np.dtype(dt)
        if dt.kind == "b":
            a = rng.random(n) < 0.5
        else:
            a = rng.integers(0, 256, (n, dt.itemsize), dtype=np.uint8).view(dt).reshape(n)
        name = f"c{k}_"
        arrays[name] = a
        widths[name] = w
    return arrays, widths


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300))
def test_packer_equals_the_byte_by_byte_reference(seed, n):
    from pcitrace.capture.sr import _byte_plan, _pack_reference, _Packer

    rng = np.random.default_rng(seed)
    arrays, widths = _layout_arrays(rng, n)
    lines = [(f"{src}{i}", src, i) for src, w in widths.items() for i in range(w)]
    if rng.random() < 0.3:        # channels in any order (probes chosen by hand)
        lines = [lines[i] for i in rng.permutation(len(lines))]
    unitsize = (len(lines) + 7) // 8
    if rng.random() < 0.3:        # chunks are views into longer arrays
        arrays = {k: np.concatenate([v, v])[::2] for k, v in arrays.items()}
    got = _Packer(lines, unitsize)(arrays, n)
    want = _pack_reference(_byte_plan(lines, unitsize), arrays, n, unitsize)
    assert got.shape == (n, unitsize) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    # and what that means: line p of the sample is bit `bit` of its source
    bits = np.unpackbits(got, axis=1, bitorder="little")
    for p, (_, src, bit) in enumerate(lines[:20]):
        a = arrays[src]
        a = a.view(np.uint8) if a.dtype.kind == "b" else a.astype(a.dtype.newbyteorder("=")).view(f"u{a.dtype.itemsize}")
        np.testing.assert_array_equal(bits[:, p], (a >> bit) & 1)


@pytest.mark.parametrize("layout,words", [
    # (source, width, dtype) in sample order; the runs stored as whole words
    ([("a", 1, np.uint8), ("v", 64, np.uint64), ("c", 8, np.uint64)], {1: 8}),        # AD after one line
    ([("v", 64, np.uint64), ("w", 64, np.uint64)], {0: 8, 1: 8}),                      # aligned, back to back
    ([("a", 1, np.uint8), ("v", 24, np.uint64), ("w", 40, np.uint64)], {1: 4}),        # w's word would pass the end
    # v's 4-byte word ends in a zero byte over w's first byte (mended); w then owns one byte: no word
    ([("a", 3, np.uint8), ("v", 21, np.uint32), ("w", 16, np.uint16), ("b", 1, np.uint8)], {1: 4}),
    ([("a", 3, np.uint8), ("v", 21, np.uint32), ("b", 8, np.uint8), ("w", 16, np.uint16)], {1: 4, 3: 2}),
    ([("v", 7, np.uint8), ("w", 12, np.int16)], {}),                                   # nothing worth a word
])
def test_packer_words_and_the_bytes_around_them(layout, words):
    from pcitrace.capture.sr import _byte_plan, _pack_reference, _Packer

    rng = np.random.default_rng(3)
    n = 1001
    arrays = {src: rng.integers(0, 256, (n, np.dtype(dt).itemsize), dtype=np.uint8).view(dt).reshape(n)
              for src, _, dt in layout}
    lines = [(f"{src}{i}", src, i) for src, w, _ in layout for i in range(w)]
    unitsize = (len(lines) + 7) // 8
    pack = _Packer(lines, unitsize)
    got = pack(arrays, n)
    np.testing.assert_array_equal(got, _pack_reference(_byte_plan(lines, unitsize), arrays, n, unitsize))
    (plan,) = pack._plans.values()
    assert plan[1] == words


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=captures(max_samples=3000), chunk=st.integers(1, 2000))
def test_fast_and_reference_writers_store_the_same_members(tmp_path, cap, chunk):
    write_sr(cap, tmp_path / "fast.sr", chunk_bytes=chunk)
    write_sr(cap, tmp_path / "ref.sr", chunk_bytes=chunk, reference=True)
    with zipfile.ZipFile(tmp_path / "fast.sr") as f, zipfile.ZipFile(tmp_path / "ref.sr") as r:
        assert f.testzip() is None
        assert f.namelist() == r.namelist()
        for name in r.namelist():
            assert f.read(name) == r.read(name), name


def _multi_chunk_capture(n=20_000):
    rng = np.random.default_rng(5)
    arrays = {"FRAME#": (np.cumsum(rng.random(n) < 0.1) & 1).astype(np.uint8),
              "AD": rng.integers(0, 2**63, n, dtype=np.uint64),
              "CBE#": rng.integers(0, 16, n, dtype=np.uint8), "PAR": rng.integers(0, 2, n, dtype=np.uint8)}
    return Capture.from_arrays(arrays, TimeBase.state(clock_hz=66e6), widths={"AD": 64, "CBE#": 4})


def test_the_threads_do_not_change_the_bytes(tmp_path, monkeypatch):
    from pcitrace.capture import sr

    cap = _multi_chunk_capture()
    sizes = {}
    for workers in (1, 2, 4):
        monkeypatch.setattr(sr, "_workers", lambda w=workers: w)
        write_sr(cap, tmp_path / f"w{workers}.sr", chunk_bytes=3000)
        sizes[workers] = (tmp_path / f"w{workers}.sr").read_bytes()
    assert sizes[1] == sizes[2] == sizes[4]
    with zipfile.ZipFile(tmp_path / "w1.sr") as zf:
        assert sum(n.startswith("logic-1-") for n in zf.namelist()) == -(-20_000 // (3000 // 9))   # 70 lines: 9 bytes a sample


def test_chunks_held_while_writing_are_bounded(tmp_path, monkeypatch):
    """The source runs ahead of the file by at most a few chunks (memory stays bounded)."""
    from pcitrace.capture import _zipwrite, sr

    cap = _multi_chunk_capture()
    written, ahead = [0], []
    real_add = _zipwrite.ZipWriter.add_deflated

    def add_deflated(self, name, *a):
        written[0] += name.startswith("logic-1-")
        return real_add(self, name, *a)

    src = cap._source

    def source(names, start, stop, chunk):
        for k, ch in enumerate(src(names, start, stop, chunk)):
            ahead.append(k - written[0])
            yield ch

    monkeypatch.setattr(_zipwrite.ZipWriter, "add_deflated", add_deflated)
    monkeypatch.setattr(sr, "_workers", lambda: 2)
    slow = Capture(cap.channels, cap.timebase, cap.num_samples, source, cap.metadata)
    write_sr(slow, tmp_path / "b.sr", chunk_bytes=1000)
    assert len(ahead) == -(-20_000 // (1000 // 9)) and max(ahead) <= 2 + 1   # a chunk per worker and one read


def test_a_failing_worker_leaves_nothing(tmp_path, monkeypatch):
    import threading

    from pcitrace.capture import sr

    calls = [0]
    real = sr.deflate

    def deflate(data):
        calls[0] += 1
        if calls[0] == 3:
            raise MemoryError("no room for the deflate stream")
        return real(data)

    monkeypatch.setattr(sr, "deflate", deflate)
    target = tmp_path / "keep.sr"
    target.write_bytes(b"old")
    with pytest.raises(MemoryError):
        write_sr(_multi_chunk_capture(), target, chunk_bytes=2000)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["keep.sr"]
    assert not [t for t in threading.enumerate() if t.name.startswith("pcitrace-write-sr")]


def test_a_full_disk_is_an_error_naming_the_file(tmp_path):
    import resource

    cap = _multi_chunk_capture()
    target = tmp_path / "big.sr"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Python ignores SIGXFSZ: a write past the limit fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, hard))
    try:
        with pytest.raises(PcitraceError) as err:
            write_sr(cap, target)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    msg = str(err.value)
    assert str(target) in msg and "cannot write" in msg and "Fix:" in msg
    assert os.listdir(tmp_path) == []


def test_forced_zip64_reads_back(tmp_path):
    cap = _multi_chunk_capture(3000)
    write_sr(cap, tmp_path / "z.sr", chunk_bytes=5000, force_zip64=True)
    with zipfile.ZipFile(tmp_path / "z.sr") as zf:
        assert zf.testzip() is None
        assert all(i.extract_version == 45 for i in zf.infolist())
    back = open_capture(tmp_path / "z.sr")
    assert back.num_samples == 3000
    want, got = bit_columns(cap), back.read()
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


@pytest.mark.sigrok
@pytest.mark.parametrize("force_zip64", [False, True])
def test_sigrok_cli_reads_many_members_and_zip64(tmp_path, sigrok_cli, force_zip64):
    rng = np.random.default_rng(11)
    n = 900
    arrays = {"FRAME#": rng.integers(0, 2, n, dtype=np.uint8), "AD": rng.integers(0, 2**32, n, dtype=np.uint64),
              "PAR": rng.integers(0, 2, n, dtype=np.uint8)}
    cap = Capture.from_arrays(arrays, TimeBase.timing(10e6), widths={"AD": 32})
    write_sr(cap, tmp_path / "m.sr", chunk_bytes=500, force_zip64=force_zip64)
    got = sigrok_bits(sigrok_cli, tmp_path / "m.sr")
    want = bit_columns(cap)
    assert [nm for nm, _ in got] == list(want)
    for name, bits in got:
        assert np.array_equal(bits, want[name]), name


def test_without_isal_zlib_writes_the_same_content(tmp_path, monkeypatch):
    from pcitrace.capture import _zipwrite

    cap = _multi_chunk_capture(5000)
    write_sr(cap, tmp_path / "isal.sr", chunk_bytes=7000)
    monkeypatch.setattr(_zipwrite, "_isal", None)
    write_sr(cap, tmp_path / "zlib.sr", chunk_bytes=7000)
    with zipfile.ZipFile(tmp_path / "isal.sr") as a, zipfile.ZipFile(tmp_path / "zlib.sr") as b:
        assert b.testzip() is None
        assert [(i.filename, i.file_size, i.CRC) for i in a.infolist()] == \
               [(i.filename, i.file_size, i.CRC) for i in b.infolist()]
        assert [i.compress_size for i in a.infolist()] != [i.compress_size for i in b.infolist()]
    got = open_capture(tmp_path / "zlib.sr").read()
    for k, v in bit_columns(cap).items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


# --- the reader's steps, each on its own --------------------------------------------------------

def test_code_changes_within_a_block_and_from_the_one_before():
    from pcitrace.capture.model import LineCode
    from pcitrace.capture.sr import _code_changes
    # bit 0 counted when low (weight 1), bit 1 when high (weight 2)
    lc = LineCode(("a", "b"), (1, 2), (0, 1))
    raw = np.array([[0b01], [0b01], [0b11], [0b10]], np.uint8)     # codes 0, 0, 2, 3
    (at, flips), last = _code_changes(raw, [0, 1], lc, None, 100)
    assert (at.tolist(), flips.tolist(), int(last)) == ([102, 103], [2, 1], 3)
    (at, flips), _ = _code_changes(raw, [0, 1], lc, 3, 100)         # the block before ended on 3
    assert (at.tolist(), flips.tolist()) == ([100, 102, 103], [3, 2, 1])


def test_read_exactly_and_skip_raise_on_a_short_member():
    import io
    from pcitrace.capture.sr import _read_exactly, _skip_samples
    f = io.BytesIO(bytes(10))
    assert _skip_samples(f, 100, 103, 2, 2) == 103 and f.tell() == 6     # 3 samples of 2 bytes
    assert _read_exactly(f, 4) == bytes(4)
    with pytest.raises(EOFError):
        _read_exactly(f, 2)


def test_shared_reads_session_opens_once_and_nested_shares_nothing(tmp_path):
    cap = Capture.from_arrays({"a": np.arange(64, dtype=np.uint8) & 1}, TimeBase.timing(1e6))
    write_sr(cap, tmp_path / "x.sr")
    sr = read_sr(tmp_path / "x.sr")
    with sr.shared_reads() as outer:
        reader = outer.reader
        assert reader.session == {"streams": {}, "sealed": False}
        with sr.shared_reads() as inner:
            assert not inner.own
        assert reader.session is not None            # the nested one did not close it
        a = list(sr.iter_chunks(["a"], chunk_samples=16))
        outer.seal()
        assert reader.session["sealed"] and len(reader.session["streams"]) == 1
    assert reader.session is None
    assert np.concatenate([c.data["a"] for c in a]).tolist() == (np.arange(64) & 1).tolist()


def test_sr_timebase_needs_a_rate():
    from types import SimpleNamespace

    from pcitrace.capture.meta import OwnMeta
    from pcitrace.capture.sr import _sr_timebase
    lay = SimpleNamespace(samplerate=None, timestamps=None, num_samples=4)
    with pytest.raises(PcitraceError, match="no samplerate"):
        _sr_timebase(lay, OwnMeta(), "x.sr")
    with pytest.raises(PcitraceError, match="without a clock"):
        _sr_timebase(lay, OwnMeta(mode="state"), "x.sr")
    assert _sr_timebase(lay, OwnMeta(mode="state", clock_hz=66e6), "x.sr").clock_hz == 66e6


# -- typed metadata (issue 18: each field of the sigrok metadata and of pcitrace.json typed once) --

def _sr_with(tmp_path, extra=None, rate="1 MHz", meta_extra="", members=None):
    files = {"version": b"2", "metadata": metadata(["A"], 1, rate=rate, extra=meta_extra),
             "logic-1-1": bytes([0, 1] * 50)}
    if extra is not None:
        files[EXTRA_MEMBER] = extra if isinstance(extra, bytes) else json.dumps(extra).encode()
    files.update(members or {})
    make_sr(tmp_path / "x.sr", files)
    return tmp_path / "x.sr"


@pytest.mark.parametrize("extra", [
    "state", [1, 2], {"metadata": 1.5}, {"metadata": [["a"]]}, {"start_ps": [1]}, {"start_ps": "é"},
    {"start_ps": 2**70}, {"samplerate_hz": [1]}, {"samplerate_hz": "None"}, {"samplerate_hz": 1e-320},
    {"mode": "state", "clock_hz": "clock_hz"}, {"mode": "state", "clock_hz": {}}, {"mode": "state", "clock_hz": 1e300},
    {"metadata": {"end_ps": float("nan")}}, {"timestamps": "yes"}])
def test_wrong_types_in_own_metadata_are_one_error(tmp_path, extra):
    with pytest.raises(PcitraceError, match=EXTRA_MEMBER):
        c = open_capture(_sr_with(tmp_path, extra))
        c.duration_ps, c.timebase.time_ps(c.num_samples - 1)


@pytest.mark.parametrize("rate", ["1e-300 Hz", "1e300", "0.0000001 Hz", "1e30 THz"])
def test_samplerates_past_the_time_arithmetic_are_refused(tmp_path, rate):
    with pytest.raises(PcitraceError, match="sample rate"):
        c = open_capture(_sr_with(tmp_path, rate=rate))
        c.duration_ps, c.timebase.time_ps(c.num_samples - 1)


def test_total_analog_that_is_not_a_number(tmp_path):
    with pytest.raises(PcitraceError, match="total analog"):
        open_capture(_sr_with(tmp_path, meta_extra="total analog=x"))


@pytest.mark.parametrize("ts", [np.array(["a", "b"]), np.array([1.5, 2.5]), np.zeros((2, 2), np.int64),
                                np.array([2**63, 2**63 + 1], np.uint64)])
def test_timestamps_of_the_wrong_kind(tmp_path, ts):
    import io as _io
    bio = _io.BytesIO()
    np.save(bio, ts, allow_pickle=False)
    extra = {"mode": "state", "timestamps": True}
    with pytest.raises(PcitraceError, match="timestamps"):
        open_capture(_sr_with(tmp_path, extra, members={"pcitrace-timestamps.npy": bio.getvalue()}))


def test_zip_version_zipfile_cannot_read(tmp_path):
    path = _sr_with(tmp_path)
    data = bytearray(path.read_bytes())
    i = data.find(b"PK\x01\x02")
    struct.pack_into("<H", data, i + 6, 215)          # "version needed to extract" 21.5
    path.write_bytes(bytes(data))
    # zipfile refuses the directory; the members are read from their own headers
    c = open_capture(path)
    assert c.num_samples == 100 and "version 21.5" in c.metadata["warnings"][0]


def test_own_metadata_is_typed_once(tmp_path):
    c = open_capture(_sr_with(tmp_path, {"mode": "state", "clock_hz": 33e6, "start_ps": 5,
                                         "metadata": {"trigger_sample": 3, "note": "hi"}}))
    assert c.timebase.mode == "state" and c.timebase.clock_hz == 33e6 and c.timebase.start_ps == 5
    assert c.metadata["trigger_sample"] == 3 and c.metadata["note"] == "hi"


def test_clocked_vector_above_byte_8_in_a_block_without_clock_edge(tmp_path):
    """A well-formed timing capture: a block with no rising clock edge holds no samples to
    unpack, and a vector whose bits start past the 8 spare bytes must not make a strided view
    reach outside that empty block (numpy raised 'strides is incompatible' there)."""
    n = 4000
    clk = np.zeros(n, np.uint8)
    clk[3000:] = np.arange(1000) % 2                 # the first blocks hold no edge at all
    cols = {f"P{i}": np.zeros(n, np.uint8) for i in range(80)}      # push AD past byte 8
    ad = np.arange(n, dtype=np.uint64) * np.uint64(0x0101010101)
    cap = Capture.from_arrays({**cols, "CLK": clk, **{f"AD{i}": (ad >> np.uint64(i)) & np.uint64(1)
                                                      for i in range(40)}}, TimeBase.timing(100e6))
    write_sr(cap, tmp_path / "t.sr")
    sr = open_capture(tmp_path / "t.sr")
    chunks = list(sr.iter_fields({"ad": [f"AD{i}" for i in range(40)]}, chunk_samples=512, clock="CLK"))
    got = np.concatenate([c["ad"] for c in chunks])
    edges = np.flatnonzero((clk[1:] == 1) & (clk[:-1] == 0)) + 1
    assert got.tolist() == (ad[edges] & np.uint64((1 << 40) - 1)).tolist()


def test_probe_name_continued_on_a_second_line_is_refused(tmp_path):
    """An INI continuation line makes a channel name with a line break, which then ran over
    two lines of an error message (issue 18)."""
    with pytest.raises(PcitraceError, match="probe2") as e:
        open_capture(_sr_with(tmp_path, meta_extra="probe2=B\n  continuation\n"))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("ts", [[0, 5, 3], [-(2**62), 2**62, 2**62]])
def test_timestamps_must_go_forward_within_the_time_range(tmp_path, ts):
    """Sample times that go back, or span more than int64 picoseconds can subtract, are refused
    (a frame's wire time overflowed from them; issue 18)."""
    import io as _io
    bio = _io.BytesIO()
    np.save(bio, np.array(ts, np.int64), allow_pickle=False)
    with pytest.raises(PcitraceError, match="timestamps"):
        open_capture(_sr_with(tmp_path, {"mode": "state", "timestamps": True},
                              members={"pcitrace-timestamps.npy": bio.getvalue()}))


def _alias_chunks(path, copies: int) -> None:
    """Add central directory entries logic-1-2..copies+1 that all point at logic-1-1's data."""
    data = bytearray(path.read_bytes())
    eocd = data.rfind(b"PK\x05\x06")
    cd_size, cd_off = struct.unpack_from("<II", data, eocd + 12)
    cd = bytes(data[cd_off:cd_off + cd_size])
    i = cd.find(b"PK\x01\x02")
    entries, target = [], None
    while i >= 0 and i < len(cd):
        n, m, k = struct.unpack_from("<HHH", cd, i + 28)
        entry = cd[i:i + 46 + n + m + k]
        entries.append(entry)
        if entry[46:46 + n] == b"logic-1-1":
            target = entry
        i += 46 + n + m + k
    new = list(entries)
    for j in range(2, copies + 2):
        name = f"logic-1-{j}".encode()
        e = bytearray(target[:46]) + name
        struct.pack_into("<H", e, 28, len(name))
        struct.pack_into("<HH", e, 30, 0, 0)
        new.append(bytes(e))
    body = b"".join(new)
    end = bytearray(data[eocd:eocd + 22])
    struct.pack_into("<HHII", end, 8, len(new), len(new), len(body), cd_off)
    path.write_bytes(bytes(data[:cd_off]) + body + bytes(end))


def test_members_sharing_their_data_are_refused(tmp_path):
    """A small zip whose 100 entries all point at one member would read that member 100 times
    over (issue 18): members are bounded against the file, and may not overlap."""
    path = _sr_with(tmp_path)
    _alias_chunks(path, 99)
    assert len(zipfile.ZipFile(path).namelist()) > 100
    with pytest.raises(PcitraceError, match="overlap") as e:
        open_capture(path)
    assert "x.sr" in str(e.value)


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_a_cut_sr_gives_the_whole_chunks_before_the_cut(tmp_path, cut):
    """An .sr cut at 10/50/90 % of its bytes loses its zip directory; the whole chunks before
    the cut are read and a warning says where the data stops (issue 18)."""
    n = 20000
    a = (np.arange(n) // 7) % 2
    cap = Capture.from_arrays({"A": a, "B": np.arange(n) % 3 == 0}, TimeBase.timing(1e6))
    write_sr(cap, tmp_path / "ok.sr", chunk_bytes=1000)
    data = (tmp_path / "ok.sr").read_bytes()
    (tmp_path / "cut.sr").write_bytes(data[:int(len(data) * cut)])
    got = open_capture(tmp_path / "cut.sr")
    whole = got.num_samples
    assert 0 < whole <= n and whole % 1000 == 0 and (whole < n or cut > 0.5)
    assert got.read(["A"])["A"].tolist() == a[:whole].tolist()
    (warning,) = got.metadata["warnings"]
    assert f"the data stops after sample {whole - 1} ({(whole - 1) / 1e6 * 1e6:.3f} us)" in warning

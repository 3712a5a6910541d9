"""The zip writer for members deflated elsewhere: zipfile and our member reader read back what it
wrote, with and without ZIP64 records, and the same members always give the same bytes."""

from __future__ import annotations

import io
import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture import _zipwrite
from pcitrace.capture._zipread import Member
from pcitrace.capture._zipwrite import ZipWriter, deflate

NAMES = st.one_of(st.sampled_from(["version", "metadata", "logic-1-1", "pcitrace.json", "a/b"]),
                  st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF, exclude_categories=("Cs",)),
                          min_size=1, max_size=20))


def _payload(seed: int, size: int) -> bytes:
    rng = np.random.default_rng(seed)
    # runs of a few values like logic samples, with some noise
    runs = np.repeat(rng.integers(0, 4, size // 40 + 1, dtype=np.uint8), 40)[:size]
    noise = rng.random(size) < 0.05
    runs[noise] = rng.integers(0, 256, int(noise.sum()), dtype=np.uint8)
    return runs.tobytes()


def _write(path, members, force_zip64=False):
    with open(path, "wb") as fp:
        zw = ZipWriter(fp, force_zip64=force_zip64)
        for name, data in members:
            zw.add(name, data)
        zw.finish()


@pytest.fixture(params=["isal", "zlib"])
def deflater(request, monkeypatch):
    if request.param == "zlib":
        monkeypatch.setattr(_zipwrite, "_isal", None)
    return request.param


@settings(max_examples=40, deadline=None)
@given(names=st.lists(NAMES, min_size=1, max_size=6, unique=True), seed=st.integers(0, 2**32 - 1),
       sizes=st.lists(st.integers(0, 200_000), min_size=6, max_size=6), force_zip64=st.booleans())
def test_zipfile_and_our_reader_read_what_it_writes(tmp_path_factory, names, seed, sizes, force_zip64):
    path = tmp_path_factory.mktemp("z") / "w.zip"
    members = [(n, _payload(seed + i, sizes[i])) for i, n in enumerate(names)]
    _write(path, members, force_zip64)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None                       # every CRC checked
        assert zf.namelist() == names
        for (name, data), info in zip(members, zf.infolist()):
            assert zf.read(name) == data
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.file_size == len(data)
            with Member(zf, info) as m:
                assert m.read(len(data) + 1) == data
    raw = path.read_bytes()
    assert (b"PK\x06\x06" in raw[-200:]) == force_zip64       # the ZIP64 end record


def test_zip64_fields_are_the_ones_zipfile_reads(tmp_path):
    """Forced ZIP64: the directory's sizes and offsets are 0xFFFFFFFF and zipfile takes the
    real values from the extra fields (a wrong order or count would give other numbers)."""
    data = [b"abc" * 1000, b"", bytes(range(256)) * 40]
    _write(tmp_path / "a.zip", [("x", data[0]), ("y", data[1]), ("z", data[2])], force_zip64=True)
    _write(tmp_path / "b.zip", [("x", data[0]), ("y", data[1]), ("z", data[2])])
    with zipfile.ZipFile(tmp_path / "a.zip") as forced, zipfile.ZipFile(tmp_path / "b.zip") as plain:
        for f, p in zip(forced.infolist(), plain.infolist()):
            assert (f.file_size, f.CRC, f.extract_version) == (p.file_size, p.CRC, 45)
            assert f.compress_size == p.compress_size
            assert f.header_offset >= p.header_offset        # the local ZIP64 fields take room
        assert [forced.read(n) for n in "xyz"] == data
    raw = (tmp_path / "a.zip").read_bytes()
    end = raw[-22:]
    assert end[:4] == b"PK\x05\x06" and end[8:20] == b"\xff" * 12   # counts, size, offset: see ZIP64


def test_more_members_than_the_classic_end_record_counts(tmp_path):
    crc, size, stream = deflate(b"\x01\x02")
    path = tmp_path / "many.zip"
    with open(path, "wb") as fp:
        zw = ZipWriter(fp)
        for k in range(70_000):
            zw.add_deflated(f"logic-1-{k + 1}", crc, size, stream)
        zw.finish()
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        assert len(infos) == 70_000
        assert zf.read("logic-1-70000") == b"\x01\x02"


def test_deflate_streams_inflate_to_the_data(deflater):
    data = _payload(7, 300_000)
    for piece in (data, np.frombuffer(data, np.uint8).reshape(-1, 20)):
        crc, size, stream = deflate(piece)
        assert (crc, size) == (zlib.crc32(data), len(data))
        assert zlib.decompress(stream, -15) == data


def test_same_members_same_bytes(deflater):
    members = [("version", b"2"), ("logic-1-1", _payload(3, 100_000))]
    a, b = io.BytesIO(), io.BytesIO()
    for out in (a, b):
        zw = ZipWriter(out)
        for name, data in members:
            zw.add(name, data)
        zw.finish()
    assert a.getvalue() == b.getvalue()


def test_unicode_names_are_flagged(tmp_path):
    _write(tmp_path / "u.zip", [("µs-chunk", b"x")])
    with zipfile.ZipFile(tmp_path / "u.zip") as zf:
        info = zf.infolist()[0]
        assert info.filename == "µs-chunk" and info.flag_bits & 0x800


def test_a_name_twice_is_refused():
    zw = ZipWriter(io.BytesIO())
    zw.add("a", b"1")
    with pytest.raises(ValueError, match="duplicate"):
        zw.add("a", b"2")

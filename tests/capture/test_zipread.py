"""Streaming member reads through ISA-L's inflate equal zipfile's, and fail where it fails."""

import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture import _zipread
from pcitrace.capture._zipread import ERRORS, Member


def _zip(tmp_path, payload: bytes, method, level=6) -> zipfile.ZipFile:
    path = tmp_path / "m.zip"
    with zipfile.ZipFile(path, "w", compression=method, compresslevel=level) as zf:
        zf.writestr("a", b"head")
        zf.writestr("logic-1-1", payload)
        zf.writestr("z", b"tail")
    return zipfile.ZipFile(path)


def _read_all(m: Member, step: int) -> bytes:
    out = []
    while True:
        b = m.read(step)
        if not b:
            return b"".join(out)
        assert len(b) == step or not m.read(1)      # short only at the end
        out.append(b)


@pytest.fixture(params=["isal", "zlib"])
def inflater(request, monkeypatch):
    if request.param == "zlib":
        monkeypatch.setattr(_zipread, "_inflate", zlib)
    return request.param


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(0, 300_000), step=st.integers(1, 70_000),
       stored=st.booleans(), level=st.integers(0, 9), runs=st.booleans())
def test_member_reads_equal_zipfile(tmp_path_factory, seed, size, step, stored, level, runs):
    rng = np.random.default_rng(seed)
    # logic samples: long runs of a few values (compress well) or noise
    payload = (np.repeat(rng.integers(0, 4, size // 50 + 1, dtype=np.uint8), 50)[:size] if runs
               else rng.integers(0, 256, size, dtype=np.uint8)).tobytes()
    zf = _zip(tmp_path_factory.mktemp("z"), payload, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED, level)
    for impl in (_zipread._inflate, zlib):
        _zipread._inflate, keep = impl, _zipread._inflate
        try:
            with Member(zf, zf.getinfo("logic-1-1")) as m:
                assert _read_all(m, step) == payload
        finally:
            _zipread._inflate = keep


def test_exact_reads_check_the_crc_without_asking_for_more(tmp_path, inflater):
    payload = bytes(range(256)) * 500
    zf = _zip(tmp_path, payload, zipfile.ZIP_DEFLATED)
    info = zf.getinfo("logic-1-1")
    info.CRC ^= 1                                   # as if the data were damaged
    with Member(zf, info) as m:
        m.read(1000)
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            m.read(len(payload) - 1000)              # the last declared bytes: checked here


def test_damaged_data_is_an_error(tmp_path, inflater):
    payload = np.random.default_rng(1).integers(0, 4, 200_000, dtype=np.uint8).tobytes()
    zf = _zip(tmp_path, payload, zipfile.ZIP_DEFLATED)
    info = zf.getinfo("logic-1-1")
    raw = bytearray((tmp_path / "m.zip").read_bytes())
    start = info.header_offset + 30 + len(info.filename)
    for i in range(start + 40, start + 60):
        raw[i] ^= 0x5A
    (tmp_path / "bad.zip").write_bytes(bytes(raw))
    bad = zipfile.ZipFile(tmp_path / "bad.zip")
    with pytest.raises(ERRORS):
        with Member(bad, bad.getinfo("logic-1-1")) as m:
            while m.read(4096):
                pass


def test_other_methods_go_through_zipfile(tmp_path):
    path = tmp_path / "b.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as zf:
        zf.writestr("logic-1-1", b"x" * 10_000)
    zf = zipfile.ZipFile(path)
    with Member(zf, zf.getinfo("logic-1-1")) as m:
        assert m.read(20_000) == b"x" * 10_000

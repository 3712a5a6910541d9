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


@pytest.mark.parametrize("what", ["method 9", "encrypted", "lzma damaged"])
def test_members_zipfile_cannot_read_are_capture_errors(tmp_path, what):
    # found by review: these raised NotImplementedError, RuntimeError or LZMAError tracebacks
    from pcitrace.capture import write_sr
    from pcitrace.capture.model import Capture, TimeBase
    from pcitrace.capture.sr import read_sr
    from pcitrace.errors import PcitraceError

    p = tmp_path / "c.sr"
    write_sr(Capture.from_arrays({"L0": np.arange(5000, dtype=np.uint8) % 2}, TimeBase.timing(1e6)), p)
    if what == "lzma damaged":
        src = zipfile.ZipFile(p)
        with zipfile.ZipFile(tmp_path / "x.sr", "w") as out:
            for info in src.infolist():
                data = src.read(info)
                method = zipfile.ZIP_LZMA if info.filename == "logic-1-1" else zipfile.ZIP_DEFLATED
                out.writestr(info.filename, data, compress_type=method)
        raw = bytearray((tmp_path / "x.sr").read_bytes())
        info = zipfile.ZipFile(tmp_path / "x.sr").getinfo("logic-1-1")
        at = info.header_offset + 30 + len(info.filename) + 20
        raw[at:at + 8] = b"\xff" * 8
        p.write_bytes(bytes(raw))
    else:
        raw = bytearray(p.read_bytes())
        info = zipfile.ZipFile(p).getinfo("logic-1-1")
        central = [i for i in range(len(raw)) if raw[i:i + 4] == b"PK\x01\x02"
                   and raw[i + 46:i + 46 + 9] == b"logic-1-1"][0]
        if what == "method 9":
            raw[info.header_offset + 8:info.header_offset + 10] = (9).to_bytes(2, "little")
            raw[central + 10:central + 12] = (9).to_bytes(2, "little")
        else:
            raw[info.header_offset + 6] |= 1
            raw[central + 8] |= 1
        p.write_bytes(bytes(raw))
    with pytest.raises(PcitraceError, match="logic-1-1"):
        read_sr(p).read(["L0"])


@pytest.mark.parametrize("force_zip64", [False, True])
def test_salvage_lists_the_whole_members_before_a_cut(tmp_path, force_zip64):
    """A zip cut inside its third member: the first two are listed from their local headers
    (ZIP64 ones too) and read back whole; the walk says where it stopped."""
    from pcitrace.capture._zipread import salvage
    from pcitrace.capture._zipwrite import ZipWriter

    parts = {"a": b"x" * 5000, "b": bytes(range(256)) * 40, "c": b"z" * 9000}
    with open(tmp_path / "z.zip", "wb") as fp:
        zw = ZipWriter(fp, force_zip64=force_zip64)
        for name, data in parts.items():
            zw.add(name, data)
        zw.finish()
    data = (tmp_path / "z.zip").read_bytes()
    third = data.find(b"PK\x03\x04", data.find(b"PK\x03\x04", data.find(b"PK\x03\x04") + 4) + 4)
    (tmp_path / "cut.zip").write_bytes(data[:third + 36])
    kept = salvage(tmp_path / "cut.zip")
    assert kept.namelist() == ["a", "b"] and "is cut at byte" in kept.stop
    for name in ("a", "b"):
        with kept.open(kept.getinfo(name)) as f:
            assert f.read(1 << 20) == parts[name]


def test_a_member_flagged_as_compressed_patched_data_is_the_one_error(tmp_path):
    # long fuzz run, seed 216 #256: zipfile raises NotImplementedError for flag bit 5
    import zipfile

    from pcitrace.capture import open_capture
    from pcitrace.errors import PcitraceError
    from tests.conftest import SAMPLES

    src = SAMPLES / "control_only.sr"
    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo("metadata")
    # set flag bit 5 on the metadata member in the central directory (and its local header)
    pos = 0
    while (pos := data.find(b"PK\x01\x02", pos)) >= 0:
        name_len = int.from_bytes(data[pos + 28:pos + 30], "little")
        if bytes(data[pos + 46:pos + 46 + name_len]) == b"metadata":
            data[pos + 8] |= 0x20
        pos += 4
    data[info.header_offset + 6] |= 0x20
    path = tmp_path / "c.sr"
    path.write_bytes(bytes(data))
    with pytest.raises(PcitraceError, match="compressed patched data"):
        open_capture(path)

"""Document: signal rows equal the capture, decoded rows equal the decoder and analyser."""

import numpy as np

from pcitrace.capture.clocked import bus_clocks
from pcitrace.decode import decode_capture
from pcitrace.gui.document import Document, session_path_for


def test_rows_hold_the_capture(sample):
    doc = Document.open(sample)
    cap = doc.capture
    keys = [r.key for r in doc.rows]
    assert "send/frame_n" in keys and "send/ad" in keys and "a_to_b/frame_present" in keys
    row = next(r for r in doc.rows if r.key == "send/frame_n")
    raw = cap.read(["send.FRAME#"])["send.FRAME#"]
    k = np.searchsorted(row.lod.times, cap.times_ps(), side="right") - 1
    assert np.array_equal(row.lod.values[k], raw)
    # AD is the value sampled at every rising clock edge
    bus = doc.profile.bus("send")
    ad = next(r for r in doc.rows if r.key == "send/ad")
    assert ad.bits == 64
    for bc in bus_clocks(cap, bus):
        k = np.searchsorted(ad.lod.times, bc.times_ps, side="right") - 1
        assert np.array_equal(ad.lod.values[k], bc.sig["ad"])
    assert doc.clock_counts["send"] == 33333
    assert round(doc.periods["send"]) == 15000


def test_decoded_rows_and_cursor_figures(sample):
    doc = Document.open(sample)
    doc.decode()
    ref = decode_capture(sample)
    assert np.array_equal(doc.result.records, ref.records)
    kinds = {r.key.split("/", 1)[1] for r in doc.rows if r.group == "send"}
    assert {"#txn", "#find", "#csr", "#dma", "#occ"} <= kinds
    assert any(r.key == "a_to_b/#frames" for r in doc.rows)
    # the transaction row's pyramid indexes the decoder's records
    txn = next(r for r in doc.rows if r.key == "send/#txn")
    sel = np.flatnonzero(ref.records["bus"] == "send")
    assert np.array_equal(np.sort(txn.lod.order), sel)
    # bytes over the whole capture = enabled byte lanes of every data word on the bus
    w = ref.words[ref.records["bus"][ref.words["record"]] == "send"]
    wid = ref.records["width"][w["record"]]
    mask = np.where(wid == 64, 0xFF, 0x0F)
    expect = sum(bin(int(~be & m & 0xFF)).count("1") for be, m in zip(w["byte_enables"], mask))
    assert doc.bytes_between("send", 0, doc.end_ps + 1) == expect
    assert doc.transactions_between("send", 0, doc.end_ps + 1) == len(sel)
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = np.sort(rng.uniform(0, doc.end_ps, 2))
        brute = int(((ref.records["bus"] == "send") & (ref.records["start_ps"] < b) & (doc.record_end > a)).sum())
        assert doc.transactions_between("send", a, b) == brute


def test_session_path_beside_the_capture(tmp_path):
    assert session_path_for(tmp_path / "a.sr") == tmp_path / "a.pcitrace-session.json"
    assert session_path_for(tmp_path / "b.vcd.gz") == tmp_path / "b.pcitrace-session.json"


def test_rows_fill_in_while_reading(sample):
    seen = []

    def partial(doc):
        row = next(r for r in doc.rows if r.key == "send/trdy_n")
        seen.append((row.lod.end_ps, row.lod.times.copy(), row.lod.values.copy()))

    doc = Document.open(sample, partial=partial, chunk_samples=10_000)
    # after 1, 2, 4, 8 ... of the 20 chunks: 5 snapshots, each a prefix of the final rows
    assert [round(e / 25_000_000) for e, _, _ in seen] == [1, 2, 4, 8, 16]
    final = next(r for r in doc.rows if r.key == "send/trdy_n").lod
    for end, t, v in seen:
        n = len(t)
        assert np.array_equal(t, final.times[:n]) and np.array_equal(v, final.values[:n])
        assert n == np.count_nonzero(final.times <= end)


def test_vcd_and_gzip_vcd_show_the_same_rows(tmp_path, violations):
    import gzip
    import shutil

    from pcitrace.capture import open_capture, write_vcd

    vcd = tmp_path / "v.vcd"
    write_vcd(open_capture(violations), vcd)
    shutil.copy(tmp_path / "violations.profile.toml", tmp_path / "v.profile.toml")
    gz = tmp_path / "g.vcd.gz"
    with open(vcd, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(tmp_path / "violations.profile.toml", tmp_path / "g.profile.toml")
    ref = Document.open(violations)
    ref.decode()
    for path in (vcd, gz):
        doc = Document.open(path)
        doc.decode()
        assert np.array_equal(doc.result.records["start_ps"], ref.result.records["start_ps"])
        a = next(r for r in doc.rows if r.key == "send/ad").lod
        b = next(r for r in ref.rows if r.key == "send/ad").lod
        assert np.array_equal(a.values, b.values)

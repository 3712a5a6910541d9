"""The real window, offscreen: open, zoom, pan, cursors, table <-> timeline, search, export,
sessions, bad input. Mouse input goes through Qt events to the plot's viewport."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PyQt5 import QtCore, QtGui, QtWidgets

from tests.gui.conftest import open_and_wait

pytestmark = pytest.mark.gui


def _viewport(win):
    return win.timeline.plot.viewport()


def _send_mouse(widget, kind, pos, button=QtCore.Qt.LeftButton, buttons=None, mods=QtCore.Qt.NoModifier):
    buttons = button if buttons is None else buttons
    ev = QtGui.QMouseEvent(kind, QtCore.QPointF(pos), widget.mapToGlobal(pos), button, buttons, mods)
    QtWidgets.QApplication.sendEvent(widget, ev)


def _click(qtbot, win, pos, button=QtCore.Qt.LeftButton):
    vp = _viewport(win)
    _send_mouse(vp, QtCore.QEvent.MouseButtonPress, pos, button)
    _send_mouse(vp, QtCore.QEvent.MouseButtonRelease, pos, button, QtCore.Qt.NoButton)
    qtbot.wait(5)


def _focus(qtbot, win):
    """Key shortcuts go to the active window: make it active (needed on X11 without a WM)."""
    win.activateWindow()
    win.raise_()
    qtbot.waitUntil(win.isActiveWindow, timeout=5000)
    win.timeline.plot.setFocus()


def _visible_point(win, t_ps, row_key):
    """Scroll the row into view and return its point at time t in viewport coordinates."""
    tl = win.timeline
    y0, y1 = tl.row_y(row_key)
    pt = tl.point_of(t_ps, row_key)
    win.scroll.ensureVisible(pt.x(), pt.y(), 10, 40)
    QtWidgets.QApplication.processEvents()
    return tl.point_of(t_ps, row_key)


def test_open_sample_shows_rows_and_table(qtbot, window, sample):
    doc = open_and_wait(qtbot, window, sample)
    assert not window.is_loading()
    keys = [r.key for r, _ in window.timeline.layout]
    assert "send/frame_n" in keys and "send/#txn" in keys and "a_to_b/#frames" in keys
    # the probed link sits between the sending and the receiving bus
    assert keys.index("a_to_b/#frames") < keys.index("recv/frame_n")
    assert window.table.model.rowCount() == len(doc.result.records) == 1308
    t0, t1 = window.timeline.view_range_ps()
    assert t0 <= doc.start_ps and t1 >= doc.end_ps * 0.99
    qtbot.waitUntil(lambda: window.timeline.rows_item.last_paint_s > 0)


def test_wheel_zooms_at_the_mouse_and_drag_pans(qtbot, window, sample):
    open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(100e6, 200e6)
    qtbot.wait(5)
    vp = _viewport(window)
    pos = tl.x_of_ps(150e6)
    pos.setY(vp.height() // 3)
    t_before = tl.vb.mapSceneToView(tl.plot.mapToScene(pos)).x()
    ev = QtGui.QWheelEvent(QtCore.QPointF(pos), QtCore.QPointF(vp.mapToGlobal(pos)), QtCore.QPoint(0, 0),
                           QtCore.QPoint(0, 120), QtCore.Qt.NoButton, QtCore.Qt.NoModifier,
                           QtCore.Qt.NoScrollPhase, False)
    QtWidgets.QApplication.sendEvent(vp, ev)
    qtbot.wait(5)
    a, b = tl.view_range_ps()
    assert b - a < 100e6 * 0.95                      # zoomed in
    t_after = tl.vb.mapSceneToView(tl.plot.mapToScene(pos)).x()
    assert t_after == pytest.approx(t_before, rel=1e-6)  # the time under the mouse stays put
    # drag right by 200 px: the view moves left by 200 px worth of time
    span = b - a
    px = span / tl.vb.width()
    start = QtCore.QPoint(pos)
    end = QtCore.QPoint(pos.x() + 200, pos.y())
    _send_mouse(vp, QtCore.QEvent.MouseButtonPress, start)
    for k in range(1, 11):
        _send_mouse(vp, QtCore.QEvent.MouseMove, QtCore.QPoint(pos.x() + 20 * k, pos.y()),
                    QtCore.Qt.NoButton, QtCore.Qt.LeftButton)
    _send_mouse(vp, QtCore.QEvent.MouseButtonRelease, end, QtCore.Qt.LeftButton, QtCore.Qt.NoButton)
    qtbot.wait(5)
    a2, b2 = tl.view_range_ps()
    assert a2 == pytest.approx(a - 200 * px, rel=0.02)
    assert b2 - a2 == pytest.approx(span, rel=1e-6)


def test_keyboard_zoom_fit_and_pan(qtbot, window, sample):
    doc = open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(100e6, 200e6)
    _focus(qtbot, window)
    qtbot.keyClick(tl.plot, QtCore.Qt.Key_Plus)
    assert tl.view_range_ps() == pytest.approx((125e6, 175e6), rel=1e-6)
    qtbot.keyClick(tl.plot, QtCore.Qt.Key_Right)
    assert tl.view_range_ps() == pytest.approx((137.5e6, 187.5e6), rel=1e-6)
    qtbot.keyClick(tl.plot, QtCore.Qt.Key_F)
    a, b = tl.view_range_ps()
    assert a <= doc.start_ps and b >= doc.end_ps


def test_cursors_by_click_and_measurements(qtbot, window, sample):
    doc = open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(20e6, 34e6)
    qtbot.wait(5)
    pa = _visible_point(window, 22e6, "send/frame_n")
    _click(qtbot, window, pa, QtCore.Qt.LeftButton)
    pb = _visible_point(window, 31e6, "send/frame_n")
    _click(qtbot, window, pb, QtCore.Qt.RightButton)
    a, b = tl.cursor_ps("A"), tl.cursor_ps("B")
    px = 14e6 / tl.vb.width()
    assert a == pytest.approx(22e6, abs=2 * px) and b == pytest.approx(31e6, abs=2 * px)
    vals = window.measure.values
    from pcitrace.gui.units import format_freq, format_time
    assert vals["Δt"] == format_time(b - a, 6)
    assert vals["1/Δt"] == format_freq(1e12 / (b - a))
    # the panel's figures are those of the records between the cursors
    assert vals["send/bytes"] == str(doc.bytes_between("send", a, b))
    assert vals["recv/bytes"] == str(doc.bytes_between("recv", a, b))
    assert vals["send/transactions"] == str(doc.transactions_between("send", a, b))
    mbs = doc.bytes_between("send", a, b) / ((b - a) * 1e-12) / 1e6
    assert vals["send/throughput"] == f"{mbs:.2f} MB/s"
    busy = float(vals["send/occupancy"].split()[0])
    rec = doc.result.records[doc.result.records["bus"] == "send"]
    period = doc.periods["send"]
    s = rec["start_ps"].astype(float)
    e = s + rec["clocks"] * period
    overlap = np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None).sum()
    assert busy == pytest.approx(100 * overlap / (b - a), abs=0.051)
    assert vals["send/busy clocks"] == f"{overlap / period:.0f} of {(b - a) / period:.0f}"
    assert 0 < busy < 100
    # per-packet figures between the cursors: labels and units from the metric table, values the
    # report's medians over the packets whose data DMA starts there
    from pcitrace.analyse import metrics
    from pcitrace.analyse.stats import Distribution
    pk = doc.analysis.buses["send"].packets
    inside = pk[(pk["data_start_ps"] >= a) & (pk["data_start_ps"] <= b)]
    assert vals["send/packets (data DMA starts)"] == str(len(inside)) and len(inside) > 0
    fig = metrics.FIGURES["data_dma_us"]
    want = Distribution.of(inside[fig.field], fig.scale).median
    assert vals[f"send/{fig.heading} (median)"] == f"{want:.4g} µs"
    # zoom to cursors
    _focus(qtbot, window)
    qtbot.keyClick(tl.plot, QtCore.Qt.Key_Z)
    assert tl.view_range_ps() == pytest.approx((a, b), rel=1e-6)


def test_table_row_click_jumps_and_annotation_click_selects(qtbot, window, sample):
    doc = open_and_wait(qtbot, window, sample)
    tl, table = window.timeline, window.table
    rec = doc.result.records
    i = int(np.flatnonzero((rec["bus"] == "send") & (rec["bytes"] == 256))[5])
    row = table.model.row_of(i)
    table.view.scrollTo(table.model.index(row, 0))
    rect = table.view.visualRect(table.model.index(row, 1))
    qtbot.mouseClick(table.view.viewport(), QtCore.Qt.LeftButton, pos=rect.center())
    assert tl.selected_record == i
    a, b = tl.view_range_ps()
    assert a <= rec["start_ps"][i] and doc.record_end[i] <= b
    assert b - a < 20 * (doc.record_end[i] - rec["start_ps"][i])
    # click another transaction on the timeline: its table row is selected
    j = i + 1
    while rec["bus"][j] != "send":
        j += 1
    tl.centre_on(float(rec["start_ps"][j]), float(doc.record_end[j]))
    qtbot.wait(5)
    mid = (rec["start_ps"][j] + doc.record_end[j]) / 2
    _click(qtbot, window, _visible_point(window, mid, "send/#txn"))
    assert tl.selected_record == j
    assert table.selected_record() == j


def test_table_filters_and_sorting(qtbot, window, violations, errors):
    doc = open_and_wait(qtbot, window, violations)
    rec = doc.result.records
    table = window.table
    table.set_filter_values(termination="retry")
    assert table.model.rowCount() == int((rec["termination"] == "retry").sum()) > 0
    lo, hi = 0xFEBC0000, 0xFEBDFFFF
    table.set_filter_values(lo=f"{lo:x}", hi=f"0x{hi:X}")
    got = table.filtered_records()
    expect = np.flatnonzero((rec["address"] >= lo) & (rec["address"] <= hi))
    assert np.array_equal(np.sort(got), expect)
    table.view.sortByColumn(6, QtCore.Qt.DescendingOrder)   # bytes
    b = rec["bytes"][table.filtered_records()]
    assert np.all(np.diff(b) <= 0)
    shown = table.model.rowCount()
    table.lo.setText("xyz")
    table.apply_filters()
    assert errors and "xyz" in errors[-1] and "hexadecimal" in errors[-1]
    assert table.model.rowCount() == shown          # a bad filter leaves the table as it was


def test_search_next_previous(qtbot, window, violations):
    doc = open_and_wait(qtbot, window, violations)
    rec = doc.result.records
    hits = np.flatnonzero(rec["termination"] == "retry")
    window.search_edit.setText("retry")
    window.timeline.select_record(None)
    window.timeline.set_view(float(rec["start_ps"][0]) - 1, float(rec["start_ps"][0]) + 1)
    got = [window.search(+1) for _ in range(3)]
    assert got == list(hits[:3])
    assert window.search(-1) == hits[1]
    assert window.timeline.selected_record == hits[1]
    assert window.table.selected_record() == hits[1]
    # all words must match: bus and command
    window.search_edit.setText("send memwr")
    i = window.search(+1)
    assert rec["command"][i] == "mem_write" and rec["bus"][i] == "send"
    window.search_edit.setText("no-such-thing")
    assert window.search(+1) is None and window.search_status.text() == "no match"


def test_export_png_and_csv(qtbot, window, violations, tmp_path, errors):
    doc = open_and_wait(qtbot, window, violations)
    png = tmp_path / "view.png"
    window.export_png(str(png))
    img = QtGui.QImage(str(png))
    assert img.width() == window.timeline.plot.width() and img.height() > 100
    window.table.set_filter_values(termination="retry")
    out = tmp_path / "t.csv"
    window.export_csv(str(out))
    rows = list(csv.DictReader(out.open()))
    rec = doc.result.records
    retry = np.flatnonzero(rec["termination"] == "retry")
    assert [int(r["index"]) for r in rows] == list(retry)
    assert all(r["termination"] == "retry" for r in rows)
    assert int(rows[0]["start_ps"]) == rec["start_ps"][retry[0]]
    assert int(rows[0]["address"], 16) == rec["address"][retry[0]]
    # a directory that does not exist: an error dialog naming it, no file, no crash
    window._guard(lambda: window.export_csv(str(tmp_path / "nodir" / "x.csv")))
    assert errors and "nodir" in errors[-1] and "Fix:" in errors[-1]
    assert not (tmp_path / "nodir").exists()


def test_session_saved_and_restored(qtbot, window, sample, tmp_path, errors):
    doc = open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(40e6, 60e6)
    tl.set_cursor("A", 41e6)
    tl.set_cursor("B", 45.5e6)
    tl.add_marker("irq", 50e6)
    window.table.set_filter_values(bus="recv", termination="normal")
    window.set_all_signals(True)
    # a click on the probe's header folds it
    hy0, hy1 = tl.row_y("a_to_b/#header")
    scene = tl.vb.mapViewToScene(QtCore.QPointF(50.0, (hy0 + hy1) / 2))
    pt = tl.plot.mapFromScene(scene)
    window.scroll.ensureVisible(pt.x(), pt.y(), 10, 40)
    QtWidgets.QApplication.processEvents()
    _click(qtbot, window, tl.plot.mapFromScene(tl.vb.mapViewToScene(QtCore.QPointF(50.0, (hy0 + hy1) / 2))))
    assert tl.collapsed == {"a_to_b"} and tl.row_y("a_to_b/#frames") is None
    assert tl.row_y("a_to_b/#header") is not None
    path = window.save_session()
    data = json.loads(path.read_text())
    assert path.name == "pro1000_66mhz.pcitrace-session.json" and data["markers"][0]["name"] == "irq"
    window.close()
    from pcitrace.gui.window import MainWindow
    win2 = MainWindow(settings=window.settings)
    qtbot.addWidget(win2)
    win2.show()
    open_and_wait(qtbot, win2, sample)
    t2 = win2.timeline
    assert t2.view_range_ps() == pytest.approx((40e6, 60e6), rel=1e-6)
    assert t2.cursor_ps("A") == pytest.approx(41e6) and t2.cursor_ps("B") == pytest.approx(45.5e6)
    assert t2.marker_list() == [("irq", pytest.approx(50e6))]
    assert win2.table.filter_values()["bus"] == "recv"
    assert win2.table.model.rowCount() == int(((doc.result.records["bus"] == "recv")
                                              & (doc.result.records["termination"] == "normal")).sum())
    assert any(r.key == "send/clk" for r, _ in t2.layout)
    assert t2.collapsed == {"a_to_b"} and t2.row_y("a_to_b/#frames") is None
    # recent files remember the capture
    assert win2.recent_files()[0].endswith("pro1000_66mhz.sr")
    # a corrupt session is ignored with a message, the capture still opens (a fresh window:
    # re-opening in win2 would first save win2's own session over the corrupt file)
    path.write_text("{not json")
    win3 = MainWindow(settings=window.settings)
    qtbot.addWidget(win3)
    open_and_wait(qtbot, win3, sample)
    assert win3.doc is not None
    assert "session ignored" in win3.statusBar().currentMessage()
    assert not errors


def test_bad_capture_and_profile_give_error_dialogs(qtbot, window, tmp_path, sample, errors):
    bad = tmp_path / "broken.sr"
    bad.write_bytes(b"this is not a zip file")
    with qtbot.waitSignal(window.loadFailed, timeout=30000):
        window.open_path(str(bad))
    assert errors and "broken.sr" in errors[-1]
    prof = tmp_path / "bad.profile.toml"
    prof.write_text('[[bus]]\nname = "x"\nkind = "pci"\n[bus.signals]\nframe_n = "NOPE"\n')
    with qtbot.waitSignal(window.loadFailed, timeout=30000):
        window.open_path(sample, profile=str(prof))
    assert "NOPE" in errors[-1] or "bad.profile.toml" in errors[-1]
    missing = tmp_path / "missing.vcd"
    with qtbot.waitSignal(window.loadFailed, timeout=30000):
        window.open_path(str(missing))
    assert "missing.vcd" in errors[-1]
    # the window still works afterwards
    open_and_wait(qtbot, window, sample)
    assert window.table.model.rowCount() > 0


def test_cancel_during_decoding_keeps_the_window_usable(qtbot, window, sample, monkeypatch):
    import time
    from pcitrace.gui import document as D

    def slow_decode(self, *, progress, cancelled):
        # a decode that only ends when cancelled, reporting progress like the real one
        for k in range(3000):
            if cancelled():
                raise D.Cancelled()
            progress(k / 3000, "decoding")
            time.sleep(0.01)
        raise AssertionError("never cancelled")

    monkeypatch.setattr(D.Document, "decode", slow_decode)
    with qtbot.waitSignal(window.documentReady, timeout=30000):
        window.open_path(sample)
    assert window.is_loading() and window.cancel_button.isVisible()
    # the GUI thread is free: zooming works while the worker decodes
    window.timeline.zoom(2.0)
    qtbot.waitUntil(lambda: window.progress.value() > 0, timeout=5000)
    qtbot.mouseClick(window.cancel_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.is_loading(), timeout=10000)
    assert "cancelled" in window.statusBar().currentMessage()
    assert window.doc is not None and window.doc.result is None
    assert window.table.model.rowCount() == 0
    assert any(r.key == "send/frame_n" for r, _ in window.timeline.layout)
    monkeypatch.undo()
    open_and_wait(qtbot, window, sample)
    assert window.table.model.rowCount() == 1308


def test_shift_drag_zooms_to_the_selection(qtbot, window, sample):
    open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(100e6, 200e6)
    qtbot.wait(5)
    vp = _viewport(window)
    a = tl.x_of_ps(120e6)
    b = tl.x_of_ps(150e6)
    y = vp.height() // 3
    shift = QtCore.Qt.ShiftModifier
    _send_mouse(vp, QtCore.QEvent.MouseButtonPress, QtCore.QPoint(a.x(), y), mods=shift)
    for k in range(1, 11):
        x = a.x() + (b.x() - a.x()) * k // 10
        _send_mouse(vp, QtCore.QEvent.MouseMove, QtCore.QPoint(x, y), QtCore.Qt.NoButton,
                    QtCore.Qt.LeftButton, mods=shift)
    _send_mouse(vp, QtCore.QEvent.MouseButtonRelease, QtCore.QPoint(b.x(), y), QtCore.Qt.LeftButton,
                QtCore.Qt.NoButton, mods=shift)
    qtbot.wait(5)
    px = 100e6 / tl.vb.width()
    t0, t1 = tl.view_range_ps()
    assert t0 == pytest.approx(120e6, abs=3 * px) and t1 == pytest.approx(150e6, abs=3 * px)


def test_markers_by_key_with_a_name(qtbot, window, sample, monkeypatch):
    open_and_wait(qtbot, window, sample)
    tl = window.timeline
    tl.set_view(10e6, 30e6)
    monkeypatch.setattr(QtWidgets.QInputDialog, "getText", staticmethod(lambda *a, **k: ("tx start", True)))
    # the mouse is outside the plot: the marker goes to the view centre
    QtGui.QCursor.setPos(window.mapToGlobal(QtCore.QPoint(-50, -50)))
    _focus(qtbot, window)
    qtbot.keyClick(tl.plot, QtCore.Qt.Key_M)
    assert tl.marker_list() == [("tx start", pytest.approx(20e6, rel=1e-6))]
    # the panel lists it relative to cursor A; a double-click there centres the view on it
    tl.set_cursor("A", 15e6)
    assert window.measure.values["Markers (Δ to A)/tx start"] == "20 us  (+5 us)"
    row = next(r for r in range(window.measure.rowCount()) if window.measure.item(r, 0).text() == "  tx start")
    tl.set_view(100e6, 120e6)
    window.measure.cellDoubleClicked.emit(row, 0)
    a, b = tl.view_range_ps()
    assert (a + b) / 2 == pytest.approx(20e6, rel=1e-6)


def test_drop_a_capture_file_opens_it(qtbot, window, sample):
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(sample)])
    pos = QtCore.QPoint(50, 50)
    enter = QtGui.QDragEnterEvent(pos, QtCore.Qt.CopyAction, mime, QtCore.Qt.LeftButton, QtCore.Qt.NoModifier)
    QtWidgets.QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    done = []
    window.decodeReady.connect(lambda: done.append(1))
    drop = QtGui.QDropEvent(QtCore.QPointF(pos), QtCore.Qt.CopyAction, mime, QtCore.Qt.LeftButton,
                            QtCore.Qt.NoModifier)
    QtWidgets.QApplication.sendEvent(window, drop)
    qtbot.waitUntil(lambda: bool(done), timeout=60000)
    assert window.doc.path == sample


def test_clicks_on_analysis_rows(qtbot, window, violations):
    doc = open_and_wait(qtbot, window, violations)
    tl = window.timeline
    ba = doc.analysis.buses["send"]
    local = np.flatnonzero(doc.result.records["bus"] == "send")
    # a DMA burst selects its transaction and names its transfer kind
    b = ba.bursts[3]
    tl.centre_on(float(b["start_ps"]), float(b["end_ps"]))
    qtbot.wait(5)
    _click(qtbot, window, _visible_point(window, (b["start_ps"] + b["end_ps"]) / 2, "send/#dma"))
    assert tl.selected_record == local[b["record"]]
    assert window.table.selected_record() == local[b["record"]]
    assert window.statusBar().currentMessage().startswith("DMA burst (")
    # a finding is described in the status bar
    f = doc.result.findings[0]
    tl.set_view(float(f["time_ps"]) - 1e6, float(f["time_ps"]) + 1e6)
    qtbot.wait(5)
    _click(qtbot, window, _visible_point(window, float(f["time_ps"]), "send/#find"))
    assert str(f["kind"]) in window.statusBar().currentMessage()
    assert str(f["message"])[:30] in window.statusBar().currentMessage()
    # a frame on the wire: its size and delays
    fr = doc.result.frames["a_to_b"][2]
    tl.centre_on(float(fr["start_ps"]), float(fr["end_ps"]))
    qtbot.wait(5)
    _click(qtbot, window, _visible_point(window, (fr["start_ps"] + fr["end_ps"]) / 2, "a_to_b/#frames"))
    assert window.statusBar().currentMessage().startswith(f"frame on a_to_b: {int(fr['frame_bytes'])} B")


def test_letter_shortcuts_do_not_steal_typing_in_the_search_box(qtbot, window, violations):
    doc = open_and_wait(qtbot, window, violations)
    before = window.timeline.view_range_ps()
    window.search_edit.setFocus()
    qtbot.keyClicks(window.search_edit, "send MemWr +-FZABMN")
    assert window.search_edit.text() == "send MemWr +-FZABMN"
    assert window.timeline.view_range_ps() == pytest.approx(before)
    assert window.timeline.cursor_ps("A") is None and not window.timeline.markers
    window.search_edit.setText("send memwr")
    qtbot.keyClick(window.search_edit, QtCore.Qt.Key_Return)
    i = window.timeline.selected_record
    assert i is not None and doc.result.records["command"][i] == "mem_write"


def test_hover_text_names_the_transaction(qtbot, window, sample):
    doc = open_and_wait(qtbot, window, sample)
    tl = window.timeline
    rec = doc.result.records
    i = 6
    tl.centre_on(float(rec["start_ps"][i]), float(doc.record_end[i]))
    y0, y1 = tl.row_y("send/#txn")
    text = tl.hover_text((rec["start_ps"][i] + doc.record_end[i]) / 2, (y0 + y1) / 2)
    assert text.startswith(f"#{i} MemRdMul 1F000000  256 B") and "32 data phases" in text
    assert tl.hover_text((rec["start_ps"][i] + doc.record_end[i]) / 2, 1.0) == ""   # the label lane

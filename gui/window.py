"""The main window: timeline, transaction table, measurements, search, export and sessions.

Loading runs in a QThread (``LoadWorker``): the signal rows are shown as soon as their change
lists exist (first paint), then the decoded and analysis rows arrive when decoding and the
analyser are done. Progress and Cancel sit in the status bar; the window stays responsive.
Every failure a file or profile can cause ends in an error dialog, never in a crash.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

import numpy as np
from PyQt5 import QtCore, QtGui, QtWidgets

from pcitrace.analyse import metrics
from pcitrace.analyse.stats import Distribution
from pcitrace.capture._atomic import atomic_path
from pcitrace.capture.formats import dialog_filter
from pcitrace.errors import PcitraceError, describe_bug
from pcitrace.gui import document as D
from pcitrace.gui.document import Cancelled, Document, session_path_for
from pcitrace.gui.table import ANY, TransactionPanel
from pcitrace.gui.timeline import Timeline
from pcitrace.gui.units import format_freq, format_time
from pcitrace.records import write_csv

SESSION_VERSION = 1
CSV_FIELDS = ("index", "bus", "start_ps", "end_ps", "clocks", "command", "dac", "address", "data_phases",
              "bytes", "devsel", "termination", "initiator_waits", "target_waits", "parity_error",
              "width", "gnt", "tag", "requester", "byte_count")


def error_text(exc: BaseException) -> str:
    """The one-line text of an error: a user's problem as pcitrace words it, anything else as the
    bug it is, with where it happened (as the batch report says it)."""
    if isinstance(exc, PcitraceError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename or 'file'}: {exc.strerror or exc}"
    return describe_bug(exc)


class LoadWorker(QtCore.QObject):
    """Opens, reads and decodes a capture off the GUI thread."""

    progress = QtCore.pyqtSignal(float, str)
    partial = QtCore.pyqtSignal(object)
    signalsReady = QtCore.pyqtSignal(object)
    decoded = QtCore.pyqtSignal(object)
    failed = QtCore.pyqtSignal(str)
    cancelled = QtCore.pyqtSignal()
    finished = QtCore.pyqtSignal()

    def __init__(self, path, profile, decode=True):
        super().__init__()
        self.path, self.profile, self.do_decode = path, profile, decode
        self._cancel = False

    def cancel(self):
        self._cancel = True

    def run(self):
        try:
            doc = Document.open(self.path, self.profile,
                                progress=lambda f, t: self.progress.emit(0.3 * f, t),
                                cancelled=lambda: self._cancel,
                                partial=self.partial.emit)
            self.signalsReady.emit(doc)
            if self.do_decode:
                doc.decode(progress=lambda f, t: self.progress.emit(0.3 + 0.7 * f, t),
                           cancelled=lambda: self._cancel)
                self.decoded.emit(doc)
        except Cancelled:
            self.cancelled.emit()
        except Exception as exc:   # every input problem becomes a dialog, not a crash
            self.failed.emit(error_text(exc))
        finally:
            self.finished.emit()


class MeasurePanel(QtWidgets.QTableWidget):
    """Figures between the cursors, per bus."""

    def __init__(self, parent=None):
        super().__init__(0, 2, parent)
        self.setHorizontalHeaderLabels(["Quantity", "Value"])
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setStretchLastSection(True)
        self.setEditTriggers(QtWidgets.QAbstractItemView.NoEditTriggers)
        self.values: dict[str, str] = {}

    def show_values(self, rows: list[tuple[str, str]]):
        # keys as 'Δt' or 'send/bytes' for scripts and tests
        self.values, section = {}, ""
        for k, v in rows:
            if not v:
                section = k
            elif k.startswith("  "):
                self.values[f"{section}/{k.strip()}"] = v
            else:
                self.values[k] = v
        self.setRowCount(len(rows))
        for i, (k, v) in enumerate(rows):
            a = QtWidgets.QTableWidgetItem(k)
            a.setToolTip(k.strip())
            b = QtWidgets.QTableWidgetItem(v)
            if not v:
                f = a.font()
                f.setBold(True)
                a.setFont(f)
            self.setItem(i, 0, a)
            self.setItem(i, 1, b)
        # the labels fit, but never push the values out of a narrow dock (the full label is the tooltip)
        self.resizeColumnToContents(0)
        self.setColumnWidth(0, min(self.columnWidth(0), int(self.viewport().width() * 0.6)))


def measure(doc, a_ps: float | None, b_ps: float | None) -> list[tuple[str, str]]:
    """Cursor figures: delta-t, 1/delta-t and per PCI bus busy clocks, occupancy, bytes, MB/s."""
    rows = [("Cursor A", format_time(a_ps, 7) if a_ps is not None else "-"),
            ("Cursor B", format_time(b_ps, 7) if b_ps is not None else "-")]
    if a_ps is None or b_ps is None:
        rows.append(("Δt", "place both cursors (left / right click)"))
        return rows
    t0, t1 = min(a_ps, b_ps), max(a_ps, b_ps)
    dt = t1 - t0
    rows += [("Δt", format_time(dt, 6)), ("1/Δt", format_freq(1e12 / dt) if dt > 0 else "-")]
    if doc is None or doc.result is None or dt <= 0:
        return rows
    for name in doc.busy:
        period = doc.periods[name]
        busy_ps = float(doc.busy[name].between(t0, t1))
        clocks = dt / period
        nbytes = doc.bytes_between(name, t0, t1)
        rows += [(f"{name}", ""),
                 ("  transactions", str(doc.transactions_between(name, t0, t1))),
                 ("  busy clocks", f"{busy_ps / period:.0f} of {clocks:.0f}"),
                 ("  occupancy", f"{100 * busy_ps / dt:.1f} %"),
                 ("  bytes", str(nbytes)),
                 ("  throughput", f"{nbytes / (dt * 1e-12) / 1e6:.2f} MB/s")]
        rows += packet_rows(doc, name, t0, t1)
    return rows


def packet_rows(doc, bus: str, t0: float, t1: float) -> list[tuple[str, str]]:
    """The packets whose frame data DMA starts between the cursors, and the median of each
    per-packet figure over them: names, labels and units from the metric table, as in the report."""
    an = doc.analysis.buses.get(bus) if doc.analysis is not None else None
    if an is None or not len(an.packets):
        return []
    pk = an.packets[(an.packets["data_start_ps"] >= t0) & (an.packets["data_start_ps"] <= t1)]
    rows = [("  packets (data DMA starts)", str(len(pk)))]
    for fig in metrics.packet_figures():
        if fig.field not in pk.dtype.names:
            continue
        dist = Distribution.of(pk[fig.field], fig.scale)      # as the report summarises it
        if dist.count:
            unit = f" {fig.unit}" if fig.unit else ""
            rows.append((f"  {fig.heading} (median)", f"{dist.median:.4g}{unit}"))
    return rows


class Legend(QtWidgets.QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        grid = QtWidgets.QGridLayout(self)
        grid.setContentsMargins(6, 2, 6, 2)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(0)
        font = self.font()
        font.setPixelSize(11)
        self.setFont(font)
        self._row = 0
        self._col = 0

        # two columns of entries under full-width titles, so the dock stays short
        def title(text):
            if self._col:
                self._row += 1
                self._col = 0
            lab = QtWidgets.QLabel(f"<b>{text}</b>")
            grid.addWidget(lab, self._row, 0, 1, 4)
            self._row += 1

        def add(colour, text, dashed=False):
            sw = QtWidgets.QLabel()
            pm = QtGui.QPixmap(16, 10)
            pm.fill(QtGui.QColor("#ffffff" if dashed else colour))
            if dashed:
                p = QtGui.QPainter(pm)
                p.setPen(QtGui.QPen(QtGui.QColor(colour), 1, QtCore.Qt.DashLine))
                p.drawLine(0, 5, 16, 5)
                p.end()
            sw.setPixmap(pm)
            grid.addWidget(sw, self._row, 2 * self._col)
            grid.addWidget(QtWidgets.QLabel(text), self._row, 2 * self._col + 1)
            self._col ^= 1
            if not self._col:
                self._row += 1

        title("Transactions (termination)")
        for t in D.TERMINATIONS:
            add(D.TERMINATION_COLOURS[t], D.TERMINATION_LABELS[t])
        add(D.FINDING_COLOUR, "protocol finding (◆)")
        title("DMA bursts")
        for c, t in zip(reversed(D.BURST_COLOURS), reversed(D.BURST_LABELS)):
            add(c, t)
        title("CSR groups")
        add(D.GROUP_COLOURS[1], "setup (before a send)")
        add(D.GROUP_COLOURS[0], "interrupt service")
        title("Occupancy, probe")
        add("#e53935", "busy (white = idle)")
        add(D.FRAME_COLOUR, "frame on the wire")
        add("#00695c", "frame ↔ DMA, delay", dashed=True)
        grid.setRowStretch(self._row + 1, 1)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)


class MainWindow(QtWidgets.QMainWindow):
    documentReady = QtCore.pyqtSignal()     # signal rows shown (maybe still filling in)
    signalsComplete = QtCore.pyqtSignal()   # every signal row read
    decodeReady = QtCore.pyqtSignal()       # decoded rows and table filled
    loadFailed = QtCore.pyqtSignal(str)

    def __init__(self, settings: QtCore.QSettings | None = None):
        super().__init__()
        self.setWindowTitle("pcitrace")
        self.setAcceptDrops(True)
        self.settings = settings or QtCore.QSettings("pcitrace", "viewer")
        self.doc: Document | None = None
        self.profile_path: str | None = None
        self._thread = None
        self._worker = None
        self._running: list = []
        self._pending_session: dict | None = None
        self._session_note: str | None = None   # a session file that could not be used
        self.search_index = None

        self.timeline = Timeline()
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarAlwaysOff)
        scroll.setWidget(self.timeline)
        self.scroll = scroll
        centre = QtWidgets.QWidget()
        cl = QtWidgets.QVBoxLayout(centre)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self._search_bar())
        cl.addWidget(scroll, 1)
        self.setCentralWidget(centre)

        self.table = TransactionPanel()
        dock = QtWidgets.QDockWidget("Transactions", self)
        dock.setObjectName("transactions")
        dock.setWidget(self.table)
        self.addDockWidget(QtCore.Qt.BottomDockWidgetArea, dock)
        self.table_dock = dock
        self.measure = MeasurePanel()
        self.measure.cellDoubleClicked.connect(self._measure_row_clicked)
        mdock = QtWidgets.QDockWidget("Measurements", self)
        mdock.setObjectName("measurements")
        mdock.setWidget(self.measure)
        self.addDockWidget(QtCore.Qt.RightDockWidgetArea, mdock)
        self.measure_dock = mdock
        self.measure.setMinimumWidth(300)
        ldock = QtWidgets.QDockWidget("Legend", self)
        ldock.setObjectName("legend")
        ldock.setWidget(Legend())
        self.addDockWidget(QtCore.Qt.RightDockWidgetArea, ldock)
        self.legend_dock = ldock
        self.resizeDocks([mdock, ldock], [520, 260], QtCore.Qt.Vertical)

        self.progress = QtWidgets.QProgressBar()
        self.progress.setMaximumWidth(240)
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.hide()
        self.cancel_button.clicked.connect(self.cancel_loading)
        self.statusBar().addPermanentWidget(self.progress)
        self.statusBar().addPermanentWidget(self.cancel_button)

        self.timeline.recordClicked.connect(self._timeline_record_clicked)
        self.timeline.annotationClicked.connect(lambda text: self.statusBar().showMessage(text, 20000))
        self.timeline.cursorsChanged.connect(self.update_measurements)
        self.table.recordActivated.connect(self._table_record_activated)
        self.table.filterError.connect(lambda m: self.show_error(m))
        self._build_menus()
        self.update_measurements()
        self.resize(1500, 950)

    # -- UI construction ---------------------------------------------------------------------
    def _search_bar(self):
        w = QtWidgets.QWidget()
        lay = QtWidgets.QHBoxLayout(w)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.addWidget(QtWidgets.QLabel("Search"))
        self.search_edit = QtWidgets.QLineEdit()
        self.search_edit.setPlaceholderText("command, address, termination or bus (e.g. MemWr, febc00, retry)")
        self.search_edit.returnPressed.connect(lambda: self.search(+1))
        lay.addWidget(self.search_edit, 1)
        prev_b = QtWidgets.QPushButton("◀ Previous")
        next_b = QtWidgets.QPushButton("Next ▶")
        prev_b.clicked.connect(lambda: self.search(-1))
        next_b.clicked.connect(lambda: self.search(+1))
        lay.addWidget(prev_b)
        lay.addWidget(next_b)
        self.search_status = QtWidgets.QLabel("")
        lay.addWidget(self.search_status)
        return w

    def _action(self, menu, text, slot, shortcut=None, shortcuts=None):
        a = QtWidgets.QAction(text, self)
        if shortcuts:
            a.setShortcuts([QtGui.QKeySequence(s) for s in shortcuts])
        elif shortcut:
            a.setShortcut(QtGui.QKeySequence(shortcut))
        a.setShortcutContext(QtCore.Qt.WindowShortcut)
        a.triggered.connect(lambda *_: slot())
        menu.addAction(a)
        return a

    def _build_menus(self):
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self._action(f, "&Open capture…", self.choose_capture, QtGui.QKeySequence.Open)
        self._action(f, "Open &profile…", self.choose_profile, "Ctrl+P")
        self.recent_menu = f.addMenu("Open &recent")
        self._fill_recent()
        f.addSeparator()
        self._action(f, "&Save session", self.save_session, QtGui.QKeySequence.Save)
        self._action(f, "Export view as &PNG…", self.choose_export_png, "Ctrl+E")
        self._action(f, "Export filtered transactions as &CSV…", self.choose_export_csv, "Ctrl+Shift+E")
        f.addSeparator()
        self._action(f, "&Quit", self.close, QtGui.QKeySequence.Quit)
        v = mb.addMenu("&View")
        tl = self.timeline
        self._action(v, "Zoom &in", lambda: tl.zoom(2.0), shortcuts=["+", "="])
        self._action(v, "Zoom &out", lambda: tl.zoom(0.5), "-")
        self._action(v, "Zoom to &fit", tl.zoom_fit, "F")
        self._action(v, "Zoom to &cursors", self.zoom_to_cursors, "Z")
        self._action(v, "Pan &left", lambda: tl.pan(-0.25), "Left")
        self._action(v, "Pan &right", lambda: tl.pan(0.25), "Right")
        self._action(v, "Go to &start", lambda: self._goto_edge(0), "Home")
        self._action(v, "Go to &end", lambda: self._goto_edge(1), "End")
        v.addSeparator()
        self.all_signals_action = QtWidgets.QAction("&All signals (CLK, PAR, REQ64#, …)", self, checkable=True)
        self.all_signals_action.setShortcut(QtGui.QKeySequence("Ctrl+L"))
        self.all_signals_action.toggled.connect(self.set_all_signals)
        v.addAction(self.all_signals_action)
        v.addAction(self.table_dock.toggleViewAction())
        v.addAction(self.measure_dock.toggleViewAction())
        v.addAction(self.legend_dock.toggleViewAction())
        m = mb.addMenu("&Markers")
        self._action(m, "Cursor &A at mouse", lambda: self._cursor_at_mouse("A"), "A")
        self._action(m, "Cursor &B at mouse", lambda: self._cursor_at_mouse("B"), "B")
        self._action(m, "Add &marker at mouse…", self._marker_at_mouse, "M")
        self._action(m, "&Clear markers", self.timeline.clear_markers)
        s = mb.addMenu("&Search")
        self._action(s, "&Find…", lambda: self.search_edit.setFocus(), QtGui.QKeySequence.Find)
        self._action(s, "Find &next", lambda: self.search(+1), shortcuts=["F3", "N"])
        self._action(s, "Find &previous", lambda: self.search(-1), shortcuts=["Shift+F3", "Shift+N"])
        h = mb.addMenu("&Help")
        self._action(h, "&Keys and mouse", self._show_keys, "F1")

    def _show_keys(self):
        QtWidgets.QMessageBox.information(self, "pcitrace viewer", (
            "Wheel: zoom at the mouse    Drag: pan    Shift+drag: zoom to selection\n"
            "Left click: cursor A (on a transaction: select it)    Right click: cursor B\n"
            "+ / -: zoom    F: fit    Z: zoom to cursors    ← →: pan    Home / End\n"
            "A / B: cursor at mouse    M: named marker at mouse\n"
            "N / Shift+N, F3 / Shift+F3: next / previous search hit\n"
            "Ctrl+O open   Ctrl+P profile   Ctrl+S session   Ctrl+E PNG   Ctrl+Shift+E CSV"))

    def _fill_recent(self):
        self.recent_menu.clear()
        for p in self.recent_files():
            a = self.recent_menu.addAction(p)
            a.triggered.connect(lambda _=False, p=p: self.open_path(p))

    def recent_files(self) -> list[str]:
        v = self.settings.value("recent", [])
        if isinstance(v, str):
            v = [v]
        return [str(x) for x in (v or [])]

    def _remember(self, path):
        path = os.path.abspath(path)
        rec = [path] + [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent", rec[:10])
        self._fill_recent()

    # -- opening ---------------------------------------------------------------------------
    def choose_capture(self):
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Open capture", "", f"{dialog_filter()};;All files (*)")
        if path:
            self.open_path(path)

    def choose_profile(self):
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open profile", "", "Profiles (*.toml);;All files (*)")
        if path and self.doc is not None:
            self.open_path(self.doc.path, profile=path)
        elif path:
            self.profile_path = path

    def open_path(self, path, profile=None, *, synchronous: bool = False, restore_session: bool = True):
        """Open a capture; ``synchronous`` does it on this thread (screenshots, scripts)."""
        if self.doc is not None:
            self.save_session(quiet=True)
        self.cancel_loading(wait=True)
        path = os.fspath(path)
        self._session_note = None
        session = self._read_session(path) if restore_session else None
        if profile is None and session and session.get("profile") and os.path.exists(session["profile"]):
            profile = session["profile"]
        self.profile_path = os.fspath(profile) if profile else None
        self._pending_session = session
        self.statusBar().showMessage(f"opening {path} …")
        if synchronous:
            try:
                doc = Document.open(path, self.profile_path)
                self._signals_ready(doc)
                doc.decode()
                self._decoded(doc)
            except Exception as exc:
                self.show_error(error_text(exc))
                self.loadFailed.emit(error_text(exc))
            return
        worker = LoadWorker(path, self.profile_path)
        thread = QtCore.QThread(self)
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        worker.progress.connect(self._progress)
        worker.partial.connect(self._partial)
        worker.signalsReady.connect(self._signals_ready)
        worker.decoded.connect(self._decoded)
        worker.failed.connect(self._failed)
        worker.cancelled.connect(lambda: self.statusBar().showMessage("loading cancelled", 5000))
        worker.finished.connect(thread.quit)
        worker.finished.connect(lambda w=worker: self._loading_done(w))
        # the worker has no Qt parent (it moves to the thread): keep it alive until it is done
        self._running.append((thread, worker))
        self._thread, self._worker = thread, worker
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.show()
        thread.start()

    def cancel_loading(self, wait: bool = False):
        for thread, worker in list(self._running):
            worker.cancel()
            if wait:
                thread.quit()
                thread.wait(60000)
                self._loading_done(worker)

    def is_loading(self) -> bool:
        return any(t.isRunning() for t, _ in self._running)

    def _loading_done(self, worker):
        for item in list(self._running):
            if item[1] is worker:
                item[0].quit()
                item[0].wait(5000)
                self._running.remove(item)
        if worker is self._worker:
            self._worker, self._thread = None, None
            self.progress.hide()
            self.cancel_button.hide()

    def _progress(self, f, text):
        self.progress.setValue(int(1000 * f))
        self.progress.setFormat(f"{text} %p%")

    def _failed(self, message):
        self.statusBar().showMessage("could not open the capture", 10000)
        self.show_error(message)
        self.loadFailed.emit(message)

    def show_error(self, message: str):
        QtWidgets.QMessageBox.critical(self, "pcitrace", message)

    def _stale(self) -> bool:
        """A signal from a worker that a newer open or a cancel has replaced."""
        return self._worker is not None and self.sender() is not None and self.sender() is not self._worker

    def _partial(self, doc):
        if self._stale():
            return
        if doc is not self.doc:
            self._show(doc)
        else:
            self.timeline.rows_item.update()

    def _signals_ready(self, doc):
        if self._stale():
            return
        if doc is not self.doc:
            self._show(doc)
        else:
            self.timeline.refresh_rows()
        src = doc.profile.source if getattr(doc.profile, "source", None) else "file"
        self.statusBar().showMessage(
            f"{doc.path}: {doc.capture.num_samples:,} samples, {doc.capture.timebase.mode} mode, "
            f"profile {doc.profile.describe()} ({src}); decoding …")
        self.signalsComplete.emit()

    def _show(self, doc):
        self.doc = doc
        self.setWindowTitle(f"pcitrace — {Path(doc.path).name}")
        self.timeline.set_document(doc)
        self._remember(doc.path)
        self.table.set_document(None)
        self.search_index = None
        self._apply_session(self._pending_session, phase=1)
        self.statusBar().showMessage(f"{doc.path}: reading signals …")
        self.documentReady.emit()

    def _decoded(self, doc):
        if doc is not self.doc:
            return
        self.timeline.set_document(doc, keep_view=True)
        self.table.set_document(doc)
        self._apply_session(self._pending_session, phase=2)
        self._pending_session = None
        self._build_search_index()
        n = len(doc.result.records)
        msg = f"{Path(doc.path).name}: {n:,} transactions, {len(doc.result.findings):,} findings"
        if doc.analysis_error:
            msg += f"; no analysis rows ({doc.analysis_error})"
        if self._session_note:
            msg += f"; {self._session_note}"
        self.statusBar().showMessage(msg, 30000)
        self.update_measurements()
        self.decodeReady.emit()

    # -- drag and drop ------------------------------------------------------------------------
    def dragEnterEvent(self, ev):
        if ev.mimeData().hasUrls():
            ev.acceptProposedAction()

    def dropEvent(self, ev):
        urls = [u.toLocalFile() for u in ev.mimeData().urls() if u.isLocalFile()]
        caps = [u for u in urls if not u.lower().endswith(".toml")]
        profs = [u for u in urls if u.lower().endswith(".toml")]
        if caps:
            self.open_path(caps[0], profile=profs[0] if profs else None)
        elif profs and self.doc is not None:
            self.open_path(self.doc.path, profile=profs[0])

    # -- cursors, markers, navigation ----------------------------------------------------------
    def _mouse_time(self) -> float | None:
        vb = self.timeline.vb
        pos = self.timeline.plot.mapFromGlobal(QtGui.QCursor.pos())
        scene = self.timeline.plot.mapToScene(pos)
        if not vb.sceneBoundingRect().contains(scene):
            t0, t1 = self.timeline.view_range_ps()
            return (t0 + t1) / 2
        return vb.mapSceneToView(scene).x() * 1e6

    def _cursor_at_mouse(self, which):
        t = self._mouse_time()
        if t is not None:
            self.timeline.set_cursor(which, t)

    def _marker_at_mouse(self):
        t = self._mouse_time()
        name, ok = QtWidgets.QInputDialog.getText(self, "Marker", "Marker name:",
                                                  text=f"M{len(self.timeline.markers) + 1}")
        if ok and name.strip():
            self.timeline.add_marker(name.strip(), t)

    def set_all_signals(self, on: bool):
        if self.all_signals_action.isChecked() != bool(on):
            self.all_signals_action.setChecked(bool(on))
            return
        self.timeline.show_all_signals = bool(on)
        if self.doc is not None:
            self.timeline.refresh_rows()

    def _measure_row_clicked(self, row, col):
        """Double-click on a cursor or marker line of the panel: centre the view there."""
        item = self.measure.item(row, 0)
        name = item.text().strip() if item else ""
        t = None
        if name in ("Cursor A", "Cursor B"):
            t = self.timeline.cursor_ps(name[-1])
        else:
            t = next((tt for n, tt in self.timeline.marker_list() if n == name), None)
        if t is not None:
            self.timeline.centre_on(t)

    def zoom_to_cursors(self):
        a, b = self.timeline.cursor_ps("A"), self.timeline.cursor_ps("B")
        if a is not None and b is not None and a != b:
            self.timeline.set_view(min(a, b), max(a, b))

    def _goto_edge(self, end):
        t0, t1 = self.timeline.view_range_ps()
        span = t1 - t0
        if self.doc is None:
            return
        if end:
            self.timeline.set_view(self.doc.end_ps - span, self.doc.end_ps)
        else:
            self.timeline.set_view(self.doc.start_ps, self.doc.start_ps + span)

    def update_measurements(self):
        a = self.timeline.cursor_ps("A")
        rows = measure(self.doc, a, self.timeline.cursor_ps("B"))
        marks = sorted(self.timeline.marker_list(), key=lambda m: m[1])
        if marks:
            rows.append(("Markers (Δ to A)", ""))
            for name, t in marks:
                rel = f"  ({'+' if t >= a else '-'}{format_time(abs(t - a), 5)})" if a is not None else ""
                rows.append((f"  {name}", format_time(t, 7) + rel))
        self.measure.show_values(rows)

    # -- table <-> timeline -------------------------------------------------------------------
    def _timeline_record_clicked(self, i):
        if not self.table.select_record(i):
            self.statusBar().showMessage(f"transaction {i} is hidden by the table filter", 5000)

    def _table_record_activated(self, i):
        self.timeline.jump_to_record(i)

    def select_record(self, i: int):
        """Select a transaction everywhere and show it."""
        self.table.select_record(i)
        self.timeline.jump_to_record(i)

    # -- search ----------------------------------------------------------------------------
    def _build_search_index(self):
        """Searchable text of the records, built on the first search: one small table of the
        distinct bus / command / termination / DEVSEL# texts, addresses as hex on demand."""
        self.search_index = None

    def _matches(self, word: str) -> np.ndarray:
        rec = self.doc.result.records
        m = np.zeros(len(rec), bool)
        for field in ("bus", "command", "termination", "devsel"):
            uniq, inv = np.unique(rec[field], return_inverse=True)
            texts = [str(u).lower() for u in uniq]
            if field == "command":
                texts = [t + " " + D.short_command(t).lower() for t in texts]
            hit = np.array([word in t for t in texts], bool)
            if hit.any():
                m |= hit[inv]
        if all(ch in "0123456789abcdef" for ch in word):
            if self.search_index is None:
                self.search_index = np.char.mod("%08x", rec["address"].astype(np.int64) & 0xFFFFFFFFFFFF)
            m |= np.char.find(self.search_index, word) >= 0
        return m

    def search(self, direction: int) -> int | None:
        """Next (+1) or previous (-1) transaction matching the search text, from the selected
        transaction (else the view centre); all words must match."""
        if self.doc is None or self.doc.result is None:
            return None
        words = self.search_edit.text().lower().replace("0x", "").split()
        if not words:
            return None
        m = np.ones(len(self.doc.result.records), bool)
        for w in words:
            m &= self._matches(w)
        hits = np.flatnonzero(m)
        if len(hits) == 0:
            self.search_status.setText("no match")
            return None
        starts = self.doc.result.records["start_ps"]
        cur = self.timeline.selected_record
        if cur is not None:
            pos = int(np.searchsorted(hits, cur, side="right" if direction > 0 else "left"))
        else:
            t0, t1 = self.timeline.view_range_ps()
            pos = int(np.searchsorted(starts[hits], (t0 + t1) / 2, side="left"))
        k = pos if direction > 0 else pos - 1
        k %= len(hits)
        i = int(hits[k])
        self.search_status.setText(f"{k + 1} of {len(hits)}")
        self.select_record(i)
        return i

    # -- export ------------------------------------------------------------------------------
    def choose_export_png(self):
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export view", "view.png", "PNG (*.png)")
        if path:
            self._guard(lambda: self.export_png(path))

    def choose_export_csv(self):
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export transactions", "transactions.csv",
                                                        "CSV (*.csv)")
        if path:
            self._guard(lambda: self.export_csv(path))

    def _guard(self, fn):
        try:
            fn()
        except Exception as exc:
            self.show_error(error_text(exc))

    def export_png(self, path, whole_window: bool = False):
        """The timeline (or the whole window) as a PNG, written atomically."""
        widget = self if whole_window else self.timeline.plot
        pm = widget.grab()
        with atomic_path(path) as tmp:
            if not pm.save(str(tmp), "PNG"):
                raise PcitraceError("could not write the PNG", path=path, fix="check the directory is writable")

    def export_csv(self, path):
        """The transactions the table filter shows, in table order, written atomically."""
        if self.doc is None or self.doc.result is None:
            raise PcitraceError("nothing to export yet", fix="open a capture and wait for decoding")
        idx = np.asarray(self.table.filtered_records(), np.int64)
        rec = self.doc.result.records[idx]
        rows = np.zeros(len(idx), [("index", np.int64)] + [(f, rec.dtype[f]) for f in CSV_FIELDS[1:]])
        rows["index"] = idx
        for f in CSV_FIELDS[1:]:
            rows[f] = rec[f]
        with atomic_path(path) as tmp:
            with open(tmp, "w", newline="") as fh:
                write_csv(fh, [rows], CSV_FIELDS, formats={"address": lambda v: f"0x{v:08x}"},
                          lineterminator="\r\n")

    # -- sessions --------------------------------------------------------------------------
    def session_dict(self) -> dict:
        t0, t1 = self.timeline.view_range_ps()
        return {
            "version": SESSION_VERSION,
            "capture": Path(self.doc.path).name,
            "profile": os.path.abspath(self.profile_path) if self.profile_path else None,
            "view_ps": [t0, t1],
            "cursors": {"A": self.timeline.cursor_ps("A"), "B": self.timeline.cursor_ps("B")},
            "markers": [{"name": n, "t_ps": t} for n, t in self.timeline.marker_list()],
            "filters": self.table.filter_values(),
            "search": self.search_edit.text(),
            "selected_record": self.timeline.selected_record,
            "all_signals": self.timeline.show_all_signals,
            "collapsed": sorted(self.timeline.collapsed),
        }

    def save_session(self, quiet: bool = False):
        if self.doc is None:
            return None
        path = session_path_for(self.doc.path)
        try:
            with atomic_path(path) as tmp:
                tmp.write_text(json.dumps(self.session_dict(), indent=2))
        except (OSError, PcitraceError) as exc:
            if not quiet:
                self.show_error(error_text(exc))
            return None
        if not quiet:
            self.statusBar().showMessage(f"session saved to {path}", 5000)
        return path

    def _read_session(self, capture_path) -> dict | None:
        path = session_path_for(capture_path)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("version") != SESSION_VERSION:
                raise ValueError("not a pcitrace session of this version")
            return data
        except (OSError, ValueError) as exc:          # unreadable, not JSON (or not UTF-8), wrong version
            # Kept for the final status line: the loading messages would overwrite it.
            self._session_note = f"{path.name}: session ignored ({exc}); delete or fix the file"
            self.statusBar().showMessage(self._session_note, 10000)
            return None

    def _apply_session(self, s: dict | None, phase: int):
        if not s:
            return
        tl = self.timeline
        try:
            if phase == 1:
                v = s.get("view_ps")
                if v and len(v) == 2 and v[1] > v[0]:
                    tl.set_view(float(v[0]), float(v[1]))
                cur = s.get("cursors") or {}
                for k in ("A", "B"):
                    tl.set_cursor(k, float(cur[k]) if cur.get(k) is not None else None)
                self.timeline.collapsed = set(map(str, s.get("collapsed") or []))
                self.set_all_signals(bool(s.get("all_signals", False)))
                if self.doc is not None:
                    self.timeline.refresh_rows()
                tl.clear_markers()
                for m in s.get("markers") or []:
                    tl.add_marker(str(m["name"]), float(m["t_ps"]))
                self.search_edit.setText(str(s.get("search") or ""))
            else:
                f = s.get("filters") or {}
                self.table.set_filter_values(f.get("bus", ANY), f.get("command", ANY),
                                             f.get("termination", ANY), f.get("lo", ""), f.get("hi", ""))
                sel = s.get("selected_record")
                if sel is not None and 0 <= int(sel) < len(self.doc.result.records):
                    tl.select_record(int(sel))
                    self.table.select_record(int(sel))
        except (KeyError, TypeError, ValueError) as exc:
            self.statusBar().showMessage(f"session partly ignored: {exc}", 10000)

    def closeEvent(self, ev):
        self.cancel_loading(wait=True)
        if self.doc is not None:
            self.save_session(quiet=True)
        super().closeEvent(ev)


def install_excepthook():
    """An exception escaping a Qt slot aborts PyQt5; show it in a dialog instead."""
    import sys

    def hook(etype, value, tb):
        text = "".join(traceback.format_exception(etype, value, tb))
        sys.stderr.write(text)
        app = QtWidgets.QApplication.instance()
        if app is not None:
            QtWidgets.QMessageBox.critical(None, "pcitrace", error_text(value))

    sys.excepthook = hook

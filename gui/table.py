"""The transaction table: sortable, filterable by bus, command, termination and address range.

The model holds an index array into the decode records (filtered, then sorted with numpy), so
filtering or sorting a million transactions is a few array operations and Qt asks only for
the rows on screen.
"""

from __future__ import annotations

import numpy as np
from PyQt5 import QtCore, QtGui, QtWidgets

from pcitrace.errors import PcitraceError
from pcitrace.gui import document as D
from pcitrace.gui.units import format_time

COLUMNS = (
    ("#", None), ("Bus", "bus"), ("Start", "start_ps"), ("Duration", "_dur"), ("Command", "command"),
    ("Address", "address"), ("Bytes", "bytes"), ("Phases", "data_phases"), ("Waits I/T", "target_waits"),
    ("DEVSEL#", "devsel"), ("Termination", "termination"),
)
ANY = "(any)"


def parse_address(text: str, what: str) -> int | None:
    text = text.strip().lower().replace("_", "")
    if not text:
        return None
    try:
        return int(text, 16) if not text.startswith("0x") else int(text, 0)
    except ValueError:
        raise PcitraceError(f"cannot read the {what} address {text!r}",
                            fix="type a hexadecimal address such as febc0000 or 0xfebc0000") from None


class TransactionModel(QtCore.QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.doc = None
        self.rec = None
        self.rows = np.zeros(0, np.int64)       # record indices in display order
        self.pos = np.zeros(0, np.int64)        # record index -> display row or -1
        self.filters = {"bus": ANY, "command": ANY, "termination": ANY, "lo": None, "hi": None}
        self.sort_col, self.sort_order = 2, QtCore.Qt.AscendingOrder

    def set_document(self, doc):
        self.beginResetModel()
        self.doc = doc
        self.rec = doc.result.records if doc is not None and doc.result is not None else None
        self._apply()
        self.endResetModel()

    def set_filters(self, **kw):
        self.filters.update(kw)
        self.beginResetModel()
        self._apply()
        self.endResetModel()

    def _apply(self):
        rec = self.rec
        if rec is None or len(rec) == 0:
            self.rows = np.zeros(0, np.int64)
            self.pos = np.zeros(0, np.int64)
            return
        m = np.ones(len(rec), bool)
        f = self.filters
        if f["bus"] != ANY:
            m &= rec["bus"] == f["bus"]
        if f["command"] != ANY:
            m &= rec["command"] == f["command"]
        if f["termination"] != ANY:
            m &= rec["termination"] == f["termination"]
        if f["lo"] is not None:
            m &= rec["address"] >= np.uint64(f["lo"])
        if f["hi"] is not None:
            m &= rec["address"] <= np.uint64(f["hi"])
        idx = np.flatnonzero(m)
        key = COLUMNS[self.sort_col][1]
        if key is not None and len(idx):
            vals = (self.doc.record_end[idx] - rec["start_ps"][idx]) if key == "_dur" else rec[key][idx]
            order = np.argsort(vals, kind="stable")
            idx = idx[order]
        if self.sort_order == QtCore.Qt.DescendingOrder:
            idx = idx[::-1]
        self.rows = idx
        self.pos = np.full(len(rec), -1, np.int64)
        self.pos[idx] = np.arange(len(idx))

    def rowCount(self, parent=QtCore.QModelIndex()):
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QtCore.QModelIndex()):
        return len(COLUMNS)

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        if role == QtCore.Qt.DisplayRole and orientation == QtCore.Qt.Horizontal:
            return COLUMNS[section][0]
        return None

    def data(self, index, role=QtCore.Qt.DisplayRole):
        if not index.isValid():
            return None
        i = int(self.rows[index.row()])
        col = index.column()
        r = self.rec[i]
        if role == QtCore.Qt.DisplayRole:
            if col == 0:
                return str(i)
            if col == 1:
                return str(r["bus"])
            if col == 2:
                return format_time(float(r["start_ps"]), 7)
            if col == 3:
                return format_time(float(self.doc.record_end[i] - r["start_ps"]), 4)
            if col == 4:
                return D.short_command(str(r["command"]))
            if col == 5:
                return "" if str(r["command"]) == "unknown" else f"{int(r['address']):08X}"
            if col == 6:
                return str(int(r["bytes"]))
            if col == 7:
                return str(int(r["data_phases"]))
            if col == 8:
                return f"{int(r['initiator_waits'])}/{int(r['target_waits'])}"
            if col == 9:
                return str(r["devsel"])
            if col == 10:
                return D.TERMINATION_LABELS.get(str(r["termination"]), str(r["termination"]))
        if role == QtCore.Qt.DecorationRole and col == 10:
            return QtGui.QColor(D.TERMINATION_COLOURS.get(str(r["termination"]), "#000000"))
        if role == QtCore.Qt.TextAlignmentRole and col in (0, 2, 3, 5, 6, 7, 8):
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        if role == QtCore.Qt.ToolTipRole:
            return self.doc.record_label(i, long=True)
        return None

    def sort(self, column, order=QtCore.Qt.AscendingOrder):
        self.sort_col, self.sort_order = column, order
        self.beginResetModel()
        self._apply()
        self.endResetModel()

    def record_at(self, row: int) -> int:
        return int(self.rows[row])

    def row_of(self, record: int) -> int:
        return int(self.pos[record]) if 0 <= record < len(self.pos) else -1


class TransactionPanel(QtWidgets.QWidget):
    """Filter bar + table. ``recordActivated(i)`` when the user picks a row."""

    recordActivated = QtCore.pyqtSignal(int)
    filterError = QtCore.pyqtSignal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = TransactionModel(self)
        self.view = QtWidgets.QTableView()
        self.view.setModel(self.model)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(2, QtCore.Qt.AscendingOrder)
        self.view.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectRows)
        self.view.setSelectionMode(QtWidgets.QAbstractItemView.SingleSelection)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(20)
        self.view.setAlternatingRowColors(True)
        self.view.horizontalHeader().setStretchLastSection(True)
        # column widths from the first rows only: a million-row table sizes instantly
        self.view.horizontalHeader().setResizeContentsPrecision(200)
        self.view.clicked.connect(self._clicked)
        self.view.activated.connect(self._clicked)
        self._select_guard = False
        self.view.selectionModel().currentRowChanged.connect(self._current_changed)
        self.bus = QtWidgets.QComboBox()
        self.command = QtWidgets.QComboBox()
        self.termination = QtWidgets.QComboBox()
        self.lo = QtWidgets.QLineEdit()
        self.lo.setPlaceholderText("from addr (hex)")
        self.hi = QtWidgets.QLineEdit()
        self.hi.setPlaceholderText("to addr (hex)")
        self.count = QtWidgets.QLabel("")
        for w in (self.bus, self.command, self.termination):
            w.currentIndexChanged.connect(self.apply_filters)
        for w in (self.lo, self.hi):
            w.editingFinished.connect(self.apply_filters)
        bar = QtWidgets.QHBoxLayout()
        for label, w in (("Bus", self.bus), ("Command", self.command), ("Termination", self.termination)):
            bar.addWidget(QtWidgets.QLabel(label))
            bar.addWidget(w)
        bar.addWidget(QtWidgets.QLabel("Address"))
        bar.addWidget(self.lo)
        bar.addWidget(QtWidgets.QLabel("–"))
        bar.addWidget(self.hi)
        bar.addStretch(1)
        bar.addWidget(self.count)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.view)

    def set_document(self, doc):
        rec = doc.result.records if doc is not None and doc.result is not None else None
        for combo, field in ((self.bus, "bus"), (self.command, "command"), (self.termination, "termination")):
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(ANY)
            if rec is not None and len(rec):
                for v in sorted(set(rec[field].tolist())):
                    combo.addItem(str(v))
            combo.blockSignals(False)
        self.model.set_document(doc)
        self._update_count()
        self.view.resizeColumnsToContents()

    def set_filter_values(self, bus=ANY, command=ANY, termination=ANY, lo="", hi=""):
        for combo, v in ((self.bus, bus), (self.command, command), (self.termination, termination)):
            combo.blockSignals(True)
            k = combo.findText(v)
            combo.setCurrentIndex(k if k >= 0 else 0)
            combo.blockSignals(False)
        self.lo.setText(lo or "")
        self.hi.setText(hi or "")
        self.apply_filters()

    def filter_values(self) -> dict:
        return {"bus": self.bus.currentText() or ANY, "command": self.command.currentText() or ANY,
                "termination": self.termination.currentText() or ANY,
                "lo": self.lo.text().strip(), "hi": self.hi.text().strip()}

    def apply_filters(self):
        try:
            lo = parse_address(self.lo.text(), "lowest")
            hi = parse_address(self.hi.text(), "highest")
        except PcitraceError as exc:
            self.filterError.emit(str(exc))
            return
        self.model.set_filters(bus=self.bus.currentText() or ANY, command=self.command.currentText() or ANY,
                               termination=self.termination.currentText() or ANY, lo=lo, hi=hi)
        self._update_count()

    def _update_count(self):
        total = 0 if self.model.rec is None else len(self.model.rec)
        self.count.setText(f"{len(self.model.rows)} of {total} transactions")

    def _clicked(self, index):
        if index.isValid():
            self.recordActivated.emit(self.model.record_at(index.row()))

    def _current_changed(self, cur, prev):
        if cur.isValid() and not self._select_guard:
            self.recordActivated.emit(self.model.record_at(cur.row()))

    def select_record(self, i: int) -> bool:
        row = self.model.row_of(i)
        if row < 0:
            return False
        self._select_guard = True
        try:
            self.view.selectRow(row)
            self.view.scrollTo(self.model.index(row, 0), QtWidgets.QAbstractItemView.PositionAtCenter)
        finally:
            self._select_guard = False
        return True

    def selected_record(self) -> int | None:
        idx = self.view.selectionModel().selectedRows()
        return self.model.record_at(idx[0].row()) if idx else None

    def filtered_records(self) -> np.ndarray:
        return self.model.rows

"""The timeline: signal, decoded and analysis rows under one time axis.

pyqtgraph provides the view box (wheel zoom centred on the mouse, drag to pan, range limits),
the time axis with SI prefixes and the cursor / marker lines. ``RowsItem`` paints the rows
itself in device pixels from the level-of-detail data (pcitrace.gui.lod), so a repaint costs
what the pixels cost and text stays crisp at every zoom. X is in microseconds.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PyQt5 import QtCore, QtGui, QtWidgets

from pcitrace import buses
from pcitrace.errors import PcitraceError
from pcitrace.gui import document as D
from pcitrace.gui.lod import busy_fraction, count_below

US = 1e6            # ps per x unit
BG = "#ffffff"
TEXT = QtGui.QColor("#212121")
LINE = QtGui.QColor("#1b5e20")
HEADER_BG = QtGui.QColor("#eceff1")
GRID = QtGui.QColor("#e0e0e0")
VEC_FILL = QtGui.QColor("#e8f5e9")
ACTIVITY = QtGui.QColor("#66bb6a")
SELECT = QtGui.QColor("#000000")
LINE_RGBA = np.array([LINE.red(), LINE.green(), LINE.blue(), 255], np.uint8)
ACTIVITY_RGBA = np.array([ACTIVITY.red(), ACTIVITY.green(), ACTIVITY.blue(), 255], np.uint8)
LINK = QtGui.QColor("#00695c")


def _qcolor(c) -> QtGui.QColor:
    return QtGui.QColor(c)


def _palette(kind: str) -> list[QtGui.QColor]:
    if kind == "txn":
        return [_qcolor(D.TERMINATION_COLOURS[t]) for t in D.TERMINATIONS]
    if kind == "csr":
        return [_qcolor(c) for c in D.GROUP_COLOURS]
    if kind == "burst":
        return [_qcolor(c) for c in D.BURST_COLOURS]
    if kind == "frames":
        return [_qcolor(D.FRAME_COLOUR)]
    return [_qcolor(D.FINDING_COLOUR)]


class RowsItem(pg.GraphicsObject):
    """Paints every row for the current view range."""

    def __init__(self, timeline: "Timeline"):
        super().__init__()
        self.tl = timeline
        self.font = QtGui.QFont("DejaVu Sans Mono")
        self.font.setPixelSize(11)
        self.bold = QtGui.QFont("DejaVu Sans")
        self.bold.setPixelSize(12)
        self.bold.setBold(True)
        fm = QtGui.QFontMetricsF(self.font)
        self.char_w = fm.horizontalAdvance("0")
        self.palettes = {k: _palette(k) for k in ("txn", "csr", "burst", "frames", "finding")}
        self.last_paint_s = 0.0

    def boundingRect(self):
        tl = self.tl
        return QtCore.QRectF(tl.x_min, 0.0, max(tl.x_max - tl.x_min, 1e-9), max(tl.total_height, 1))

    def paint(self, p: QtGui.QPainter, *args):
        import time
        t_start = time.perf_counter()
        tl = self.tl
        vb = self.getViewBox()
        if vb is None or not tl.layout:
            return
        (x0, x1), _ = vb.viewRange()
        tr = p.transform()
        dx0 = tr.map(QtCore.QPointF(x0, 0)).x()
        dx1 = tr.map(QtCore.QPointF(x1, 0)).x()
        width = int(round(dx1 - dx0))
        if width <= 0:
            return
        ys = [tr.map(QtCore.QPointF(0, y)).y() for y in tl.row_edges]
        p.resetTransform()
        p.setRenderHint(QtGui.QPainter.Antialiasing, False)
        t0, t1 = x0 * US, x1 * US
        ctx = _Ctx(p, t0, t1, dx0, width, (dx1 - dx0) / (t1 - t0))
        for (row, _), ytop, ybot in zip(tl.layout, ys[:-1], ys[1:]):
            h = ybot - ytop
            if h < 2:
                continue
            if row.kind == "header":
                p.fillRect(QtCore.QRectF(dx0, ytop, width, h), HEADER_BG)
                p.setPen(TEXT)
                p.setFont(self.bold)
                p.drawText(QtCore.QRectF(dx0 + 6, ytop, width, h),
                           QtCore.Qt.AlignVCenter | QtCore.Qt.AlignLeft, row.label)
                continue
            p.setPen(QtGui.QPen(GRID, 1))
            p.drawLine(QtCore.QPointF(dx0, ybot - 0.5), QtCore.QPointF(dx0 + width, ybot - 0.5))
            y0, y1 = ytop + 3, ybot - 3
            fn = getattr(self, "_paint_" + row.kind, None)
            if fn is not None:
                fn(ctx, row, y0, y1)
        self._paint_links(ctx, ys)
        self.last_paint_s = time.perf_counter() - t_start

    # -- signals --------------------------------------------------------------------------
    def _paint_line(self, c: "_Ctx", row, y0, y1):
        v = row.lod.view(c.t0, c.t1, c.width)
        p = c.p
        if v.exact:
            if not len(v.times):
                return
            n = len(v.times)
            xs, xe = _value_spans(c, v)
            ylev = np.where(v.values.astype(bool), y0, y1)
            # horizontal run per value, vertical at each change
            segs = np.empty((2 * n - 1, 4))
            segs[:n, 0], segs[:n, 1], segs[:n, 2], segs[:n, 3] = xs, ylev, xe, ylev
            if n > 1:
                segs[n:, 0] = xs[1:]
                segs[n:, 1] = ylev[:-1]
                segs[n:, 2] = xs[1:]
                segs[n:, 3] = ylev[1:]
            self._draw_segments(p, segs, LINE)
            return
        # zoomed out: one image row per pixel column (level, or a full bar where it toggles)
        h = max(int(round(y1 - y0)) + 1, 2)
        img = np.zeros((h, c.width, 4), np.uint8)
        quiet = np.flatnonzero(~v.busy)
        img[np.where(v.values[quiet].astype(bool), 0, h - 1), quiet] = LINE_RGBA
        img[:, v.busy] = LINE_RGBA
        self._blit(c, y0, img)

    def _paint_vector(self, c: "_Ctx", row, y0, y1):
        v = row.lod.view(c.t0, c.t1, c.width, max_per_pixel=0.2)
        p = c.p
        ym = (y0 + y1) / 2
        digits = max((row.bits + 3) // 4, 1)
        if v.exact:
            if not len(v.times):
                return
            xs, xe = _value_spans(c, v)
            slope = 2.0
            path = QtGui.QPainterPath()
            for a, b in zip(xs, xe):
                if b - a < 2 * slope + 1:
                    path.addRect(QtCore.QRectF(a, y0, max(b - a, 1.0), y1 - y0))
                    continue
                poly = QtGui.QPolygonF([QtCore.QPointF(a, ym), QtCore.QPointF(a + slope, y0),
                                        QtCore.QPointF(b - slope, y0), QtCore.QPointF(b, ym),
                                        QtCore.QPointF(b - slope, y1), QtCore.QPointF(a + slope, y1),
                                        QtCore.QPointF(a, ym)])
                path.addPolygon(poly)
            p.setPen(QtGui.QPen(LINE, 1))
            p.setBrush(VEC_FILL)
            p.drawPath(path)
            p.setBrush(QtCore.Qt.NoBrush)
            p.setFont(self.font)
            p.setPen(TEXT)
            for a, b, val in zip(xs, xe, v.values):
                full = _hex(int(val), digits)
                text = self._fit([full, "…" + full[-4:], "…" + full[-2:]], b - a - 2)
                if not text:
                    continue
                vis_a, vis_b = max(a, c.dx0), min(b, c.dx0 + c.width)
                p.drawText(QtCore.QRectF(vis_a, y0, vis_b - vis_a, y1 - y0), QtCore.Qt.AlignCenter, text)
            return
        # zoomed out: activity band where values change, two rails where they hold
        h = max(int(round(y1 - y0)) + 1, 2)
        img = np.zeros((h, c.width, 4), np.uint8)
        q = ~v.busy
        img[0, q] = LINE_RGBA
        img[h - 1, q] = LINE_RGBA
        img[:, v.busy] = ACTIVITY_RGBA
        self._blit(c, y0, img)

    # -- decoded and analysis rows ----------------------------------------------------------
    def _paint_intervals(self, c: "_Ctx", row, y0, y1, label_fn=None, min_w=1.0):
        level, s, e, cls, idx = row.lod.view(c.t0, c.t1, c.width)
        if len(s) > 0:
            pal = self.palettes[row.kind]
            xa = np.maximum(c.x(s), c.dx0 - 2)
            xb = np.minimum(np.maximum(c.x(e), xa + min_w), c.dx0 + c.width + 2)
            if level > 0 or len(s) > c.width // 3:
                self._interval_image(c, row, y0, y1, xa, xb, cls, pal)
            else:
                p = c.p
                p.setPen(QtCore.Qt.NoPen)
                for a, b, k in zip(xa, xb, cls):
                    p.fillRect(QtCore.QRectF(a, y0, b - a, y1 - y0), pal[min(int(k), len(pal) - 1)])
                if label_fn is not None:
                    # a label stops where the next interval starts (they may overlap in time)
                    room = np.minimum(xb, np.append(xa[1:], np.inf)) - xa
                    wide = np.flatnonzero(room > self.char_w * 4 + 6)
                    p.setFont(self.font)
                    p.setPen(QtGui.QColor("#ffffff"))
                    for i in wide:
                        w = room[i]
                        text = label_fn(int(idx[i]), w)
                        if text:
                            p.drawText(QtCore.QRectF(xa[i] + 3, y0, w - 6, y1 - y0),
                                       QtCore.Qt.AlignVCenter | QtCore.Qt.AlignLeft, text)
        sel = self.tl.selected_record
        doc = self.tl.doc
        if row.kind == "txn" and sel is not None and str(doc.result.records["bus"][sel]) == row.group:
            a = max(c.x(np.array([doc.result.records["start_ps"][sel]]))[0], c.dx0 - 4)
            b = min(c.x(np.array([doc.record_end[sel]]))[0], c.dx0 + c.width + 4)
            if b >= c.dx0 - 4 and a <= c.dx0 + c.width + 4:
                c.p.setPen(QtGui.QPen(SELECT, 2))
                c.p.setBrush(QtCore.Qt.NoBrush)
                c.p.drawRect(QtCore.QRectF(a - 1, y0 - 2, max(b - a, 1) + 2, y1 - y0 + 4))

    def _interval_image(self, c, row, y0, y1, xa, xb, cls, pal):
        """Many intervals: per pixel column the most severe class covering it, one image."""
        w = c.width
        pa = np.clip(np.floor(xa - c.dx0).astype(np.int64), 0, w - 1)
        pb = np.clip(np.ceil(xb - c.dx0).astype(np.int64), pa + 1, w)
        best = np.full(w, -1, np.int64)
        for k in np.unique(cls):
            m = cls == k
            d = np.bincount(pa[m], minlength=w + 1) - np.bincount(pb[m], minlength=w + 1)
            cover = np.cumsum(d[:w]) > 0
            best[cover] = np.maximum(best[cover], int(k))
        rgba = np.array([[q.red(), q.green(), q.blue(), 255] for q in pal] + [[0, 0, 0, 0]], np.uint8)
        line = rgba[np.where(best < 0, len(pal), np.minimum(best, len(pal) - 1))]
        h = max(int(round(y1 - y0)), 1)
        self._blit(c, y0, np.repeat(line[None, :, :], h, axis=0))

    @staticmethod
    def _blit(c, y0, img: np.ndarray):
        img = np.ascontiguousarray(img)
        q = QtGui.QImage(img.data, img.shape[1], img.shape[0], img.shape[1] * 4, QtGui.QImage.Format_RGBA8888)
        c.p.drawImage(QtCore.QPointF(c.dx0, y0), q)

    def _fit(self, texts, w):
        for t in texts:
            if self.char_w * len(t) + 6 <= w:
                return t
        return ""

    def _paint_txn(self, c, row, y0, y1):
        doc = self.tl.doc

        def label(i, w):
            r = doc.result.records[i]
            cmd = D.short_command(str(r["command"]))
            addr = f"{int(r['address']):08X}"
            term = str(r["termination"])
            extra = "" if term == "normal" else " " + D.TERMINATION_LABELS.get(term, term)
            if str(r["command"]) == "unknown":
                return self._fit([f"{int(r['data_phases'])} phases{extra}", "Txn"], w)
            return self._fit([f"{cmd} {addr} {int(r['bytes'])}B{extra}", f"{cmd} {addr}", cmd], w)

        self._paint_intervals(c, row, y0, y1, label)
        # data phases: a tick per completed data phase once they are 5 pixels apart
        wb = getattr(doc, "word_bytes", {}).get(row.group)
        if wb is not None:
            t = wb[0]
            i0, i1 = count_below(t, np.array([c.t0, c.t1]))
            if 0 < i1 - i0 <= c.width // 5:
                xs = c.x(t[i0:i1])
                segs = np.column_stack([xs, np.full(len(xs), y1 - 3), xs, np.full(len(xs), y1)])
                self._draw_segments(c.p, segs, QtGui.QColor("#ffffff"))

    def _paint_csr(self, c, row, y0, y1):
        ba = self.tl.doc.analysis.buses[row.group]

        def label(i, w):
            g = ba.groups[i]
            kind = "setup" if g["setup"] else "irq"
            return self._fit([f"{kind} {int(g['accesses'])} CSR {D_fmt(g['span_ps'])}",
                              f"{kind} {int(g['accesses'])}", kind], w)

        self._paint_intervals(c, row, y0, y1, label)

    def _paint_burst(self, c, row, y0, y1):
        ba = self.tl.doc.analysis.buses[row.group]

        def label(i, w):
            b = ba.bursts[i]
            d = {1: "rd", 2: "wr"}.get(int(b["direction"]), "")
            return self._fit([f"{int(b['bytes'])} B {d}", f"{int(b['bytes'])}"], w)

        self._paint_intervals(c, row, y0, y1, label)

    def _paint_frames(self, c, row, y0, y1):
        fr = self.tl.doc.result.frames[row.group]

        def label(i, w):
            f = fr[i]
            seq = int(f["udpmon_seq"])
            s = f" #{seq}" if seq >= 0 else ""
            return self._fit([f"frame {int(f['frame_bytes'])} B{s} {D_fmt(f['wire_time_ps'])}",
                              f"{int(f['frame_bytes'])} B{s}", f"{int(f['frame_bytes'])}"], w)

        self._paint_intervals(c, row, y0, y1, label)

    def _paint_finding(self, c, row, y0, y1):
        level, s, e, cls, idx = row.lod.view(c.t0, c.t1, c.width, per_pixel=0.5)
        if len(s) == 0:
            return
        p = c.p
        xs = c.x(s)
        col = _qcolor(D.FINDING_COLOUR)
        p.setPen(QtCore.Qt.NoPen)
        p.setBrush(col)
        ym = (y0 + y1) / 2
        r = (y1 - y0) / 2
        for x in xs:
            p.drawPolygon(QtGui.QPolygonF([QtCore.QPointF(x, y0), QtCore.QPointF(x + r, ym),
                                           QtCore.QPointF(x, y1), QtCore.QPointF(x - r, ym)]))
        p.setBrush(QtCore.Qt.NoBrush)
        if level == 0 and idx is not None and len(xs) < 200:
            f = self.tl.doc.result.findings
            p.setFont(self.font)
            p.setPen(col)
            nxt = np.append(xs[1:], c.dx0 + c.width + 1e9)
            for x, xn, i in zip(xs, nxt, idx):
                text = self._fit([str(f["kind"][i])], xn - x - r - 8)
                if text:
                    p.drawText(QtCore.QRectF(x + r + 3, y0 - 2, xn - x - r - 6, y1 - y0 + 4),
                               QtCore.Qt.AlignVCenter | QtCore.Qt.AlignLeft, text)

    def _paint_occupancy(self, c, row, y0, y1):
        frac = busy_fraction(row.lod, c.t0, c.t1, c.width)
        lo = np.array([255, 255, 255], np.float64)
        hi = np.array([229, 57, 53], np.float64)
        rgb = (lo[None, :] + (hi - lo)[None, :] * frac[:, None]).astype(np.uint8)
        img = np.ascontiguousarray(np.concatenate([rgb, np.full((len(rgb), 1), 255, np.uint8)], 1)[None, :, :])
        qimg = QtGui.QImage(img.data, img.shape[1], 1, img.shape[1] * 4, QtGui.QImage.Format_RGBA8888)
        c.p.drawImage(QtCore.QRectF(c.dx0, y0, c.width, y1 - y0), qimg)
        # mean over the view, for reading the strip
        mean = float(frac.mean()) if len(frac) else 0.0
        text = f"{100 * mean:.1f} % busy in view"
        tw = self.char_w * len(text) + 8
        box = QtCore.QRectF(c.dx0 + c.width - tw - 4, y0 - 2, tw, y1 - y0 + 4)
        c.p.fillRect(box, QtGui.QColor(255, 255, 255, 235))
        c.p.setFont(self.font)
        c.p.setPen(TEXT)
        c.p.drawText(box, QtCore.Qt.AlignCenter, text)

    def _paint_links(self, c, ys):
        """Frame on the wire <-> the DMA that sent it and the DMA that delivered it."""
        tl = self.tl
        doc = tl.doc
        if doc is None or not doc.chains:
            return
        centre = {row.key: (ys[i] + ys[i + 1]) / 2 for i, (row, _) in enumerate(tl.layout)}
        p = c.p
        pen = QtGui.QPen(LINK, 1, QtCore.Qt.DashLine)
        for link, ch in doc.chains.items():
            fy = centre.get(f"{link}/#frames")
            if fy is None:
                continue
            arr = ch.chain
            if len(arr) == 0:
                continue
            ws = arr["wire_start_ps"]
            i0, i1 = count_below(ws, np.array([c.t0 - 50e6, c.t1 + 50e6]))
            if i1 - i0 > c.width // 60:
                continue
            sy = centre.get(f"{ch.send_bus}/#dma") if ch.send_bus else None
            ry = centre.get(f"{ch.recv_bus}/#dma") if ch.recv_bus else None
            p.setFont(self.font)
            for r in arr[i0:i1]:
                if sy is not None and r["send_first_word_ps"] >= 0:
                    a = c.x(np.array([r["send_first_word_ps"]]))[0]
                    b = c.x(np.array([r["wire_start_ps"]]))[0]
                    p.setPen(pen)
                    p.drawLine(QtCore.QPointF(a, sy), QtCore.QPointF(b, fy))
                    self._delay_text(p, a, b, sy, fy, r["send_pci_to_wire_ps"])
                if ry is not None and r["recv_first_word_ps"] >= 0:
                    a = c.x(np.array([r["wire_end_ps"]]))[0]
                    b = c.x(np.array([r["recv_first_word_ps"]]))[0]
                    p.setPen(pen)
                    p.drawLine(QtCore.QPointF(a, fy), QtCore.QPointF(b, ry))
                    self._delay_text(p, a, b, fy, ry, r["wire_to_recv_pci_ps"])

    def _delay_text(self, p, xa, xb, ya, yb, ps):
        if ps < 0 or abs(xb - xa) < 1:
            return
        text = D_fmt(ps)
        if self.char_w * len(text) + 8 > max(abs(xb - xa), 60):
            return
        p.setPen(LINK)
        xm, ym = (xa + xb) / 2, (ya + yb) / 2
        p.fillRect(QtCore.QRectF(xm - 3, ym - 8, self.char_w * len(text) + 6, 16), QtGui.QColor(255, 255, 255, 220))
        p.drawText(QtCore.QRectF(xm, ym - 8, self.char_w * len(text) + 4, 16), QtCore.Qt.AlignVCenter, text)

    @staticmethod
    def _draw_segments(p, segs: np.ndarray, colour):
        if len(segs) == 0:
            return
        x = segs[:, [0, 2]].ravel()
        y = segs[:, [1, 3]].ravel()
        path = pg.arrayToQPath(x, y, connect="pairs")
        p.setPen(QtGui.QPen(colour, 1))
        p.drawPath(path)


def D_fmt(ps) -> str:
    from pcitrace.gui.units import format_time
    return format_time(float(ps), 3).replace(" ", "")


ANNOTATIONS = {"txn", "finding", "csr", "burst", "frames"}


def format_abs(ps) -> str:
    from pcitrace.gui.units import format_time
    return format_time(float(ps), 7)


def _hex(v: int, digits: int) -> str:
    # 64-bit AD carrying 32-bit data reads better without eight leading zeros
    if digits > 8 and v < (1 << 32):
        return f"{v:08X}"
    return f"{v:0{digits}X}"


class _Ctx:
    __slots__ = ("p", "t0", "t1", "dx0", "width", "scale")

    def __init__(self, p, t0, t1, dx0, width, scale):
        self.p, self.t0, self.t1, self.dx0, self.width, self.scale = p, t0, t1, dx0, width, scale

    def x(self, t_ps: np.ndarray) -> np.ndarray:
        return self.dx0 + (np.asarray(t_ps, np.float64) - self.t0) * self.scale


def _value_spans(c: _Ctx, v) -> tuple[np.ndarray, np.ndarray]:
    """Pixel x where each exact value of a level-of-detail view begins and where it ends."""
    xs = c.x(v.times)
    return xs, np.append(xs[1:], c.x(np.array([v.end]))[0])


# shown only with View > All signals: they rarely matter when reading transactions
MINOR_SIGNALS = {"clk", "par", "par64", "req64_n", "ack64_n", "idsel", "rst_n", "rx_clk", "rx_dv", "rxd"}


def _order_groups(rows, doc):
    """Bus groups in profile order, except that a probed link sits between the bus that sends
    on it and the bus that receives from it, so frame <-> DMA links run down the page."""
    groups = list(dict.fromkeys(r.group for r in rows))
    for link, ch in (doc.chains or {}).items():
        if link in groups and ch.send_bus in groups and ch.send_bus != link:
            groups.remove(link)
            groups.insert(groups.index(ch.send_bus) + 1, link)
    by = {g: [r for r in rows if r.group == g] for g in groups}
    return [r for g in groups for r in by[g]]


class TimeViewBox(pg.ViewBox):
    """X-only zoom and pan; Shift+drag selects a range to zoom to; clicks are reported."""

    sigClicked = QtCore.pyqtSignal(float, float, object, object)   # x, y, button, modifiers
    sigSelected = QtCore.pyqtSignal(float, float)

    def __init__(self):
        super().__init__(enableMenu=False)
        self.setMouseEnabled(x=True, y=False)
        self.invertY(True)
        self._sel = None

    def mouseClickEvent(self, ev):
        pos = self.mapSceneToView(ev.scenePos())
        ev.accept()
        self.sigClicked.emit(pos.x(), pos.y(), ev.button(), ev.modifiers())

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() == QtCore.Qt.LeftButton and ev.modifiers() & QtCore.Qt.ShiftModifier:
            ev.accept()
            a = self.mapSceneToView(ev.buttonDownScenePos()).x()
            b = self.mapSceneToView(ev.scenePos()).x()
            if self._sel is None:
                self._sel = pg.LinearRegionItem(values=(a, b), movable=False,
                                                brush=pg.mkBrush(33, 150, 243, 50))
                self.addItem(self._sel, ignoreBounds=True)
            self._sel.setRegion((min(a, b), max(a, b)))
            if ev.isFinish():
                self.removeItem(self._sel)
                self._sel = None
                if abs(b - a) > 0:
                    self.sigSelected.emit(min(a, b), max(a, b))
            return
        if ev.button() == QtCore.Qt.LeftButton:
            super().mouseDragEvent(ev, axis=0)   # pan in time only
        else:
            ev.ignore()

    def wheelEvent(self, ev, axis=None):
        super().wheelEvent(ev, axis=0)           # zoom in time, centred on the mouse


class Timeline(QtWidgets.QWidget):
    """Rows + time axis + cursors + markers, with the navigation API the window and tests use."""

    recordClicked = QtCore.pyqtSignal(int)
    annotationClicked = QtCore.pyqtSignal(str)
    cursorsChanged = QtCore.pyqtSignal()
    viewChanged = QtCore.pyqtSignal()

    LABEL_WIDTH = 150
    LANE = 18

    def __init__(self, parent=None):
        super().__init__(parent)
        self.doc = None
        self.layout = []            # (row, y) pairs
        self.row_edges = [0.0]
        self.total_height = 1.0
        self.x_min, self.x_max = 0.0, 1.0
        self.selected_record = None
        self.show_all_signals = False
        self.collapsed: set[str] = set()     # groups shown as their header only
        self.markers: list[tuple[str, pg.InfiniteLine]] = []
        self.vb = TimeViewBox()
        axis = pg.AxisItem("bottom")
        axis.setLabel("time", units="s")
        axis.setScale(1e-6)
        axis.enableAutoSIPrefix(True)
        self.left = pg.AxisItem("left")
        self.left.setWidth(self.LABEL_WIDTH)
        self.left.setStyle(tickLength=0)
        self.plot = pg.PlotWidget(viewBox=self.vb, axisItems={"bottom": axis, "left": self.left},
                                  background=BG)
        self.plot.setAntialiasing(False)
        pi = self.plot.getPlotItem()
        pi.hideButtons()
        pi.showGrid(x=True, y=False, alpha=0.15)
        for ax in ("bottom", "left"):
            pi.getAxis(ax).setPen(pg.mkPen("#616161"))
            pi.getAxis(ax).setTextPen(pg.mkPen("#212121"))
        top = pg.AxisItem("top")
        top.setLabel("", units="s")
        top.setScale(1e-6)
        pi.setAxisItems({"top": top})
        pi.getAxis("top").setPen(pg.mkPen("#616161"))
        pi.getAxis("top").setTextPen(pg.mkPen("#212121"))
        self.rows_item = RowsItem(self)
        self.vb.addItem(self.rows_item)
        self.cursor_a = self._cursor_line("A", "#1565c0")
        self.cursor_b = self._cursor_line("B", "#ef6c00")
        self.vb.sigXRangeChanged.connect(lambda *_: self.viewChanged.emit())
        self.vb.sigClicked.connect(self._on_click)
        self.plot.scene().sigMouseMoved.connect(self._on_hover)
        self.vb.sigSelected.connect(lambda a, b: self.set_view(a * US, b * US))
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.plot)

    def _cursor_line(self, name, colour):
        line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen(colour, width=1.5),
                               hoverPen=pg.mkPen(colour, width=3), label=name,
                               labelOpts={"position": 0.01, "color": colour, "fill": (255, 255, 255, 255)})
        line.setZValue(10)
        line.hide()
        line.sigPositionChanged.connect(lambda *_: self.cursorsChanged.emit())
        self.vb.addItem(line, ignoreBounds=True)
        return line

    # -- content ----------------------------------------------------------------------------
    def set_document(self, doc, keep_view: bool = False):
        old = self.view_range_ps() if (keep_view and self.doc is not None) else None
        self.doc = doc
        self.selected_record = None
        self.x_min = doc.start_ps / US
        self.x_max = max(doc.end_ps, doc.start_ps + 1) / US
        self.refresh_rows()
        span = self.x_max - self.x_min
        self.vb.setLimits(xMin=self.x_min - 0.02 * span, xMax=self.x_max + 0.02 * span,
                          minXRange=1e-4, yMin=0, yMax=self.total_height)
        if old:
            self.set_view(*old)
        else:
            self.zoom_fit()

    def refresh_rows(self):
        doc = self.doc
        rows = [r for r in doc.rows if self.show_all_signals or r.key.split("/", 1)[1] not in MINOR_SIGNALS]
        rows = _order_groups(rows, doc)
        # a blank lane on top carries the cursor and marker labels, clear of the rows' text
        layout, y, last = [(D.Row("#lane", "", "", "lane", height=self.LANE), 0.0)], float(self.LANE), None
        for r in rows:
            if r.group != last:
                mark = "▸" if r.group in self.collapsed else "▾"
                layout.append((D.Row(f"{r.group}/#header", f"{mark} {self._group_title(r.group)}", r.group,
                                     "header", height=22), y))
                y += 22
                last = r.group
            if r.group in self.collapsed:
                continue
            layout.append((r, y))
            y += r.height
        self.layout = layout
        self.row_edges = [yy for _, yy in layout] + [y]
        self.total_height = max(y, 1.0)
        ticks = [((yy + r.height / 2), "" if r.kind == "header" else r.label) for r, yy in layout]
        self.left.setTicks([ticks, []])
        self.vb.setLimits(yMin=0, yMax=self.total_height)
        self.vb.setYRange(0, self.total_height, padding=0)
        axis_h = 70
        self.plot.setMinimumHeight(int(self.total_height + axis_h))
        for line in [self.cursor_a, self.cursor_b] + [m for _, m in self.markers]:
            self._place_label(line)
        self.rows_item.prepareGeometryChange()
        self.rows_item.update()

    def _place_label(self, line):
        line.label.setPosition((self.LANE / 2) / self.total_height)

    def _group_title(self, name: str) -> str:
        doc = self.doc
        try:
            bus = doc.profile.bus(name)
        except PcitraceError:       # a row group that is no bus of the profile (e.g. the frames)
            return name
        title = buses.kind(bus.kind).title
        if not bus.is_pci:
            rate = (bus.link_bps or 1e9) / 1e9
            return f"{name}  ·  {title}, {rate:g} Gb/s"
        period = doc.periods.get(name)
        mhz = f", {1e6 / period:.4g} MHz" if period else ""
        return f"{name}  ·  {title} {bus.width}-bit{mhz}"

    def row_at(self, y: float):
        i = int(np.searchsorted(self.row_edges, y, side="right")) - 1
        if 0 <= i < len(self.layout):
            return self.layout[i][0]
        return None

    def row_y(self, key: str) -> tuple[float, float] | None:
        for i, (r, y) in enumerate(self.layout):
            if r.key == key:
                return y, self.row_edges[i + 1]
        return None

    # -- navigation ------------------------------------------------------------------------
    def view_range_ps(self) -> tuple[float, float]:
        (x0, x1), _ = self.vb.viewRange()
        return x0 * US, x1 * US

    def set_view(self, t0_ps: float, t1_ps: float):
        if t1_ps <= t0_ps:
            t1_ps = t0_ps + 1000.0
        self.vb.setXRange(t0_ps / US, t1_ps / US, padding=0)

    def zoom_fit(self):
        self.vb.setXRange(self.x_min, self.x_max, padding=0.01)

    def zoom(self, factor: float, centre_ps: float | None = None):
        t0, t1 = self.view_range_ps()
        c = (t0 + t1) / 2 if centre_ps is None else centre_ps
        self.set_view(c - (c - t0) / factor, c + (t1 - c) / factor)

    def pan(self, fraction: float):
        t0, t1 = self.view_range_ps()
        d = (t1 - t0) * fraction
        self.set_view(t0 + d, t1 + d)

    def centre_on(self, t0_ps: float, t1_ps: float | None = None, min_span_ps: float | None = None):
        """Show [t0, t1] with margins; zoom in only when the interval would be a few pixels."""
        t1_ps = t0_ps if t1_ps is None else t1_ps
        v0, v1 = self.view_range_ps()
        span = v1 - v0
        dur = max(t1_ps - t0_ps, 1.0)
        want = max(dur * 4, min_span_ps or 0)
        if span > dur * 200 or span < dur * 1.2:
            span = want
        c = (t0_ps + t1_ps) / 2
        self.set_view(c - span / 2, c + span / 2)

    # -- cursors and markers -----------------------------------------------------------------
    def set_cursor(self, which: str, t_ps: float | None):
        line = self.cursor_a if which.upper() == "A" else self.cursor_b
        if t_ps is None:
            line.hide()
        else:
            line.setValue(t_ps / US)
            line.show()
        self.cursorsChanged.emit()

    def cursor_ps(self, which: str) -> float | None:
        line = self.cursor_a if which.upper() == "A" else self.cursor_b
        return line.value() * US if line.isVisible() else None

    def add_marker(self, name: str, t_ps: float):
        line = pg.InfiniteLine(pos=t_ps / US, angle=90, movable=True,
                               pen=pg.mkPen("#6a1b9a", width=1, style=QtCore.Qt.DashLine), label=name,
                               labelOpts={"position": 0.98, "color": "#6a1b9a", "fill": (255, 255, 255, 220)})
        line.setZValue(9)
        self.vb.addItem(line, ignoreBounds=True)
        self.markers.append((name, line))
        self._place_label(line)
        line.sigPositionChanged.connect(lambda *_: self.cursorsChanged.emit())
        self.cursorsChanged.emit()
        return line

    def clear_markers(self):
        for _, line in self.markers:
            self.vb.removeItem(line)
        self.markers = []
        self.cursorsChanged.emit()

    def marker_list(self) -> list[tuple[str, float]]:
        return [(n, line.value() * US) for n, line in self.markers]

    # -- clicks -------------------------------------------------------------------------------
    def _on_click(self, x, y, button, modifiers):
        t = x * US
        row = self.row_at(y)
        if button == QtCore.Qt.LeftButton and row is not None and row.kind == "header":
            self.toggle_group(row.group)
            return
        if button == QtCore.Qt.LeftButton and row is not None and self.doc is not None \
                and self.doc.result is not None and row.kind in ANNOTATIONS:
            v0, v1 = self.view_range_ps()
            tol = 4 * (v1 - v0) / max(self.vb.width(), 1)
            i = row.lod.at(t, tol)
            if i is not None:
                rec, text = self.describe(row, int(i))
                if text:
                    self.annotationClicked.emit(text)
                if rec is not None:
                    self.select_record(rec)
                    self.recordClicked.emit(int(rec))
                return
        if button == QtCore.Qt.LeftButton:
            self.set_cursor("A", t)
        elif button in (QtCore.Qt.RightButton, QtCore.Qt.MiddleButton):
            self.set_cursor("B", t)

    def hover_text(self, t_ps: float, y: float) -> str:
        """What the tooltip says at time t on the row at y ('' when nothing is there)."""
        row = self.row_at(y)
        if row is None or self.doc is None or self.doc.result is None or row.kind not in ANNOTATIONS:
            return ""
        v0, v1 = self.view_range_ps()
        i = row.lod.at(t_ps, 3 * (v1 - v0) / max(self.vb.width(), 1))
        if i is None:
            return ""
        if row.kind == "txn":
            r = self.doc.result.records[i]
            return (f"#{i} {self.doc.record_label(i, long=True)}\n"
                    f"{format_abs(r['start_ps'])}, {int(r['clocks'])} clocks, {int(r['data_phases'])} data phases, "
                    f"waits initiator {int(r['initiator_waits'])} / target {int(r['target_waits'])}, "
                    f"DEVSEL# {r['devsel']}")
        return self.describe(row, int(i))[1]

    def _on_hover(self, scene_pos):
        if not self.vb.sceneBoundingRect().contains(scene_pos):
            return
        p = self.vb.mapSceneToView(scene_pos)
        text = self.hover_text(p.x() * US, p.y())
        if text:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), text, self.plot)
        else:
            QtWidgets.QToolTip.hideText()

    def describe(self, row, i: int) -> tuple[int | None, str]:
        """(transaction to select or None, one line for the status bar) of annotation i."""
        doc = self.doc
        fmt = D_fmt
        if row.kind == "txn":
            return i, ""
        if row.kind == "finding":
            f = doc.result.findings[i]
            return None, f"{f['bus']} {format_abs(f['time_ps'])}: {f['kind']}: {f['message']}"
        if row.kind in ("csr", "burst"):
            ba = doc.analysis.buses[row.group]
            local = np.flatnonzero(doc.result.records["bus"] == row.group)
            if row.kind == "csr":
                g = ba.groups[i]
                kind = "setup" if g["setup"] else "interrupt"
                return (int(local[g["first_record"]]) if 0 <= g["first_record"] < len(local) else None,
                        f"{kind} CSR group: {int(g['accesses'])} accesses, {int(g['retries'])} retries, "
                        f"span {fmt(g['span_ps'])}, from {format_abs(g['start_ps'])}")
            b = ba.bursts[i]
            from pcitrace.analyse.dma import TRANSFER_KINDS
            kind = TRANSFER_KINDS[int(ba.transfers["kind"][b["transfer"]])] if len(ba.transfers) else "?"
            return (int(local[b["record"]]) if 0 <= b["record"] < len(local) else None,
                    f"DMA burst ({kind}): {int(b['bytes'])} B in {fmt(b['duration_ps'])}, "
                    f"{int(b['data_phases'])} data phases, {int(b['waits'])} waits, {b['termination']}")
        if row.kind == "frames":
            f = doc.result.frames[row.group][i]
            text = (f"frame on {row.group}: {int(f['frame_bytes'])} B, wire {fmt(f['wire_time_ps'])}, "
                    f"from {format_abs(f['start_ps'])}")
            ch = doc.chains.get(row.group)
            if ch is not None and len(ch.chain):
                k = np.flatnonzero(ch.chain["wire_start_ps"] == f["start_ps"])
                if len(k):
                    c = ch.chain[k[0]]
                    parts = []
                    if c["send_pci_to_wire_ps"] >= 0:
                        parts.append(f"send PCI -> wire {fmt(c['send_pci_to_wire_ps'])}")
                    if c["wire_to_recv_pci_ps"] >= 0:
                        parts.append(f"wire -> receive PCI {fmt(c['wire_to_recv_pci_ps'])}")
                    if parts:
                        text += "; " + ", ".join(parts)
            return None, text
        return None, ""

    def toggle_group(self, group: str, collapsed: bool | None = None):
        """Fold a bus or link to its header line (a click on the header) or unfold it."""
        want = (group not in self.collapsed) if collapsed is None else bool(collapsed)
        (self.collapsed.add if want else self.collapsed.discard)(group)
        if self.doc is not None:
            self.refresh_rows()

    def select_record(self, i: int | None):
        self.selected_record = None if i is None else int(i)
        self.rows_item.update()

    def jump_to_record(self, i: int):
        r = self.doc.result.records[i]
        self.select_record(i)
        self.centre_on(float(r["start_ps"]), float(self.doc.record_end[i]))

    def x_of_ps(self, t_ps: float) -> QtCore.QPoint:
        """Widget coordinates (of self.plot's viewport) of time t at the current view."""
        scene = self.vb.mapViewToScene(QtCore.QPointF(t_ps / US, 0))
        return self.plot.mapFromScene(scene)

    def point_of(self, t_ps: float, row_key: str) -> QtCore.QPoint:
        y0, y1 = self.row_y(row_key)
        scene = self.vb.mapViewToScene(QtCore.QPointF(t_ps / US, (y0 + y1) / 2))
        return self.plot.mapFromScene(scene)

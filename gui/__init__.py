"""The timeline viewer (`pcitrace gui`): captures, decoded transactions, analysis rows.

PyQt5 + pyqtgraph. ``pcitrace.gui.window.MainWindow`` is the window; ``pcitrace.gui.lod``
holds the level-of-detail structures that keep a repaint proportional to the pixels drawn;
``pcitrace.gui.document`` turns a capture + profile into rows. Qt is imported only by the
window modules, so ``pcitrace.gui.units`` and ``pcitrace.gui.lod`` work without a display.
"""

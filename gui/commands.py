"""`pcitrace gui [CAPTURE] [--profile P] [--screenshot OUT.png] [--zoom START:END]`."""

from __future__ import annotations

import os
import sys

import click

from pcitrace.errors import PcitraceError


@click.command("gui")
@click.argument("capture", required=False, type=click.Path(dir_okay=False))
@click.option("--profile", "profile", type=click.Path(dir_okay=False),
              help="Channel profile (default: NAME.profile.toml beside the capture, else detected).")
@click.option("--screenshot", type=click.Path(dir_okay=False),
              help="Render the window offscreen to this PNG and exit.")
@click.option("--zoom", help="Show START:END, e.g. 10us:25us or 1.5ms:2ms (units ps, ns, us, ms, s).")
@click.option("--cursors", help="Place cursors A and B at A:B (same units as --zoom).")
@click.option("--select", "select", type=int, help="Select this transaction (its index in the table).")
@click.option("--size", default="1600x1000", show_default=True, help="Window size WxH for --screenshot.")
@click.option("--no-session", is_flag=True, help="Do not restore the saved session of the capture.")
def gui(capture, profile, screenshot, zoom, cursors, select, size, no_session):
    """Open the timeline viewer: signals, transactions, CSR groups, DMA bursts, occupancy and
    probe frames, with cursors, markers, a transaction table, search and export."""
    from pcitrace.gui.units import parse_range_ps

    view = parse_range_ps(zoom, "--zoom") if zoom else None
    cur = parse_range_ps(cursors, "--cursors") if cursors else None
    if screenshot and not capture:
        raise PcitraceError("--screenshot needs a capture", fix="pcitrace gui CAPTURE --screenshot OUT.png")
    try:
        w, h = (int(x) for x in size.lower().split("x"))
    except ValueError:
        raise PcitraceError(f"cannot read --size {size!r}", fix="write WIDTHxHEIGHT, e.g. 1600x1000") from None
    if screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        # probe the capture first: a bad file is an error on stderr, exit status 2
        from pcitrace.capture import open_capture
        open_capture(capture)
    from PyQt5 import QtWidgets
    from pcitrace.gui.window import MainWindow, install_excepthook

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    app.setApplicationName("pcitrace")
    win = MainWindow()
    if not screenshot:
        install_excepthook()
        win.show()
        if capture:
            win.open_path(capture, profile, restore_session=not no_session)
            if view or cur or select is not None:
                def after():
                    _apply(win, view, cur, select)
                win.decodeReady.connect(after)
        return app.exec_()
    errors = []
    win.loadFailed.connect(errors.append)
    win.show_error = lambda m: errors.append(m)
    win.resize(w, h)
    win.show()
    app.processEvents()
    win.open_path(capture, profile, synchronous=True, restore_session=not no_session)
    if errors:
        raise PcitraceError(errors[0])
    _apply(win, view, cur, select)
    for _ in range(3):
        app.processEvents()
    win.export_png(screenshot, whole_window=True)
    click.echo(f"wrote {screenshot}", err=True)
    win.doc = None          # no session write for a screenshot
    win.close()
    return 0


def _apply(win, view, cur, select):
    if select is not None:
        if win.doc is None or win.doc.result is None or not 0 <= select < len(win.doc.result.records):
            n = 0 if win.doc is None or win.doc.result is None else len(win.doc.result.records)
            raise PcitraceError(f"--select {select}: the capture has {n} transactions",
                                fix=f"choose an index from 0 to {max(n - 1, 0)}")
        win.select_record(select)
    if view:
        win.timeline.set_view(*view)
    if cur:
        win.timeline.set_cursor("A", cur[0])
        win.timeline.set_cursor("B", cur[1])

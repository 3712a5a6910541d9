"""Fixtures for the viewer tests: private copies of the samples (sessions are written beside
the capture), an isolated QSettings, and a window driven offscreen."""

from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.conftest import SAMPLES  # noqa: E402


def copy_sample(name: str, dest) -> str:
    for suffix in (".sr", ".profile.toml"):
        shutil.copy(SAMPLES / f"{name}{suffix}", dest / f"{name}{suffix}")
    return str(dest / f"{name}.sr")


@pytest.fixture
def sample(tmp_path):
    return copy_sample("pro1000_66mhz", tmp_path)


@pytest.fixture
def violations(tmp_path):
    return copy_sample("violations", tmp_path)


@pytest.fixture
def errors(monkeypatch):
    """Error dialogs recorded instead of shown (a modal box would block the test)."""
    from PyQt5 import QtWidgets
    got: list[str] = []

    def critical(parent, title, text, *a, **k):
        got.append(text)
        return QtWidgets.QMessageBox.Ok

    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(critical))
    return got


@pytest.fixture
def window(qtbot, tmp_path, errors):
    from PyQt5 import QtCore
    from pcitrace.gui.window import MainWindow

    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.IniFormat)
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    qtbot.waitExposed(win)
    return win


def open_and_wait(qtbot, win, path, profile=None, timeout=60000):
    """Open through the worker thread and wait until decoded; a load error fails at once."""
    done, failed = [], []
    win.decodeReady.connect(lambda: done.append(1))
    win.loadFailed.connect(failed.append)
    win.open_path(path, profile)
    qtbot.waitUntil(lambda: bool(done or failed), timeout=timeout)
    assert not failed, failed[0]
    qtbot.wait(10)
    return win.doc

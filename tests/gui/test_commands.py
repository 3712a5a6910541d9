"""`pcitrace gui --screenshot`: renders offscreen, writes the PNG, exits; bad input -> exit 2."""

from __future__ import annotations

import pytest
from PyQt5 import QtGui

from pcitrace.cli import main

pytestmark = pytest.mark.gui


def test_screenshot_of_a_zoomed_view(qapp, sample, tmp_path, capsys):
    out = tmp_path / "shot.png"
    rc = main(["gui", sample, "--screenshot", str(out), "--zoom", "20us:34us",
               "--cursors", "22us:31us", "--size", "1280x800"])
    assert rc == 0, capsys.readouterr().err
    img = QtGui.QImage(str(out))
    assert (img.width(), img.height()) == (1280, 800)
    # a real picture, not a blank window: many distinct colours (rows, legend, table)
    colours = {img.pixel(x, y) for x in range(0, 1280, 7) for y in range(0, 800, 7)}
    assert len(colours) > 20
    # a screenshot leaves no session file behind
    assert not (tmp_path / "pro1000_66mhz.pcitrace-session.json").exists()


def test_screenshot_selecting_a_transaction(qapp, violations, tmp_path):
    out = tmp_path / "t.png"
    assert main(["gui", violations, "--screenshot", str(out), "--select", "10"]) == 0
    assert out.exists()
    assert main(["gui", violations, "--screenshot", str(out), "--select", "99999"]) == 2


@pytest.mark.parametrize("args,words", [
    (["--zoom", "20us"], "START:END"),
    (["--zoom", "30us:20us"], "ends before it starts"),
    (["--size", "big"], "WIDTHxHEIGHT"),
])
def test_bad_options_exit_2(qapp, sample, tmp_path, capsys, args, words):
    rc = main(["gui", sample, "--screenshot", str(tmp_path / "x.png"), *args])
    assert rc == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_bad_capture_and_profile_exit_2(qapp, tmp_path, sample, capsys):
    bad = tmp_path / "junk.sr"
    bad.write_bytes(b"junk")
    assert main(["gui", str(bad), "--screenshot", str(tmp_path / "x.png")]) == 2
    assert "junk.sr" in capsys.readouterr().err
    prof = tmp_path / "p.toml"
    prof.write_text("[[bus]]\nname = 3\n")
    assert main(["gui", sample, "--profile", str(prof), "--screenshot", str(tmp_path / "x.png")]) == 2
    assert "p.toml" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()

"""Full disk (issue 18): every command writing a file meets ENOSPC with the one pcitrace error,
exit 2, one line, and leaves nothing behind: no temporary file, no partial output, no partial
set of simulate outputs."""

from __future__ import annotations

import builtins
import errno
import io
import os

import pytest

from tests.conftest import DATA, SAMPLES

UDP = DATA / "udp-tools"


class _FullFile:
    """A file object whose writes past ``room`` bytes fail as a full disk does."""

    def __init__(self, f, room: int):
        self._f, self._room = f, room

    def write(self, data):
        self._room -= len(data)
        if self._room < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __iter__(self):
        return iter(self._f)


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """Files opened for writing under tmp_path/out hold ``room[name suffix]`` bytes (else 0)."""
    out = tmp_path / "out"
    out.mkdir()
    room: dict[str, int] = {}
    real = builtins.open

    def fake_open(file, mode="r", *a, **k):
        f = real(file, mode, *a, **k)
        if any(c in mode for c in "wax") and str(file).startswith(str(out)):
            name = os.path.basename(str(file))
            return _FullFile(f, next((v for s, v in room.items() if s in name), 0))
        return f

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    return out, room


def _run(argv, capsys):
    from pcitrace.cli import main

    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


CAP = SAMPLES / "pro1000_66mhz.sr"


@pytest.mark.parametrize("argv,target", [
    (["decode", CAP, "--format", "jsonl", "-o", "{out}/r.jsonl"], "r.jsonl"),
    (["decode", CAP, "--format", "csv", "-o", "{out}/r.csv"], "r.csv"),
    (["report", CAP, "--format", "json", "-o", "{out}/r.json"], "r.json"),
    (["report", CAP, "--format", "html", "-o", "{out}/r.html"], "r.html"),
    (["convert", CAP, "{out}/c.vcd"], "c.vcd"),
    (["convert", SAMPLES / "control_only.sr", "{out}/c.sr"], "c.sr"),
    (["runlog", UDP / "iperf3_udp.json", "--format", "json", "-o", "{out}/run.json"], "run.json"),
    (["correlate", CAP, UDP / "udpmon_bw_1472_w12_G.txt", "-o", "{out}/c.txt"], "c.txt"),
])
def test_full_disk_is_the_one_error_and_leaves_nothing(full_disk, capsys, argv, target):
    out, _room = full_disk
    rc, err = _run([str(a).format(out=out) for a in argv], capsys)
    assert rc == 2 and len(err) == 1 and err[0].startswith("pcitrace: error: ") and target in err[0], err
    assert "No space left" in err[0]
    assert os.listdir(out) == []


def test_simulate_leaves_no_partial_set_when_only_the_truth_does_not_fit(full_disk, capsys):
    out, room = full_disk
    room.update({"sim.sr": 1 << 30, "sim.profile.toml": 1 << 30})      # only the truth meets a full disk
    rc, err = _run(["simulate", SAMPLES / "control_only.scenario.toml", "-o", out / "sim.sr",
                    "--duration-us", "5"], capsys)
    assert rc == 2 and len(err) == 1 and "No space left" in err[0], err
    assert os.listdir(out) == []

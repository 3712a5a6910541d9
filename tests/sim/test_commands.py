"""`pcitrace simulate`: writes the three files, honours the overrides, fails cleanly."""

from __future__ import annotations

import json

from pcitrace.capture import open_capture
from pcitrace.cli import main

SCENARIO = '''
name = "cli"
duration_us = 40
[[bus]]
name = "send"
pc = "a"
'''


def write(tmp_path, text=SCENARIO):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_simulate_writes_capture_profile_truth(tmp_path, capsys):
    sc = write(tmp_path)
    assert main(["simulate", str(sc), "-o", str(tmp_path / "out.sr")]) == 0
    out = capsys.readouterr().out
    assert "transactions" in out and "send" in out
    for f in ("out.sr", "out.profile.toml", "out.truth.json"):
        assert (tmp_path / f).exists()
    t = json.loads((tmp_path / "out.truth.json").read_text())
    assert t["scenario"] == "cli" and t["mode"] == "timing" and t["records"]
    assert "send.CLK" in open_capture(tmp_path / "out.sr").channel_names


def test_mode_and_no_ad_overrides(tmp_path):
    sc = write(tmp_path)
    assert main(["simulate", str(sc), "-o", str(tmp_path / "o.sr"), "--mode", "state", "--no-ad",
                 "--seed", "3", "--duration-us", "25"]) == 0
    t = json.loads((tmp_path / "o.truth.json").read_text())
    assert (t["mode"], t["ad"], t["seed"], t["duration_ps"]) == ("state", False, 3, 25_000_000)
    names = open_capture(tmp_path / "o.sr").channel_names
    assert "send.CLK" not in names and not any(n.startswith("send.AD") for n in names)


def test_bad_scenario_exits_2_naming_the_key(tmp_path, capsys):
    sc = write(tmp_path, SCENARIO + "clock_mhz = 50\n")
    assert main(["simulate", str(sc), "-o", str(tmp_path / "o.sr")]) == 2
    err = capsys.readouterr().err
    assert "bus[0].clock_mhz" in err and "Fix:" in err and "Traceback" not in err
    assert not (tmp_path / "o.sr").exists()


def test_bad_output_extension_exits_2(tmp_path, capsys):
    sc = write(tmp_path)
    assert main(["simulate", str(sc), "-o", str(tmp_path / "o.csv")]) == 2
    assert ".sr or .vcd" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [sc]


def test_missing_scenario_exits_2(tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "o.sr")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_state_override_refuses_glitches(tmp_path, capsys):
    sc = write(tmp_path, SCENARIO.replace('duration_us = 40', 'duration_us = 40\n[faults]\nglitches = 1'))
    assert main(["simulate", str(sc), "-o", str(tmp_path / "o.sr"), "--mode", "state"]) == 2
    assert "faults.glitches" in capsys.readouterr().err


def test_state_override_refuses_gmii(tmp_path, capsys):
    sc = write(tmp_path, SCENARIO.replace('duration_us = 40', 'duration_us = 40\n[link]\ngmii = true'))
    assert main(["simulate", str(sc), "-o", str(tmp_path / "o.sr"), "--mode", "state"]) == 2
    err = capsys.readouterr().err
    assert "link.gmii" in err and "timing" in err

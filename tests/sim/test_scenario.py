"""Scenario files: defaults, every key checked, errors that name the key and the fix."""

from __future__ import annotations

import pytest

from pcitrace.errors import PcitraceError
from pcitrace.sim.scenario import load_scenario, scenario_from_dict

ONE_BUS = {"bus": [{"name": "send", "pc": "a"}]}


def test_defaults_are_the_370dle_pro1000():
    sc = scenario_from_dict(ONE_BUS)
    b = sc.buses[0]
    assert (b.kind, b.width, b.clock_mhz, b.period_ps) == ("pci", 64, 66.0, 15000)
    assert sc.traffic.frame_bytes == 1400 and sc.traffic.spacing_us == 11.0
    assert sc.link.rate_gbps == 1.0 and sc.mode == "timing" and sc.ad and sc.gnt


@pytest.mark.parametrize("mhz, period", [(33, 30000), (66, 15000), (100, 10000), (133, 7500)])
def test_nominal_clock_periods(mhz, period):
    kind = "pcix" if mhz > 66 else "pci"
    sc = scenario_from_dict({"bus": [{"name": "x", "kind": kind, "clock_mhz": mhz}]})
    assert sc.buses[0].period_ps == period


def test_full_scenario_file(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('''
name = "t"
seed = 9
duration_us = 50
mode = "state"
ad = false
[traffic]
pattern = "request_response"
frame_bytes = 64
[link]
rate_gbps = 10
lost = [1, 4]
[faults]
parity_errors = 2
[[bus]]
name = "a"
kind = "pcix"
clock_mhz = 133
mmrbc = 4096
[bus.host]
split_latency_clocks = 12
[bus.nic]
coalesce_us = 20.5
[[bus.other]]
rate_per_us = 0.5
bytes = 128
command = "mem_read_multiple"
''')
    sc = load_scenario(p)
    assert sc.name == "t" and sc.seed == 9 and sc.mode == "state" and not sc.ad
    assert sc.traffic.pattern == "request_response" and sc.link.lost == [1, 4]
    assert sc.buses[0].mmrbc == 4096 and sc.buses[0].host.split_latency_clocks == 12
    assert sc.buses[0].nic.coalesce_us == 20.5 and sc.buses[0].other[0].bytes == 128
    assert sc.faults.parity_errors == 2


@pytest.mark.parametrize("doc, key, fix", [
    ({"bus": [{"name": "s", "widht": 64}]}, "bus[0].widht", "spelling"),
    ({"bus": [{"name": "s", "width": 48}]}, "bus[0].width", "32, 64"),
    ({"bus": [{"name": "s", "clock_mhz": 50}]}, "bus[0].clock_mhz", "33, 66, 100, 133"),
    ({"bus": [{"name": "s", "kind": "pcix", "clock_mhz": 33}]}, "bus[0].clock_mhz", "66, 100 or 133"),
    ({"bus": [{"name": "s", "clock_mhz": 133}]}, "bus[0].clock_mhz", "pcix"),
    ({"bus": [{"name": "s", "mmrbc": 300}]}, "bus[0].mmrbc", "512"),
    ({"bus": [{"name": "s", "host": {"read_disconnect_bytes": 100}}]}, "bus[0].host.read_disconnect_bytes",
     "multiple of 8"),
    ({"bus": [{"name": "s", "nic": {"devsel": "quick"}}]}, "bus[0].nic.devsel", "fast, medium, slow"),
    ({"bus": [{"name": "s", "nic": {"bar": 0x1234000}}]}, "bus[0].nic.bar", "0x20000"),
    ({"bus": [{"name": "s", "nic": {"csr_read_waits": -1}}]}, "bus[0].nic.csr_read_waits", "0 .. 32"),
    ({"bus": [{"name": "s", "other": [{"command": "dac"}]}]}, "bus[0].other[0].command", "mem_write"),
    ({"bus": [{"name": "s"}, {"name": "s"}]}, "bus[1].name", "own name"),
    ({"bus": [{"name": "bad name"}]}, "bus[0].name", "letters"),
    ({"bus": [{"name": "s"}], "traffic": {"spacing_us": "fast"}}, "traffic.spacing_us", "number"),
    ({"bus": [{"name": "s"}], "traffic": {"pattern": "burst"}}, "traffic.pattern", "stream"),
    ({"bus": [{"name": "s"}], "link": {"rate_gbps": 2.5}}, "link.rate_gbps", "1, 10"),
    ({"bus": [{"name": "s"}], "link": {"lost": [-1]}}, "link.lost", "sequence numbers"),
    ({"bus": [{"name": "s"}], "link": {"loss": 1.5}}, "link.loss", "0 .. 1"),
    ({"bus": [{"name": "s"}], "ad": "yes"}, "ad", "true or false"),
    ({"bus": [{"name": "s"}], "mode": "state", "faults": {"glitches": 2}}, "faults.glitches", "timing"),
    ({"bus": [{"name": "s"}], "colour": 1}, "colour", "spelling"),
    ({}, "bus", "[[bus]]"),
    ({"bus": [{"name": "s", "nic": {"max_burst_bytes": 300}}]}, "bus[0].nic.max_burst_bytes", "256, 512"),
    ({"bus": [{"name": "s", "nic": {"latency_timer_clocks": 8}}]}, "bus[0].nic.latency_timer_clocks",
     "at least 16"),
    ({"bus": [{"name": "s", "kind": "pcix", "clock_mhz": 133, "nic": {"csr_disconnect": True}}]},
     "bus[0].nic.csr_disconnect", "pcix"),
    ({"bus": [{"name": "s", "kind": "pcix", "clock_mhz": 133, "nic": {"read_command": "by_length"}}]},
     "bus[0].nic.read_command", "pcix"),
    ({"bus": [{"name": "s", "nic": {"csr_retry_path": "tx"}}]}, "bus[0].nic.csr_retry_path", "send, irq"),
    ({"bus": [{"name": "s", "nic": {"irq_order": "random"}}]}, "bus[0].nic.irq_order", "interleaved"),
    ({"bus": [{"name": "s", "nic": {"icr_read": "middle"}}]}, "bus[0].nic.icr_read", "first, last"),
    ({"bus": [{"name": "s", "nic": {"tx_ring": -1}}]}, "bus[0].nic.tx_ring", "0 .. 4096"),
    ({"bus": [{"name": "s"}], "inta": 1}, "inta", "true or false"),
    ({"mode": "state", "bus": [{"name": "a", "clock_mhz": 33}, {"name": "b", "clock_mhz": 66}]}, "mode",
     "timing"),
])
def test_bad_values_name_the_key_and_the_fix(tmp_path, doc, key, fix):
    with pytest.raises(PcitraceError) as ei:
        scenario_from_dict(doc)
    e = ei.value
    assert e.where == key, str(e)
    assert e.fix and fix in e.fix, str(e)
    assert key in str(e)


def test_bad_toml_and_missing_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = \n")
    with pytest.raises(PcitraceError, match="not valid TOML") as ei:
        load_scenario(p)
    assert ei.value.path == str(p)
    with pytest.raises(PcitraceError, match="cannot read"):
        load_scenario(tmp_path / "missing.toml")


@pytest.mark.parametrize("text,where", [
    ("[[bus]]\n[[bus.other]]\nrate_per_us=1e-320\n", "rate_per_us"),          # mean gap of inf us
    ("[link]\npropagation_us=" + "1" * 400 + "\n", "propagation_us"),        # an int no float holds
])
def test_numbers_a_simulation_cannot_use_are_refused_by_name(tmp_path, text, where):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(PcitraceError, match=where) as exc:
        load_scenario(path)
    assert len(str(exc.value)) < 300


def test_a_scenario_that_is_not_utf8_is_refused_with_the_byte(tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b'name = "a\xfeb"\n')
    with pytest.raises(PcitraceError, match=r"\(byte 9\): is not UTF-8 text \(0xfe"):
        load_scenario(path)


@pytest.mark.parametrize("table,key", [("traffic", "start_us"), ("traffic", "spacing_us"), ("link", "propagation_us")])
def test_a_time_no_picosecond_count_holds_is_refused_by_name(tmp_path, table, key):
    # fuzz campaign seed 102, scenario #253: start_us = 1e308 made the model's time infinite
    path = tmp_path / "s.toml"
    path.write_text(f"[{table}]\n{key} = 1e308\n")
    with pytest.raises(PcitraceError, match=f"{key}.*out of range"):
        load_scenario(path)

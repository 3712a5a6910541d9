"""Channel profiles: detection, TOML, validation, and bus_clocks streaming."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcitrace.capture import open_capture, write_sr, write_vcd
from pcitrace.capture.clocked import bus_clocks
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.capture.profile import (BusProfile, NicIdentity, Profile, detect_profile,
                                      dump_profile, load_profile, resolve_profile, save_profile)
from pcitrace.errors import PcitraceError
from tests.conftest import SAMPLES


def cap_of(names, n=8, widths=None, tb=None):
    widths = widths or {}
    arrays = {nm: np.zeros(n, dtype=np.uint64 if widths.get(nm, 1) > 1 else np.uint8) for nm in names}
    return Capture.from_arrays(arrays, tb or TimeBase.timing(100e6), widths=widths)


@pytest.mark.parametrize("frame", ["FRAME#", "FRAME_N", "frame_n", "/FRAME", "FRAME", "Frame_L", "nFRAME"[1:]])
def test_frame_spellings(frame):
    p = detect_profile(cap_of(["CLK", frame, "IRDY#"]))
    assert len(p.buses) == 1
    assert p.buses[0].signals["frame_n"] == frame
    assert p.buses[0].signals["clk"] == "CLK"


def test_vector_spellings():
    c = cap_of(["PCI_CLK", "FRAME#", "AD[31:0]", "C/BE#[3:0]", "PAR"],
               widths={"AD[31:0]": 32, "C/BE#[3:0]": 4})
    b = detect_profile(c).buses[0]
    assert b.signals["ad"] == "AD[31:0]" and b.signals["cbe_n"] == "C/BE#[3:0]"
    assert b.width == 32 and b.signals["par"] == "PAR"


def test_bit_channels_assemble_lsb_first():
    names = ["CLK", "FRAME#"] + [f"AD{i}" for i in range(64)] + [f"CBE{i}" for i in range(8)]
    b = detect_profile(cap_of(names)).buses[0]
    assert b.signals["ad"] == [f"AD{i}" for i in range(64)]
    assert b.signals["cbe_n"] == [f"CBE{i}" for i in range(8)]
    assert b.width == 64
    b2 = detect_profile(cap_of(["CLK", "FRAME#", "IRDY#", "C/BE#0", "C/BE#1", "C_BE2", "C/BE#3"])).buses[0]
    assert b2.signals["cbe_n"] == ["C/BE#0", "C/BE#1", "C_BE2", "C/BE#3"]


def test_gaps_in_bit_channels_are_not_a_vector():
    b = detect_profile(cap_of(["CLK", "FRAME#", "AD0", "AD1", "AD3"])).buses[0]
    assert "ad" not in b.signals


def test_two_buses_and_probe_lines_by_prefix():
    names = ["send.CLK", "send.FRAME#", "send.IRDY#", "send.AD", "send.GNT#", "send.REQ#",
             "recv.CLK", "recv.FRAME#", "recv.TRDY#", "recv.AD",
             "probe.RXD", "probe.RX_DV", "probe.RX_ER", "probe.RX_CLK", "probe.SOF"]
    c = cap_of(names, widths={"send.AD": 32, "recv.AD": 64, "probe.RXD": 8})
    p = detect_profile(c)
    by = {b.name: b for b in p.buses}
    assert set(by) == {"send", "recv", "probe"}
    assert by["send"].signals["gnt_n"] == "send.GNT#" and by["send"].nic.gnt == "gnt_n"
    assert by["send"].nic.req == "req_n"
    assert by["recv"].width == 64 and by["recv"].nic.gnt is None
    assert by["probe"].kind == "gbe_probe" and by["probe"].signals["rxd"] == "probe.RXD"
    assert by["probe"].clock == "probe.RX_CLK" and by["probe"].link_bps == 1e9
    assert [b.name for b in p.pci_buses] == ["send", "recv"]


def test_ambiguous_lines_are_left_out():
    # three masters' GNT lines: none is "the NIC's"
    b = detect_profile(cap_of(["CLK", "FRAME", "IRDY", "MAS0_GNT", "MAS1_GNT", "GNT0", "GNT1"])).buses[0]
    assert "gnt_n" not in b.signals


def test_state_capture_gets_clock_hz():
    c = cap_of(["FRAME#", "IRDY#"], tb=TimeBase.state(clock_hz=66e6))
    b = detect_profile(c).buses[0]
    assert b.clock is None and b.clock_hz == 66e6


def test_toml_round_trip(tmp_path):
    p = Profile([
        BusProfile("send", "pcix", {"clk": "s.CLK", "frame_n": "s.FRAME#", "ad": ["A0", "A1"]},
                   inverted={"frame_n"}, width=64, clock_hz=133e6,
                   nic=NicIdentity("gnt_n", None, [(0xF000_0000, 0xF000_1FFF)])),
        BusProfile("link \"0\"", "gbe_probe", {"rxd": "RXD", "rx_dv": "DV"}, link_bps=1e9),
    ])
    p.buses[0].signals["gnt_n"] = "s.GNT#"
    save_profile(p, tmp_path / "p.toml")
    q = load_profile(tmp_path / "p.toml")
    assert q.buses == p.buses
    assert q.buses[0].mode == "pcix"
    assert "0xf0000000" in (tmp_path / "p.toml").read_text()


@pytest.mark.parametrize("text,match", [
    ("[[bus]]\nname='a'\nkind='isa'\n[bus.signals]\nframe_n='F'\n", "kind"),
    ("[[bus]]\nname='a'\n[bus.signals]\nfrane_n='F'\n", "frane_n"),
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[bus.nic]\nbars=[[5,1]]\n", "bars"),
    ("[[bus]]\nname='a'\ninverted=['irdy_n']\n[bus.signals]\nframe_n='F'\n", "inverted"),
    ("[[bus]]\nname='a'\nwidth=48\n[bus.signals]\nframe_n='F'\n", "width"),
    ("bus = 3\n", "bus"),
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[[bus]]\nname='a'\n[bus.signals]\nframe_n='G'\n", "duplicate"),
    ("[[bus\n", "TOML"),
    # issue 18: each was a Python exception
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[bus.nic]\nbars=true\n", "bars"),
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[bus.nic]\nbars=5\n", "bars"),
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[bus.nic]\nbars=[[0, 18446744073709551616]]\n", "bars"),
    ("[[bus]]\nname='a'\n[bus.signals]\nframe_n='F'\n[bus.nic]\nbars=[[true, 5]]\n", "bars"),
    ("[[bus]]\nname='a'\n[bus.signals]\nclk=5\nframe_n='F'\n", "clk"),
    ("[[bus]]\nname='a'\nlink_bps=" + "9" * 400 + "\n[bus.signals]\nframe_n='F'\n", "link_bps"),
    ("[[bus]]\nname='a'\nlink_bps=1e300\n[bus.signals]\nframe_n='F'\n", "link_bps"),
    ("[[bus]]\nname='a'\nclock_hz=1e-300\n[bus.signals]\nframe_n='F'\n", "clock_hz"),
])
def test_bad_profiles_name_file_and_place(tmp_path, text, match):
    path = tmp_path / "bad.profile.toml"
    path.write_text(text)
    with pytest.raises(PcitraceError, match=match) as e:
        load_profile(path)
    assert "bad.profile.toml" in str(e.value)


def test_missing_channel_names_it_and_the_profile(tmp_path):
    (tmp_path / "p.toml").write_text("[[bus]]\nname='send'\n[bus.signals]\nclk='CLK'\nframe_n='FRAME#'\n"
                                     "irdy_n='IRDY#'\n")
    c = cap_of(["CLK", "FRAME#"])
    with pytest.raises(PcitraceError) as e:
        resolve_profile(c, tmp_path / "p.toml")
    msg = str(e.value)
    assert "'IRDY#'" in msg and "irdy_n" in msg and "p.toml" in msg and "send" in msg


def test_vector_for_a_line_is_an_error():
    c = cap_of(["CLK", "FRAME#"], widths={"FRAME#": 4})
    with pytest.raises(PcitraceError, match="1-bit"):
        Profile([BusProfile("b", signals={"clk": "CLK", "frame_n": "FRAME#"})]).check(c)


def test_resolve_uses_sidecar_then_detection(tmp_path):
    c = Capture.from_arrays({"CLK": np.arange(10) % 2, "FRAME#": np.ones(10), "IRDY#": np.zeros(10)},
                            TimeBase.timing(1e6))
    write_sr(c, tmp_path / "cap.sr")
    cap = open_capture(tmp_path / "cap.sr")
    assert resolve_profile(cap).source == "auto-detected"
    (tmp_path / "cap.profile.toml").write_text("[[bus]]\nname='mine'\n[bus.signals]\nclk='CLK'\nframe_n='IRDY#'\n")
    assert resolve_profile(cap).buses[0].name == "mine"
    nobus = Capture.from_arrays({"a": np.zeros(3)}, TimeBase.timing(1e6), path="nobus.sr")
    with pytest.raises(PcitraceError, match="nobus.sr.*profile"):
        resolve_profile(nobus)


# -- bus_clocks ----------------------------------------------------------------------------

def reference_clocks(arrays, clk, before: bool):
    """One entry per 0->1 change of clk (never at sample 0), read at the edge or just before."""
    c = arrays[clk]
    out = {k: [] for k in arrays}
    idx = []
    for i in range(1, len(c)):
        if c[i - 1] == 0 and c[i] == 1:
            idx.append(i)
            for k, v in arrays.items():
                out[k].append(v[i - 1] if before else v[i])
    return idx, out


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 700), seed=st.integers(0, 2**31), chunk=st.integers(1, 50),
       read=st.integers(1, 97))
def test_bus_clocks_timing_across_chunk_boundaries(n, seed, chunk, read):
    rng = np.random.default_rng(seed)
    clk = (np.cumsum(rng.random(n) < 0.4) & 1).astype(np.uint8)
    arrays = {"CLK": clk, "FRAME#": rng.integers(0, 2, n).astype(np.uint8),
              "AD": rng.integers(0, 2**32, n, dtype=np.uint64)}
    bits = {f"CBE{i}": rng.integers(0, 2, n).astype(np.uint8) for i in range(4)}
    cap = Capture.from_arrays({**arrays, **bits}, TimeBase.timing(100e6), widths={"AD": 32})
    bus = BusProfile("b", signals={"clk": "CLK", "frame_n": "FRAME#", "ad": "AD",
                                   "cbe_n": [f"CBE{i}" for i in range(4)]}, inverted={"frame_n"})
    chunks = list(bus_clocks(cap, bus, chunk_clocks=chunk, read_samples=read))
    idx, ref = reference_clocks({**arrays, **bits}, "CLK", before=False)
    assert all(len(c) == chunk for c in chunks[:-1])
    assert [c.start_clock for c in chunks] == list(range(0, len(idx), chunk))[:len(chunks)]
    got = {k: np.concatenate([c.sig[k] for c in chunks]) if chunks else np.zeros(0) for k in ("frame_n", "ad", "cbe_n")}
    times = np.concatenate([c.times_ps for c in chunks]) if chunks else np.zeros(0)
    assert times.tolist() == [i * 10_000 for i in idx]
    assert got["frame_n"].tolist() == [1 - v for v in ref["FRAME#"]]          # inversion undone
    assert got["ad"].tolist() == [int(v) for v in ref["AD"]]
    cbe = [sum(int(ref[f"CBE{i}"][j]) << i for i in range(4)) for j in range(len(idx))]
    assert got["cbe_n"].tolist() == cbe
    if chunks:
        assert "clk" not in chunks[0].sig
        assert got["frame_n"].dtype == np.uint8 and got["ad"].dtype == np.uint64


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**31), chunk=st.integers(1, 64))
def test_bus_clocks_state_capture_is_every_sample(n, seed, chunk):
    rng = np.random.default_rng(seed)
    f = rng.integers(0, 2, n).astype(np.uint8)
    ts = np.cumsum(rng.integers(1, 5, n)) * 15_000
    cap = Capture.from_arrays({"FRAME#": f}, TimeBase.state(timestamps_ps=ts))
    bus = BusProfile("b", signals={"frame_n": "FRAME#"})
    chunks = list(bus_clocks(cap, bus, chunk_clocks=chunk, read_samples=7))
    assert all(len(c) == chunk for c in chunks[:-1])
    assert np.array_equal(np.concatenate([c.sig["frame_n"] for c in chunks]), f)
    assert np.array_equal(np.concatenate([c.times_ps for c in chunks]), ts)


def test_bus_clocks_on_vcd_reads_just_before_edges(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    clk = (np.arange(n) // 2) % 2
    frame = rng.integers(0, 2, n)
    cap = Capture.from_arrays({"CLK": clk, "FRAME#": frame}, TimeBase.timing(100e6))
    write_vcd(cap, tmp_path / "a.vcd")
    # an event-timed VCD (no pcitrace comment): strip our comment so it reads as foreign
    text = (tmp_path / "a.vcd").read_text().splitlines()
    (tmp_path / "f.vcd").write_text("\n".join(l for l in text if not l.startswith("$comment")) + "\n")
    vcd = open_capture(tmp_path / "f.vcd")
    assert vcd.timebase.event_timed
    bus = BusProfile("b", signals={"clk": "CLK", "frame_n": "FRAME#"})
    got = list(bus_clocks(vcd, bus, chunk_clocks=16))
    idx, ref = reference_clocks({"CLK": clk, "FRAME#": frame}, "CLK", before=True)
    assert np.concatenate([c.sig["frame_n"] for c in got]).tolist() == ref["FRAME#"]
    assert np.concatenate([c.times_ps for c in got]).tolist() == [i * 10_000 for i in idx]
    # the generic streamed path over an .sr gives the edge-sample values instead
    write_sr(cap, tmp_path / "a.sr")
    sr = open_capture(tmp_path / "a.sr")
    got_sr = list(bus_clocks(sr, bus, read_samples=33))
    idx2, ref2 = reference_clocks({"CLK": clk, "FRAME#": frame}, "CLK", before=False)
    assert np.concatenate([c.sig["frame_n"] for c in got_sr]).tolist() == ref2["FRAME#"]


def test_timing_bus_without_clock_is_an_error():
    cap = cap_of(["FRAME#"])
    with pytest.raises(PcitraceError, match="clock"):
        list(bus_clocks(cap, BusProfile("b", signals={"frame_n": "FRAME#"})))


def test_dump_profile_is_valid_toml():
    import tomllib
    p = detect_profile(cap_of(["CLK", "FRAME#", "IRDY#"]))
    assert tomllib.loads(dump_profile(p))["bus"][0]["signals"]["frame_n"] == "FRAME#"


def test_vcd_scopes_become_bus_prefixes(tmp_path):
    text = """$timescale 1ns $end
$scope module tb $end
$scope module send $end
$var wire 1 ! clk $end
$var wire 1 " FRAME_N $end
$var wire 32 # AD [31:0] $end
$upscope $end
$scope module recv $end
$var wire 1 $ clk $end
$var wire 1 % FRAME_N $end
$var wire 1 & IRDY_N $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
0!
1"
b0 #
0$
1%
1&
#10
1!
1$
#20
"""
    (tmp_path / "two.vcd").write_text(text)
    cap = open_capture(tmp_path / "two.vcd")
    assert cap.channel_names == ["send.clk", "send.FRAME_N", "send.AD", "recv.clk", "recv.FRAME_N",
                                 "recv.IRDY_N"]
    by = {b.name: b for b in detect_profile(cap).buses}
    assert by["send"].signals == {"clk": "send.clk", "frame_n": "send.FRAME_N", "ad": "send.AD"}
    assert by["recv"].signals["irdy_n"] == "recv.IRDY_N"
    got = list(bus_clocks(cap, by["recv"]))
    assert got[0].times_ps.tolist() == [10_000] and got[0].sig["frame_n"].tolist() == [1]


def test_bus_clocks_passes_chunk_sized_reads_on_without_copying(tmp_path, monkeypatch):
    # A state .sr read in blocks of exactly chunk_clocks: each block is a chunk as it is (a
    # copy per chunk once cost a quarter of a 64-bit decode).
    rng = np.random.default_rng(3)
    n = 5000
    arrays = {"FRAME#": rng.integers(0, 2, n).astype(np.uint8),
              "AD": rng.integers(0, 2**63, n, dtype=np.uint64)}
    path = tmp_path / "s.sr"
    write_sr(Capture.from_arrays(arrays, TimeBase.state(clock_hz=66e6), widths={"AD": 64}), path)
    cap = open_capture(path)
    bus = BusProfile("b", signals={"frame_n": "FRAME#", "ad": [f"AD{i}" for i in range(64)]})
    import pcitrace.capture.clocked as clocked_mod

    joins = []
    real = np.concatenate
    monkeypatch.setattr(clocked_mod.np, "concatenate", lambda parts, *a, **k: joins.append(1) or real(parts, *a, **k))
    chunks = list(bus_clocks(cap, bus, chunk_clocks=1000))
    monkeypatch.undo()
    assert [len(c) for c in chunks] == [1000] * 5
    assert joins == []
    assert np.array_equal(np.concatenate([c.sig["ad"] for c in chunks]), arrays["AD"])
    assert np.array_equal(np.concatenate([c.sig["frame_n"] for c in chunks]), arrays["FRAME#"])


# -- the steps of parsing and detection -------------------------------------------------------

def test_parse_kind_mode_picks_pcix_and_is_refused_on_a_probe():
    from pcitrace.buses import pci
    from pcitrace.capture.profile import _parse_kind

    assert _parse_kind(None, "w", "pci", "pcix") is pci.PCIX
    assert _parse_kind(None, "w", "pci", None) is pci.PCI
    with pytest.raises(PcitraceError, match="mode = 'pcix'"):
        _parse_kind(None, "w", "gbe_probe", "pcix")
    with pytest.raises(PcitraceError, match="is not one of"):
        _parse_kind(None, "w", "usb", None)


@pytest.mark.parametrize("value", [0, -1, True, float("inf"), float("nan"), "66e6", 10**400, 1e300])
def test_parse_rate_refuses_what_is_not_a_rate(value):
    from pcitrace.capture.profile import _parse_rate

    with pytest.raises(PcitraceError, match="is not a bit rate in 1 .. 1e"):
        _parse_rate("p.toml", "[[bus]] 'x' link_bps", "link_bps", value, "a bit rate", 1, 1e15)
    assert _parse_rate(None, "w", "clock_hz", 66e6, "a frequency in Hz", 1, 1e13) == 66e6
    assert _parse_rate(None, "w", "clock_hz", None, "a frequency in Hz", 1, 1e13) is None


def test_parse_nic_names_the_bad_bar():
    from pcitrace.capture.profile import _parse_nic

    nic = _parse_nic(None, "n", {"gnt": "gnt_n", "bars": [[1, 2]]}, {"gnt_n": "GNT#"})
    assert nic.gnt == "gnt_n" and nic.bars == [(1, 2)]
    with pytest.raises(PcitraceError) as info:
        _parse_nic("p.toml", "[[bus]] 'x' nic", {"bars": [[1, 2], [5, 3]]}, {})
    assert info.value.where == "[[bus]] 'x' nic.bars[1]"


def test_vector_channels_from_a_vector_or_numbered_bits():
    from types import SimpleNamespace as C

    from pcitrace.capture.profile import _line_channel, _vector_channels

    assert _vector_channels([(C(name="AD", width=32), None, None)]) == "AD"
    bits = [(C(name=f"AD{i}", width=1), i, None) for i in (1, 0, 2)]
    assert _vector_channels(bits) == ["AD0", "AD1", "AD2"]
    assert _vector_channels([(C(name="AD1", width=1), 1, None)]) is None      # bit 0 missing
    assert _line_channel([(C(name="FRAME#", width=1), None, None)]) == "FRAME#"
    assert _line_channel([(C(name="a.FRAME#", width=1), None, None), (C(name="FRAME", width=1), None, None)]) is None


def _write(path, text: str):
    path.write_text(text)
    return path


def _link_profile(tmp_path, extra: str):
    text = (SAMPLES / "reqresp_64_1400.profile.toml").read_text()
    text = text.replace('name = "b_to_a"\nkind = "gbe_probe"\n', f'name = "b_to_a"\nkind = "gbe_probe"\n{extra}\n')
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_a_link_can_say_which_bus_sends_and_which_receives(tmp_path):
    prof = load_profile(_link_profile(tmp_path, 'send_bus = "b"\nrecv_bus = "a"'))
    link = prof.bus("b_to_a")
    assert (link.send_bus, link.recv_bus) == ("b", "a")
    again = load_profile(_write(tmp_path / "again.toml", dump_profile(prof)))
    assert (again.bus("b_to_a").send_bus, again.bus("b_to_a").recv_bus) == ("b", "a")


@pytest.mark.parametrize("extra,match", [('send_bus = "c"', "no PCI bus"), ('send_bus = "a_to_b"', "no PCI bus"),
                                         ('send_bus = 3', "not a bus name"),
                                         ('send_bus = "a"\nrecv_bus = "a"', "both 'a'")])
def test_a_link_end_that_is_no_pci_bus_is_an_error(tmp_path, extra, match):
    with pytest.raises(PcitraceError, match=match):
        load_profile(_link_profile(tmp_path, extra))

"""VCD reader (pywellen + what it lacks) and writer (sigrok-cli / GTKWave compatible)."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from pcitrace.capture import clocked_view, open_capture, write_sr, write_vcd
from pcitrace.capture.model import Capture, TimeBase
from pcitrace.capture.vcd import is_active_low
from pcitrace.errors import PcitraceError

from tests.conftest import DATA, SAMPLES

from ._capture_helpers import SIGROK_RATES, bit_columns, captures, sigrok_bits

HEADER = """$date today $end
$version hand written $end
$timescale {ts} $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 1 " FRAME# $end
$var wire 4 # CBE [3:0] $end
$var wire 1 $ data $end
$scope module sub $end
$var wire 1 % data $end
$upscope $end
$upscope $end
$enddefinitions $end
"""

BODY = """#0
$dumpvars
0!
z"
bxxxx #
x$
0%
$end
#5
1!
0"
b1z01 #
#10
0!
1$
#15
1!
b0110 #
1%
#20
0!
z"
#25
1!
#30
"""


def write(tmp_path, text, name="t.vcd"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("ts,ps", [("1ns", 1000), ("10 ps", 10), ("1 ps", 1), ("100us", 100_000_000),
                                   ("1 fs", 0.001)])
def test_timescales(tmp_path, ts, ps):
    cap = open_capture(write(tmp_path, HEADER.format(ts=ts) + BODY))
    t, v = cap.change_times("clk")
    assert t.tolist() == [int(round(x * ps)) for x in (0, 5, 10, 15, 20, 25)] or ps < 1
    assert v.tolist() == [0, 1, 0, 1, 0, 1]


def test_names_values_and_the_unknown_rule(tmp_path):
    cap = open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY))
    # same leaf name in two scopes: full names, without the common top scope
    assert cap.channel_names == ["clk", "FRAME#", "CBE", "data", "sub.data"]
    assert cap.channel("CBE").width == 4
    # z on an active-low line reads deasserted (1), x elsewhere reads 0
    t, v = cap.change_times("FRAME#")
    assert v.tolist() == [1, 0, 1]
    t, v = cap.change_times("CBE")
    assert v.tolist() == [0, 0b1001, 0b0110]   # x -> 0, z bit -> 0
    t, v = cap.change_times("data")
    assert v.tolist() == [0, 1]
    u = cap.metadata["unknown_counts"]
    assert u["FRAME#"] == {"x": 0, "z": 2}
    assert u["CBE"] == {"x": 1, "z": 1}
    assert u["data"] == {"x": 1, "z": 0}
    assert "clk" not in u


def test_event_timed_samples(tmp_path):
    cap = open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY))
    assert cap.timebase.event_timed
    assert cap.times_ps().tolist() == [0, 5000, 10000, 15000, 20000, 25000]
    d = cap.read()
    assert d["clk"].tolist() == [0, 1, 0, 1, 0, 1]
    assert d["FRAME#"].tolist() == [1, 0, 0, 0, 1, 1]
    assert d["CBE"].tolist() == [0, 9, 9, 6, 6, 6]


def test_clocked_view_samples_just_before_rising_edges(tmp_path):
    cap = open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY))
    v = clocked_view(cap, "clk")
    assert v.timebase.mode == "state"
    assert v.times_ps().tolist() == [5000, 15000, 25000]
    d = v.read()
    # at #5 FRAME# falls with the edge: just before it, it was still 1 (z -> deasserted)
    assert d["FRAME#"].tolist() == [1, 0, 1]
    assert d["CBE"].tolist() == [0, 9, 6]
    assert d["sub.data"].tolist() == [0, 0, 1]
    # which sampled values stood in for an x or z of the file
    assert v.metadata["unknown_at_clock"] == {"FRAME#": {"x": 0, "z": 2}, "CBE": {"x": 1, "z": 1},
                                              "data": {"x": 1, "z": 0}}


def test_gzip(tmp_path):
    raw = (HEADER.format(ts="1ns") + BODY).encode()
    p = tmp_path / "t.vcd.gz"
    p.write_bytes(gzip.compress(raw))
    cap = open_capture(p)
    assert cap.change_times("clk")[1].tolist() == [0, 1, 0, 1, 0, 1]
    bad = tmp_path / "cut.vcd.gz"
    bad.write_bytes(gzip.compress(raw)[:40])
    with pytest.raises(PcitraceError, match="cut.vcd.gz.*gzip"):
        open_capture(bad)


def test_undeclared_identifier_is_an_error_naming_the_line(tmp_path):
    text = HEADER.format(ts="1ns") + BODY.replace("#10\n", "#10\n1?\n")
    with pytest.raises(PcitraceError) as e:
        open_capture(write(tmp_path, text, "u.vcd"))
    msg = str(e.value)
    assert "u.vcd" in msg and "'?'" in msg and "line 27" in msg
    vec = HEADER.format(ts="1ns") + BODY.replace("#15\n", "#15\nb0101 @@\n")
    with pytest.raises(PcitraceError, match="@@"):
        open_capture(write(tmp_path, vec, "v.vcd"))


def test_not_a_vcd(tmp_path):
    with pytest.raises(PcitraceError, match="n.vcd"):
        open_capture(write(tmp_path, "hello world\n", "n.vcd"))


def test_aliases_share_changes(tmp_path):
    text = """$timescale 1ns $end
$scope module t $end
$var wire 1 ! a $end
$var wire 1 ! b $end
$upscope $end
$enddefinitions $end
#0
0!
#3
1!
#4
"""
    cap = open_capture(write(tmp_path, text))
    assert cap.channel_names == ["a", "b"]
    assert cap.change_times("b")[1].tolist() == [0, 1]


@pytest.mark.parametrize("name,low", [("FRAME#", True), ("FRAME", True), ("/FRAME", True),
                                      ("frame_n", True), ("send.IRDY", True), ("GNT#", True),
                                      ("AD", False), ("PAR", False), ("clk", False), ("x_n", True),
                                      ("data", False), ("IDSEL", False)])
def test_active_low_names(name, low):
    assert is_active_low(name) is low


# -- round trips and sigrok ----------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=captures())
def test_sr_vcd_sr_round_trip_is_bit_exact(tmp_path, cap):
    write_sr(cap, tmp_path / "a.sr")
    a = open_capture(tmp_path / "a.sr")
    write_vcd(a, tmp_path / "b.vcd")
    b = open_capture(tmp_path / "b.vcd")
    write_sr(b, tmp_path / "c.sr")
    c = open_capture(tmp_path / "c.sr")
    assert c.channel_names == a.channel_names
    assert c.num_samples == a.num_samples == cap.num_samples
    assert c.timebase.mode == a.timebase.mode
    assert c.timebase.rate_hz == pytest.approx(a.timebase.rate_hz)
    da, dc = a.read(), c.read()
    for k in da:
        assert np.array_equal(da[k], dc[k]), k
    assert (tmp_path / "a.sr").read_bytes() != b""


def test_state_capture_with_timestamps_survives_vcd(tmp_path):
    ts = np.array([0, 30_000, 60_000, 150_000, 180_000, 181_000], dtype=np.int64)
    vals = np.array([1, 1, 0, 0, 1, 1])
    cap = Capture.from_arrays({"FRAME#": vals, "AD": np.array([5, 5, 5, 7, 7, 7])},
                              TimeBase.state(timestamps_ps=ts), widths={"AD": 3})
    write_vcd(cap, tmp_path / "s.vcd")
    back = open_capture(tmp_path / "s.vcd")
    assert back.timebase.mode == "state"
    assert back.num_samples == 6
    assert np.array_equal(back.times_ps(), ts)
    d = back.read()
    assert np.array_equal(d["FRAME#"], vals)
    assert d["AD0"].tolist() == [1, 1, 1, 1, 1, 1] and d["AD1"].tolist() == [0, 0, 0, 1, 1, 1]


@pytest.mark.sigrok
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=captures(rates=SIGROK_RATES, max_samples=100))
def test_sigrok_cli_imports_our_vcd(tmp_path, sigrok_cli, cap):
    path = tmp_path / "s.vcd"
    write_vcd(cap, path)
    text = path.read_text()
    assert "$enddefinitions" in text
    ts = text.split("$timescale", 1)[1].split("$end", 1)[0].split()
    tick_ps = int(ts[0]) * {"us": 10**6, "ns": 10**3, "ps": 1}[ts[1]]
    k = int(round(1e12 / cap.timebase.rate_hz / tick_ps))
    got = sigrok_bits(sigrok_cli, path)
    want = bit_columns(cap)
    assert len(got) == len(want)
    for (name, bits), (wname, wbits) in zip(got, want.items()):
        assert wname.endswith(name)
        assert len(bits) >= (cap.num_samples - 1) * k + 1
        assert np.array_equal(bits[::k][: cap.num_samples], wbits), wname


def test_writer_output_is_plain_scalar_vcd(tmp_path):
    cap = Capture.from_arrays({"send.AD": np.array([1, 2, 3]), "send.FRAME#": np.array([1, 0, 1])},
                              TimeBase.timing(1e6), widths={"send.AD": 2})
    write_vcd(cap, tmp_path / "w.vcd")
    text = (tmp_path / "w.vcd").read_text()
    assert "$var wire 1 " in text and "$var wire 2" not in text and "\nb" not in text
    assert "$scope module send $end" in text
    lines = text.strip().splitlines()
    assert lines[-1] == "#3"   # closing timestamp one sample after the last
    with pytest.raises(PcitraceError, match="white space"):
        write_vcd(Capture.from_arrays({"a b": np.zeros(2)}, TimeBase.timing(1e6)), tmp_path / "x.vcd")


def test_undeclared_identifier_with_free_form_ids(tmp_path):
    """Ids outside the usual '!'.. sequence take the vectorised scan instead of wellen's check."""
    text = """$timescale 1ns $end
$scope module t $end
$var wire 1 a0 clk $end
$var wire 8 zz bus [7:0] $end
$upscope $end
$enddefinitions $end
#0
0a0
b0 zz
#1
1a0
1a1
#2
"""
    with pytest.raises(PcitraceError, match=r"line 12.*'a1'"):
        open_capture(write(tmp_path, text, "f.vcd"))
    ok = open_capture(write(tmp_path, text.replace("1a1\n", "b101 zz\n"), "g.vcd"))
    assert ok.change_times("bus")[1].tolist() == [0, 5]


def test_vcd_writer_chunks_agree(tmp_path):
    rng = np.random.default_rng(9)
    n = 3001
    cap = Capture.from_arrays({"A": rng.integers(0, 2, n), "V": rng.integers(0, 16, n)},
                              TimeBase.timing(10e6), widths={"V": 4})
    write_vcd(cap, tmp_path / "one.vcd")
    write_vcd(cap, tmp_path / "many.vcd", chunk_samples=7)
    assert (tmp_path / "one.vcd").read_text() == (tmp_path / "many.vcd").read_text()


def test_time_going_backwards_is_an_error_and_nothing_reaches_stdout(tmp_path, capfd):
    # pywellen prints "time decreased ... Skipping!" to stdout and drops those changes: that
    # silently lost data and put text in the middle of JSON / CSV written to stdout.
    text = HEADER.format(ts="1ns") + BODY.replace("#15\n", "#8\n")
    with pytest.raises(PcitraceError, match="time goes backwards") as e:
        open_capture(write(tmp_path, text, "back.vcd"))
    assert "back.vcd" in str(e.value) and "decreased" in str(e.value)
    out, _ = capfd.readouterr()
    assert out == ""


def test_a_vcd_cut_in_the_middle_of_a_line_reads_up_to_the_cut_and_says_where(tmp_path):
    text = HEADER.format(ts="1ns") + BODY + "b01"          # a vector change cut short
    cap = open_capture(write(tmp_path, text, "cut.vcd"))
    assert cap.change_times("clk")[1].tolist() == [0, 1, 0, 1, 0, 1]
    assert "middle of a line" in cap.metadata["warnings"][0] and "#30" in cap.metadata["warnings"][0]
    # a timestamp cut short reads as an earlier time: left out, not "time goes backwards"
    cap = open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY + "0!\n#3", "cut2.vcd"))
    assert cap.change_times("clk")[1].tolist() == [0, 1, 0, 1, 0, 1, 0] and "#30" in cap.metadata["warnings"][0]
    # a last timestamp without a newline ends the dump there; it may have been cut, which is said
    cap = open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY.rstrip("\n"), "ok.vcd"))
    assert cap.duration_ps == 30_000 and "may have been cut" in cap.metadata["warnings"][0]
    assert "warnings" not in open_capture(write(tmp_path, HEADER.format(ts="1ns") + BODY, "whole.vcd")).metadata


def test_a_vcd_we_wrote_that_stops_early_keeps_its_samples_and_says_where(tmp_path):
    cap = Capture.from_arrays({"A": np.array([0, 1] * 500, np.uint8)}, TimeBase.timing(1e6))
    whole = tmp_path / "w.vcd"
    write_vcd(cap, whole)
    assert open_capture(whole).num_samples == 1000
    lines = whole.read_text().splitlines(keepends=True)
    # cut after a complete timestamp line half-way through the body
    stamps = [i for i, ln in enumerate(lines) if ln.startswith("#")]
    cut = tmp_path / "c.vcd"
    cut.write_text("".join(lines[:stamps[len(stamps) // 2] + 1]))
    got = open_capture(cut)
    assert 0 < got.num_samples < 1000
    assert "sample" in got.metadata["warnings"][0] and "1000" in got.metadata["warnings"][0]
    want = next(cap.iter_chunks(["A"], chunk_samples=1000)).data["A"][:got.num_samples]
    assert np.array_equal(next(got.iter_chunks(["A"], chunk_samples=1000)).data["A"], want)


def _records_before(capture, tmp_path, end_ps):
    """The decoded records (jsonl lines) of a capture that end before end_ps."""
    import json

    from pcitrace.cli import main
    out = tmp_path / f"{capture.stem}.jsonl"
    assert main(["decode", str(capture), "--format", "jsonl", "-o", str(out)]) == 0
    return [ln for ln in out.read_text().splitlines() if json.loads(ln)["end_ps"] < end_ps]


@pytest.mark.parametrize("written", [True, False], ids=["pcitrace-vcd", "plain-dump"])
@pytest.mark.parametrize("percent", [10, 50, 90])
def test_a_vcd_cut_at_some_percent_decodes_the_records_before_the_cut(tmp_path, percent, written):
    sample = open_capture(SAMPLES / "violations.sr")        # its first 16 000 samples: 2 ms of a timing capture
    first = next(sample.iter_chunks(sample.channel_names, chunk_samples=16000))
    text = tmp_path / "w.vcd"
    write_vcd(Capture.from_arrays(first.data, sample.timebase, {c.name: c.width for c in sample.channels}), text)
    data = text.read_bytes()
    if not written:     # a plain dump: no pcitrace comment, timed by its value changes
        data = re.sub(rb"\$comment pcitrace .*? \$end\n", b"", data)
    whole, cut = tmp_path / "whole.vcd", tmp_path / "cut.vcd"
    whole.write_bytes(data)
    cut.write_bytes(data[:len(data) * percent // 100])
    for p in (whole, cut) if written else ():    # (a plain dump's channel names keep their scopes: auto-detected)
        p.with_suffix(".profile.toml").write_text((SAMPLES / "violations.profile.toml").read_text())
    part = open_capture(cut)
    stops = part.metadata["warnings"][0]
    assert "\n" not in stops and ("byte" in stops or "sample" in stops)
    safe = part.timebase.start_ps + part.duration_ps - 2_000_000       # records done 2 us before the cut
    want = _records_before(whole, tmp_path, safe)
    assert want and _records_before(cut, tmp_path, safe) == want


@pytest.mark.parametrize("comment,field", [
    ('{"clock_hz": {"v": 664}, "mode": "state"}', "clock_hz"),
    ('{"metadata": "n"}', "metadata"),
    ('{"metadata": 1}', "metadata"),
    ('{"clock_hz": 64, "mode": "state", "num_samples": "sts"}', "num_samples"),
    ('{"samplerate_hz": [[10]]}', "samplerate_hz"),
    ('{"start_ps": {"v": 0}, "samplerate_hz": 40.0}', "start_ps"),
    ('{"mode": "s"}', "mode"),
    ('{"mode": "state", "clock_hz": 1e6, "vrs": Infinity', "JSON"),
])
def test_a_bad_pcitrace_comment_is_the_error_naming_its_field(tmp_path, comment, field):
    text = f"$comment pcitrace {comment} $end\n" + HEADER.format(ts="1ns") + BODY
    with pytest.raises(PcitraceError, match=field) as e:
        open_capture(write(tmp_path, text))
    assert "$comment pcitrace" in str(e.value) and "\n" not in str(e.value)


def test_a_pcitrace_grid_without_a_sample_count_holds_the_samples_of_the_dump(tmp_path):
    text = '$comment pcitrace {"clock_hz": 1e8, "mode": "state"} $end\n' + HEADER.format(ts="1ns") + BODY
    cap = open_capture(write(tmp_path, text))
    assert cap.num_samples == 3       # 10 ns a sample, #0 .. #20 (#30 closes the dump)
    assert cap.timebase.clock_hz == 1e8


def test_a_pcitrace_comment_cannot_replace_what_the_reader_found(tmp_path):
    meta = '{"metadata": {"format": "sr", "unknown_counts": 3, "skipped_vars": 1, "scenario": "s"}}'
    cap = open_capture(write(tmp_path, f"$comment pcitrace {meta} $end\n" + HEADER.format(ts="1ns") + BODY))
    assert cap.metadata["format"] == "vcd" and cap.metadata["scenario"] == "s"
    assert isinstance(cap.metadata["unknown_counts"], dict) and "skipped_vars" not in cap.metadata


def test_pywellens_message_becomes_one_line(tmp_path):
    text = HEADER.format(ts="1ns").replace('$var wire 1 $ data $end', '$var wire 1 $ data $end\n$var wire 1 TOP# $end') + BODY
    with pytest.raises(PcitraceError, match="not a readable VCD") as e:
        open_capture(write(tmp_path, text))
    assert "\n" not in str(e.value) and "t.vcd" in str(e.value)


@pytest.mark.parametrize("body,where", [
    ("#0\n1!\n#9223372036854775808\n0!\n#10\n", "signal"),        # past int64 inside the dump
    ("#0\n1!\n#18446744073709551617\n0!\n", "signal"),
    ("#0\n1!\n#9223372036854775807\n0!\n", "#9223372036854775807"),   # fits in ticks, not in ps
])
def test_a_time_past_int64_picoseconds_is_an_error(tmp_path, body, where):
    with pytest.raises(PcitraceError, match="past") as e:
        open_capture(write(tmp_path, HEADER.format(ts="1ns") + body))
    assert where in str(e.value)


def test_a_var_declaration_missing_its_end_is_an_error_not_a_name_with_a_line_break(tmp_path):
    # pywellen reads the tokens up to the next $end as the name: "data\n$var wire 1 % data"
    text = HEADER.format(ts="1ns").replace("$var wire 1 $ data $end", "$var wire 1 $ data\xff")
    with pytest.raises(PcitraceError, match="line break") as e:
        open_capture(write(tmp_path, text + BODY))
    assert "\n" not in str(e.value)


def test_wide_vectors_changing_more_often_than_memory_holds_are_an_error(tmp_path, monkeypatch):
    import pcitrace.capture.vcd as vcd
    monkeypatch.setattr(vcd, "MAX_WIDE_BYTES", 100_000)
    head = HEADER.format(ts="1ns").replace("$var wire 4 # CBE [3:0] $end", "$var wire 4096 # CBE $end")
    body = "".join(f"#{i}\nb{i & 1} #\n" for i in range(400))     # 400 changes of 1 KB each (x/z: 2 bits a bit)
    with pytest.raises(PcitraceError, match="4096 bits") as e:
        open_capture(write(tmp_path, head + body))
    assert "400" in str(e.value) and "CBE" in str(e.value)
    assert open_capture(write(tmp_path, head + body[:body.index("#90\n")], "fewer.vcd")).channel("CBE").width == 4096


def test_a_vcd_that_cannot_be_mapped_into_memory_is_the_error_saying_so(tmp_path, monkeypatch):
    import pcitrace.capture.vcd as vcd

    def no_room(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(vcd.mmap, "mmap", no_room)   # as under an address-space limit
    text = HEADER.format(ts="1ns").replace(" % data", " %% data").replace(" ! clk", " !! clk")   # ids not '!', '"', ..
    body = BODY.replace("%", "%%").replace("!", "!!")
    with pytest.raises(PcitraceError, match="cannot map the VCD into memory .Cannot allocate memory"):
        open_capture(write(tmp_path, text + body))


@pytest.mark.parametrize("width", [4097, 1_000_000, 2**31])
def test_a_declared_width_past_the_limit_is_an_error_before_anything_is_allocated(tmp_path, width):
    text = HEADER.format(ts="1ns").replace("$var wire 4 # CBE [3:0] $end", f"$var wire {width} # CBE $end")
    with pytest.raises(PcitraceError, match=f"declares {width} bits"):
        open_capture(write(tmp_path, text + "#0\nb0 #\n#150\n"))


# --- the reader's and writer's steps, each on its own -------------------------------------------

def test_ticks_to_ps_scales_and_rounds_femtoseconds():
    from pcitrace.capture.vcd import _ticks_to_ps
    t = np.array([0, 3, 7], np.int64)
    assert _ticks_to_ps(t, 1) is t
    assert _ticks_to_ps(t, 1000).tolist() == [0, 3000, 7000]
    assert _ticks_to_ps(t, 0.1).tolist() == [0, 0, 1]          # 100 fs ticks: whole ps


def test_start_unknown_gives_late_channels_an_x_at_the_first_time():
    from pcitrace.capture.vcd import _start_unknown
    times = {"FRAME#": np.array([50], np.int64), "d": np.array([0, 10], np.int64)}
    values = {"FRAME#": np.array([0], np.uint8), "d": np.array([1, 0], np.uint8)}
    masks, unknown = {}, {}
    _start_unknown(times, values, masks, unknown, 0)
    assert times["FRAME#"].tolist() == [0, 50] and values["FRAME#"].tolist() == [1, 0]   # active low: 1
    assert masks["FRAME#"].tolist() == [1, 0] and unknown == {"FRAME#": {"x": 1, "z": 0}}
    assert times["d"].tolist() == [0, 10] and "d" not in masks


def test_vcd_header_nests_scopes_from_dotted_names():
    from pcitrace.capture.vcd import _vcd_header
    head = _vcd_header(["send.FRAME#", "send.IRDY#", "recv.FRAME#", "CLK"], ["!", '"', "#", "$"],
                       {"mode": "timing"}, "1 ns")
    body = head[head.index("$timescale 1 ns $end") + 1:]
    assert body == ["$scope module pcitrace $end", "$scope module send $end", "$var wire 1 ! FRAME# $end",
                    '$var wire 1 " IRDY# $end', "$upscope $end", "$scope module recv $end",
                    "$var wire 1 # FRAME# $end", "$upscope $end", "$var wire 1 $ CLK $end",
                    "$upscope $end", "$enddefinitions $end"]


def test_value_changes_and_their_text():
    from pcitrace.capture.vcd import _change_text, _value_changes
    cols = np.array([[0, 0, 1, 1], [1, 0, 0, 0]], np.uint8)
    samp, var, first = _value_changes(cols, None, 0)
    assert (samp.tolist(), var.tolist(), first.tolist()) == ([0, 0, 1, 2], [0, 1, 1, 0], [True, False, True, True])
    # after a chunk whose last values were the same: nothing changes on the first sample
    samp, var, _ = _value_changes(cols, np.array([0, 1], np.uint8), 0)
    assert (samp.tolist(), var.tolist()) == ([1, 2], [1, 0])
    assert _value_changes(np.zeros((2, 3), np.uint8), np.zeros(2, np.uint8), 0) is None
    tok = np.array(["0!", '1"', '0"', "1!"], dtype=object)
    assert _change_text(tok, np.array([True, False, True, True]), np.array([5, 6, 7])) == \
        ["#5", "0!", '1"', "#6", '0"', "#7", "1!"]


def test_closing_tick_is_one_sample_after_the_last():
    from pcitrace.capture.vcd import _closing_tick
    tb = TimeBase.timing(1e9)
    assert _closing_tick(tb, 10, 1000, lambda i: tb.times_at(i) // 1000, None) == 10
    assert _closing_tick(tb, 10, 1000, lambda i: tb.times_at(i) // 1000, 12) == 13
    st = TimeBase.state(clock_hz=None, timestamps_ps=np.array([0, 30, 60], np.int64))
    assert _closing_tick(st, 3, 1, None, 60) == 90

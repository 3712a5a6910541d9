"""decoders/pci under the end-of-data behaviour of newer libsigrokdecode, where wait() raises
EOFError when the samples run out (0.5.3 just stops calling back).

A small stand-in for the ``sigrokdecode`` module drives the decoder with the wait()
semantics libsigrokdecode documents (first wait() = sample 0, 'skip', level and edge
conditions, ``self.matched``, absent optional channels read 255). The same bus activity
also goes through the real sigrok-cli, and the complete transactions must be identical; the
one still running at the end must come out as ``truncated`` only here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest

from busgen import DECODERS, Bus, channel_map, run_decoder

ABSENT = 255


class _FakeDecoder:
    def register(self, kind):
        return kind

    def put(self, ss, es, output, data):
        self._out.append((ss, es, output, data))

    def wait(self, conds=None):
        rows = self._rows
        if self.samplenum < 0:
            self.samplenum = 0
            self.matched = (True,)
            if not rows:
                raise EOFError
            return rows[0]
        if conds is None:
            conds = [{"skip": 1}]
        if isinstance(conds, dict):
            conds = [conds]
        s = self.samplenum + 1
        while s < len(rows):
            prev, cur = rows[s - 1], rows[s]
            matched = []
            for c in conds:
                ok = True
                for key, want in c.items():
                    if key == "skip":
                        ok = ok and s == self.samplenum + want
                    elif want == "l":
                        ok = ok and cur[key] == 0
                    elif want == "h":
                        ok = ok and cur[key] == 1
                    elif want == "r":
                        ok = ok and prev[key] == 0 and cur[key] == 1
                    elif want == "f":
                        ok = ok and prev[key] == 1 and cur[key] == 0
                    elif want == "e":
                        ok = ok and prev[key] != cur[key]
                matched.append(ok)
            if any(matched):
                self.samplenum = s
                self.matched = tuple(matched)
                return cur
            s += 1
        raise EOFError


def _load_decoder_class():
    fake = types.ModuleType("sigrokdecode")
    fake.Decoder = _FakeDecoder
    fake.OUTPUT_ANN, fake.OUTPUT_PYTHON, fake.OUTPUT_BINARY = 0, 1, 2
    fake.SRD_CONF_SAMPLERATE = 10000
    saved = sys.modules.get("sigrokdecode")
    sys.modules["sigrokdecode"] = fake
    try:
        spec = importlib.util.spec_from_file_location(
            "pci_under_fake_srd", DECODERS / "pci" / "__init__.py",
            submodule_search_locations=[str(DECODERS / "pci")])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod.Decoder, fake
    finally:
        if saved is None:
            sys.modules.pop("sigrokdecode", None)
        else:
            sys.modules["sigrokdecode"] = saved


def _rows(bus: Bus, timing: bool, mapping: dict[str, str]):
    """Per-sample pin tuples in the decoder's channel order (absent = 255)."""
    cap = bus.capture(timing=timing)
    data = cap.read()
    widths = {c.name: c.width for c in cap.channels}
    Decoder, _ = _load_decoder_class()
    ids = [c["id"] for c in Decoder.channels + Decoder.optional_channels]
    cols = []
    for cid in ids:
        name = mapping.get(cid)
        if name is None:
            cols.append(None)
            continue
        base = name.rstrip("0123456789")
        if name in data and widths[name] == 1:
            cols.append(data[name].astype(int))
        else:
            bit = int(name[len(base):])
            cols.append(((data[base] >> bit) & 1).astype(int))
    n = cap.num_samples
    return [tuple(ABSENT if c is None else int(c[i]) for c in cols) for i in range(n)], cap


def _run_fake(bus: Bus, timing: bool, mapping_text: str, options: dict):
    mapping = dict(kv.split("=") for kv in mapping_text.split(":"))
    rows, cap = _rows(bus, timing, mapping)
    Decoder, fake = _load_decoder_class()
    d = Decoder()
    d._rows, d._out, d.samplenum = rows, [], -1
    d.options = dict({"clock": "none", "mode": "pci", "width": 32, "bus": "pci"}, **options)
    d.metadata(fake.SRD_CONF_SAMPLERATE, int(cap.timebase.rate_hz))
    d.start()
    d.decode()   # returns: the EOFError ends the decode loop
    lines = [json.loads(data[1].decode()) for _, _, out, data in d._out if out == fake.OUTPUT_BINARY]
    return [x for x in lines if "finding" not in x and "word" not in x]


@pytest.mark.sigrok
@pytest.mark.parametrize("timing", [False, True], ids=["state", "timing"])
def test_truncated_transaction_reported_at_eof(sigrok_cli, tmp_path, timing):
    b = Bus()
    b.idle(2)
    b.clock(F=1, AD=0x100, CBE=0x7)
    b.clock(F=1, I=1, D=1, T=1, AD=1, CBE=0)
    b.clock(I=1, D=1, T=1, AD=2)
    b.idle(3)
    b.clock(F=1, AD=0x200, CBE=0x6)
    b.clock(F=1, I=1, n=2)
    b.clock(F=1, I=1, D=1)          # the capture ends here, mid-transaction
    cmap = channel_map(32, timing)
    opts = {"clock": "clk" if timing else "none"}
    fake_txns = _run_fake(b, timing, cmap, opts)
    sr = b.write(tmp_path / "e.sr", timing=timing)
    real_txns, _, _ = run_decoder(sigrok_cli, sr, cmap, f"clock={opts['clock']}")
    assert len(real_txns) == 1
    assert fake_txns[:1] == real_txns
    assert len(fake_txns) == 2
    last = fake_txns[1]
    assert (last["termination"], last["address"], last["command"], last["devsel"],
            last["target_waits"], last["data_phases"]) == ("truncated", 0x200, "mem_read", "slow", 3, 0)
    assert last["end_sample"] == cap_last_clock_sample(b, timing)


def cap_last_clock_sample(b: Bus, timing: bool, k: int = 8) -> int:
    n = len(b.clocks)
    return n * k if timing else n - 1

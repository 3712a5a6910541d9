"""Structured mutators, one per input kind pcitrace reads.

Each takes a seed input (bytes) and a random.Random and returns a mutated input (bytes). They
know the structure they mutate (the members of an .sr zip, its INI metadata and JSON extras,
the header and body of a VCD, the tables of a TOML profile or scenario, the number tokens of a
tool's text output, the length fields of a pcap) so that most inputs get past the first check
and reach the code behind it, where the campaign found its crashes; a share of plain byte
mutations (truncation, flips) keeps the damaged-file paths covered too.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import random
import re
import struct
import tomllib
import zipfile

# Values that break code which trusts a field's type or range.
NASTY_INTS = [0, -1, 1, 2, 7, 255, 256, 65535, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64,
              -2**63, 10**30]
NASTY_FLOATS = [0.0, -0.0, 0.5, -1.5, 1e-320, 1e-300, 1e308, math.inf, -math.inf, math.nan, 3.3e7, 1e13]
NASTY_STRINGS = ["", " ", "x", "None", "null", "1e", "1.2.3", ".", "-", "nan", "inf", "0x10", "é😀\u202e",
                 "a" * 300, "FRAME#", "send.FRAME#", "state", "timing", "1 GHz", "12 kHz", "-5 MHz", "\t"]
NASTY_TEXT_NUMBERS = ["0", "-0", "-1", "1e", "1.2.3", ".", "..", "nan", "inf", "-inf", "1e999", "9" * 25,
                      "4294967296", "9223372036854775808", "-9223372036854775809", "0.0000001", "1,5", "",
                      "0x1f", "1_000", "+5"]


def nasty_value(rng: random.Random):
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(NASTY_INTS)
    if pick < 0.5:
        return rng.choice(NASTY_FLOATS)
    if pick < 0.7:
        return rng.choice(NASTY_STRINGS)
    if pick < 0.8:
        return rng.choice([True, False])
    if pick < 0.9:
        return rng.choice([[], [1, 2], ["a"], [[0, 1]], [True], [2**64]])
    return rng.choice([{}, {"a": 1}, {"x": [1]}])


# --- plain bytes -----------------------------------------------------------------------------
def byte_mutation(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    op = rng.randrange(5)
    if op == 0:                                            # cut short
        return data[:rng.randrange(len(data))]
    if op == 1:                                            # flip a few bytes
        buf = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf)
    if op == 2:                                            # a 32-bit field to a nasty value
        buf = bytearray(data)
        at = rng.randrange(max(1, len(buf) - 4))
        buf[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 0xFFFFFFFF, 0xFFFFFFF0, 0x7FFFFFFF, 0x10000]))
        return bytes(buf)
    if op == 3:                                            # a block repeated
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randrange(1, 512))
        return data[:b] + data[a:b] * rng.randrange(1, 4) + data[b:]
    a = rng.randrange(len(data))                           # a block removed
    return data[:a] + data[a + rng.randrange(1, 256):]


# --- TOML (profiles, scenarios) --------------------------------------------------------------
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump_toml(doc: dict, prefix: str = "") -> str:
    """TOML text of a document: scalars and inline values first, then tables and arrays of tables."""
    lines, tables = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v))
        else:
            lines.append(f"{json.dumps(k)} = {_toml_value(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in tables:
        name = f"{prefix}{json.dumps(k)}"
        if isinstance(v, dict):
            out += f"\n[{name}]\n" + dump_toml(v, name + ".")
        else:
            for item in v:
                out += f"\n[[{name}]]\n" + dump_toml(item, name + ".")
    return out


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,), v
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield path + (i,), v
            yield from _leaves(v, path + (i,))


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _delete(doc, path):
    node = doc
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]


def tree_mutation(doc, rng: random.Random):
    """Mutate a parsed JSON/TOML tree in place: a leaf replaced, a key deleted or added."""
    for _ in range(rng.randrange(1, 4)):
        leaves = list(_leaves(doc))
        if not leaves:
            break
        path, value = rng.choice(leaves)
        op = rng.random()
        if op < 0.6:
            _set(doc, path, nasty_value(rng))
        elif op < 0.75:
            _delete(doc, path)
        elif op < 0.85 and isinstance(value, dict):
            value[rng.choice(["extra", "clk", "width", "kind", "signals", "bars", "name"])] = nasty_value(rng)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            _set(doc, path, rng.choice([value * 1000, -value, value + 0.5, value * 10**12]))
        else:
            _set(doc, path, nasty_value(rng))
    return doc


def toml_mutation(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.15:
        return byte_mutation(data, rng)
    doc = tomllib.loads(data.decode())
    try:
        return dump_toml(tree_mutation(doc, rng)).encode()
    except (TypeError, ValueError):
        return data


# --- tool text outputs (run logs) -----------------------------------------------------------
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def runlog_mutation(data: bytes, rng: random.Random) -> bytes:
    if data.lstrip().startswith(b"{") and rng.random() < 0.7:
        try:
            doc = json.loads(data)
            return json.dumps(tree_mutation(doc, rng)).encode()
        except ValueError:
            pass
    op = rng.random()
    if op < 0.6:                                           # number tokens replaced
        spans = [m.span() for m in _NUMBER.finditer(data)]
        buf = data
        for a, b in sorted(rng.sample(spans, min(len(spans), rng.randrange(1, 4))), reverse=True):
            buf = buf[:a] + rng.choice(NASTY_TEXT_NUMBERS).encode() + buf[b:]
        return buf
    lines = data.split(b"\n")
    if op < 0.8 and len(lines) > 1:                         # lines deleted, repeated or swapped
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        choice = rng.randrange(3)
        if choice == 0:
            del lines[i]
        elif choice == 1:
            lines.insert(i, lines[j])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    return byte_mutation(data, rng)


# --- pcap / pcapng ---------------------------------------------------------------------------
def pcap_mutation(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5 and len(data) > 32:               # a length field of a record or block
        buf = bytearray(data)
        at = rng.choice([4, 8, 12, 16, 20, 24 + 8, 24 + 12, 28, 32]) if rng.random() < 0.5 \
            else rng.randrange(0, len(buf) - 4, 4)
        buf[at:at + 4] = struct.pack("<I", rng.choice([0, 3, 12, 0xFFFFFFF0, 0x7FFFFFFF, 65536, 2**20]))
        return bytes(buf)
    return byte_mutation(data, rng)


# --- VCD -------------------------------------------------------------------------------------
def vcd_mutation(data: bytes, rng: random.Random) -> bytes:
    gz = data[:2] == b"\x1f\x8b"
    text = gzip.decompress(data) if gz else data
    lines = text.split(b"\n")
    op = rng.random()
    if op < 0.2:                                           # a $var's width, type, name or id
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b"$var")]
        if idx:
            i = rng.choice(idx)
            toks = lines[i].split()
            if len(toks) >= 5:
                k = rng.choice([1, 2, 3, 4])
                toks[k] = rng.choice([b"wire", b"real", b"0", b"-1", b"1000000", b"2147483648", b"9" * 22,
                                      b"[7:0]", b"FRAME#", b"$end", toks[3]])
                lines[i] = b" ".join(toks)
    elif op < 0.35:                                        # the pcitrace comment's JSON
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b"$comment pcitrace ")]
        if idx:
            i = rng.choice(idx)
            body = lines[i][len(b"$comment pcitrace "):-len(b" $end")]
            try:
                doc = json.loads(body)
                lines[i] = b"$comment pcitrace " + json.dumps(tree_mutation(doc, rng)).encode() + b" $end"
            except ValueError:
                pass
    elif op < 0.45:                                        # the timescale
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b"$timescale")]
        if idx:
            lines[idx[0]] = b"$timescale " + rng.choice([b"0 ps", b"1 as", b"10 s", b"1 xs", b"1000000000 fs",
                                                         b"-1 ns", b""]) + b" $end"
    elif op < 0.65:                                        # a time line
        idx = [i for i, ln in enumerate(lines) if ln.startswith(b"#")]
        if idx:
            lines[rng.choice(idx)] = b"#" + rng.choice([b"0", b"-5", b"9223372036854775808", b"1e5", b"",
                                                        b"18446744073709551616", b"3.5", b"99999999999999"])
    elif op < 0.8:                                         # a value change
        idx = [i for i, ln in enumerate(lines) if ln[:1] in (b"0", b"1", b"x", b"z", b"b")]
        if idx:
            i = rng.choice(idx)
            lines[i] = rng.choice([b"x" + lines[i][1:], b"z" + lines[i][1:], b"b" + b"1" * 70 + b" !",
                                   b"bxz01 " + lines[i][1:], b"2" + lines[i][1:], lines[i][:1] + b"~~",
                                   b"r1.5 !", b"b " + lines[i][1:]])
    else:
        return _maybe_gz(byte_mutation(text, rng), gz)
    return _maybe_gz(b"\n".join(lines), gz)


def _maybe_gz(data: bytes, gz: bool) -> bytes:
    return gzip.compress(data, mtime=0) if gz else data


# --- sigrok session (.sr) --------------------------------------------------------------------
def sr_mutation(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.2:
        return byte_mutation(data, rng)
    members = _unzip(data)
    if members is None:
        return byte_mutation(data, rng)
    op = rng.random()
    if op < 0.3 and "metadata" in members:
        members["metadata"] = _ini_mutation(members["metadata"], rng)
    elif op < 0.55 and "pcitrace.json" in members:
        try:
            doc = json.loads(members["pcitrace.json"])
            members["pcitrace.json"] = json.dumps(tree_mutation(doc, rng)).encode()
        except ValueError:
            pass
    elif op < 0.75:                                        # a logic chunk damaged, cut or removed
        chunks = [n for n in members if n.startswith("logic-")]
        if chunks:
            name = rng.choice(chunks)
            choice = rng.randrange(3)
            if choice == 0:
                del members[name]
            elif choice == 1:
                members[name] = members[name][:rng.randrange(len(members[name]) + 1)]
            else:
                members[name] = byte_mutation(members[name], rng)
    elif op < 0.85 and "version" in members:
        members["version"] = rng.choice([b"1", b"3", b"", b"x", b"2\n2"])
    else:
        members[rng.choice(["logic-1-999", "pcitrace-timestamps.npy", "analog-1-1-1"])] = bytes(rng.randrange(64))
    return _zip(members, rng)


def _ini_mutation(text: bytes, rng: random.Random) -> bytes:
    lines = text.decode("utf-8", "replace").split("\n")
    idx = [i for i, ln in enumerate(lines) if "=" in ln]
    if not idx:
        return text
    i = rng.choice(idx)
    key, _, _ = lines[i].partition("=")
    op = rng.random()
    if op < 0.6:
        lines[i] = f"{key}={rng.choice(NASTY_STRINGS + NASTY_TEXT_NUMBERS)}"
    elif op < 0.8:
        del lines[i]
    else:
        lines.insert(i, rng.choice(["total analog=x", "unitsize=0", "unitsize=9999", "probe999=X",
                                    "samplerate=0 Hz", "total probes=100000", "capturefile=nothing"]))
    return "\n".join(lines).encode()


def _unzip(data: bytes) -> dict[str, bytes] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return {n: zf.read(n) for n in zf.namelist()}
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        return None


def _zip(members: dict[str, bytes], rng: random.Random) -> bytes:
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_DEFLATED if rng.random() < 0.8 else zipfile.ZIP_STORED) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return bio.getvalue()


MUTATORS = {"sr": sr_mutation, "vcd": vcd_mutation, "profile": toml_mutation, "scenario": toml_mutation,
            "runlog": runlog_mutation, "pcap": pcap_mutation}

"""A short, fixed-seed fuzz campaign in every test run: 300 structured mutations across the
input kinds, each in a forked child under 10 s and 2 GiB, must all end in success or one line
of the pcitrace error. The long run is bench/fuzz.py."""

from __future__ import annotations

from tests.fuzz.campaign import campaign, table
from tests.fuzz.mutators import dump_toml

import tomllib


def test_short_campaign_finds_nothing():
    rows = campaign(300, seed=1, jobs=2)
    bad = [r for r in rows if r[2] not in ("ok", "error")]
    assert len(rows) == 300
    assert not bad, table(rows) + "\n" + "\n".join(f"{r[0]} #{r[1]}: {r[2]}: {r[3]}" for r in bad[:10])


def test_toml_writer_round_trips_the_tables_profiles_and_scenarios_use():
    doc = {"name": "x", "seed": 2**63 - 1, "ratio": 0.5, "on": True, "list": [1, "a"],
           "bus": [{"name": "send", "signals": {"clk": "CLK", "ad": ["AD0", "AD1"]}, "nic": {"bars": [[1, 2]]}},
                   {"name": "recv"}],
           "link": {"rate_gbps": 1, "lost": []}}
    assert tomllib.loads(dump_toml(doc)) == doc

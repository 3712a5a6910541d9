"""Every input of the fuzz corpus (tests/data/fuzz-corpus, copied from ../shared/fuzz-corpus: one
minimized input per failure an outside campaign found) ends in success or one line of the
pcitrace error, within 10 s and 2 GiB of address space."""

from __future__ import annotations

import json

import pytest

from tests.conftest import DATA
from tests.fuzz.harness import run_input

CORPUS = DATA / "fuzz-corpus"
CASES = sorted(p.parent for p in CORPUS.glob("*/*/case.json"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_corpus_input_ends_cleanly(case, tmp_path):
    spec = json.loads((case / "case.json").read_text())
    outcome = run_input(spec["kind"], case / spec["input"], tmp_path, spec.get("options"))
    assert outcome.clean, f"{outcome.verdict}: {outcome.detail} (was: {spec['seen']})"

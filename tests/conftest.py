"""Shared test fixtures: where things are, and whether the real sigrok-cli is here.

Tests that need sigrok-cli use the ``sigrok_cli`` fixture. Outside CI they are skipped with
a visible reason when it is absent; in CI (CI=true) its absence is a failure, because CI
installs it and those tests are the reference check.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"          # copies of ../shared's independent data: see tests/data/README.md
SAMPLES = ROOT / "samples"
DECODERS = ROOT / "decoders"
OPENCORES_VCD = DATA / "conformance" / "opencores-pci" / "pci_bus.vcd.gz"
OPENCORES_MON = DATA / "conformance" / "opencores-pci" / "pci_mon.log"
UDP_TOOLS = DATA / "udp-tools"


@pytest.fixture(scope="session")
def sigrok_cli() -> str:
    exe = shutil.which("sigrok-cli")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sigrok-cli is missing in CI: .ci/run must install it (apt-get install sigrok-cli)")
        pytest.skip("sigrok-cli not installed (apt-get install sigrok-cli); the reference-decoder tests need it")
    return exe


@pytest.fixture(scope="session")
def opencores_vcd() -> Path:
    if not OPENCORES_VCD.exists():
        pytest.fail(f"{OPENCORES_VCD} missing: tests/data holds the conformance data (see tests/data/README.md)")
    return OPENCORES_VCD

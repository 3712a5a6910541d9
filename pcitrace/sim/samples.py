"""The bundled samples: every ``samples/NAME.scenario.toml`` regenerates ``NAME.sr``,
``NAME.profile.toml`` and ``NAME.truth.json`` deterministically (the seed is in the scenario).

    python -m pcitrace.sim.samples [SAMPLES_DIR] [NAME ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from pcitrace.errors import PcitraceError

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"
SUFFIX = ".scenario.toml"


def sample_names(directory: Path = SAMPLES_DIR) -> list[str]:
    return sorted(p.name[: -len(SUFFIX)] for p in Path(directory).glob(f"*{SUFFIX}"))


def build_sample(name: str, directory: Path = SAMPLES_DIR, out_dir: Path | None = None):
    """Simulate ``directory/NAME.scenario.toml`` and write its three outputs to ``out_dir``."""
    from pcitrace.sim.scenario import load_scenario, simulate, write_outputs

    scenario = Path(directory) / f"{name}{SUFFIX}"
    if not scenario.exists():
        raise PcitraceError("no such sample scenario", path=scenario,
                            fix=f"use one of {', '.join(sample_names(directory))}")
    result = simulate(load_scenario(scenario))
    return result, write_outputs(result, Path(out_dir or directory) / f"{name}.sr")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    directory = Path(argv.pop(0)) if argv and Path(argv[0]).is_dir() else SAMPLES_DIR
    names = argv or sample_names(directory)
    try:
        for name in names:
            _, paths = build_sample(name, directory)
            size = paths[0].stat().st_size
            print(f"{paths[0]} ({size / 1e6:.2f} MB)")
    except PcitraceError as exc:
        print(f"pcitrace: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""No function in pcitrace/ or gui/ is over 150 lines or cyclomatic complexity 35 (radon).

A function past these is hard to read and cannot be tested in parts: split it along the steps it
already has. decoders/ is left out on purpose: the sigrok state machine reads better whole.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

from tests.conftest import ROOT

MAX_LINES = 150
MAX_COMPLEXITY = 35


def _functions(blocks):
    for block in blocks:
        if hasattr(block, "methods"):                      # a class: its methods count, not itself
            yield from _functions(block.methods)
            yield from _functions(getattr(block, "inner_classes", []))
        else:
            yield block
            yield from _functions(block.closures)


def _oversized():
    for path in sorted((ROOT / "pcitrace").rglob("*.py")) + sorted((ROOT / "gui").rglob("*.py")):
        for fn in _functions(cc_visit(path.read_text())):
            lines = fn.endline - fn.lineno + 1
            if lines > MAX_LINES or fn.complexity > MAX_COMPLEXITY:
                yield f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}: {lines} lines, complexity {fn.complexity}"


def test_every_function_is_small_and_simple():
    found = list(_oversized())
    assert not found, (f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}:\n" + "\n".join(found))

"""Where a page says a function lives (``f()`` in ``path.py``), it is defined there."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.rst")), ROOT / "README.md"]
REFERENCE = re.compile(r"``(\w+)\(\)``\s+in\s+``((?:benchmarks|scripts|sci_moe)/[\w/]+\.py)``")


def references(text: str) -> list[tuple[str, str]]:
    """Every ``(function, path)`` pair a page names, in order."""
    return [m.groups() for m in REFERENCE.finditer(text)]


def test_references_are_found():
    text = "computed by ``verdicts()`` in\n``benchmarks/x/_x.py`` from the rows"
    assert references(text) == [("verdicts", "benchmarks/x/_x.py")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_function_is_defined_in_named_file(page):
    wrong = []
    for fn, path in references(page.read_text()):
        source = ROOT / path
        if not source.is_file():
            wrong.append(f"{path} does not exist")
        elif not re.search(rf"^\s*(?:async\s+)?def {fn}\(", source.read_text(), re.M):
            wrong.append(f"{fn}() is not defined in {path}")
    assert not wrong, f"{page.name}: " + "; ".join(wrong) + " (name the file that defines it)"

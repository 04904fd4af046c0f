"""The contributor page is in the docs' toctree and lists the core's current public face."""

from __future__ import annotations

import doctest
import pathlib
import re

import sci_moe.moe

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def test_contributing_is_in_the_toctree():
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    assert re.search(r"^\s+contributing\s*$", index, re.M), "docs/index.rst: add contributing"


def test_contributing_names_exist_and_cover_the_core():
    """Every ``sci_moe.moe`` name the page cites exists, and the page cites all of them."""
    text = (DOCS / "contributing.rst").read_text(encoding="utf-8")
    cited = set(re.findall(r"~sci_moe\.moe\.(\w+)", text))
    cited |= set(re.findall(r"<sci_moe\.moe\.(\w+)", text))
    public = set(sci_moe.moe.__all__)
    assert cited - public == set(), f"the page cites names sci_moe.moe lacks: {cited - public}"
    assert public - cited == set(), (
        f"docs/contributing.rst does not mention {sorted(public - cited)}: add them to "
        "'The core is the contract'"
    )


def test_worked_example_runs():
    """The page's ``>>>`` example (a routed layer on RoutedModule and its check) runs and
    prints what it says."""
    text = (DOCS / "contributing.rst").read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, "contributing.rst", None, 0)
    assert any("assert_routed_module" in e.source for e in test.examples), "no worked example"
    failures: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=failures.append)
    assert result.failed == 0, "".join(failures)

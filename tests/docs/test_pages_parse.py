"""The hand-written results pages parse as reStructuredText without warnings.

The docs build runs ``sphinx-build -W`` only at the end of CI (minutes); a markup slip on a
results page (a directive without its blank line, a broken table) then fails the whole
run. This parses every page with docutils in well under a second. Sphinx-only roles and
directives are unknown to plain docutils and are the only messages ignored.
"""

from __future__ import annotations

import io
import pathlib

import docutils.core
import docutils.nodes
import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted((DOCS / "results").glob("*.rst"))
SPHINX_ONLY = ("Unknown interpreted text role", "Unknown directive type", "No role entry",
               "No directive entry")  # fmt: skip


def problems(text: str) -> list[str]:
    """Messages (level >= warning) docutils reports for ``text``, Sphinx-only ones left out."""
    tree = docutils.core.publish_doctree(
        text, settings_overrides={"warning_stream": io.StringIO(), "report_level": 5}
    )
    out = []
    for msg in tree.findall(docutils.nodes.system_message):
        first = msg.astext().split("\n", 1)[0]
        if msg["level"] >= 2 and not any(s in msg.astext() for s in SPHINX_ONLY):
            out.append(f"line {msg.get('line')}: {first}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_results_page_parses_without_warnings(page):
    assert not problems(page.read_text()), problems(page.read_text())


def test_a_directive_without_its_blank_line_is_caught():
    bad = "Title\n=====\n\n.. image:: x.png\n   :alt: x\nNext paragraph.\n"
    assert any("blank line" in p for p in problems(bad))
    assert not problems(bad.replace(":alt: x\n", ":alt: x\n\n"))

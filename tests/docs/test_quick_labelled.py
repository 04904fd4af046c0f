"""A ``--quick`` run is labelled "quick" wherever a results page shows it (issue 41 item 5).

Every ``result-table``, ``verdicts`` or ``image`` directive whose file names a quick run
(``..._quick``) has "quick" in its section's heading or in the twelve lines before it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGES = sorted((Path(__file__).resolve().parents[2] / "docs" / "results").glob("*.rst"))
DIRECTIVE = re.compile(r"\.\. (result-table|verdicts|image)::\s*(\S+)")
UNDERLINE = re.compile(r"[=\-~^]{3,}")


def unlabelled(text: str) -> list[str]:
    """The quick-run directives of a page without "quick" near them (line: directive)."""
    lines = text.splitlines()
    heading, bad = "", []
    for i, line in enumerate(lines):
        if line.strip() and i + 1 < len(lines) and UNDERLINE.fullmatch(lines[i + 1]):
            heading = line
        m = DIRECTIVE.match(line)
        if m and "quick" in m.group(2):
            near = " ".join([heading, *lines[max(0, i - 12) : i]]).lower()
            if "quick" not in near:
                bad.append(f"{i + 1}: {line}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_quick_runs_are_labelled(page):
    bad = unlabelled(page.read_text(encoding="utf-8"))
    assert not bad, f"{page.name}: a quick run shown without saying so:\n" + "\n".join(bad)


def test_the_check_finds_an_unlabelled_quick_table():
    page = "Results\n-------\n\n" + "text\n" * 13 + ".. result-table:: x/results/x_quick\n"
    assert unlabelled(page)
    assert not unlabelled(page.replace("Results\n-------", "Quick run\n---------"))

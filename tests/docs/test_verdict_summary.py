"""``docs/_ext/verdict_summary.py``: the results index's table of every paper's verdict
counts, rendered from the JSON under plain docutils (no Sphinx)."""

from __future__ import annotations

import importlib
import io
import json
import re
import sys
import textwrap
from pathlib import Path

import docutils.core
import docutils.nodes
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BENCH = DOCS.parent / "benchmarks"


@pytest.fixture(scope="module")
def ext():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        mod = importlib.import_module("verdict_summary")
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    mod.register()
    return mod


def _directive_block() -> str:
    text = (DOCS / "results" / "index.rst").read_text(encoding="utf-8")
    m = re.search(r"^\.\. verdict-summary::\n\n((?:   .*\n|\n)+)", text, re.M)
    assert m, "index.rst has no verdict-summary directive"
    return ".. verdict-summary::\n\n" + m.group(1)


def _render(block: str):
    err = io.StringIO()
    tree = docutils.core.publish_doctree(
        block, settings_overrides={"warning_stream": err, "report_level": 2}
    )
    return tree, err.getvalue()


def test_the_index_lists_nineteen_papers_with_their_counts(ext):
    block = _directive_block()
    papers = ext.parse_lines(textwrap.dedent("\n".join(block.split("\n")[2:])).split("\n"))
    assert len(papers) == 19
    tree, err = _render(block)
    assert not err, err
    rows = list(tree.findall(docutils.nodes.row))[1:]  # after the header
    assert len(rows) == 19
    for (title, page, files), row in zip(papers, rows, strict=True):
        assert (DOCS / "results" / f"{page}.rst").is_file(), page
        entries = []
        for name in files:
            entries += json.loads((BENCH / f"{name}.json").read_text(encoding="utf-8"))["verdicts"]
        cells = [e.astext() for e in row.findall(docutils.nodes.entry)]
        assert cells[0] == title and cells[1] == str(len(entries))
        for cell, verdict in zip(cells[2:5], ("reproduced", "contradicted", "not decided"),
                                 strict=True):  # fmt: skip
            n = sum(e["verdict"] == verdict for e in entries)
            d = sum(e["verdict"] == verdict and e["decisive"] for e in entries)
            assert cell == (f"{n} ({d} decisive)" if d else str(n))


def test_a_changed_json_changes_the_table(ext, tmp_path, monkeypatch):
    src = json.loads((BENCH / "moe_cap" / "results" / "moe_cap.json").read_text())
    src["verdicts"][0]["verdict"] = "not decided"
    src["verdicts"][0]["decisive"] = False
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "m.json").write_text(json.dumps(src))
    monkeypatch.setattr(ext, "_dirs", lambda document: (tmp_path,))
    tree, err = _render(".. verdict-summary::\n\n   MoE-CAP = moe_cap | x/m\n")
    assert not err, err
    cells = [e.astext() for e in list(tree.findall(docutils.nodes.row))[1].findall(
        docutils.nodes.entry)]  # fmt: skip
    n = sum(v["verdict"] == "not decided" for v in src["verdicts"])
    assert cells[4] == str(n)


@pytest.mark.parametrize(
    "block, message",
    [
        (".. verdict-summary::\n\n   no equals sign here\n", "is not 'TITLE = PAGE"),
        (".. verdict-summary::\n\n   A = a | nowhere/results/none\n", "none"),
        (".. verdict-summary::\n", "no papers listed"),
    ],
)
def test_bad_lines_are_errors_in_the_page(ext, block, message):
    _, err = _render(block)
    assert "verdict-summary" in err and message in err

"""A quoted figure renders as quoted, and nothing is derived from it (issue 41, item 3).

Rows with ``"quoted": {"source", "machine"}`` (figures from a paper, an issue or another
machine's run) render with the extension's ``QUOTED_MARK`` and a tooltip naming the
source; a ratio or difference with a quoted operand is a build error.
"""

from __future__ import annotations

import json

import pytest

from .test_results_rendered import _html, ext  # noqa: F401

QUOTE = {"source": "issue 28", "machine": "the filer's host"}


def _doc(path):
    rows = [
        {"case": "theirs", "metric": "ms", "value": 0.85, "unit": "ms", "quoted": QUOTE},
        {"case": "ours", "metric": "ms", "value": 1.25, "unit": "ms", "vs": "ref", "ratio": 2.0},
        {"case": "ref", "metric": "ms", "value": 2.5, "unit": "ms", "vs": None, "ratio": None},
    ]
    path.write_text(json.dumps({"benchmark": "q", "machine": {}, "rows": rows}))


def test_a_quoted_figure_is_marked(ext, tmp_path, monkeypatch):  # noqa: F811
    _doc(tmp_path / "q.json")
    assert ext.render("q#theirs | ms:.2f", (tmp_path,))[0] == "0.85" + ext.QUOTED_MARK
    assert ext.render("q#ours | ms:.2f", (tmp_path,))[0] == "1.25"
    assert ext.render("q#* | ms @count", (tmp_path,))[0] == "3" + ext.QUOTED_MARK
    page = (
        "T\n=\n\nours :result:`q#ours | ms:.2f`, theirs :result:`q#theirs | ms:.2f`\n\n"
        ".. result-table:: q\n   :rows: ours; theirs\n\n   ms = {row} | ms:.2f\n"
    )
    html, errors = _html(ext, tmp_path, monkeypatch, page)
    assert not errors, errors
    # the role's node carries the class (Sphinx adds the source as the tooltip)
    assert html.count("0.85 (quoted)") == 2 and 'class="result quoted"' in html
    assert "1.25 (quoted)" not in html


@pytest.mark.parametrize(
    "spec",
    ["q#ours | ms // theirs | ms", "q#theirs | ms -- ours | ms", "q#ours | ms ** theirs | ms"],
)
def test_nothing_is_derived_from_a_quoted_figure(ext, tmp_path, spec):  # noqa: F811
    _doc(tmp_path / "q.json")
    with pytest.raises(ext.ResultError, match="quoted row"):
        ext.render(spec, (tmp_path,))
    assert ext.render("q#ref | ms // ours | ms:.1f", (tmp_path,))[0] == "2.0"


def test_a_quoted_row_has_no_ratio_to_render(ext, tmp_path):  # noqa: F811
    _doc(tmp_path / "q.json")
    with pytest.raises(ext.ResultError, match="neither a row field"):
        ext.render("q#theirs | ms | ratio", (tmp_path,))

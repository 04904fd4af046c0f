"""The pages rendered from benchmark JSON at docs build time are valid reStructuredText."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

docutils_core = pytest.importorskip("docutils.core")

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _results_module():
    spec = importlib.util.spec_from_file_location("_docs_results", DOCS / "_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_markup_characters_in_cells_render_literally(tmp_path):
    rows = [
        {
            "case": "a / b_min",
            "metric": "mean paired |error| difference",
            "value": 0.5,
            "unit": "eV",
            "vs": "x*y",
            "ratio": None,
        },
        {"case": "`c`", "metric": "p\\q", "value": 1.25, "unit": "-", "vs": None, "ratio": 2.0},
    ]
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"benchmark": "demo", "machine": {"seed": 0}, "rows": rows}))
    text = _results_module().render(path)
    html = docutils_core.publish_string(
        text, writer_name="html", settings_overrides={"report_level": 2, "halt_level": 2}
    ).decode()
    for literal in ("mean paired |error| difference", "b_min", "x*y", "`c`", "p\\q"):
        assert literal in html


def test_paper_folders_name_their_pages_and_scripts():
    # issue 41 item 5: benchmarks/<paper>/results/[history/]*.json, written by run.py or a
    # companion script named after the rest of the benchmark's name
    mod = _results_module()
    bench = mod.BENCH
    assert mod.page_name(bench / "md" / "results" / "md_quick.json") == "md_quick"
    assert mod.page_name(bench / "fame" / "results" / "quick.json") == "fame_quick"
    assert mod.page_name(bench / "md" / "results" / "history" / "md_old.json") == "md_old"
    assert mod.page_name(bench / "results" / "vrp.json") == "vrp"
    assert mod.script_of(bench / "mvcge" / "results" / "x.json", "mvcge").endswith("mvcge/run.py")
    for path in mod.sources():
        assert not path.name.endswith(".state.json")

"""Quoted is not measured (issue 41, item 3): figures from elsewhere are quoted rows.

A row with ``"quoted": {"source", "machine"}`` is a figure of a paper, an issue or another
machine's run; it has no ``vs`` / ``ratio`` keys, and no row names it as its ``vs`` (only
a baseline measured in the same run gets a ratio). Checked on every stored results JSON,
on :class:`_common.Row`, and on the energy-diffusion scripts' ``--quoted-only`` rules.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from .conftest import BENCH, load_benchmark

RESULTS = BENCH / "energy_diffusion" / "results"


def _docs():
    """Every stored results JSON: benchmarks/<paper>/results/ (and history/)."""
    for path in sorted(p for p in BENCH.rglob("*.json") if "results" in p.relative_to(BENCH).parts):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            continue
        rows = doc.get("rows") if isinstance(doc, dict) else None
        if isinstance(rows, list):
            yield path, rows


def quoted_row_problems(rows: list) -> list[str]:
    """What is wrong with the quoted rows of one JSON's ``rows``."""
    bad = []
    quoted = set()
    for r in rows:
        if isinstance(r, dict) and r.get("quoted") is not None:  # "quoted": null is no quote
            where = f"{r.get('case')} | {r.get('metric')}"
            q = r["quoted"]
            if not (isinstance(q, dict) and q.get("source") and q.get("machine")):
                bad.append(f"{where}: quoted needs a source and a machine, got {q!r}")
            extra = [k for k in ("vs", "ratio") if k in r]
            if extra:
                bad.append(f"{where}: a quoted row with {' and '.join(extra)}")
            quoted.add(r.get("case"))
    for r in rows:
        if isinstance(r, dict) and r.get("quoted") is None and r.get("vs") in quoted:
            bad.append(f"{r.get('case')} | {r.get('metric')}: a ratio to quoted {r['vs']}")
    return bad


def test_no_stored_row_is_quoted_and_compared():
    bad = [
        f"{path.relative_to(BENCH)}: {p}"
        for path, rows in _docs()
        for p in quoted_row_problems(rows)
    ]
    assert not bad, "\n".join(bad)


def test_the_check_finds_a_quoted_row_with_a_ratio():
    q = {"source": "issue 28", "machine": "another host"}
    rows = [
        {"case": "theirs", "metric": "ms", "value": 1.0, "unit": "ms", "quoted": q},
        {"case": "ours", "metric": "ms", "value": 2.0, "unit": "ms", "vs": "theirs", "ratio": 0.5},
    ]
    assert len(quoted_row_problems(rows)) == 1
    rows[0].update(vs=None, ratio=None)
    assert len(quoted_row_problems(rows)) == 2
    rows[0]["quoted"] = {"source": "issue 28"}
    assert len(quoted_row_problems(rows)) == 3


@pytest.fixture(scope="module")
def common():
    with load_benchmark("_common/__init__.py", "bench_common_quoted") as mod:
        yield mod


def test_a_quoted_row_has_no_ratio(common):
    q = common.quote("issue 28", "another host")
    row = common.QuotedRow("scoremd/plain", "ms_per_step", 0.85, "ms", quoted=q)
    assert common.row_dict(row) == {
        "case": "scoremd/plain",
        "metric": "ms_per_step",
        "value": 0.85,
        "unit": "ms",
        "quoted": q,
    }
    measured = common.Row("ours", "ms_per_step", 1.0, "ms", "ref", 2.0)
    assert "quoted" not in vars(measured)  # every script's measured rows keep their form
    assert common.row_from_dict(common.row_dict(row)) == row
    assert common.row_from_dict(common.row_dict(measured)) == measured
    with pytest.raises(TypeError):
        common.row_from_dict({**common.row_dict(row), "vs": None, "ratio": 1.2})
    with pytest.raises(TypeError):
        common.QuotedRow("scoremd/plain", "ms_per_step", 0.85, "ms", "ref", 1.2)
    with pytest.raises(ValueError, match="machine"):
        common.quote("issue 28", " ")
    with pytest.raises(ValueError, match="source"):
        common.QuotedRow("x", "y", 1.0, "-", quoted={"source": "", "machine": "m"})


def test_rederive_rows_rewrites_only_the_rows(common, tmp_path):
    path = tmp_path / "r.json"
    doc = {
        "benchmark": "b",
        "machine": {"git": "abc"},
        "rows": [
            {"case": "a", "metric": "m", "value": 1.0, "unit": "-", "vs": None, "ratio": None}
        ],
        "verdicts": [{"claim": "c"}],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
    q = common.quote("s", "m")
    common.rederive_rows(
        path, lambda d: [common.Row(**d["rows"][0]), common.QuotedRow("b", "m", 2.0, "-", quoted=q)]
    )
    out = json.loads(path.read_text())
    assert out["machine"] == doc["machine"] and out["verdicts"] == doc["verdicts"]
    assert out["rows"][1] == {"case": "b", "metric": "m", "value": 2.0, "unit": "-", "quoted": q}
    assert path.read_text().startswith('{\n "benchmark"')  # the file's own indent


@pytest.fixture(scope="module")
def speed():
    with load_benchmark("energy_diffusion/speed.py", "bench_ed_speed_quoted") as mod:
        yield mod


@pytest.fixture(scope="module")
def paper():
    with load_benchmark(
        "energy_diffusion/_energy_diffusion_paper.py", "bench_ed_paper_quoted"
    ) as mod:
        yield mod


def _load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["energy_diffusion_speed", "energy_diffusion_speed_update"])
def test_speed_json_is_in_the_quoted_form(speed, name):
    """The stored JSON is what ``--quoted-only`` makes of it (a fixed point of the rule)."""
    doc = _load(name)
    rows = [speed._common.row_dict(r) for r in speed.quoted_rows(copy.deepcopy(doc))]
    assert rows == doc["rows"]
    assert {r["case"] for r in rows if "quoted" in r} == {"scoremd/plain", "scoremd/fp"}


def test_speed_rule_drops_the_ratio_to_a_quoted_figure(speed):
    old = {
        "machine": {"scoremd_source": "measured on this machine", "scoremd_quoted": True},
        "rows": [
            {
                "case": "scoremd/plain",
                "metric": "ms_per_step",
                "value": 0.85,
                "unit": "ms",
                "vs": None,
                "ratio": None,
            },
            {
                "case": "plain/compiled",
                "metric": "ms_per_step",
                "value": 3.0,
                "unit": "ms",
                "vs": "plain/reference",
                "ratio": 2.2,
            },
            {
                "case": "plain/compiled",
                "metric": "ms_per_step_vs_scoremd",
                "value": 3.0,
                "unit": "ms",
                "vs": "scoremd/plain",
                "ratio": 0.28,
            },
        ],
    }
    rows = speed.quoted_rows(old)
    assert [(r.case, r.metric, hasattr(r, "quoted")) for r in rows] == [
        ("scoremd/plain", "ms_per_step", True),
        ("plain/compiled", "ms_per_step", False),
    ]
    assert old["machine"] == {"scoremd_source": speed.SCOREMD_SOURCE}
    old["rows"][0]["value"] = 0.9  # not the quoted figure: refused
    with pytest.raises(ValueError, match="ScoreMD figure"):
        speed.quoted_rows(old)


@pytest.mark.parametrize(
    "name", ["energy_diffusion_paper", "energy_diffusion_paper_moe", "energy_diffusion_paper_seed3"]
)
def test_paper_json_is_in_the_quoted_form(paper, name):
    doc = _load(name)
    rows = [paper._common.row_dict(r) for r in paper.quoted_rows(copy.deepcopy(doc))]
    assert rows == doc["rows"]
    quoted = [r for r in rows if "quoted" in r]
    assert len(quoted) == sum(len(d) for d in paper.SCOREMD.values()) + len(paper.PAPER_FIGURES)
    assert all(r["case"].startswith(("scoremd/", "paper/")) for r in quoted)


def test_paper_rule_refuses_a_ratio_to_a_quoted_figure(paper):
    doc = {
        "machine": {},
        "rows": [
            {
                "case": "mb_paper/plain",
                "metric": "md_js_scoremd",
                "value": 0.1,
                "unit": "-",
                "vs": "scoremd/plain/seed1",
                "ratio": 0.4,
            },
        ],
    }
    with pytest.raises(ValueError, match="quoted figure"):
        paper.quoted_rows(doc)


def test_scripts_write_scoremd_as_quoted_rows(paper, speed):
    rows = paper.scoremd_rows()
    assert all(r.quoted == paper.SCOREMD_QUOTE for r in rows if r.case.startswith("scoremd/"))
    assert all(r.quoted == paper.PAPER_QUOTE for r in rows if r.case.startswith("paper/"))
    row = speed._scoremd_row("fp")
    assert row.quoted == speed.SCOREMD_QUOTE and not hasattr(row, "ratio")
    assert Path(speed.__file__).name == "speed.py"

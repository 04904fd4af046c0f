"""Numbers quoted by hand on the results pages agree with the benchmark JSON they cite.

The tables under ``docs/results/generated/`` are rendered from the benchmark JSON
by ``docs/_results.py``; the hand-written pages ``docs/results/*.rst`` quote figures in prose
and tables. Every decimal number with at least two significant digits on those pages (outside
code blocks) must be accounted for, in one of four ways:

1. it equals, at its printed precision, a ``value`` or ``ratio`` (or 100 x one, a percentage)
   of a row of one of the JSON files the page names (:func:`test_every_number_is_accounted_for`);
2. it is bound to one row in :data:`CLAIMS` (page, quoted string, JSON, case, metric), checked
   exactly (:func:`test_claims_match_their_row`);
3. it is a statistic over seed rows in :data:`DERIVED` (mean or population std of a metric
   over the cases with a prefix), recomputed from the JSON (:func:`test_derived_numbers`);
4. it is listed in :data:`NOT_FROM_JSON` with the reason (the paper's own number, a setup
   constant, a run that is not stored, or arithmetic on other quoted numbers).

A number added to a page without one of these fails the test: add the JSON row (preferred),
or bind or list it here. Integers (seeds, sizes, counts) are not checked.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
from decimal import Decimal

import numpy as np
import pytest

from .test_results_rendered import PENDING

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
BENCH = DOCS.parent / "benchmarks"
# Only the pages not yet rendered from JSON (issue 41): the others are checked exactly by
# test_results_rendered.py. This file goes when PENDING is empty.
PAGES = sorted(p for p in (DOCS / "results").glob("*.rst") if p.name in PENDING)

#: A decimal number, not part of a word, an arXiv id or a version string.
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*\.\d+(?:e[-+]?\d+)?(?![\w.]*\w)")


@functools.cache
def _find(name: str) -> pathlib.Path | None:
    """``NAME.json`` in a paper's ``results/`` (or its ``history/``), or ``benchmarks/results/``."""
    for pattern in (f"*/results/{name}", f"*/results/history/{name}", f"results/{name}"):
        for path in sorted(BENCH.glob(pattern)):
            return path
    return None


@functools.cache
def _rows(name: str) -> list[dict]:
    return json.loads(_find(name).read_text())["rows"]


def _cited_json(text: str) -> list[str]:
    return sorted({n for n in re.findall(r"([a-z_0-9]+\.json)", text) if _find(n)})


def _prose_numbers(text: str):
    """(line number, quoted string) of every checked number outside code blocks."""
    in_code = False
    for i, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith((".. code-block", ".. math::")) or line.rstrip().endswith("::"):
            in_code = True
            continue
        if in_code and line and not line[0].isspace():
            in_code = False
        if in_code:
            continue
        for m in NUMBER.finditer(line):
            s = m.group(0)
            if len(s.replace("-", "").replace(".", "").replace(",", "").lstrip("0")) >= 2:
                yield i, s


def _agrees(quoted: str, value: float, scale: float = 1.0) -> bool:
    """``value * scale`` rounds to ``quoted`` (half a unit of its last digit, plus float slack)."""
    d = Decimal(quoted.replace(",", ""))
    half = 0.5 * 10.0 ** d.as_tuple().exponent
    return abs(value * scale - float(d)) <= half * (1 + 1e-9) + 1e-12


def _matches_any(quoted: str, names: list[str]) -> bool:
    for name in names:
        for r in _rows(name):
            for v in (r.get("value"), r.get("ratio")):
                if isinstance(v, int | float) and (_agrees(quoted, v) or _agrees(quoted, v, 100)):
                    return True
    return False


#: (page, quoted string, JSON file, case, metric, field, scale): numbers bound to one row.
CLAIMS: list[tuple] = []

#: (page, quoted string, JSON file, case prefix, metric, statistic): "mean" or "std"
#: (population std, ddof=0) of ``metric`` over the cases starting with the prefix.
DERIVED: list[tuple] = []


#: page -> {quoted string: why it is not (directly) a JSON figure}.
NOT_FROM_JSON: dict[str, dict[str, str]] = {}


def _bound() -> dict[str, set[str]]:
    """Numbers of each page covered by CLAIMS and DERIVED."""
    out: dict[str, set[str]] = {}
    for page, quoted, *_ in CLAIMS:
        out.setdefault(page, set()).update(m.group(0) for m in NUMBER.finditer(quoted))
    for page, quoted, *_ in DERIVED:
        out.setdefault(page, set()).add(quoted)
    return out


def unaccounted(page: pathlib.Path) -> list[str]:
    """``line: number`` of every number of ``page`` that nothing above accounts for."""
    text = page.read_text(encoding="utf-8")
    names = _cited_json(text)
    skip = set(NOT_FROM_JSON.get(page.name, {})) | _bound().get(page.name, set())
    return [
        f"{page.name}:{i}: {s}"
        for i, s in _prose_numbers(text)
        if s not in skip and not _matches_any(s, names)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_number_is_accounted_for(page):
    bad = unaccounted(page)
    assert not bad, (
        "numbers on the results page agree with no row of the JSON it cites; fix the number, "
        "or bind it in CLAIMS/DERIVED, or list it in NOT_FROM_JSON with a reason:\n"
        + "\n".join(bad)
    )


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c[0]}:{c[3]}")
def test_claims_match_their_row(claim):
    page, quoted, name, case, metrics = claim
    assert quoted in (DOCS / "results" / page).read_text(encoding="utf-8"), (page, quoted)
    numbers = [m.group(0) for m in NUMBER.finditer(quoted)]
    assert len(numbers) == len(metrics), (quoted, metrics)
    rows = {r["metric"]: r["value"] for r in _rows(name) if r["case"] == case}
    for q, metric in zip(numbers, metrics, strict=True):
        if metric is not None:
            assert metric in rows, f"{name} has no row ({case!r}, {metric!r})"
            assert _agrees(q, rows[metric]), (
                f"{page}: {q} but {name} {case} {metric} = {rows[metric]}"
            )


@pytest.mark.parametrize("item", DERIVED, ids=lambda d: f"{d[0]}:{d[3]}:{d[4]}:{d[5]}")
def test_derived_numbers(item):
    page, quoted, name, prefix, metric, stat = item
    assert quoted in (DOCS / "results" / page).read_text(encoding="utf-8"), (page, quoted)
    vals = [
        r["value"] for r in _rows(name) if r["case"].startswith(prefix) and r["metric"] == metric
    ]
    assert len(vals) >= 2, f"{name}: fewer than two {prefix}* rows of {metric}"
    got = float(np.mean(vals)) if stat == "mean" else float(np.std(vals))
    assert _agrees(quoted, got), f"{page}: {quoted} but the {stat} of {prefix}* {metric} is {got}"


def test_not_from_json_entries_still_appear():
    """A listed exemption whose number left the page is stale: remove it."""
    assert set(NOT_FROM_JSON) <= set(PENDING), "drop the entries of converted pages"
    for page, entries in NOT_FROM_JSON.items():
        text = (DOCS / "results" / page).read_text(encoding="utf-8")
        for quoted in entries:
            assert quoted in text, f"{page}: {quoted!r} no longer on the page; drop it here"


def test_results_pages_cite_their_json():
    for page in PAGES:
        assert _cited_json(page.read_text(encoding="utf-8")), f"{page.name} cites no JSON file"

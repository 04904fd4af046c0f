"""``benchmarks/self_distillation/run.py``: the derived rows and verdicts the page renders.

The page's agreement count and the share of the soft-label gain reached by hard labels are
rows re-derived from the stored rows (``--derived-only``), never typed.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from .conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def sd():
    with load_benchmark("self_distillation/run.py", "bench_self_distillation_derived") as mod:
        yield mod


def _dict(row) -> dict:
    """A measured row as the JSON stores it."""
    return dataclasses.asdict(row)


def _row(case, metric, value):
    return {"case": case, "metric": metric, "value": value, "unit": "1", "vs": None, "ratio": None}


def test_derived_rows_count_and_share(sd):
    doc = {
        "rows": [
            _row("bce 0-SD alpha=2", "error", 0.20),
            _row("bce 1-SD hard alpha=2", "error", 0.14),
            _row("bce 1-SD soft alpha=2", "error", 0.12),
            _row("bce 0-SD rho=0.3 alpha=2 learned", "error", 0.3),
            _row("bce 0-SD alpha=2", "sim_z", -3.5),
            _row("bce 1-SD hard alpha=2", "sim_z", 2.9),
        ]
    }
    rows = {(r.case, r.metric): r.value for r in sd.derived_rows(doc)}
    assert rows[("theory vs simulation", "n_points")] == 2
    assert rows[("theory vs simulation", "n_within_3se")] == 1
    assert rows[("bce 1-SD alpha=2", "hard_share_of_soft_gain")] == pytest.approx(0.75)
    assert not any("rho" in c and m == "hard_share_of_soft_gain" for c, m in rows)
    again = {"rows": [_dict(r) for r in sd.derived_rows(doc)]}
    assert len(sd.derived_rows(again)) == len(again["rows"])  # applying it twice adds nothing


@pytest.mark.parametrize("name", ["self_distillation", "self_distillation_quick"])
def test_stored_json_holds_its_derived_rows(sd, name):
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / f"{name}.json").read_text(encoding="utf-8")
    )
    rows = [_dict(r) for r in sd.derived_rows(copy.deepcopy(doc))]
    assert rows == doc["rows"]


def _theory_doc(gains: dict[float, tuple[float, float, float, float, float]]) -> dict:
    """A main sweep: alpha -> theory errors (0-SD, 1-SD hard, 1-SD soft, 2-SD hard, 2-SD soft)."""
    rows = []
    for a, errs in gains.items():
        labels = ("0-SD", "1-SD hard", "1-SD soft", "2-SD hard", "2-SD soft")
        for label, e in zip(labels, errs, strict=True):
            rows.append(_row(f"bce {label} alpha={a:g}", "error", e))
    return {"machine": {"seeds": 8, "delta": 0.5, "theta": 0.3}, "rows": rows}


def test_verdicts_follow_the_theory_at_every_alpha(sd):
    doc = _theory_doc(
        {
            0.5: (0.30, 0.29, 0.25, 0.285, 0.24),  # hard reaches 20 % of the soft gain
            2.0: (0.20, 0.13, 0.12, 0.12, 0.11),
            8.0: (0.11, 0.09, 0.089, 0.088, 0.087),
        }
    )
    doc["rows"] = [_dict(r) for r in sd.derived_rows(doc)]
    out = {v["claim"].split(" (")[0]: v["verdict"] for v in sd.verdicts(doc)}
    assert out["hard pseudo-labels: optimal 1-SD beats the optimal plain classifier"] == (
        "reproduced"
    )
    assert out["hard labels are the main driver of the gain"] == "not decided"
    assert out["gains are largest at moderate dataset sizes"] == "reproduced"
    assert out["few stages suffice: the second SD stage gains less than the first"] == (
        "reproduced"
    )
    doc["rows"] = [r for r in doc["rows"] if "alpha=8" not in r["case"]]
    out = {v["claim"].split(" (")[0]: v["verdict"] for v in sd.verdicts(doc)}
    assert out["gains are largest at moderate dataset sizes"] == "not decided"  # no inner alpha


@pytest.mark.parametrize("name", ["self_distillation", "self_distillation_quick"])
def test_stored_verdicts_follow_the_rule(sd, name):
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / f"{name}.json").read_text(encoding="utf-8")
    )
    assert doc["verdicts"] == [sd.verdict_entry(**v) for v in sd.verdicts(doc)]


def test_stored_heuristics_verdicts_follow_the_rule(sd):
    # ``run.py --verdicts-only`` on a --heuristics JSON takes the heuristics' rule (bias
    # fixing and early stopping, from the stored details), not the main sweep's
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation_heuristics.json").read_text(
            encoding="utf-8"
        )
    )
    assert doc["verdicts"] == [sd.verdict_entry(**v) for v in sd.verdict_rule(doc)]
    main = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation.json").read_text(
            encoding="utf-8"
        )
    )
    assert sd.verdict_rule(main) == sd.verdicts(main)

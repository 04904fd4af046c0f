"""``benchmarks/more_brain/run.py``: the verdict rule behind ``more_brain.rst`` (issue 41)."""

from __future__ import annotations

import json

import pytest

from .conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def mb():
    with load_benchmark("more_brain/run.py", "bench_more_brain_verdicts") as mod:
        yield mod


def _doc(sd: float | None, moe: float = 0.1, ridge: float = 0.3) -> dict:
    rows = []

    def add(case, metric, value):
        rows.append({"case": case, "metric": metric, "value": value, "unit": "-"})
        if sd is not None:
            rows.append({"case": case, "metric": f"{metric}_sd", "value": sd, "unit": "-"})

    add("snr=0.3 ridge", "top1", ridge)
    add("snr=0.3 flat MoE", "top1", 0.08)
    add("snr=0.3 MoRE-Brain", "top1", moe)
    for lv in range(2):
        add(f"level {lv} assignment", "ari", 0.01)
        add(f"level {lv} chance", "ari", 0.0)
    for case, v in (("router-only", 0.02), ("scratch", 0.03), ("ridge", 0.04)):
        add(f"new subject 2.5% {case}", "top5", v)
    add("sweep snr=0.1 MoRE-Brain", "top1", 0.03)
    add("sweep snr=1 MoRE-Brain", "top1", 0.6)
    return {"machine": {"seeds": 3}, "rows": rows}


def test_without_deviations_every_comparison_is_not_decided(mb):
    out = mb.verdicts(_doc(sd=None))
    by = {v["claim"]: v for v in out}
    assert by["voxel -> expert assignments recover the planted brain regions"]["verdict"] == (
        "contradicted"
    )
    others = [v for c, v in by.items() if "assignments" not in c]
    assert len(others) == 5 and all(v["verdict"] == "not decided" for v in others)
    transfer = by["router-only fine-tuning transfers to a new subject (2.5% of its rows)"]
    assert transfer["baseline_value"] == 0.04  # the stronger of scratch and ridge


def test_ridge_on_linear_data_refutes_nothing(mb):
    out = mb.verdicts(_doc(sd=0.001))  # a resolved difference against the MoE
    ridge = out[0]
    assert ridge["verdict"] == "not decided" and "linear" in ridge["why"]
    assert ridge["p_value"] < 0.05
    snr = [v for v in out if v["claim"].startswith("retrieval falls")]
    assert [v["verdict"] for v in snr] == ["reproduced", "reproduced"]
    better = mb.verdicts(_doc(sd=0.001, moe=0.5))[0]
    assert better["verdict"] == "reproduced"


def test_stored_verdicts_follow_the_rule(mb):
    doc = json.loads(
        (BENCH / "more_brain" / "results" / "more_brain_quick.json").read_text(encoding="utf-8")
    )
    assert doc["verdicts"] == [mb.verdict_entry(**v) for v in mb.verdicts(doc)]

"""``benchmarks/more_brain/run.py``: the verdict rule behind ``more_brain.rst`` (issues 41, 45)."""

from __future__ import annotations

import json

import pytest

from .conftest import BENCH, load_benchmark

SEEDS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def mb():
    with load_benchmark("more_brain/run.py", "bench_more_brain_verdicts") as mod:
        yield mod


def _doc(moe=0.5, ridge=0.4, flat=1.0, spectral=0.6, router=0.2, full=0.1, scratch=0.15):
    rows = []

    def add(case, metric, value, jitter=0.01):
        vals = [value + jitter * (i % 2) for i in range(len(SEEDS))]
        rows.append({"case": case, "metric": metric, "value": sum(vals) / len(vals)})
        rows.extend(
            {"case": case, "metric": f"{metric} seed {s}", "value": v}
            for s, v in zip(SEEDS, vals, strict=True)
        )

    add("ridge", "top1", ridge)
    add("flat MoE", "top1", 0.3)
    add("MoRE-Brain", "top1", moe)
    for case in ("flat MoE", "MoRE-Brain"):
        add(case, "flat", flat, jitter=0.0)
    for level in ("networks", "regions"):
        add(f"{level} MoRE-Brain", "ari", 0.05)
        add(f"{level} spectral", "ari", spectral)
    for n in (25, 100):
        for case, v in (("router-only", router), ("full fine-tuning", full), ("scratch", scratch)):
            add(f"new subject {n} rows {case}", "top5", v)
            add(f"new subject {n} rows {case}", "flat", flat, jitter=0.0)
    return {"machine": {"seeds": SEEDS}, "rows": rows}


def test_paired_verdicts_on_per_seed_rows(mb):
    by = {v["claim"]: v for v in mb.verdicts(_doc())}
    ridge = by["the hierarchical MoE decodes better than ridge"]
    assert ridge["verdict"] == "reproduced" and ridge["decisive"] and ridge["seeds"] == 5
    assert ridge["p_value"] == 0.0 and "paired t-test" in ridge["why"]
    assert by["the expert tree decodes better than a flat MoE"]["verdict"] == "reproduced"
    groups = [v for c, v in by.items() if "voxel groups" in c]
    assert len(groups) == 2 and all(v["verdict"] == "contradicted" for v in groups)
    assert all(v["baseline"].endswith("spectral") for v in groups)
    transfer = by["router-only fine-tuning transfers to a new subject (25 training rows)"]
    assert transfer["verdict"] == "reproduced"
    assert transfer["baseline"] == "new subject 25 rows scratch"  # the stronger one
    assert len(by) == 6


def test_not_flat_is_never_decisive_and_losses_contradict(mb):
    out = mb.verdicts(_doc(moe=0.3, ridge=0.4, flat=0.8))
    assert out[0]["verdict"] == "contradicted" and not out[0]["converged"]
    assert not any(v["decisive"] for v in out)


def test_stored_verdicts_follow_the_rule(mb):
    for name in ("more_brain_quick.json", "more_brain.json"):
        path = BENCH / "more_brain" / "results" / name
        if not path.is_file():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["verdicts"] == [mb.verdict_entry(**v) for v in mb.verdicts(doc)]


def test_flat_rule_ignores_one_validation_sentence(mb):
    def curve(values):
        return [[100 * (i + 1), v] for i, v in enumerate(values)]

    plateau = [0.1, 0.3, 0.5, *[0.56] * 16]
    assert mb.flat(curve([*plateau, 0.56 + 1 / 150]))
    assert not mb.flat(curve([*plateau, 0.56 + 2 / 150]))
    # at a transfer-sized top-1 one sentence is 10 % relative, still no gain
    assert mb.flat(curve([0.02] * 16 + [0.02 + 1 / 150] * 4))
    assert not mb.flat(curve([0.01 * i for i in range(20)]))

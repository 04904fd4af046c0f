"""benchmarks/cogamid/long.py at toy size (issue 45 item 5): the flatness criterion, a
partial run and its resume, the per-seed rows and the verdict rule."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("cogamid/long.py", "cogamid_long_under_test") as mod:
        yield mod


def test_flat_criterion(bench):
    rising = [[10 * i, 0.1 * i] for i in range(1, 11)]
    assert not bench.flat(rising)
    assert bench.flat(rising, "early_stop")
    plateau = [[10 * i, min(0.5, 0.1 * i)] for i in range(1, 11)]
    assert bench.flat(plateau)
    assert not bench.flat([[10, 0.3]])


def test_toy_run_resume_and_verdicts(bench, tmp_path, monkeypatch):
    size = {
        **bench.QUICK,
        "n_classes": 4,
        "image_size": 16,
        "n_train": 4,
        "n_val": 2,
        "n_test": 2,
        "width": 4,
        "feature_dim": 4,
        "base_steps": 2,
        "base_eval_every": 1,
        "increment_steps": 2,
        "eval_every": 1,
    }
    monkeypatch.setattr(bench, "QUICK", size)
    path = tmp_path / "toy.json"
    methods = ["finetune", "prototype", "gmm"]
    args = ["--quick", "--threads", "1", "--json", str(path), "--methods", *methods]
    assert bench.main([*args, "--seeds", "1"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and set(doc["runs"]) == {"0"}
    # one seed: only the claims on the methods run, none testable
    assert len(doc["verdicts"]) == 3
    assert all(v["verdict"] == "not decided" and v["p_value"] is None for v in doc["verdicts"])
    seconds0 = doc["runs"]["0"]["seconds"]
    assert bench.main([*args, "--seeds", "2", "--resume"]) == 0
    doc = json.loads(path.read_text())
    assert set(doc["runs"]) == {"0", "1"} and doc["runs"]["0"]["seconds"] == seconds0
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    for m in methods:
        assert (m, "miou_all_last seed 1") in rows and (m, "converged_fraction") in rows
        assert (f"{m}/step1", "miou_old") in rows
    assert len(doc["runs"]["1"]["curves"]["gmm"]) == 1  # step 1 of 3-1 on 4 classes
    assert all(v["seeds"] == 2 for v in doc["verdicts"])
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before
    assert bench.main(["--rows-only", str(path)]) == 0
    assert json.loads(path.read_text())["rows"] == doc["rows"]


def test_verdict_rule_on_stored_rows(bench):
    seeds = list(range(5))
    rows = [{"case": "base", "metric": "converged_fraction", "value": 1.0}]
    for i, m in enumerate(bench.METHODS):
        rows.append({"case": m, "metric": "converged_fraction", "value": 1.0})
        for metric in ("miou_all_last", "miou_old_last"):
            rows.append({"case": m, "metric": metric, "value": 0.1 * i})
            for s in seeds:
                v = 0.1 * i + 0.01 * ((s * (i + 1)) % 3)
                rows.append({"case": m, "metric": f"{metric} seed {s}", "value": v})
    doc = {"machine": {"seeds": seeds}, "runs": {str(s): {} for s in seeds}, "rows": rows}
    out = bench.verdicts(doc)
    assert len(out) == len(bench.CLAIMS)
    first = out[0]  # gmm (index 2) above finetune (index 0) on every seed
    assert first["verdict"] == "reproduced" and first["decisive"] and first["seeds"] == 5
    doc["runs"] = {"0": {}, "1": {}, "2": {}}
    few = bench.verdicts(doc)
    assert all(not v["decisive"] and v["seeds"] == 3 for v in few)

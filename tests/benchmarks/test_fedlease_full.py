"""benchmarks/fedlease/full.py at toy size: a run in pieces, its resume, the rows, the
learning curves and the verdict rules (issue 46 item 3)."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fedlease/full.py", "fedlease_full_under_test") as mod:
        yield mod


def test_clustering_verdict_rule(bench):
    v = bench.clustering_verdict([0.9, 0.95, 0.85, 1.0], [5, 5, 4, 5], 5, converged=True)
    assert v["verdict"] == "reproduced" and v["decisive"] and "3 of 4 seeds" in v["why"]
    v = bench.clustering_verdict([0.0, -0.1, 0.05, 0.1], [2, 2, 2, 3], 5, converged=False)
    assert v["verdict"] == "contradicted" and not v["decisive"] and v["p_value"] < 0.05
    v = bench.clustering_verdict([0.1, 0.9, 0.3, 0.8], [2, 5, 3, 5], 5, converged=True)
    assert v["verdict"] == "not decided" and not v["decisive"]
    v = bench.clustering_verdict([1.0, 1.0], [5, 5], 5, converged=True)  # no spread
    assert v["verdict"] == "reproduced" and v["p_value"] == 0.0


def test_alpha_override_is_a_setting(bench, tmp_path):
    path = tmp_path / "a.json"
    args = ["--quick", "--json", str(path), "--max-hours", "0", "--cache", str(tmp_path)]
    assert bench.main([*args, "--alpha", "100"]) == 0
    assert json.loads(path.read_text())["machine"]["settings"]["alpha"] == 100.0
    with pytest.raises(SystemExit, match="other settings"):
        bench.main([*args, "--resume"])
    with pytest.raises(SystemExit, match="alpha"):
        bench.main([*args, "--alpha", "0"])


def test_verdicts_need_two_complete_seeds(bench):
    doc = {"machine": {"seeds": [0, 1]}, "rows": []}
    assert bench.verdicts(doc) == []


def test_toy_run_in_pieces_resume_and_verdicts(bench, tmp_path):
    pytest.importorskip("transformers")
    path = tmp_path / "full.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "h")]
    assert bench.main([*args, "--seeds", "1", "--max-hours", "0"]) == 0  # starts no unit
    doc = json.loads(path.read_text())
    assert doc["runs"] == {} and doc["complete"] is False and doc["verdicts"] == []
    assert bench.main([*args, "--seeds", "1", "--resume"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and doc["verdicts"] == []  # one seed: no paired test
    assert sorted(doc["runs"]) == sorted(f"seed=0/{m}" for m in bench.UNITS)
    first = doc["runs"]["seed=0/fedlease"]
    assert bench.main([*args, "--seeds", "2", "--resume", "--plots", str(tmp_path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and doc["runs"]["seed=0/fedlease"] == first
    n = len(bench.UNITS)
    assert [p["units"] for p in doc["machine"]["pieces"]] == [0, n, n]
    assert (tmp_path / "fedlease_full_quick_curves.png").is_file()
    s = doc["machine"]["settings"]
    for m in bench.METHODS:
        r = doc["runs"][f"seed=1/{m}"]
        assert isinstance(r["converged"], bool) and 1 <= r["rounds"] <= s["max_rounds"]
        assert len(r["curve"]) == r["rounds"] + 1 and len(r["accuracy"]) == 6
        assert r["bytes_down"] > 0 and r["bytes_up"] > 0 and r["excluded"] == 0
    for k, m in ((1, "fedlease_top1"), (2, "fedlease_top2")):
        used = doc["runs"][f"seed=1/{m}"]["experts_used"]
        M = doc["runs"][f"seed=1/{m}"]["M"]
        assert used["query"] == used["value"] == min(k, M)
    assert doc["runs"]["seed=1/fedlease_oracle"]["ari"] == 1.0
    sweep = doc["runs"]["seed=0/warmup_sweep"]["sweep"]
    assert sorted(sweep) == sorted(f"alpha={c[0]}/{c[1]}/epochs={c[3]}" for c in bench.SWEEP)
    assert all(set(d) == {"B", "B_query", "B_value", "head"} for d in sweep.values())
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    assert ("fedlease seed 1", "ARI vs true tasks") in rows and ("run", "seeds done") in rows
    assert ("fedlease", "bytes down per round") in rows
    assert ("sweep alpha=1.0/sgd/epochs=2 B", "ari") in rows
    claims = [v["claim"] for v in doc["verdicts"]]
    assert len(claims) == 10 and claims[0].startswith("B-matrix clustering")
    assert all(v["seeds"] == 2 for v in doc["verdicts"])
    # the verdicts are a rule of the rows: --verdicts-only rewrites the same ones
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before

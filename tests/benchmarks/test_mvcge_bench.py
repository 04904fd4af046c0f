"""benchmarks/mvcge/run.py at toy size: the flatness criterion, a partial run and its resume,
and the verdict rule (issue 45 item 4)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("mvcge/run.py", "mvcge_run_under_test") as mod:
        yield mod


def test_flat_criterion(bench):
    # the best of the last 20 % is not 1 % below the best before: flat
    assert bench.flat([1.0, 0.8, 0.7, 0.6, 0.55, 0.5, 0.5, 0.5, 0.5, 0.499])
    # still falling in the last 20 %: not flat
    assert not bench.flat([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3])
    assert not bench.flat([0.5])


def test_toy_run_resume_and_verdicts(bench, tmp_path):
    path = tmp_path / "toy.json"
    args = ["--seeds", "2", "--max-steps", "3", "--num-nodes", "80", "--threads", "1"]
    args += ["--json", str(path)]
    assert bench.main([*args, "--settings", "complementary"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is False  # the consistent setting has not run
    assert set(doc["runs"]) == {"complementary"}
    # resume: the complementary seeds are kept, the consistent ones added
    assert bench.main([*args, "--resume"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and set(doc["runs"]) == {"complementary", "consistent"}
    claims = [v["claim"] for v in doc["verdicts"]]
    assert len(claims) == 8 and all(v["seeds"] == 2 for v in doc["verdicts"])
    assert sum("consistent" in c for c in claims) == 2  # ablations only on complementary
    # the per-seed rows behind the paired tests
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    assert ("complementary MvCGE", "test_accuracy seed 1") in rows
    assert ("consistent per-view GCN ensemble", "test_accuracy seed 0") in rows
    assert set(doc["curves"]["complementary"]["MvCGE"]) == {"0", "1"}
    # the rule re-derives the same verdicts from the stored rows
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_toy_run_on_cuda(bench, tmp_path):
    path = tmp_path / "toy.json"
    args = ["--seeds", "1", "--max-steps", "3", "--num-nodes", "80", "--threads", "1"]
    args += ["--json", str(path), "--settings", "complementary", "--device", "cuda"]
    assert bench.main(args) == 0
    doc = json.loads(path.read_text())
    assert doc["machine"]["device"] == "cuda"
    methods = doc["runs"]["complementary"]["0"]["methods"]
    assert all(0 <= r["test_accuracy"] <= 1 for r in methods.values())
    assert 0 <= methods["MvCGE"]["usage_entropy"]  # the diagnostics ran on the GPU graph

"""benchmarks/graph_merging/run.py at toy size: the flatness criterion, a partial run and its
resume, the per-seed rows and the verdict rule (issue 45 item 3)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.benchmarks.conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("graph_merging/run.py", "graph_merging_run_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def helper():
    with load_benchmark(
        "graph_merging/_graph_merging.py", "graph_merging_helper_under_test"
    ) as mod:
        yield mod


def _curve(values):
    return [[50 * (i + 1), v] for i, v in enumerate(values)]


def test_flat_criterion(bench):
    # sci_moe.train.is_flat on the validation AUC: the last 20 % of the steps gain less
    # than 1 % (relative) over the best before, with at least five evaluations
    assert bench.flat(_curve([0.6, 0.7, 0.75, 0.78, 0.8, 0.8, 0.801, 0.8, 0.802, 0.803]))
    assert not bench.flat(_curve([0.6, 0.65, 0.7, 0.72, 0.74, 0.76, 0.78, 0.8, 0.82, 0.84]))
    assert not bench.flat(_curve([0.7, 0.71, 0.71]))  # too few evaluations
    assert not bench.flat(_curve([0.7]))


def test_rejudge_updates_flags_rows_and_verdicts(bench):
    path = BENCH / "graph_merging" / "results" / "graph_merging_quick.json"
    doc = json.loads(path.read_text())
    again = bench.rejudge(json.loads(path.read_text()))
    assert again == doc  # the stored file is judged by the current rule
    assert doc["machine"]["flat_rule"].startswith("sci_moe.train.is_flat")
    # a pre-training curve still rising: its flag, its row and every verdict on it follow
    doc["curves"]["pretrain"]["0"] = [[50 * i, 0.5 + 0.05 * i] for i in range(1, 7)]
    bench.rejudge(doc)
    assert doc["runs"]["0"]["converged"]["pretrain"] is False
    rows = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    assert rows[("pretrain", "converged_fraction")] == pytest.approx(2 / 3)
    assert not any(v["converged"] or v["decisive"] for v in doc["verdicts"])


def test_toy_run_resume_and_verdicts(bench, helper, tmp_path):
    path = tmp_path / "toy.json"
    args = ["--max-steps", "2", "--nodes", "30", "40", "--threads", "1", "--json", str(path)]
    assert bench.main([*args, "--seeds", "1"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and set(doc["runs"]) == {"0"}
    # resume with two seeds: seed 0 kept (not rerun), seed 1 added
    seconds0 = doc["runs"]["0"]["seconds"]
    assert bench.main([*args, "--seeds", "2", "--resume"]) == 0
    doc = json.loads(path.read_text())
    assert set(doc["runs"]) == {"0", "1"} and doc["runs"]["0"]["seconds"] == seconds0
    assert len(doc["verdicts"]) == len(helper.CLAIMS)
    assert all(v["seeds"] == 2 and v["p_value"] is not None for v in doc["verdicts"])
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    for s in bench.STRATS:
        assert (f"unseen {s}", "auc seed 1") in rows
    assert ("unseen adamic_adar", "auc") in rows and ("pretrain", "converged_fraction") in rows
    assert ("unseen ba", "auc family expert") in rows
    assert set(doc["curves"]["pretrain"]) == {"0", "1"} and doc["curves"]["kdem"]["1"]
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before


def test_specialised_families_and_the_specialisation_check(bench, tmp_path):
    path = tmp_path / "families.json"
    args = ["--max-steps", "2", "--nodes", "30", "40", "--threads", "1", "--json", str(path)]
    assert bench.main([*args, "--seeds", "2", "--families", "specialised"]) == 0
    doc = json.loads(path.read_text())
    fams = list(bench.FAMILY_SETS["specialised"])
    assert doc["machine"]["families"] == fams and doc["machine"]["model"]["num_experts"] == 4
    assert all(len(r["specialisation_auc"]) == len(fams) for r in doc["runs"].values())
    rows = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    wins = rows[("specialisation", "family expert wins fraction")]
    per_family = [rows[(f"unseen {f}", "family expert wins")] for f in fams]
    assert wins == pytest.approx(sum(per_family) / len(fams))
    assert rows[("specialisation", "target")] == bench.SPECIALISATION_TARGET
    assert rows[("specialisation", "target met")] == float(wins >= bench.SPECIALISATION_TARGET)
    assert all("(family, seed) pairs" in v["why"] for v in doc["verdicts"])
    # the rows are rebuilt with the stored families
    assert bench.main(["--rows-only", str(path)]) == 0
    again = {(r["case"], r["metric"]): r["value"] for r in json.loads(path.read_text())["rows"]}
    assert again == rows


def test_specialisation_only(bench, tmp_path, capsys):
    args = ["--max-steps", "2", "--nodes", "30", "40", "--threads", "1", "--seeds", "1"]
    path = tmp_path / "none.json"
    assert bench.main([*args, "--families", "specialised", "--specialisation-only"]) == 0
    out = capsys.readouterr().out
    assert "heterophily_quiet" in out and "(family, seed) pairs (target 80%" in out
    assert not path.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_toy_run_on_cuda_resumes_a_cpu_run(bench, tmp_path):
    path = tmp_path / "toy.json"
    args = ["--max-steps", "2", "--nodes", "30", "40", "--threads", "1", "--json", str(path)]
    assert bench.main([*args, "--seeds", "1"]) == 0  # the default: the CPU
    assert json.loads(path.read_text())["machine"]["device"] == "cpu"
    # the device is no setting of the run: a CPU run continues on the GPU
    assert bench.main([*args, "--seeds", "2", "--resume", "--device", "cuda"]) == 0
    doc = json.loads(path.read_text())
    assert set(doc["runs"]) == {"0", "1"} and doc["machine"]["device"] == "cuda"
    u = doc["runs"]["1"]["metrics"]["unseen"]
    assert all(0 <= u[s]["auc"] <= 1 for s in bench.STRATS)

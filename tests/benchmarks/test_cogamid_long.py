"""benchmarks/cogamid/long.py at toy size (issue 45 item 5): the flatness criterion, a
partial run and its resume, the per-seed rows and the verdict rule."""

from __future__ import annotations

import json

import pytest
import torch

from tests.benchmarks.conftest import load_benchmark, refused


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("cogamid/long.py", "cogamid_long_under_test") as mod:
        yield mod


def test_flat_criterion(bench):
    rising = [[10 * i, 0.1 * i] for i in range(1, 11)]
    assert not bench.flat(rising)
    assert not bench.flat(rising, "early_stop")  # a patience stop is not enough
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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_toy_run_on_cuda_resumes_a_cpu_run(bench, tmp_path, monkeypatch):
    size = {
        **bench.QUICK,
        **dict(n_classes=4, image_size=16, n_train=4, n_val=2, n_test=2, width=4),
        **dict(feature_dim=4, base_steps=2, base_eval_every=1, increment_steps=2),
        "eval_every": 1,
    }
    monkeypatch.setattr(bench, "QUICK", size)
    path = tmp_path / "toy.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--methods", "prototype", "gmm"]
    assert bench.main([*args, "--seeds", "1"]) == 0
    # the device is not compared on --resume: a CPU run continues on the GPU
    assert bench.main([*args, "--seeds", "2", "--resume", "--device", "cuda"]) == 0
    doc = json.loads(path.read_text())
    assert set(doc["runs"]) == {"0", "1"} and doc["machine"]["device"] == "cuda"
    steps = doc["runs"]["1"]["methods"]["gmm"]
    assert all(0 <= s["miou_all"] <= 1 for s in steps)


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


#: Planned validation mIoU per optimiser step ``s`` of a fit (the fakes' curves): level
#: from step ``p`` on, or rising to the end.
def _plateau(p):
    return lambda s: 0.05 * min(s, p)


def _rising(s):
    return 0.05 * s


def test_an_unflat_fit_trains_on_to_flat_or_its_cap_and_records_it(bench, tmp_path, monkeypatch):
    """Real toy fits on the engine with planned validation curves: a fit still rising at its
    minimum trains on until its curve is flat (or to the cap, recorded as not flat); a fit
    flat at its minimum stops there; steps and flat flags land in the rows."""
    import importlib

    cg_train = importlib.import_module("sci_moe.vision.cogamid.train")
    size = {
        **bench.QUICK,
        "n_classes": 4,
        "image_size": 16,
        "n_train": 4,
        "n_val": 2,
        "n_test": 3,
        "width": 4,
        "feature_dim": 4,
        "base_steps": 4,
        "base_eval_every": 1,
        "increment_steps": 5,
        "eval_every": 1,
        "max_steps_factor": 4,
    }
    monkeypatch.setattr(bench, "QUICK", size)
    plan = {"base": _plateau(6), "finetune": _plateau(2), "gmm": _plateau(8), "prototype": _rising}
    now = {"curve": None, "evals": 0}

    def fake_evaluate(model, x, m, tasks, t):
        if len(x) == size["n_val"]:  # a validation evaluation: one per step (eval_every 1)
            now["evals"] += 1
            v = now["curve"](now["evals"])
        else:  # the test images, scored after a fit: the next fit starts counting afresh
            now["evals"], v = 0, 0.5
        return {"miou_all": v, "miou_old": v, "miou_new": v, "miou_base": v}

    real = bench.run_incremental

    def run_incremental(cfg, stop_after=None, start_state=None):
        assert cfg.patience == 0 and cfg.stop_when_flat == 0.01 and cfg.flat_tail == 0.2
        if start_state is None:  # the base fit: minimum 4, cap 16
            assert (cfg.steps, cfg.flat_min_steps) == (16, 4)
            now["curve"] = plan["base"]
        else:
            assert (cfg.increment_steps, cfg.flat_min_steps) == (20, 5)
            now["curve"] = plan[cfg.method]
        return real(cfg, stop_after=stop_after, start_state=start_state)

    monkeypatch.setattr(cg_train, "_evaluate", fake_evaluate)
    monkeypatch.setattr(bench, "run_incremental", run_incremental)
    path = tmp_path / "flat.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--seeds", "2"]
    assert bench.main([*args, "--methods", "finetune", "prototype", "gmm"]) == 0
    doc = json.loads(path.read_text())
    rows = {(r["case"], r["metric"]): r["value"] for r in doc["rows"]}
    # base: level from step 6, first flat evaluation at 8 (> its minimum 4)
    # finetune: level from step 2, flat at its minimum 5 (five evaluations)
    # gmm: level from step 8, flat at 10; prototype: rising, at its cap 20, not flat
    expect = {"base": (8, 1), "finetune/step1": (5, 1), "gmm/step1": (10, 1)}
    expect["prototype/step1"] = (20, 0)
    for case, (steps, is_flat) in expect.items():
        for s in (0, 1):
            assert rows[(case, f"steps seed {s}")] == steps
            assert rows[(case, f"flat seed {s}")] == is_flat
    for s in ("0", "1"):
        curves = doc["runs"][s]["curves"]
        assert curves["base"]["reason"] == "flat" and curves["gmm"][0]["reason"] == "flat"
        assert curves["prototype"][0]["reason"] == "completed"  # the cap
        assert [e[0] for e in curves["gmm"][0]["evals"]] == list(range(1, 11))
    assert rows[("prototype", "capped_fraction")] == 1.0
    assert rows[("prototype", "converged_fraction")] == 0.0
    assert rows[("gmm", "capped_fraction")] == 0.0 and rows[("gmm", "converged_fraction")] == 1.0
    assert rows[("base", "capped_fraction")] == 0.0 and rows[("base", "max_steps")] == 8
    assert doc["machine"]["plan"] == bench.plan(size)
    assert doc["machine"]["plan"]["increment_max_steps"] == 20
    by_claim = {v["claim"]: v for v in doc["verdicts"]}
    assert "not trained to convergence" in by_claim[bench.CLAIMS[1][0]]["why"]  # prototype
    assert "not trained" not in by_claim[bench.CLAIMS[0][0]]["why"]  # gmm vs finetune


def test_resume_refuses_another_plan(bench, tmp_path, capsys):
    path = tmp_path / "old.json"
    machine = {"methods": list(bench.METHODS), "quick": False, "seeds": [0]}
    path.write_text(json.dumps({"machine": machine, "runs": {}, "rows": []}))
    with refused(capsys, "none stored: a fixed-step run"):
        bench.main(["--json", str(path), "--resume", "--seeds", "1"])
    with refused(capsys, r"old.json was written with other settings \(quick: False -> True\)"):
        bench.main(["--quick", "--json", str(path), "--resume", "--seeds", "1"])
    machine["plan"] = bench.plan(bench.FULL)
    path.write_text(json.dumps({"machine": machine, "runs": {}, "rows": []}))
    plan_diff = r"\(base_max_steps: 4800 -> 2400; increment_max_steps: 1200 -> 600\)"
    with refused(capsys, "another training plan " + plan_diff):
        bench.main(["--json", str(path), "--resume", "--max-steps-factor", "2"])
    with pytest.raises(SystemExit):
        bench.main(["--max-steps-factor", "0"])

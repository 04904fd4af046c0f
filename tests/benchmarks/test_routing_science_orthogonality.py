"""benchmarks/routing_science/orthogonality.py at toy size (issue 44 item 3): the shipped
configurations, a fine-tune rerun through ``sci-moe train lm``, the cycles' curve, a run
in pieces equal to one in one go, the JSON's structure and the verdict rule."""

from __future__ import annotations

import json

import pytest

from .conftest import BENCH, load_benchmark, refused

TIMES = ("seconds", "step_ms")
ENV = {"threads": 1, "device": None}


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("routing_science/orthogonality.py", "routing_science_orth") as mod:
        yield mod


@pytest.fixture(scope="module")
def helper():
    with load_benchmark("routing_science/_orthogonality.py", "routing_science_orth_helper") as mod:
        yield mod


@pytest.fixture
def toy(bench, monkeypatch):
    """The quick plan made smaller still (a few steps, 10 probe texts per class)."""
    size = dict(
        bench.QUICK, pretrain_steps=6, pretrain_eval=3, ft_steps=4, ft_eval=2, probe_per_class=10
    )
    monkeypatch.setattr(bench, "QUICK", size)
    return json.loads(json.dumps(size))


def test_shipped_configs_are_the_full_runs(bench, tmp_path):
    from sci_moe.language import LMConfig

    tomllib = pytest.importorskip("tomllib")
    p = json.loads(json.dumps(bench.FULL))
    files = bench.files_dir(bench.CONFIGS.parent / "results" / f"{bench.BENCHMARK}.json")
    written = bench.write_configs(p, tmp_path, files)
    shipped = BENCH / "routing_science" / "configs"
    assert sorted(q.name for q in written) == sorted(
        q.name for q in shipped.glob("orthogonality_*.toml")
    )
    assert len(written) == 1 + len(p["ortho"]) * len(p["var"]) >= 10  # pretraining + 3 x 3
    for path in written:
        assert (shipped / path.name).read_text() == path.read_text()
        LMConfig(**tomllib.loads(path.read_text())).model_config()
    assert ("orthogonality_o0_v0.toml" in {q.name for q in written}) and 0.0 in p["ortho"]


def test_cli_config_reruns_a_fine_tune(bench, toy, tmp_path):
    """``sci-moe train lm --config`` of a grid point: the benchmark's fine-tuning curve."""
    from sci_moe.cli.main import main
    from sci_moe.language import load_corpus, text_corpus

    pytest.importorskip("tomllib")
    files = tmp_path / "files"
    files.mkdir()
    (files / "lee_news.txt").write_text(bench.news_text(), encoding="utf-8")
    pre = bench.train_keys(toy, "pretrain")
    bench.one_cycle(pre, 0, ENV, load_corpus(), None, files / "pretrained.pt")
    configs = bench.write_configs(toy, tmp_path / "c", files)
    cfg = next(c for c in configs if c.name == "orthogonality_o0.01_v1.toml")
    out = tmp_path / "run"
    assert main(["train", "lm", "--config", str(cfg), "--seed", "1", "--out", str(out)]) == 0
    got = json.loads((out / "results.json").read_text())
    news = text_corpus(bench.news_text(), name="lee_news")
    keys = bench.train_keys(toy, "ft", 0.01, 1.0)
    rec, _, _ = bench.one_cycle(keys, 1, ENV, news, files / "pretrained.pt", None)
    assert got["val"]["loss"] == pytest.approx(rec["val_loss"][-1], rel=1e-6)


def test_cycles_form_one_curve(bench):
    cycles = [
        {"step": [0, 5, 10], "val_loss": [5.0, 3.0, 2.0]},
        {"step": [0, 5, 10], "val_loss": [2.0, 2.1, 1.99]},
    ]
    steps, loss = bench.cycles_curve(cycles)
    assert steps == [0, 5, 10, 15, 20] and loss == [5.0, 3.0, 2.0, 2.1, 1.99]
    assert bench.flat(steps, loss)  # 0.5 % better over the last fifth


def _strip(runs):
    """The units without their wall-clock fields."""
    if isinstance(runs, dict):
        return {k: _strip(v) for k, v in runs.items() if k not in TIMES}
    if isinstance(runs, list):
        return [_strip(v) for v in runs]
    return runs


def test_pieces_equal_one_go(bench, helper, toy, tmp_path):
    one = tmp_path / "one.json"
    assert bench.main(["--quick", "--threads", "1", "--json", str(one)]) == 0
    doc = json.loads(one.read_text())
    assert doc["complete"] is True and doc["benchmark"] == bench.BENCHMARK
    n_grid = len(toy["ortho"]) * len(toy["var"])
    assert len(doc["runs"]["finetune"]) == n_grid * toy["seeds"]
    assert set(doc["runs"]["reference"]) == {"pretrained", "bytes"}
    assert (one.parent / "one_files" / "pretrained.pt").is_file()
    keys = {"claim", "verdict", "decisive", "why", "metric", "ours", "baseline"}
    assert len(doc["verdicts"]) == 5 and all(keys <= set(v) for v in doc["verdicts"])
    assert all(v["baseline"] == helper.BASELINE and v["seeds"] == 2 for v in doc["verdicts"])
    metrics = {(r["case"], r["metric"]) for r in doc["rows"]}
    for m in (*bench.METRICS, "converged", "probe_topic", "probe_sentiment"):
        assert ("o0.01_v1", f"{m} seed 1") in metrics and ("o0_v0", m) in metrics
    assert ("bytes", "probe_acc") in metrics and ("pretrain", "converged") in metrics
    assert {("pretrained", m) for m in (*bench.DIAG, "val_loss", "probe_acc")} <= metrics

    two = tmp_path / "two.json"
    base = ["--quick", "--threads", "1", "--json", str(two)]
    n_pre = len(doc["runs"]["pretrain"])  # cycles until flat (at most 2 here)
    # the pretraining cycles, the reference probes and two fine-tunes
    assert bench.main([*base, "--max-units", str(n_pre + 3)]) == 0
    part = json.loads(two.read_text())
    assert part["complete"] is False and len(part["runs"]["finetune"]) == 2
    assert part["verdicts"] == [] and ("o0_v0", "val_loss") not in {
        (r["case"], r["metric"]) for r in part["rows"]
    }
    assert bench.main([*base, "--resume"]) == 0
    resumed = json.loads(two.read_text())
    assert resumed["complete"] is True and len(resumed["machine"]["pieces"]) == 2
    assert _strip(resumed["runs"]) == _strip(doc["runs"])
    assert resumed["rows"] == doc["rows"] and resumed["verdicts"] == doc["verdicts"]
    assert bench.main(["--verdicts-only", str(two)]) == 0
    assert json.loads(two.read_text())["verdicts"] == doc["verdicts"]


def test_resume_refuses_other_weights(bench, toy, tmp_path):
    path = tmp_path / "r.json"
    base = ["--quick", "--threads", "1", "--json", str(path)]
    assert bench.main([*base, "--max-units", "1"]) == 0
    (tmp_path / "r_files" / "pretrained.pt").write_bytes(b"other")
    with pytest.raises(SystemExit, match="SHA-256"):
        bench.main([*base, "--resume"])


def test_resume_refuses_another_plan_seeds_or_device(bench, tmp_path, capsys):
    path = tmp_path / "r.json"
    plan = json.loads(json.dumps(bench.QUICK))
    seeds = list(range(plan["seeds"]))
    machine = {"plan": dict(plan, ft_steps=plan["ft_steps"] + 1), "seeds": seeds, "device": "cpu"}
    path.write_text(json.dumps({"machine": machine, "runs": {}}))
    base = ["--quick", "--threads", "1", "--json", str(path), "--resume"]
    with refused(capsys, r"r.json was written with other settings \(plan.ft_steps: "):
        bench.main(base)  # nothing trained: the check comes first
    machine.update(plan=plan, seeds=[s + 1 for s in seeds])
    path.write_text(json.dumps({"machine": machine, "runs": {}}))
    with refused(capsys, r"other settings \(seeds: \[1, "):
        bench.main(base)


def _doc(val_loss: dict, pre: float = 1.0) -> dict:
    """Rows of five seeds: ``val_loss`` per case as given (plus a case-specific jitter),
    overlap 0.05 lower off the baseline, the other metrics equal everywhere."""
    rows = [{"case": "pretrain", "metric": "converged", "value": pre}]
    for i, (case, loss) in enumerate(val_loss.items()):
        rows.append({"case": case, "metric": "converged", "value": 1.0})
        per_seed = {
            "val_loss": [loss + 0.001 * s * (i + 1) for s in range(5)],
            "overlap": [0.2 - 0.05 * (case != "o0_v0") + 0.001 * s * i for s in range(5)],
            "score_variance": [0.05] * 5,
            "max_violation": [0.3] * 5,
            "probe_acc": [0.6] * 5,
        }
        for metric, vals in per_seed.items():
            rows.append({"case": case, "metric": metric, "value": sum(vals) / 5})
            rows += [
                {"case": case, "metric": f"{metric} seed {s}", "value": v}
                for s, v in enumerate(vals)
            ]
    return {"machine": {"seeds": [0, 1, 2, 3, 4]}, "rows": rows}


def test_best_point_has_both_losses_on(helper):
    # a one-loss ablation with the lowest loss does not stand in for L_o + L_v
    doc = _doc({"o0_v0": 2.0, "o0.01_v1": 1.9, "o0_v1": 1.8, "o0.01_v0": 1.7})
    assert helper.best_point(doc) == "o0.01_v1"
    assert helper.best_point(_doc({"o0_v0": 2.0, "o0_v1": 1.8})) is None


def test_verdict_rule(bench, helper):
    doc = _doc({"o0_v0": 2.0, "o0.01_v1": 1.9, "o0_v1": 1.95})
    assert helper.best_point(doc) == "o0.01_v1"
    out = {v["metric"]: v for v in bench.verdicts(doc)}
    assert set(out) == set(bench.METRICS)
    # equal on every seed: no gain at all, so below the smallest claimable gain
    assert out["probe_acc"]["verdict"] == "contradicted"
    assert out["val_loss"]["verdict"] == "reproduced" and out["val_loss"]["decisive"]
    assert out["overlap"]["verdict"] == "reproduced" and out["overlap"]["baseline"] == "o0_v0"
    assert "o0.01_v1" in out["overlap"]["why"]
    # the pretraining not flat: nothing is decisive
    late = _doc({"o0_v0": 2.0, "o0.01_v1": 1.9}, pre=0.0)
    assert not any(v["decisive"] for v in bench.verdicts(late))
    assert bench.verdicts({"machine": {"seeds": [0]}, "rows": []}) == []

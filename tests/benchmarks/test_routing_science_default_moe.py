"""benchmarks/routing_science/default_moe.py at toy size (issue 44 item 2): the shipped
configurations, a rerun through ``sci-moe train lm``, a run in pieces equal to one in one
go, the rows and the verdict rule."""

from __future__ import annotations

import json

import pytest

from .conftest import BENCH, load_benchmark, refused

TOY = dict(seeds=2, steps=8, eval_interval=4, eval_batches=1, corpus_bytes=20_000, configs=[[8, 2]])


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("routing_science/default_moe.py", "routing_science_default_moe") as mod:
        yield mod


@pytest.fixture
def toy(bench, monkeypatch):
    full = bench.plan

    def plan(quick):
        return json.loads(json.dumps(TOY)) if quick else full(quick)

    monkeypatch.setattr(bench, "plan", plan)
    return json.loads(json.dumps(TOY))


def test_shipped_configs_are_the_full_runs(bench, tmp_path):
    from sci_moe.language import LMConfig

    tomllib = pytest.importorskip("tomllib")
    p = bench.plan(False)
    files = bench.files_dir(bench.CONFIGS.parent / "results" / f"{bench.BENCHMARK}.json")
    written = bench.write_configs(p, tmp_path, files)
    shipped = BENCH / "routing_science" / "configs"
    assert sorted(q.name for q in written) == sorted(
        q.name for q in shipped.glob("default_moe_*.toml")
    )
    assert len(written) == 2 * len(p["configs"]) >= 4
    for path in written:
        assert (shipped / path.name).read_text() == path.read_text()
        cfg = LMConfig(**tomllib.loads(path.read_text()))
        assert cfg.default_moe == path.stem.endswith("default")
        assert cfg.text_file.endswith(bench.CORPUS_FILE)


def test_cli_config_reruns_a_training(bench, toy, tmp_path):
    """``sci-moe train lm --config`` of a toy configuration: the benchmark's training."""
    from sci_moe.cli.main import main

    pytest.importorskip("tomllib")
    args = ["--quick", "--json", str(tmp_path / "x.json"), "--write-configs", str(tmp_path / "c")]
    assert bench.main(args) == 0
    cfg = tmp_path / "c" / "default_moe_8c2_default.toml"
    text = (tmp_path / "x_files" / bench.CORPUS_FILE).read_text()
    assert len(text) == TOY["corpus_bytes"]
    out = tmp_path / "run"  # (the configuration's text_file is absolute here)
    assert main(["train", "lm", "--config", str(cfg), "--seed", "1", "--out", str(out)]) == 0
    got = json.loads((out / "results.json").read_text())
    rec = bench.one_run(toy, 8, 2, "default", 1, bench.corpus_of(toy))
    assert got["val"]["loss"] == pytest.approx(rec["val_loss"][-1], rel=1e-6)


def _strip(doc: dict) -> list:
    return [r for r in doc["rows"] if r["metric"] != "step_time"]


def test_pieces_equal_one_go(bench, toy, tmp_path, capsys):
    one = tmp_path / "one.json"
    assert bench.main(["--quick", "--threads", "1", "--json", str(one)]) == 0
    two = tmp_path / "two.json"
    args = ["--quick", "--threads", "1", "--json", str(two)]
    assert bench.main([*args, "--max-hours", "0"]) == 0  # stops before the first training
    assert not two.exists()
    state = json.loads(two.with_suffix(".state.json").read_text())
    assert set(state) == {"plan"}
    assert bench.main([*args, "--resume"]) == 0
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert _strip(a) == _strip(b)
    assert a["verdicts"] == b["verdicts"]
    metrics = {(r["case"], r["metric"]) for r in a["rows"]}
    for key in (
        ("8c2", "floor"),
        ("8c2", "oracle_rate"),
        ("8c2", "target_loss"),
        ("8c2/default", "val_loss p_t"),
        ("8c2/default", "tokens_to_target seed 1"),
        ("8c2/top-k", "router_grad_density_early"),
        ("8c2/default", "excess"),
    ):
        assert key in metrics
    floor = next(r["value"] for r in a["rows"] if r["metric"] == "floor")
    oracle = next(r["value"] for r in a["rows"] if r["metric"] == "oracle_rate")
    assert 0 < oracle < floor
    dens = {r["case"]: r["value"] for r in a["rows"] if r["metric"] == "router_grad_density"}
    assert dens["8c2/default"] > 0.99 and dens["8c2/top-k"] < 0.3  # k/E = 0.25 for Top-K
    assert len(a["verdicts"]) == 3
    assert set(a["machine"]["curves"]["8c2"]) == {"top-k", "default"}
    with refused(capsys, r"written with another plan \("):  # a resume with another plan
        bench.main(["--threads", "1", "--json", str(two), "--resume"])


def test_more_seeds_resume_a_stored_run(bench, toy, tmp_path, capsys):
    path = tmp_path / "grow.json"
    args = ["--quick", "--threads", "1", "--json", str(path)]
    assert bench.main(args) == 0
    state = json.loads(path.with_suffix(".state.json").read_text())
    kept = {k: v for k, v in state.items() if k != "plan"}
    assert bench.main([*args, "--resume", "--seeds", "3", "--plots", str(tmp_path / "img")]) == 0
    # the plots are named after the JSON, so a run with more seeds keeps the first run's
    assert sorted(p.name for p in (tmp_path / "img").iterdir()) == [
        "grow_curves.png",
        "grow_seeds.png",
    ]
    grown = json.loads(path.with_suffix(".state.json").read_text())
    assert all(grown[k] == v for k, v in kept.items())  # the finished trainings are kept
    assert len(grown) - 1 == len(kept) + len(bench.METHODS)  # one more seed of each method
    doc = json.loads(path.read_text())
    assert doc["machine"]["seeds"] == [0, 1, 2]
    assert any(r["metric"] == "val_loss seed 2" for r in doc["rows"])
    with refused(capsys, r"fewer than the 3 seeds"):
        bench.main([*args, "--resume", "--seeds", "2"])


def _doc(bench, flat_default=(1, 1, 1, 1, 1), default_better=True):
    seeds = [0, 1, 2, 3, 4]  # five: the fewest on which a verdict can be decisive
    rows = [{"case": "8c2", "metric": "floor", "value": 1.0}]
    base = {
        "val_loss": [1.10, 1.12, 1.11, 1.13, 1.09],
        "tokens_to_target": [9e5, 9.5e5, 9.2e5, 9.4e5, 9.1e5],
    }
    dens = {"top-k": [0.25] * 5, "default": [1.0, 0.999, 1.0, 0.998, 1.0]}
    for m in bench.METHODS:
        for metric, vals in base.items():
            if m == "default":
                vals = [v * (0.95 if default_better else 1.05) for v in vals]
            rows += [
                {"case": f"8c2/{m}", "metric": f"{metric} seed {s}", "value": v}
                for s, v in zip(seeds, vals, strict=True)
            ]
        rows += [
            {"case": f"8c2/{m}", "metric": f"router_grad_density seed {s}", "value": v}
            for s, v in zip(seeds, dens[m], strict=True)
        ]
        flats = flat_default if m == "default" else (1, 1, 1, 1, 1)
        rows += [
            {"case": f"8c2/{m}", "metric": f"converged seed {s}", "value": float(f)}
            for s, f in zip(seeds, flats, strict=True)
        ]
        rows.append({"case": f"8c2/{m}", "metric": "excess", "value": 3.0})
    return {"machine": {"seeds": seeds}, "rows": rows}


def test_verdict_rule(bench):
    v = bench.verdicts(_doc(bench))
    assert [x["verdict"] for x in v] == ["reproduced"] * 3
    assert all(x["decisive"] and x["converged"] for x in v)
    assert "exact floor" in v[0]["why"]
    v = bench.verdicts(_doc(bench, flat_default=(1, 0, 1, 1, 1)))
    assert not any(x["decisive"] for x in v) and v[0]["verdict"] == "reproduced"
    v = bench.verdicts(_doc(bench, default_better=False))
    assert [x["verdict"] for x in v[:2]] == ["contradicted"] * 2
    keys = {"claim", "verdict", "decisive", "why", "metric", "ours", "baseline", "seeds"}
    assert keys <= set(v[0]) and {"baseline_value", "p_value", "converged"} <= set(v[0])

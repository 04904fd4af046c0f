"""benchmarks/fedlease/full.py at toy size: a run in pieces, its resume, the rows, the
learning curves and the verdict rules (issue 46 item 3)."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.conftest import BENCH, load_benchmark, refused


def row_value(doc, case, metric):
    (v,) = [r["value"] for r in doc["rows"] if r["case"] == case and r["metric"] == metric]
    return v


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("fedlease/full.py", "fedlease_full_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def helpers():
    with load_benchmark("fedlease/_fedlease.py", "fedlease_helpers_under_test") as mod:
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


def test_alpha_override_is_a_setting(bench, tmp_path, capsys):
    path = tmp_path / "a.json"
    args = ["--quick", "--json", str(path), "--max-hours", "0", "--cache", str(tmp_path)]
    assert bench.main([*args, "--alpha", "100"]) == 0
    assert json.loads(path.read_text())["machine"]["settings"]["alpha"] == 100.0
    with refused(capsys, r"other settings \(alpha: 100.0 -> 1.0\)"):
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
    assert (tmp_path / "full_curves.png").is_file()  # named after --json
    s = doc["machine"]["settings"]
    assert doc["machine"]["flat_rule"] == bench.flat_rule(s)
    for m in bench.METHODS:
        r = doc["runs"][f"seed=1/{m}"]
        assert isinstance(r["converged"], bool) and 1 <= r["rounds"] <= s["max_rounds"]
        assert len(r["curve"]) == r["rounds"] + 1 and len(r["accuracy"]) == 6
        assert r["excluded"] == 0
        if m == "local":  # (d) sends nothing; the simulator's traffic kept apart
            assert r["bytes_down"] == r["bytes_up"] == 0.0
            assert r["simulator_bytes_down"] > 0 and r["simulator_bytes_up"] > 0
        else:
            assert r["bytes_down"] > 0 and r["bytes_up"] > 0
    for metric in ("bytes down per round", "bytes up per round"):
        assert row_value(doc, "local", metric) == 0.0 and row_value(doc, "fedit", metric) > 0
    # (b) the majority class: a row per seed, and the check of every method against it
    maj = doc["runs"]["seed=1/majority"]
    assert len(maj["accuracy"]) == len(maj["label"]) == 6
    assert all(0.0 <= a <= 1.0 for a in maj["accuracy"])
    assert row_value(doc, "majority seed 1", "mean client accuracy") == pytest.approx(
        sum(maj["accuracy"]) / 6
    )
    assert sorted(doc["beats_trivial"]) == sorted(bench.METHODS)
    assert all(isinstance(c["beats"], bool) for c in doc["beats_trivial"].values())
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
    assert len(claims) == 11 and claims[0].startswith("B-matrix clustering")
    assert claims[9].endswith("top-M_max") and "majority-class" in claims[10]
    assert all(v["seeds"] == 2 for v in doc["verdicts"])
    # the verdicts are a rule of the rows: --verdicts-only rewrites the same ones
    before = doc["verdicts"]
    assert bench.main(["--verdicts-only", str(path)]) == 0
    assert json.loads(path.read_text())["verdicts"] == before


# ---------------------------------------------------------------- (a) the flat rule


def test_flat_rule_waits_for_min_rounds_and_patience(helpers):
    bench = helpers
    s = bench.settings(False)
    assert s["min_rounds"] >= 30 and s["patience"] >= 3 and s["max_rounds"] > s["min_rounds"]
    first = s["min_rounds"] + s["patience"] - 1
    # flat from round 8 on: the first run's rule (one check from round 10) stopped here
    curve = [0.5 + 0.04 * min(r, 8) for r in range(1, s["max_rounds"] + 1)]
    old = dict(s, min_rounds=10, patience=1)
    assert bench.run_flat(curve[:10], old)
    assert not any(bench.run_flat(curve[:n], s) for n in range(1, first))
    assert bench.run_flat(curve[:first], s)
    # still rising by more than 1 % over the tail: never flat
    rising = [0.5 + 0.01 * r for r in range(1, s["max_rounds"] + 1)]
    assert not any(bench.run_flat(rising[:n], s) for n in range(1, len(rising) + 1))
    # patience: one gain inside the window (round first - 1) delays the stop
    bumped = curve[: first - 2] + [0.9] * 10
    assert not bench.run_flat(bumped[:first], s)
    rule = bench.flat_rule(s)
    assert f"{s['patience']} consecutive rounds from round {s['min_rounds']}" in rule
    assert f"never before round {first}" in rule and f"at most {s['max_rounds']}" in rule


def test_the_device_is_recorded_but_no_setting(bench, tmp_path):
    path = tmp_path / "d.json"
    args = ["--quick", "--json", str(path), "--max-hours", "0", "--cache", str(tmp_path)]
    assert bench.main(args) == 0
    doc = json.loads(path.read_text())
    assert doc["machine"]["device"] == "cpu" and "device" not in doc["machine"]["settings"]
    doc["machine"]["device"] = "cuda:0"  # as if started on a GPU
    path.write_text(json.dumps(doc))
    assert bench.main([*args, "--resume", "--device", "cpu"]) == 0
    assert json.loads(path.read_text())["machine"]["device"] == "cpu"


def test_warmup_optimizer_is_a_setting(bench, tmp_path, capsys):
    path = tmp_path / "w.json"
    args = ["--quick", "--json", str(path), "--max-hours", "0", "--cache", str(tmp_path)]
    assert bench.main([*args, "--warmup-optimizer", "sgd"]) == 0
    s = json.loads(path.read_text())["machine"]["settings"]
    assert (s["warmup_optimizer"], s["warmup_lr"]) == ("sgd", 3e-2)
    with refused(capsys, r"other settings \(.*warmup_optimizer: 'sgd' -> 'adam'"):
        bench.main([*args, "--resume"])  # adam now: another run


def test_sgd_warmup_trains_round_zero_only(helpers, tmp_path):
    bench = helpers
    pytest.importorskip("transformers")
    s = bench.settings(True)
    s.update(max_rounds=1, min_rounds=1)
    fs = bench.build_seed(0, s, tmp_path)
    adam = bench.run_method("fedit", 0, fs, s)
    sgd = bench.run_method("fedit", 0, fs, dict(s, warmup_optimizer="sgd", warmup_lr=3e-2))
    # round 1 (Adam in both) starts from another warm-up state: its training loss differs
    assert len(adam["curve"]) == len(sgd["curve"]) == 2
    assert adam["curve"][1][2] != sgd["curve"][1][2]
    same = bench.run_method("fedit", 0, fs, dict(s, warmup_optimizer="adam", warmup_lr=s["lr"]))
    assert same["curve"] == adam["curve"]


# ---------------------------------------------- (b) (c) the verdict rules on made-up rows


def _doc(acc: dict, majority, chosen_m):
    """A results doc with the rows the verdict rules read: per-seed accuracies, ARI, M."""
    seeds = list(range(len(majority)))
    rows = [{"case": "run", "metric": "true tasks", "value": 5.0}]
    for m, vals in acc.items():
        rows.append({"case": m, "metric": "mean client accuracy", "value": sum(vals) / len(vals)})
        rows.append({"case": m, "metric": "converged fraction", "value": 1.0})
        for s, v in zip(seeds, vals, strict=True):
            rows.append({"case": f"{m} seed {s}", "metric": "mean client accuracy", "value": v})
    for s in seeds:
        rows += [
            {"case": f"fedlease seed {s}", "metric": "ARI vs true tasks", "value": 0.1 * s},
            {"case": f"fedlease seed {s}", "metric": "chosen M", "value": float(chosen_m[s])},
        ]
        if majority[s] is not None:
            rows.append(
                {
                    "case": f"majority seed {s}",
                    "metric": "mean client accuracy",
                    "value": majority[s],
                }
            )
    return {"machine": {"seeds": seeds}, "rows": rows}


def _acc(bench, n, low=None):
    base = [0.80 + 0.01 * (s % 3) for s in range(n)]
    acc = {
        m: [b + 0.002 * j + 0.003 * (s % 2) for s, b in enumerate(base)]
        for j, m in enumerate(bench.METHODS)
    }
    if low is not None:
        acc[low] = [0.55 + 0.01 * (s % 2) for s in range(n)]
    return acc


def test_trivial_baseline_flags_a_method_below_it(bench):
    n = 6
    doc = _doc(_acc(bench, n, low="fedit"), [0.6 + 0.005 * s for s in range(n)], [3] * n)
    check = bench.trivial_check(doc)
    assert not check["fedit"]["beats"] and check["fedit"]["p_value"] < 0.05
    assert all(check[m]["beats"] for m in bench.METHODS if m != "fedit")
    vs = bench.verdicts(doc)
    assert len(vs) == 11
    last = vs[-1]
    assert last["verdict"] == "contradicted" and "fedit" in last["baseline"]
    assert "not above the majority class: fedit" in last["why"]
    first = vs[1]  # FedLEASE beats FedIT: reproduced, but FedIT is no result
    assert first["verdict"] == "reproduced" and not first["decisive"]
    assert "not above the per-client majority class: fedit" in first["why"]
    assert vs[2]["decisive"] and "majority" not in vs[2]["why"]  # fedlease vs local


def test_trivial_baseline_all_above(bench):
    n = 6
    doc = _doc(_acc(bench, n), [0.6 + 0.005 * s for s in range(n)], [3] * n)
    assert all(c["beats"] for c in bench.trivial_check(doc).values())
    last = bench.verdicts(doc)[-1]
    assert last["verdict"] == "reproduced" and last["decisive"] and "all above it" in last["why"]


def test_older_docs_have_no_trivial_check(bench):
    n = 4
    doc = _doc(_acc(bench, n), [None] * n, [3] * n)
    assert bench.trivial_check(doc) is None and len(bench.verdicts(doc)) == 10


def test_top_mmax_is_top2_when_m_is_two(bench):
    n = 6
    doc = _doc(_acc(bench, n), [0.6] * n, [2, 2, 1, 2, 2, 2])
    v = bench.verdicts(doc)[9]
    assert v["claim"].endswith("top-M_max") and v["verdict"] == "not decided"
    assert not v["decisive"] and v["p_value"] is None and v["seeds"] == n
    assert f"identical in {n} of {n} seeds" in v["why"]
    doc = _doc(_acc(bench, n), [0.6] * n, [2, 4, 5, 2, 6, 3])  # compared where M > 2 only
    v = bench.verdicts(doc)[9]
    assert v["seeds"] == 4 and "identical in 2 of 6 seeds" in v["why"] and v["p_value"] < 0.05
    # the M of a run record wins over the fedlease row
    doc["runs"] = {f"seed={s}/fedlease_topmax": {"M": 2} for s in range(n)}
    assert bench.verdicts(doc)[9]["verdict"] == "not decided"


def test_verdicts_only_reads_the_committed_json(bench, tmp_path):
    src = BENCH / "fedlease" / "results" / "fedlease_full.json"
    if not src.is_file():
        pytest.skip("no committed full run")
    path = tmp_path / "old.json"
    path.write_text(src.read_text())
    old = json.loads(path.read_text())
    assert bench.main(["--verdicts-only", str(path)]) == 0
    new = json.loads(path.read_text())
    assert {k for k in old if old[k] != new[k]} <= {"verdicts"}
    assert [v["claim"] for v in new["verdicts"]] == [v["claim"] for v in old["verdicts"]]
    ms = [int(new["runs"][f"seed={s}/fedlease_topmax"]["M"]) for s in old["machine"]["seeds"]]
    if sum(m > 2 for m in ms) < 2:
        assert new["verdicts"][9]["verdict"] == "not decided"
        assert f"identical in {sum(m <= 2 for m in ms)} of {len(ms)}" in new["verdicts"][9]["why"]

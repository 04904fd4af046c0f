"""``benchmarks/self_distillation/run.py``: the derived rows and verdicts the page renders.

The page's agreement count and the share of the soft-label gain reached by hard labels are
rows re-derived from the stored rows (``--derived-only``), never typed.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from .conftest import BENCH, load_benchmark


@pytest.fixture(scope="module")
def sd():
    with load_benchmark("self_distillation/run.py", "bench_self_distillation_derived") as mod:
        yield mod


def _dict(row) -> dict:
    """A measured row as the JSON stores it."""
    return dataclasses.asdict(row)


def _row(case, metric, value):
    return {"case": case, "metric": metric, "value": value, "unit": "1", "vs": None, "ratio": None}


def test_derived_rows_count_and_share(sd):
    doc = {
        "rows": [
            _row("bce 0-SD alpha=2", "error", 0.20),
            _row("bce 1-SD hard alpha=2", "error", 0.14),
            _row("bce 1-SD soft alpha=2", "error", 0.12),
            _row("bce 0-SD rho=0.3 alpha=2 learned", "error", 0.3),
            _row("bce 0-SD alpha=2", "sim_z", -3.5),
            _row("bce 1-SD hard alpha=2", "sim_z", 2.9),
        ]
    }
    rows = {(r.case, r.metric): r.value for r in sd.derived_rows(doc)}
    assert rows[("theory vs simulation", "n_points")] == 2
    assert rows[("theory vs simulation", "n_within_3se")] == 1
    assert rows[("bce 1-SD alpha=2", "hard_share_of_soft_gain")] == pytest.approx(0.75)
    assert not any("rho" in c and m == "hard_share_of_soft_gain" for c, m in rows)
    again = {"rows": [_dict(r) for r in sd.derived_rows(doc)]}
    assert len(sd.derived_rows(again)) == len(again["rows"])  # applying it twice adds nothing


@pytest.mark.parametrize("name", ["self_distillation", "self_distillation_quick"])
def test_stored_json_holds_its_derived_rows(sd, name):
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / f"{name}.json").read_text(encoding="utf-8")
    )
    rows = [_dict(r) for r in sd.derived_rows(copy.deepcopy(doc))]
    assert rows == doc["rows"]


def _theory_doc(gains: dict[float, tuple[float, float, float, float, float]]) -> dict:
    """A main sweep: alpha -> theory errors (0-SD, 1-SD hard, 1-SD soft, 2-SD hard, 2-SD soft)."""
    rows = []
    for a, errs in gains.items():
        labels = ("0-SD", "1-SD hard", "1-SD soft", "2-SD hard", "2-SD soft")
        for label, e in zip(labels, errs, strict=True):
            rows.append(_row(f"bce {label} alpha={a:g}", "error", e))
    return {"machine": {"seeds": 8, "delta": 0.5, "theta": 0.3}, "rows": rows}


def test_verdicts_follow_the_theory_at_every_alpha(sd):
    doc = _theory_doc(
        {
            0.5: (0.30, 0.29, 0.25, 0.285, 0.24),  # hard reaches 20 % of the soft gain
            2.0: (0.20, 0.13, 0.12, 0.12, 0.11),
            8.0: (0.11, 0.09, 0.089, 0.088, 0.087),
        }
    )
    doc["rows"] = [_dict(r) for r in sd.derived_rows(doc)]
    out = {v["claim"].split(" (")[0]: v["verdict"] for v in sd.verdicts(doc)}
    assert out["hard pseudo-labels: optimal 1-SD beats the optimal plain classifier"] == (
        "reproduced"
    )
    assert out["hard labels are the main driver of the gain"] == "not decided"
    assert out["gains are largest at moderate dataset sizes"] == "reproduced"
    assert out["few stages suffice: the second SD stage gains less than the first"] == (
        "reproduced"
    )
    doc["rows"] = [r for r in doc["rows"] if "alpha=8" not in r["case"]]
    out = {v["claim"].split(" (")[0]: v["verdict"] for v in sd.verdicts(doc)}
    assert out["gains are largest at moderate dataset sizes"] == "not decided"  # no inner alpha


@pytest.mark.parametrize("name", ["self_distillation", "self_distillation_quick"])
def test_stored_verdicts_follow_the_rule(sd, name):
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / f"{name}.json").read_text(encoding="utf-8")
    )
    assert doc["verdicts"] == [sd.verdict_entry(**v) for v in sd.verdicts(doc)]


def test_stored_heuristics_verdicts_follow_the_rule(sd):
    # ``run.py --verdicts-only`` on a --heuristics JSON takes the heuristics' rule (bias
    # fixing and early stopping, from the stored details), not the main sweep's
    doc = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation_heuristics.json").read_text(
            encoding="utf-8"
        )
    )
    assert doc["verdicts"] == [sd.verdict_entry(**v) for v in sd.verdict_rule(doc)]
    main = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation.json").read_text(
            encoding="utf-8"
        )
    )
    assert sd.verdict_rule(main) == sd.verdicts(main)


def test_paired_rows_are_the_stored_run_simulated_again(sd):
    import _self_distillation_paired as paired

    doc = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation_quick.json").read_text(
            encoding="utf-8"
        )
    )
    stored = {
        (r["case"], r["metric"]): r["value"]
        for r in doc["rows"]
        if r["metric"].startswith(paired.SEED_METRIC)
    }
    assert len(stored) == len(paired.main_sweep_cases(doc)) * doc["machine"]["seeds"]
    bare = copy.deepcopy(doc)
    bare["rows"] = [r for r in doc["rows"] if not r["metric"].startswith(paired.SEED_METRIC)]
    got = {
        (r.case, r.metric): r.value
        for r in paired.paired_rows(copy.deepcopy(bare))
        if r.metric.startswith(paired.SEED_METRIC)
    }
    assert got.keys() == stored.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-9) for k, v in stored.items())
    # hyper-parameters that are not the stored run's: refused, nothing written
    case = paired.main_sweep_cases(bare)[1]
    for r in bare["rows"]:
        if (r["case"], r["metric"]) == (case, "lambda_0"):
            r["value"] *= 0.5
    with pytest.raises(ValueError, match="not the stored"):
        paired.paired_rows(bare)


def _with_seeds(doc, noise, shift=None, n=5):
    """Per-seed errors around each theory error: seed s adds a shared draw (the data set
    every variant of seed s trains on) and a small own one; ``shift`` maps a case to a
    per-seed offset list."""
    import numpy as np

    rng = np.random.default_rng(0)
    shared = {}
    rows = list(doc["rows"])
    for r in doc["rows"]:
        if r["metric"] != "error":
            continue
        a = r["case"].rsplit("alpha=", 1)[1]
        common = shared.setdefault(a, 0.01 * rng.standard_normal(n))
        own = noise * rng.standard_normal(n) + np.asarray((shift or {}).get(r["case"], 0.0))
        for s in range(n):
            rows.append(_row(r["case"], f"sim_error_seed{s}", r["value"] + common[s] + own[s]))
    return {**doc, "machine": {**doc["machine"], "seeds": n, "seed": 0}, "rows": rows}


def test_the_simulation_makes_a_unanimous_theory_verdict_decisive(sd):
    theory = _theory_doc(
        {
            0.5: (0.30, 0.27, 0.25, 0.26, 0.24),
            2.0: (0.20, 0.13, 0.12, 0.12, 0.11),
            8.0: (0.11, 0.09, 0.089, 0.088, 0.087),
        }
    )
    theory["rows"] = [_dict(r) for r in sd.derived_rows(theory)]

    def judged(doc):
        return {v["claim"].split(" (")[0]: v for v in sd.verdicts(doc)}

    bare = judged(theory)  # no per-seed rows: the theory alone is never decisive
    assert not any(v["decisive"] for v in bare.values())
    assert "--paired-only" in bare["gains are largest at moderate dataset sizes"]["why"]

    clear = judged(_with_seeds(theory, noise=1e-4))
    first = clear["hard pseudo-labels: optimal 1-SD beats the optimal plain classifier"]
    assert first["decisive"] and first["p_value"] < 0.05 and first["verdict"] == "reproduced"
    assert clear["gains are largest at moderate dataset sizes"]["decisive"]
    assert clear["few stages suffice: the second SD stage gains less than the first"]["decisive"]

    # the simulation contradicts the theory at one alpha: the verdict stays, not decisive
    against = {"bce 1-SD hard alpha=0.5": [0.05] * 5}
    mixed = judged(_with_seeds(theory, noise=1e-4, shift=against))
    first = mixed["hard pseudo-labels: optimal 1-SD beats the optimal plain classifier"]
    assert first["verdict"] == "reproduced" and not first["decisive"]
    assert "does not resolve" in first["why"]

    few = judged(_with_seeds(theory, noise=1e-4, n=3))  # resolved, but too few seeds
    assert not any(v["decisive"] for v in few.values())


def test_stop_seeds_sets_the_early_stopping_splits(sd, monkeypatch, tmp_path):
    import _self_distillation_heuristics as heuristics

    for bad in (
        ["--heuristics", "--stop-seeds", "1"],
        ["--heuristics", "--replace-part", "--json", str(tmp_path / "none.json")],  # both parts
        ["--heuristics", "--sections", "minilm", "--replace-part", "--json", "nowhere.json"],
    ):
        with pytest.raises(SystemExit) as exc:
            sd.main(bad)
        assert exc.value.code == 2
    seen = {}

    def run_stopping(cfg, seed, rows, details, cache):
        seen["stop_seeds"] = cfg["stop_seeds"]

    monkeypatch.setattr(heuristics, "run_stopping", run_stopping)
    monkeypatch.setattr(heuristics, "stopping_verdicts", lambda details, cfg: [])
    monkeypatch.setattr(heuristics, "plot_stopping", lambda *a: None)
    out = tmp_path / "stop.json"
    args = ["--heuristics", "--quick", "--sections", "minilm", "--stop-seeds", "7"]
    assert sd.main([*args, "--json", str(out)]) == 0
    assert seen == {"stop_seeds": 7}
    assert json.loads(out.read_text())["machine"]["stop_seeds"] == 7


def test_replace_part_keeps_the_other_part_and_recomputes_the_verdicts(sd):
    import _self_distillation_heuristics as heuristics

    stored = json.loads(
        (BENCH / "self_distillation" / "results" / "self_distillation_heuristics.json").read_text(
            encoding="utf-8"
        )
    )
    # a stand-in stopping part: the stored one on its first three splits
    new = copy.deepcopy(stored)
    new["rows"] = [r for r in new["rows"] if r["case"].startswith("stop")]
    new["rows"][0]["value"] = -1.0  # marks the new part's rows
    new["details"] = {k: v[:3] for k, v in new["details"].items() if k.startswith("stop")}
    new["machine"].update(stop_seeds=3, cpu="another CPU")
    merged = heuristics.replace_part(copy.deepcopy(stored), new, "stopping")
    bias = [r for r in stored["rows"] if r["case"].startswith("bias")]
    assert merged["rows"][: len(bias)] == bias  # the bias part as stored
    assert merged["rows"][len(bias) :] == new["rows"]
    assert all(len(v) == 3 for k, v in merged["details"].items() if k.startswith("stop"))
    assert {k: v for k, v in merged["details"].items() if k.startswith("bias")} == {
        k: v for k, v in stored["details"].items() if k.startswith("bias")
    }
    assert merged["machine"]["stop_seeds"] == 3
    assert merged["machine"]["n_seeds"] == stored["machine"]["n_seeds"]  # a bias setting
    assert merged["machine"]["parts"]["stopping"]["cpu"] == "another CPU"
    assert merged["verdicts"] == heuristics.heuristics_verdicts(merged)
    assert merged["verdicts"] != stored["verdicts"]  # three splits decide otherwise
    new["machine"]["theta"] = 0.1  # a shared setting differs: refused
    with pytest.raises(ValueError, match="shared settings"):
        heuristics.replace_part(stored, new, "stopping")

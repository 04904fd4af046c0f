"""``benchmarks/spice/ablation.py``: variants, the flatness rule, the paired comparison and
its verdict rule, and a tiny run written in two pieces (``--max-hours`` / ``--resume``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.benchmarks.conftest import load_benchmark, refused
from tests.cli.test_train_cli import _tiny_set


@pytest.fixture(scope="module")
def abl():
    with load_benchmark("spice/ablation.py", "spice_ablation_bench") as mod:
        yield mod


@pytest.fixture(scope="module")
def helper():
    with load_benchmark("spice/_spice.py", "spice_helper_bench") as mod:
        yield mod


def test_flat_is_under_one_percent_over_the_last_fifth(helper):
    falling = [1.0] * 8 + [0.9, 0.8]  # 20 % better over the last 2 of 10 epochs
    assert not helper.flat(falling)
    assert helper.flat([2.0, 1.5, 1.2, 1.1, 1.1, 1.1, 1.1, 1.095])  # 0.5 % better
    assert not helper.flat([1.0, 1.0, 1.0, 1.0])  # fewer than five epochs
    assert helper.val_change([1.0, 0.5]) == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        helper.val_change([1.0])


def test_every_part_names_two_variants_and_units_put_baselines_first(abl):
    for with_it, without in abl.PARTS.values():
        assert with_it in abl.VARIANTS and without in abl.VARIANTS and with_it != without
    units = abl.plan([*abl.VARIANTS, abl.ENSEMBLE, abl.SINGLE], 2)
    assert units[:6] == [(m, s) for m in (abl.ENSEMBLE, abl.SINGLE, "spice") for s in (0, 1)]
    assert len(units) == 2 * (len(abl.VARIANTS) + 2)


def test_variant_options_change_one_part_of_the_chosen_spice(abl):
    chosen = {"spice": {"hidden": 32, "cross_conformer": False}, abl.ENSEMBLE: {"hidden": 16}}
    base = {"n_targets": 3}
    name, opts, train = abl.unit_options("one_expert", chosen, base, 36)
    assert (name, opts, train) == ("spice_dense", {"n_targets": 3, **chosen["spice"]}, {})
    name, opts, _ = abl.unit_options("spice_cross", chosen, base, 36)
    assert name == "spice" and opts["cross_conformer"] is True and opts["hidden"] == 32
    _, opts, train = abl.unit_options("upcycled", chosen, base, 36)
    assert opts["upcycle"] is True and train == {"upcycle_epochs": 9}
    assert abl.unit_options(abl.ENSEMBLE, chosen, base, 36)[1] == {"n_targets": 3, "hidden": 16}
    with pytest.raises(ValueError, match="unknown variant"):
        abl.unit_options("nope", chosen, base, 36)


def test_next_rung_climbs_the_ladder_until_flat(abl):
    def rec(curve):
        return {"epochs_run": len(curve), "history": {"val_score": curve}}

    rungs = [5, 8]
    assert abl.next_rung(None, rungs) == 5
    assert abl.next_rung(rec([1.0, 0.9, 0.8, 0.75, 0.7]), rungs) == 8  # still falling
    assert abl.next_rung(rec([1.0, 0.9, 0.8, 0.8, 0.8]), rungs) is None  # flat
    assert abl.next_rung(rec([1.0] * 7 + [0.5]), rungs) is None  # last rung: done anyway


def _runs(pred_noise, y, seeds=2, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in range(seeds):
        idx = np.arange(s, y.shape[0], 2)
        pred = y[idx] + rng.normal(scale=pred_noise, size=(idx.size, y.shape[1]))
        mae = np.abs(pred - y[idx]).mean(0)
        out.append(
            {"seed": s, "test_index": idx.tolist(), "test_pred": pred.tolist(), "test_mae": mae}
        )
    return out


def test_compare_resolves_a_clearly_better_model_and_the_rule_reproduces(abl):
    y = np.random.default_rng(1).normal(size=(400, 3))
    good, bad = _runs(0.1, y, seed=2), _runs(1.0, y, seed=3)
    c = abl.compare(good, bad, y, np.ones(3), ["a", "b", "c"])
    assert c["score_a"] < c["score_b"] and c["mean_diff"] < 0 and c["p"] < 0.01
    assert c["counts"] == {"better": 3, "worse": 0, "noise": 0}
    assert abl.rule(c) == "reproduced"
    assert abl.rule(abl.compare(bad, good, y, np.ones(3), ["a", "b", "c"])) == "contradicted"
    same = abl.compare(good, good, y, np.ones(3), ["a", "b", "c"])
    assert same["p"] == 1.0 and abl.rule(same) == "not decided"
    with pytest.raises(ValueError, match="same splits"):
        abl.compare(good, bad[::-1], y, np.ones(3), ["a", "b", "c"])


def test_tiny_run_in_two_pieces(abl, tmp_path, capsys):
    data = _tiny_set(tmp_path / "mols")
    out = tmp_path / "abl.json"
    argv = [
        "--quick", "--threads", "1", "--data", str(data), "--json", str(out), "--epochs", "2,3",
        "--seeds", "2", "--variants", "spice,one_expert,boltzmann_ensemble,single_conformer",
    ]  # fmt: skip
    abl.main([*argv, "--max-hours", "0"])  # a piece that starts no unit
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["runs"] == {}
    assert doc["machine"]["device"] == "cpu"
    doc["machine"]["device"] = "cuda:0"  # as if started on a GPU: not a setting
    out.write_text(json.dumps(doc))
    abl.main([*argv, "--resume", "--device", "cpu", "--plots", str(tmp_path / "img")])
    doc = json.loads(out.read_text())
    assert doc["complete"] is True and doc["machine"]["device"] == "cpu"
    assert (tmp_path / "img" / "abl_curves.png").stat().st_size > 0
    assert {v: sorted(r) for v, r in doc["runs"].items()} == {
        v: ["0", "1"] for v in ("boltzmann_ensemble", "single_conformer", "spice", "one_expert")
    }
    for r in (r for rs in doc["runs"].values() for r in rs.values()):  # the epoch ladder
        # two epochs are never flat (fewer than five): every unit climbs to the last rung
        assert [x["epochs"] for x in r["ladder"]] == [2, 3] and r["epochs_run"] == 3
    claims = [e["claim"] for e in doc["verdicts"]]
    assert "the geometric MoE (vs one dense expert): SPiCE is better with it" in claims
    assert "SPiCE (spice) outperforms the strongest conformer ensemble" in claims
    assert all(e["decisive"] is False or e["converged"] for e in doc["verdicts"])
    assert doc["machine"]["data_as_chosen_from"] is False
    assert doc["machine"]["epochs"] == [2, 3] and doc["details"]["ensemble_helps"] is not None
    with refused(capsys, r"other settings \(epochs: \[2, 3\] -> \[3\]"):
        abl.main([*argv[:-4], "--epochs", "3", "--seeds", "2", "--resume"])


def test_the_attention_ablation_is_planned_and_compared_with_spice_cross(abl):
    name, extra, _ = abl.VARIANTS["spice_cross_no_attention"]
    assert name == "spice" and extra == {"cross_conformer": True, "attention": False}
    parts = {ab: part for part, ab in abl.PARTS.items()}
    assert "cross-conformer attention" in parts[("spice_cross", "spice_cross_no_attention")]
    units = abl.plan([abl.ENSEMBLE, abl.SINGLE, *abl.VARIANTS], 3)
    assert len(units) == 36 and ("spice_cross_no_attention", 2) in units
    chosen = {"spice": {"hidden": 32, "cross_conformer": False}}
    _, opts, train = abl.unit_options("spice_cross_no_attention", chosen, {"n_targets": 3}, 36)
    assert opts["cross_conformer"] is True and opts["attention"] is False and train == {}

"""``benchmarks/spice/run.py``: the tuning grid (same budget per model) and the run cache key."""

from __future__ import annotations

import pytest

from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def spice():
    with load_benchmark("spice/run.py", "spice_bench") as mod:
        yield mod


def test_spice_grid_covers_every_knob_at_both_levels(spice):
    g = spice.grid("spice", [16, 32], 4)
    assert len(g) == 4 and len({tuple(sorted(c.items())) for c in g}) == 4
    assert {c["hidden"] for c in g} == {16, 32}
    assert {(c["num_experts"], c["top_k"]) for c in g} == {(4, 1), (8, 2)}
    assert {c["cross_conformer"] for c in g} == {True, False}
    # the full grid: widths x (experts, top-k) x cross-conformer, no duplicates
    full = spice.grid("spice", [16, 32], 8)
    assert len({tuple(sorted(c.items())) for c in full}) == 8


def test_every_model_gets_the_same_budget_over_its_own_knobs(spice):
    for name in ("deepsets", "single_conformer", "boltzmann_ensemble", "gnn2d"):
        g = spice.grid(name, [16, 32], 4)
        assert len(g) == 4
        assert {(c["hidden"], c["atom_pool"]) for c in g} == {
            (h, p) for h in (16, 32) for p in ("sum", "mean")
        }
    g = spice.grid("attention_ensemble", [16, 32], 4)
    assert {(c["hidden"], c["heads"]) for c in g} == {(h, k) for h in (16, 32) for k in (2, 4)}


def test_grid_size_two_is_the_earlier_runs_grid(spice):
    """``--grid-size 2`` reproduces spice_ligands.json's tuning (same options as before)."""
    assert [
        (c["hidden"], c["num_experts"], c["top_k"]) for c in spice.grid("spice", [16, 32], 2)
    ] == [
        (32, 4, 1),
        (32, 8, 2),
    ]
    assert all(c["cross_conformer"] for c in spice.grid("spice", [16, 32], 2))
    assert [c["hidden"] for c in spice.grid("deepsets", [16, 32], 2)] == [16, 32]


def test_grid_rejects_bad_sizes(spice):
    with pytest.raises(ValueError, match="grid size"):
        spice.grid("deepsets", [16, 32], 5)
    with pytest.raises(ValueError, match="grid size"):
        spice.grid("spice", [16, 32], 0)


def test_run_key_changes_with_every_input(spice):
    base = ("sha", "spice", {"hidden": 32}, 0, {"lr": 1e-3})
    k = spice.run_key(*base)
    assert k.startswith("spice-s0-") and k == spice.run_key(*base)
    assert spice.run_key("sha2", *base[1:]) != k
    assert spice.run_key("sha", "spice", {"hidden": 16}, 0, {"lr": 1e-3}) != k
    assert spice.run_key("sha", "spice", {"hidden": 32}, 1, {"lr": 1e-3}) != k
    assert spice.run_key("sha", "spice", {"hidden": 32}, 0, {"lr": 2e-3}) != k


def _t(diff, p_holm):
    return {"mean_diff": diff, "p_holm": p_holm}


def test_verdict_counts_follow_the_holm_p_and_the_sign(spice):
    tests = {
        "a": {spice.ENSEMBLE_HELPS: _t(-1.0, 0.01), spice.CLAIM: _t(+0.5, 0.001)},
        "b": {spice.ENSEMBLE_HELPS: _t(-1.0, 0.2), spice.CLAIM: _t(-0.5, 0.001)},
        "c": {spice.ENSEMBLE_HELPS: _t(+1.0, 0.01), spice.CLAIM: _t(-0.5, 0.04)},
        "d": {spice.ENSEMBLE_HELPS: _t(-1.0, 0.049), spice.CLAIM: _t(-0.5, 0.5)},
    }
    rows, out = spice.verdict_rows(tests, ["a", "b", "c", "d"])
    assert out[spice.ENSEMBLE_HELPS] == {"a": "better", "b": "noise", "c": "worse", "d": "better"}
    assert out[spice.CLAIM] == {"a": "worse", "b": "better", "c": "better", "d": "noise"}
    # the claim where ensembles help: only targets a and d
    assert out[f"{spice.CLAIM} where ensembles help"] == {"a": "worse", "d": "noise"}
    got = {(r.case, r.metric.split()[1]): r.value for r in rows}
    assert got[(f"verdicts {spice.CLAIM}", "better")] == 2
    assert got[(f"verdicts {spice.CLAIM}", "worse")] == 1
    assert got[(f"verdicts {spice.CLAIM}", "noise")] == 1
    assert got[(f"verdicts {spice.CLAIM} where ensembles help", "worse")] == 1
    assert got[(f"verdicts {spice.CLAIM} where ensembles help", "better")] == 0
    with pytest.raises(ValueError, match="alpha"):
        spice.verdict_rows(tests, ["a"], alpha=1.5)

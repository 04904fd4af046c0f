"""Ensemble baselines on the SPiCE backbone: invariances, readout semantics, registry."""

from __future__ import annotations

import pytest
import torch

from sci_moe.molecules import EnsembleGraph, collate_ensembles
from sci_moe.molecules.spice import MODEL_NAMES, MODELS, SetReadout, build_model, pick_conformer
from tests.molecules.spice.test_spice_model import FA, FB, random_graph

OPTS = dict(n_targets=2, atom_dim=FA, bond_dim=FB, hidden=8, num_layers=1, num_rbf=4, heads=2)
ENSEMBLES = ("mean_ensemble", "deepsets", "attention_ensemble", "boltzmann_ensemble", "gnn2d_3d")


@pytest.fixture
def f64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _permuted(mol: EnsembleGraph, perm: torch.Tensor) -> EnsembleGraph:
    return EnsembleGraph(
        **{
            **mol.to_dict(),
            "pos": mol.pos[perm],
            "conf_energy": mol.conf_energy[perm],
            "conf_weight": mol.conf_weight[perm],
        }
    )


@pytest.mark.parametrize("name", ENSEMBLES)
def test_ensemble_models_ignore_conformer_order(f64, name):
    torch.manual_seed(0)
    model = build_model(name, **OPTS).eval()
    mols = [random_graph(6, 4, seed=1), random_graph(5, 3, seed=2)]
    ref = model(collate_ensembles(mols)).pred
    moved = [
        _permuted(mols[0], torch.tensor([2, 0, 3, 1])),
        _permuted(mols[1], torch.tensor([1, 2, 0])),
    ]
    torch.testing.assert_close(model(collate_ensembles(moved)).pred, ref)


def test_boltzmann_readout_with_all_weight_on_one_conformer(f64):
    torch.manual_seed(0)
    model = build_model("boltzmann_ensemble", **OPTS).eval()
    mol = random_graph(6, 3, seed=4)
    w = torch.tensor([0.0, 1.0, 0.0])
    heavy = collate_ensembles([EnsembleGraph(**{**mol.to_dict(), "conf_weight": w})])
    only = collate_ensembles(
        [
            EnsembleGraph(
                **{
                    **mol.to_dict(),
                    "pos": mol.pos[1:2],
                    "conf_energy": mol.conf_energy[1:2],
                    "conf_weight": torch.ones(1),
                }
            )
        ]
    )
    torch.testing.assert_close(model(heavy).pred, model(only).pred)


def test_random_conformer_picks_one_per_molecule_and_first_in_eval():
    b = collate_ensembles([random_graph(5, 4, seed=1), random_graph(4, 2, seed=2)])
    torch.manual_seed(0)
    seen = set()
    for _ in range(20):
        one = pick_conformer(b, random=True)
        assert one.num_confs == 2 and one.conf_to_mol.tolist() == [0, 1]
        seen.add(tuple(one.pos[:5].flatten().tolist()))
    assert len(seen) > 1  # different conformers are drawn
    first = pick_conformer(b, random=False)
    torch.testing.assert_close(first.pos[:5], b.pos[:5])  # conformer 0 of molecule 0
    torch.manual_seed(0)
    model = build_model("random_conformer", **OPTS).eval()
    torch.testing.assert_close(model(b).pred, model(b).pred)  # deterministic in eval


def test_attention_readout_pads_molecules_of_different_sizes():
    torch.manual_seed(0)
    r = SetReadout("attention", 8, heads=2).eval()
    g = torch.randn(5, 8)
    out = r(g, torch.tensor([0, 0, 0, 1, 1]), 2)
    alone = r(g[3:], torch.tensor([0, 0]), 1)
    torch.testing.assert_close(out[1:], alone, atol=1e-6, rtol=1e-5)


def test_registry():
    assert tuple(MODELS) == MODEL_NAMES and len(MODEL_NAMES) == 10
    with pytest.raises(ValueError, match="set readout"):
        SetReadout("max", 8)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("schnet")

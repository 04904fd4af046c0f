"""Issue 27 (molecules): non-finite coordinates, chirality features, duplicates, seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem

from sci_moe.molecules.embedding import ConformerConfig
from sci_moe.molecules.features import ATOM_FEATURE_NAMES, atom_features
from sci_moe.molecules.graph import EnsembleGraph, collate_ensembles
from tests.molecules.spice.test_spice_model import random_graph, small_model

CHIRAL_COLS = [i for i, n in enumerate(ATOM_FEATURE_NAMES) if n.startswith("chirality=")]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_spice_refuses_non_finite_coordinates_naming_molecule_and_conformer(bad):
    batch = collate_ensembles([random_graph(5, 2, 0), random_graph(4, 3, 1)])
    model = small_model().eval()
    assert torch.isfinite(model(batch).pred).all()
    # molecule 1, conformer 2: points of mol 0 (2 x 5) then mol 1 conformers 0, 1 (2 x 4)
    batch.pos[10 + 8 + 1, 0] = bad
    with pytest.raises(ValueError, match=r"molecule 1 'mol1' conformer 2"):
        model(batch)


def test_ensemble_graph_names_the_bad_conformer():
    g = random_graph(4, 3, 0)
    pos = g.pos.clone()
    pos[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"conformers \[1\]"):
        EnsembleGraph(
            g.z, g.atom_attr, g.bond_index, g.bond_attr, pos, g.conf_energy, g.conf_weight
        )


def _canonical_chirality(smiles: str) -> list[int]:
    """Chirality columns per atom, in canonical atom order (independent of the SMILES)."""
    m = Chem.MolFromSmiles(smiles)
    order = np.argsort(list(Chem.CanonicalRankAtoms(m, breakTies=True)))
    return atom_features(m)[order][:, CHIRAL_COLS].argmax(1).tolist()


@pytest.mark.parametrize(
    "smiles", ["C[C@H](N)C(=O)O", "C[C@@H](O)CC", "F[C@](Cl)(Br)C(=O)O", "N[C@@H](Cc1ccccc1)C(=O)O"]
)
def test_chirality_feature_is_canonical(smiles):
    """The same enantiomer as random SMILES: identical; the mirror image: different."""
    mol = Chem.MolFromSmiles(smiles)
    mirror = Chem.MolFromSmiles(smiles.replace("@@", "!").replace("@", "@@").replace("!", "@"))
    ref = _canonical_chirality(smiles)
    ref_mirror = _canonical_chirality(Chem.MolToSmiles(mirror))
    assert ref != ref_mirror
    for _ in range(8):
        for m, r in ((mol, ref), (mirror, ref_mirror)):
            rnd = Chem.MolToSmiles(m, doRandom=True, canonical=False)
            assert _canonical_chirality(rnd) == r, (smiles, rnd)


def test_chirality_columns_and_no_mutation():
    assert [ATOM_FEATURE_NAMES[i] for i in CHIRAL_COLS] == [
        "chirality=none",
        "chirality=R",
        "chirality=S",
        "chirality=other",
    ]
    m = Chem.MolFromSmiles("C[C@H](N)C(=O)O")
    before = [a.GetChiralTag() for a in m.GetAtoms()]
    f = atom_features(m)[:, CHIRAL_COLS]
    assert [a.GetChiralTag() for a in m.GetAtoms()] == before
    assert f[1].argmax() == 2  # L-alanine is (S)
    assert (f[[0, 2, 3, 4, 5]].argmax(1) == 0).all()


def _mol_with_confs():
    m = Chem.AddHs(Chem.MolFromSmiles("CCO"))
    ids = list(AllChem.EmbedMultipleConfs(m, 2, randomSeed=7))
    assert len(ids) == 2
    return m, ids


def test_duplicate_conformers_are_dropped_with_a_warning():
    m, (a, b) = _mol_with_confs()
    ref = EnsembleGraph.from_rdkit(m, [a, b], energies_kj=[0.0, 1.0])
    with pytest.warns(UserWarning, match=r"conformers \[2\].*duplicate"):
        g = EnsembleGraph.from_rdkit(m, [a, b, a], energies_kj=[0.0, 1.0, 0.0])
    assert g.num_confs == 2
    assert torch.allclose(g.conf_weight, ref.conf_weight)
    assert torch.equal(g.pos, ref.pos)
    # explicit weights: the dropped copy's weight goes to the kept one
    with pytest.warns(UserWarning):
        g = EnsembleGraph.from_rdkit(m, [a, b, a], weights=[1.0, 1.0, 2.0])
    assert torch.allclose(g.conf_weight, torch.tensor([0.75, 0.25], dtype=g.conf_weight.dtype))


@pytest.mark.parametrize("seed", [-1, -5, 1.5, True, "1"])
def test_conformer_config_seed_must_be_a_non_negative_integer(seed):
    with pytest.raises(ValueError, match="seed"):
        ConformerConfig(seed=seed)


def test_conformer_config_accepts_numpy_seed():
    assert ConformerConfig(seed=np.int64(3)).seed == 3

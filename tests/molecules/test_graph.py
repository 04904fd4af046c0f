"""Ensemble graphs: featurisation, collate, per-conformer radius graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import rdDistGeom

from sci_moe.molecules.features import (
    ATOM_FEATURE_DIM,
    ATOM_FEATURE_NAMES,
    BOND_FEATURE_DIM,
    BOND_FEATURE_NAMES,
    atom_features,
    bond_features,
    bond_index,
)
from sci_moe.molecules.graph import (
    KB_KJ_PER_MOL_K,
    EnsembleDataset,
    EnsembleGraph,
    boltzmann_weights,
    collate_ensembles,
    radius_graph_per_conformer,
)


def _embedded(smiles: str, n: int, seed: int = 7) -> Chem.Mol:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    p = rdDistGeom.ETKDGv3()
    p.randomSeed = seed
    p.numThreads = 1
    assert len(rdDistGeom.EmbedMultipleConfs(mol, numConfs=n, params=p)) == n
    return mol


def _random_graph(n_atoms: int, n_confs: int, n_targets: int = 2, name: str = "") -> EnsembleGraph:
    rng = np.random.default_rng(n_atoms * 10 + n_confs)
    bonds = np.array([[i, i + 1] for i in range(n_atoms - 1)]).T.reshape(2, -1)
    bonds = np.concatenate([bonds, bonds[::-1]], axis=1)
    e = rng.uniform(0, 5, n_confs)
    return EnsembleGraph(
        z=rng.integers(1, 10, n_atoms),
        atom_attr=rng.normal(size=(n_atoms, 4)),
        bond_index=bonds,
        bond_attr=rng.normal(size=(bonds.shape[1], 3)),
        pos=rng.normal(scale=0.3, size=(n_confs, n_atoms, 3)),
        conf_energy=e - e.min(),
        conf_weight=boltzmann_weights(e, 300.0),
        y=rng.normal(size=n_targets),
        conf_y=rng.normal(size=(n_confs, n_targets)),
        name=name,
    )


def _brute_force(pos, p2c, cutoff, max_neighbors=None, loop=False):
    pos = pos.double()
    edges = []
    for i in range(pos.shape[0]):
        cand = []
        for j in range(pos.shape[0]):
            if p2c[i] != p2c[j] or (i == j and not loop):
                continue
            d = float(torch.linalg.norm(pos[i] - pos[j]))
            if d <= cutoff:
                cand.append((d, j))
        cand.sort()
        if max_neighbors is not None:
            cand = cand[:max_neighbors]
        edges += [(j, i) for _, j in cand]
    return set(edges)


def test_feature_widths_and_values():
    mol = Chem.AddHs(Chem.MolFromSmiles("CCO"))
    fa, fb, bi = atom_features(mol), bond_features(mol), bond_index(mol)
    assert fa.shape == (9, ATOM_FEATURE_DIM) == (9, len(ATOM_FEATURE_NAMES))
    assert fb.shape == (16, BOND_FEATURE_DIM) == (16, len(BOND_FEATURE_NAMES))
    assert bi.shape == (2, 16)
    np.testing.assert_array_equal(bi[:, 0], bi[::-1, 1])  # both directions
    # oxygen: element O, one heavy neighbour + one H = degree 2, one H
    o = fa[2]
    names = np.array(ATOM_FEATURE_NAMES)
    on = set(names[o > 0])
    assert {"element=O", "degree=2", "num_hs=1", "formal_charge=0", "aromatic"} - on == {"aromatic"}
    # every categorical block is one-hot
    for prefix in ("element", "degree", "formal_charge", "num_hs", "hybridization"):
        cols = [k for k, n in enumerate(ATOM_FEATURE_NAMES) if n.startswith(prefix + "=")]
        np.testing.assert_array_equal(fa[:, cols].sum(1), 1.0)
    # heavy-atom graph keeps the hydrogen count
    heavy = atom_features(Chem.MolFromSmiles("CCO"))
    np.testing.assert_array_equal(heavy, fa[:3])
    # unknown element falls into "other"
    xe = atom_features(Chem.MolFromSmiles("[Xe]"))
    assert xe[0, ATOM_FEATURE_NAMES.index("element=other")] == 1.0


def test_boltzmann_weights_two_state():
    w = boltzmann_weights([10.0, 12.5], 300.0)
    np.testing.assert_allclose(w[1] / w[0], np.exp(-2.5 / (KB_KJ_PER_MOL_K * 300.0)), rtol=1e-12)
    assert w.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(boltzmann_weights([1e4, 0.0], 298.0), [0.0, 1.0], atol=1e-300)
    with pytest.raises(ValueError, match="temperature"):
        boltzmann_weights([0.0], 0.0)
    with pytest.raises(ValueError, match="finite"):
        boltzmann_weights([0.0, np.nan], 300.0)


def test_from_rdkit_units_and_heavy_only(float_dtype):
    mol = _embedded("CCCO", 3)
    g = EnsembleGraph.from_rdkit(
        mol, energies_kj=[1.0, 0.0, 4.0], temperature_k=300.0, name="propanol"
    )
    assert g.num_atoms == 12 and g.num_confs == 3
    ref = mol.GetConformer(1).GetPositions() / 10.0  # Angstrom -> nm
    np.testing.assert_allclose(g.pos[1].double().numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(g.conf_energy.numpy(), [1.0, 0.0, 4.0], atol=1e-6)
    np.testing.assert_allclose(
        g.conf_weight.numpy(), boltzmann_weights([1.0, 0.0, 4.0], 300.0), rtol=1e-6
    )
    h = EnsembleGraph.from_rdkit(mol, heavy_only=True)
    assert h.num_atoms == 4 and h.bond_index.shape == (2, 6)
    np.testing.assert_allclose(h.pos.numpy(), g.pos[:, :4].numpy())
    assert h.smiles == g.smiles == "CCCO"


def test_graph_validation_messages():
    g = _random_graph(4, 2)
    d = g.to_dict()
    with pytest.raises(ValueError, match="pos must be"):
        EnsembleGraph(**{**d, "pos": torch.zeros(2, 5, 3)})
    with pytest.raises(ValueError, match="sum to 1"):
        EnsembleGraph(**{**d, "conf_weight": torch.tensor([0.2, 0.2])})
    with pytest.raises(ValueError, match="one value per conformer"):
        EnsembleGraph(**{**d, "conf_energy": torch.zeros(3)})
    with pytest.raises(ValueError, match="outside"):
        EnsembleGraph(
            **{**d, "bond_index": torch.tensor([[0, 9], [9, 0]]), "bond_attr": torch.zeros(2, 3)}
        )
    with pytest.raises(ValueError, match="NaN"):
        EnsembleGraph(**{**d, "pos": torch.full((2, 4, 3), float("nan"))})


def test_collate_index_vectors(float_dtype):
    graphs = [
        _random_graph(5, 3, name="a"),
        _random_graph(3, 1, name="b"),
        _random_graph(4, 2, name="c"),
    ]
    b = collate_ensembles(graphs)
    assert b.num_mols == 3 and b.num_atoms == 12 and b.num_confs == 6
    assert b.num_points == 5 * 3 + 3 * 1 + 4 * 2
    assert b.names == ["a", "b", "c"]
    assert b.y.shape == (3, 2) and b.conf_y.shape == (6, 2)
    torch.testing.assert_close(b.confs_per_mol, torch.tensor([3, 1, 2]))
    torch.testing.assert_close(b.atoms_per_mol, torch.tensor([5, 3, 4]))
    # weights sum to one per molecule
    wsum = torch.zeros(3, dtype=b.conf_weight.dtype).index_add_(0, b.conf_to_mol, b.conf_weight)
    torch.testing.assert_close(wsum, torch.ones(3, dtype=wsum.dtype))
    # every point maps to an atom and a conformer of the same molecule
    assert torch.equal(b.atom_to_mol[b.point_to_atom], b.point_to_mol)
    # round trip: positions, bonds and atoms of each molecule recovered from the batch
    atom_off = 0
    for m, g in enumerate(graphs):
        pts = b.point_to_mol == m
        torch.testing.assert_close(b.pos[pts].reshape(g.num_confs, g.num_atoms, 3), g.pos)
        torch.testing.assert_close(b.z[b.point_to_atom[pts]], g.z.repeat(g.num_confs))
        bonds = b.atom_to_mol[b.bond_index[0]] == m
        torch.testing.assert_close(b.bond_index[:, bonds] - atom_off, g.bond_index)
        assert (b.atom_to_mol[b.bond_index[1, bonds]] == m).all()
        atom_off += g.num_atoms
    # points of each conformer contiguous (conformer-major)
    assert (torch.diff(b.point_to_conf) >= 0).all()


def test_collate_mismatch_and_empty():
    with pytest.raises(ValueError, match="at least one"):
        collate_ensembles([])
    with pytest.raises(ValueError, match="targets"):
        collate_ensembles([_random_graph(3, 1, 2), _random_graph(3, 1, 1)])
    b = collate_ensembles([_random_graph(3, 1, 0)])
    assert b.y.shape == (1, 0)


def test_select_conformers_and_lowest_energy(float_dtype):
    graphs = [_random_graph(5, 3), _random_graph(3, 2)]
    b = collate_ensembles(graphs)
    low = b.lowest_energy()
    assert low.num_confs == 2
    torch.testing.assert_close(low.conf_weight, torch.ones(2, dtype=low.conf_weight.dtype))
    torch.testing.assert_close(low.conf_energy, torch.zeros(2, dtype=low.conf_energy.dtype))
    for m, g in enumerate(graphs):
        k = int(torch.argmin(g.conf_energy))
        torch.testing.assert_close(low.pos[low.point_to_mol == m], g.pos[k])
    keep = torch.tensor([True, False, True, True, True])
    s = b.select_conformers(keep)
    w0 = graphs[0].conf_weight[[0, 2]]
    torch.testing.assert_close(s.conf_weight[:2], w0 / w0.sum())
    assert s.num_points == 2 * 5 + 2 * 3 and int(s.point_to_conf.max()) == 3
    with pytest.raises(ValueError, match="at least one conformer"):
        b.select_conformers(torch.tensor([True, True, True, False, False]))


@pytest.mark.parametrize("max_neighbors", [None, 3])
@pytest.mark.parametrize("loop", [False, True])
def test_radius_graph_matches_brute_force(max_neighbors, loop, float_dtype):
    g = torch.Generator().manual_seed(3)
    sizes = [7, 1, 12, 5]
    p2c = torch.cat([torch.full((n,), c) for c, n in enumerate(sizes)])
    perm = torch.randperm(p2c.numel(), generator=g)  # unsorted conformer labels
    p2c = p2c[perm]
    pos = torch.rand(p2c.numel(), 3, generator=g)
    ref = _brute_force(pos, p2c, 0.6, max_neighbors, loop)
    for block in (2**24, 10):  # one block, and many chunks
        ei = radius_graph_per_conformer(
            pos, p2c, 0.6, max_neighbors, loop=loop, max_block_elements=block
        )
        got = set(map(tuple, ei.T.tolist()))
        assert got == ref and ei.shape[1] == len(ref)
    assert len(ref) > 0


def test_radius_graph_on_batch_never_crosses_conformers(float_dtype):
    mol = _embedded("CCCCCO", 2)
    b = collate_ensembles(
        [EnsembleGraph.from_rdkit(mol), EnsembleGraph.from_rdkit(_embedded("CCN", 3))]
    )
    ei = b.radius_graph(0.5)
    assert torch.equal(b.point_to_conf[ei[0]], b.point_to_conf[ei[1]])
    d = (b.pos[ei[0]] - b.pos[ei[1]]).norm(dim=1)
    assert (d <= 0.5).all() and (d > 0).all()
    # bonded atoms are within 0.2 nm in every conformer
    ei2 = b.radius_graph(0.2)
    pairs = set(
        zip(b.point_to_atom[ei2[0]].tolist(), b.point_to_atom[ei2[1]].tolist(), strict=True)
    )
    assert set(map(tuple, b.bond_index.T.tolist())) <= pairs
    with pytest.raises(ValueError, match="cutoff"):
        radius_graph_per_conformer(b.pos, b.point_to_conf, 0.0)


def test_dataset_loader_and_dtype():
    ds = EnsembleDataset([_random_graph(n, c) for n, c in [(3, 1), (4, 2), (5, 3)]], ["a", "b"])
    batches = list(ds.loader(batch_size=2, shuffle=True, seed=1))
    assert [bb.num_mols for bb in batches] == [2, 1]
    b64 = batches[0].to(dtype=torch.float64)
    assert b64.pos.dtype == torch.float64 and b64.z.dtype == torch.long

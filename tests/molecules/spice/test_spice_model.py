"""SPiCE model: joint symmetry (per-conformer E(3), conformer and atom order), batching,
readouts, upcycling from a dense model, input errors."""

from __future__ import annotations

import pytest
import torch
from e3nn.util.test import assert_equivariant

from sci_moe.molecules.backbone import vectors_to_irreps
from sci_moe.molecules.graph import EnsembleGraph, collate_ensembles
from sci_moe.molecules.spice.ensemble import CrossConformerIntegration, conformer_packing
from sci_moe.molecules.spice.model import SPiCE, SPiCEConfig, segment_softmax
from sci_moe.testing import random_ensemble_graph

FA, FB = 5, 3


def random_graph(n: int, c: int, seed: int, n_targets: int = 2) -> EnsembleGraph:
    """A random chain molecule with ``c`` conformers (positions in nm)."""
    return random_ensemble_graph(n, c, seed, n_targets, atom_dim=FA, bond_dim=FB)


def small_model(**kw) -> SPiCE:
    cfg = dict(
        n_targets=2,
        atom_dim=FA,
        bond_dim=FB,
        hidden=16,
        num_layers=2,
        num_rbf=6,
        num_experts=4,
        top_k=2,
        cutoff_nm=0.35,
    )
    cfg.update(kw)
    return SPiCE(SPiCEConfig(**cfg))


def _random_o3(g):
    q, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    return -q if torch.rand(1, generator=g) < 0.5 else q


@pytest.fixture
def f64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize("readout", ["mean", "boltzmann", "learned"])
def test_invariant_to_per_conformer_e3_and_orders(f64, readout):
    model = small_model(readout=readout).eval()
    mol = random_graph(9, 4, seed=1)
    ref = model(collate_ensembles([mol])).pred
    g = torch.Generator().manual_seed(5)
    # independent rotation + reflection + translation of every conformer
    pos = torch.stack([p @ _random_o3(g).T + torch.randn(3, generator=g) for p in mol.pos])
    # permutation of conformers and of atoms
    cperm = torch.randperm(4, generator=g)
    aperm = torch.randperm(9, generator=g)
    inv = torch.argsort(aperm)
    moved = EnsembleGraph(
        z=mol.z[aperm],
        atom_attr=mol.atom_attr[aperm],
        bond_index=inv[mol.bond_index],
        bond_attr=mol.bond_attr,
        pos=pos[cperm][:, aperm],
        conf_energy=mol.conf_energy[cperm],
        conf_weight=mol.conf_weight[cperm],
        y=mol.y,
    )
    out = model(collate_ensembles([moved])).pred
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=1e-9)


def test_invariance_check_catches_a_broken_model(f64):
    # Test the tester: leaking raw coordinates into the readout must break invariance.
    model = small_model().eval()
    mol = random_graph(9, 3, seed=2)
    b = collate_ensembles([mol])
    moved = collate_ensembles([EnsembleGraph(**{**mol.to_dict(), "pos": mol.pos + 0.3})])
    assert torch.allclose(model(b).pred, model(moved).pred)
    h_hook = model.encoder.register_forward_hook(
        lambda m, args, out: (out[0] + 10 * args[2][:, :1], *out[1:])
    )
    try:
        assert not torch.allclose(model(b).pred, model(moved).pred)
    finally:
        h_hook.remove()


def test_vector_features_equivariant_per_conformer(f64):
    model = small_model().eval()
    mol = random_graph(8, 1, seed=3)
    b = collate_ensembles([mol])

    def f(pos):
        b.pos = pos
        h, v, _, _ = model.encode(b)
        return h, vectors_to_irreps(v)

    assert_equivariant(
        f, args_in=[b.pos.clone()], irreps_in=["cartesian_points"], irreps_out=["16x0e", "16x1o"]
    )


def test_each_conformers_vectors_rotate_with_its_own_rotation(f64):
    # Independent O(3) + translation per conformer: scalars unchanged, vectors of
    # conformer c rotated by R_c (never mixed across conformers).
    model = small_model().eval()
    mol = random_graph(7, 3, seed=6)
    b = collate_ensembles([mol])
    h, v, t, _ = model.encode(b)
    g = torch.Generator().manual_seed(9)
    rots = [_random_o3(g) for _ in range(3)]
    moved = [
        p @ r.T + torch.randn(3, generator=g, dtype=p.dtype)
        for p, r in zip(mol.pos, rots, strict=True)
    ]
    b.pos = torch.cat(moved)
    h2, v2, t2, _ = model.encode(b)
    torch.testing.assert_close(h2, h)
    torch.testing.assert_close(t2, t)
    for c, r in enumerate(rots):
        sel = b.point_to_conf == c
        torch.testing.assert_close(v2[sel], torch.einsum("ij,pjf->pif", r, v[sel]))


def test_batch_equals_one_at_a_time():
    model = small_model(readout="learned").eval()
    mols = [random_graph(n, c, seed=s) for s, (n, c) in enumerate([(7, 3), (10, 1), (6, 5)])]
    together = model(collate_ensembles(mols)).pred
    alone = torch.cat([model(collate_ensembles([m])).pred for m in mols])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_loss_masks_missing_targets_and_trains():
    model = small_model()
    mols = [random_graph(8, 2, seed=s) for s in range(4)]
    b = collate_ensembles(mols)
    model.set_target_stats(b.y)
    b.y[0, 1] = float("nan")
    loss, out = model.loss(b)
    assert torch.isfinite(loss) and out.pred.shape == (4, 2)
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "experts" in n)
    assert len(out.moe) == 2 and out.aux_loss > 0


def test_from_dense_upcycles_exactly():
    dense = small_model(use_moe=False).eval()
    moe = SPiCE.from_dense(dense).eval()
    b = collate_ensembles([random_graph(8, 3, seed=4), random_graph(6, 2, seed=5)])
    # every expert is a copy of the dense one and routing weights sum to one
    torch.testing.assert_close(moe(b).pred, dense(b).pred, atol=1e-5, rtol=1e-5)
    assert moe.num_parameters() > dense.num_parameters()
    up = small_model(upcycle=True).eval()
    assert up.is_dense
    up.upcycle_()
    assert not up.is_dense


def test_cross_conformer_attention_matches_a_loop_over_conformers(f64):
    """The padded (C, heads, n_max, n_max) attention equals per-conformer attention."""
    F, H = 8, 2
    cross = CrossConformerIntegration(F, FB, heads=H)
    mols = [random_graph(n, c, seed=s) for s, (n, c) in enumerate([(7, 3), (4, 1), (9, 2)])]
    b = collate_ensembles(mols)
    g = torch.Generator().manual_seed(3)
    h = torch.randn(b.num_points, F, generator=g)
    t = torch.randn(b.num_atoms, F, generator=g)
    args = (h, t, b.point_to_atom, b.point_to_conf, b.num_confs, b.bond_index, b.bond_attr)
    h_new, t_new = cross(*args)
    h_packed, _ = cross(*args, conformer_packing(b.point_to_conf, b.num_confs))
    torch.testing.assert_close(h_packed, h_new, rtol=0, atol=0)
    # reference: t from the module's own GINE step, then one softmax per conformer and head
    m = torch.zeros(b.num_atoms, F).index_add_(0, b.point_to_atom, h)
    m = m / torch.bincount(b.point_to_atom, minlength=b.num_atoms).unsqueeze(1)
    src, dst = b.bond_index
    agg = torch.zeros_like(m).index_add_(
        0, dst, torch.nn.functional.silu(m[src] + cross.bond(b.bond_attr))
    )
    t_ref = cross.norm_t(t + cross.gine((1 + cross.eps) * m + agg))
    torch.testing.assert_close(t_new, t_ref)
    q = cross.q(cross.norm_q(t_ref))[b.point_to_atom]
    k, v = cross.k(cross.norm_k(h)), cross.v(h)
    out = torch.empty_like(h)
    d = F // H
    for c in range(b.num_confs):
        idx = torch.nonzero(b.point_to_conf == c).squeeze(1)
        for hd in range(H):
            cols = slice(hd * d, (hd + 1) * d)
            a = torch.softmax(q[idx, cols] @ k[idx, cols].T / d**0.5, dim=-1)
            out[idx, cols] = a @ v[idx, cols]
    torch.testing.assert_close(h_new, cross.norm_h(h + cross.rho(out)))


def test_segment_softmax():
    s = torch.tensor([1.0, 2.0, 3.0, 100.0])
    w = segment_softmax(s, torch.tensor([0, 0, 1, 1]), 2)
    torch.testing.assert_close(w[:2].sum(), torch.tensor(1.0))
    torch.testing.assert_close(w[2:].sum(), torch.tensor(1.0))


def test_errors():
    with pytest.raises(ValueError, match="readout"):
        SPiCEConfig(readout="max")
    with pytest.raises(ValueError, match="cutoff_nm"):
        SPiCEConfig(cutoff_nm=0)
    with pytest.raises(ValueError, match="upcycle"):
        SPiCEConfig(use_moe=False, upcycle=True)
    model = small_model()
    with pytest.raises(TypeError, match="EnsembleBatch"):
        model({"z": 1})
    b = collate_ensembles([random_graph(5, 2, seed=0, n_targets=3)])
    with pytest.raises(ValueError, match="n_targets"):
        model.loss(b)
    b.z[0] = 500
    with pytest.raises(ValueError, match="num_atom_types"):
        model(b)


def _alanine_and_mirror_image():
    """(S)-alanine with two conformers and its exact mirror image, (R)-alanine."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles("N[C@@H](C)C(=O)O"))
    AllChem.EmbedMultipleConfs(mol, 2, randomSeed=3, useRandomCoords=True)
    mirror = Chem.Mol(mol)
    for conf in mirror.GetConformers():
        for i, (x, y, z) in enumerate(conf.GetPositions()):
            conf.SetAtomPosition(i, (-x, y, z))
    Chem.AssignStereochemistryFrom3D(mirror)
    return mol, mirror


def test_default_config_tells_enantiomers_apart():
    # the geometry is invariant to reflections: only the atom features (CIP label) see
    # chirality, and the default config used to ignore them (atom_dim=0)
    mol, mirror = _alanine_and_mirror_image()
    s, r = EnsembleGraph.from_rdkit(mol), EnsembleGraph.from_rdkit(mirror)
    assert not torch.equal(s.atom_attr, r.atom_attr)  # chirality=S vs chirality=R
    batch = collate_ensembles([s, r])
    with torch.no_grad():
        torch.manual_seed(0)
        pred = SPiCE(SPiCEConfig()).eval()(batch).pred
        # the control: without atom features the two predictions are the same
        torch.manual_seed(0)
        blind = SPiCE(SPiCEConfig(atom_dim=0)).eval()(batch).pred
    assert abs(float(pred[0, 0] - pred[1, 0])) > 1e-4
    assert abs(float(blind[0, 0] - blind[1, 0])) < 1e-5


def test_float64_model_is_rotation_invariant_with_graphs_built_in_float32():
    import numpy as np
    from rdkit import Chem

    mol, _ = _alanine_and_mirror_image()
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    rotated = Chem.Mol(mol)
    for conf in rotated.GetConformers():
        for i, p in enumerate(conf.GetPositions() @ q.T):
            conf.SetAtomPosition(i, p.tolist())
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        graphs = [EnsembleGraph.from_rdkit(m) for m in (mol, rotated)]
    finally:
        torch.set_default_dtype(old)
    assert graphs[0].pos.dtype == torch.float64  # positions keep their precision
    torch.manual_seed(0)
    model = SPiCE(SPiCEConfig(hidden=16, num_layers=2, num_experts=4)).double().eval()
    with torch.no_grad():
        a, b = (model(collate_ensembles([g])).pred for g in graphs)
    assert a.dtype == torch.float64
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_without_directions_the_vectors_stay_zero_and_the_weights_are_the_same():
    """``directions=False`` (SPiCE's invariant ablation): distances only, zero vectors."""
    torch.manual_seed(0)
    full, inv = small_model(), small_model(directions=False)
    inv.load_state_dict(full.state_dict())  # same parameters, nothing added or dropped
    b = collate_ensembles([random_graph(7, 3, seed=1), random_graph(5, 2, seed=2)])
    h, v, _, _ = inv.encode(b)
    assert torch.isfinite(h).all() and torch.count_nonzero(v) == 0
    assert torch.count_nonzero(full.encode(b)[1]) > 0
    assert not torch.allclose(inv(b).pred, full(b).pred)
    loss, _ = inv.loss(b)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in inv.parameters() if p.grad is not None)


def test_without_attention_the_mean_and_gine_stay_and_no_attention_weights_exist():
    """``attention=False`` (ablation of the cross-conformer attention alone)."""
    torch.manual_seed(0)
    full, no_att = small_model(), small_model(attention=False)
    attn = ("norm_q", "norm_k", ".q.", ".k.", ".v.")
    full_keys, keys = set(full.state_dict()), set(no_att.state_dict())
    assert keys < full_keys  # nothing added; only the attention's weights dropped
    assert {k.split(".")[3] for k in full_keys - keys} == {"norm_q", "norm_k", "q", "k", "v"}
    assert not any(a in k for k in keys for a in attn)
    assert any(".gine." in k for k in keys) and any(".rho." in k for k in keys)
    b = collate_ensembles([random_graph(7, 3, seed=1), random_graph(5, 2, seed=2)])
    out = no_att(b)
    assert out.pred.shape == (2, 2) and torch.isfinite(out.pred).all()
    # h is the reference update from the module's own t: LN(h + rho(t[point_to_atom]))
    F = 16
    g = torch.Generator().manual_seed(3)
    h = torch.randn(b.num_points, F, generator=g)
    t = torch.randn(b.num_atoms, F, generator=g)
    cross = CrossConformerIntegration(F, FB, heads=4, attention=False)
    args = (h, t, b.point_to_atom, b.point_to_conf, b.num_confs, b.bond_index, b.bond_attr)
    h_new, t_new = cross(*args)
    torch.testing.assert_close(h_new, cross.norm_h(h + cross.rho(t_new[b.point_to_atom])))
    # the topology features reach the prediction (the GINE weights matter)
    with torch.no_grad():
        before = no_att(b).pred
        no_att.encoder.cross[0].gine[0].weight.add_(1.0)
        assert not torch.allclose(no_att(b).pred, before)
    loss, _ = no_att.loss(b)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in no_att.parameters() if p.grad is not None)


def test_attention_switch_default_keeps_keys_and_outputs():
    """The default (``attention=True``) is the model as before the switch: the same
    state-dict keys and, seeded, the same weights and outputs as an explicit ``True``."""
    torch.manual_seed(0)
    default = small_model().eval()
    torch.manual_seed(0)
    explicit = small_model(attention=True).eval()
    cross0 = {k for k in default.state_dict() if k.startswith("encoder.cross.0.")}
    names = ["bond", "gine.0", "gine.2", "norm_t", "norm_q", "norm_k", "rho.0", "rho.2", "norm_h"]
    expected = {f"encoder.cross.0.{n}.{p}" for n in names for p in ("weight", "bias")}
    expected |= {f"encoder.cross.0.{n}.weight" for n in ("q", "k", "v")} | {"encoder.cross.0.eps"}
    assert cross0 == expected
    sd, sd2 = default.state_dict(), explicit.state_dict()
    assert list(sd) == list(sd2) and all(torch.equal(sd[k], sd2[k]) for k in sd)
    b = collate_ensembles([random_graph(7, 3, seed=1), random_graph(5, 2, seed=2)])
    torch.testing.assert_close(default(b).pred, explicit(b).pred, rtol=0, atol=0)


def test_attention_switch_is_validated():
    with pytest.raises(ValueError, match="cross_conformer"):
        SPiCEConfig(cross_conformer=False, attention=False)
    with pytest.raises(ValueError, match="bool"):
        SPiCEConfig(attention="no")
    with pytest.raises(ValueError, match="bool"):
        CrossConformerIntegration(8, 0, attention=1)
    with pytest.raises(ValueError, match="heads"):
        SPiCEConfig(hidden=10, heads=4)
    # without attention the heads need not divide the width
    assert SPiCEConfig(hidden=10, heads=4, attention=False).encoder_config().attention is False

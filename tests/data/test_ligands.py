"""Kraken-like ligand set: enumeration, descriptors, builder (cache, resume, failures)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sci_moe.data.ligands import LIGAND_CLASSES, choose_ligands, ligand_pool
from sci_moe.data.ligands_build import (
    LIGAND_TARGETS,
    LigandSetConfig,
    build_ligand_set,
)
from sci_moe.data.ligands_descriptors import DESCRIPTORS, dummy_metal
from sci_moe.data.ligands_oracle import oracle_gap
from sci_moe.data.molecule_set_store import MoleculeSet
from sci_moe.molecules import ConformerConfig

TINY = [("PMe2Et", "CCP(C)C"), ("P(OMe)2Et", "CCP(OC)OC"), ("NotP", "CCO"), ("PEt3", "CCP(CC)CC")]


def _cfg(n=2):
    return LigandSetConfig(n_ligands=n, conformers=ConformerConfig(num_attempts=6, max_confs=3))


def test_pool_is_large_deterministic_and_interleaved():
    pool = ligand_pool()
    assert len(pool) >= 1000
    assert len({s for _, s, _ in pool}) == len(pool)  # deduplicated
    assert {c for *_, c in pool} == set(LIGAND_CLASSES)
    a, b = choose_ligands(30, seed=1), choose_ligands(60, seed=1)
    assert a == b[:30]  # n only truncates
    assert [c for *_, c in a[:3]] == list(LIGAND_CLASSES)
    assert choose_ligands(30, seed=2) != a
    with pytest.raises(ValueError, match="unknown ligand classes"):
        ligand_pool(["phosphate"])
    with pytest.raises(ValueError, match="n must be"):
        choose_ligands(0)


def test_dummy_metal_on_lone_pair_axis():
    x = np.array([[0, 0, 0.5], [1, 0, 0], [-0.5, 0.87, 0], [-0.5, -0.87, 0]])
    m = dummy_metal(x, 0, [1, 2, 3])
    assert np.linalg.norm(m - x[0]) == pytest.approx(2.28)
    assert m[2] > x[0, 2]  # opposite the substituents
    with pytest.raises(ValueError, match="planar"):
        dummy_metal(np.array([[0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 0, 0]]) * 1.0, 0, [1, 2])


def test_config_validation():
    with pytest.raises(ValueError, match="n_ligands"):
        LigandSetConfig(n_ligands=0)
    with pytest.raises(ValueError, match="classes"):
        LigandSetConfig(classes=("phosphate",))


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("ligset")
    ms = build_ligand_set(out, _cfg(3), n_jobs=1, progress=False, ligands=TINY)
    return out, ms


def test_build_targets_failures_and_report(tiny_set):
    out, ms = tiny_set
    assert ms.names == ["PMe2Et", "P(OMe)2Et", "PEt3"]  # NotP replaced by the next one
    assert ms.target_names == list(LIGAND_TARGETS)
    assert ms.targets.shape == (3, 3 * len(DESCRIPTORS))
    assert ms.conf_targets.shape == (ms.conf_ptr[-1], 3 * len(DESCRIPTORS))
    for d in DESCRIPTORS:
        b, lo, hi = (ms.target_names.index(d + s) for s in ("", "_min", "_max"))
        assert np.all(ms.targets[:, lo] <= ms.targets[:, b] + 1e-12)
        assert np.all(ms.targets[:, b] <= ms.targets[:, hi] + 1e-12)
        for i in range(len(ms)):
            c = ms.conf_targets[ms.conf_ptr[i] : ms.conf_ptr[i + 1], b]
            w = ms.conformer_weights(i)
            assert ms.targets[i, b] == pytest.approx(w @ c)
            assert ms.targets[i, hi] == pytest.approx(c.max())
    rep = json.loads((out / "report.json").read_text())
    assert [f["name"] for f in rep["failures"]] == ["NotP"]
    assert rep["failures"][0]["stage"] == "ligand"
    assert rep["n_uff_fallback"] == 0 and rep["n_mmff"] == 3
    gap = rep["statistics"]["sterimol_B5_max"]
    assert {"std", "mae_lowest", "mae_random", "rel_lowest"} <= set(gap)
    assert "sterimol_burB5" in rep["targets"] and "ip_ev_min" in rep["targets"]
    # physically sensible: %Vbur in (0, 100), IP > HOMO-free bound, cone angle in (0, 360)
    col = ms.target_names.index
    assert np.all((ms.targets[:, col("vbur")] > 5) & (ms.targets[:, col("vbur")] < 100))
    assert np.all(ms.targets[:, col("ip_ev")] > 5)
    # loads back with the checksum and gives graphs for any target subset
    ms2 = MoleculeSet.load(out)
    assert ms2.content_sha256() == ms.content_sha256()
    g = ms2.graphs(targets=["sterimol_B5_max", "vbur"])
    assert g[0].y.shape == (2,) and g[0].conf_y.shape == (g[0].num_confs, 2)


def test_oracle_gap_lowest_and_min_max(tiny_set):
    _, ms = tiny_set
    gap = oracle_gap(ms)
    low = ms.lowest_energy_targets()
    t = ms.target_names.index("sterimol_L_min")
    assert gap["sterimol_L_min"]["mae_lowest"] == pytest.approx(
        np.abs(low[:, t] - ms.targets[:, t]).mean()
    )
    assert gap["sterimol_L_min"]["rel_lowest"] == pytest.approx(
        gap["sterimol_L_min"]["mae_lowest"] / ms.targets[:, t].std()
    )


def test_resume_after_kill_gives_same_content(tiny_set, tmp_path):
    _, ref = tiny_set

    class Kill(Exception):
        pass

    seen = []

    def kill_after_first(name):
        seen.append(name)
        if len(seen) == 1:
            raise Kill(name)

    with pytest.raises(Kill):
        build_ligand_set(
            tmp_path, _cfg(3), n_jobs=1, progress=False, ligands=TINY, on_ligand=kill_after_first
        )
    assert not (tmp_path / "molecule_set.npz").exists()
    ms = build_ligand_set(tmp_path, _cfg(3), n_jobs=1, progress=False, ligands=TINY)
    assert ms.content_sha256() == ref.content_sha256()
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["cache_hits"]["labels"] == 1 and rep["cache_hits"]["conformers"] == 3


def test_uff_fallback_ensemble(tmp_path):
    from sci_moe.data.ligands_conformers import uff_ensemble

    cfg = ConformerConfig(num_attempts=4, max_confs=2)
    e = uff_ensemble("PMe3", "CP(C)C", cfg, tmp_path)
    assert e.num_confs >= 1 and e.energies_kj.min() == 0.0
    again = uff_ensemble("PMe3", "CP(C)C", cfg, tmp_path)  # from the cache
    np.testing.assert_array_equal(again.positions_nm, e.positions_nm)
    with pytest.raises(ValueError, match="invalid SMILES"):
        uff_ensemble("bad", "C(", cfg)


def test_vertical_ip_ea_phosphine():
    from sci_moe.data.xtb import vertical_ip_ea

    # PH3 at a fixed geometry (nm)
    z = np.array([15, 1, 1, 1])
    x = np.array([[0, 0, 0.0], [0.142, 0, -0.0], [-0.035, 0.138, 0], [-0.035, -0.05, 0.128]])
    ip, ea = vertical_ip_ea(z, x)
    assert 8 < ip < 20 and np.isfinite(ea) and ea < ip
    ip2, ea2 = vertical_ip_ea(z, x, ea=False)
    assert ip2 == pytest.approx(ip) and np.isnan(ea2)


def _as_marcel_kraken(ms: MoleculeSet, targets) -> bytes:
    """The ligand set written in MARCEL's on-disk Kraken layout (``Kraken.pickle``)."""
    import pickle

    from rdkit import Chem

    cols = [ms.target_names.index(t) for t in targets]
    data = {}
    for i in range(len(ms)):
        mol = ms.mol(i)
        w = ms.conformer_weights(i)
        c0 = int(ms.conf_ptr[i])
        confs = {}
        for k in range(ms.num_confs(i)):
            props = {
                t: float(ms.conf_targets[c0 + k, c]) for t, c in zip(targets, cols, strict=True)
            }
            confs[f"conf{k}"] = (Chem.MolToMolBlock(mol, confId=k), float(w[k]), props)
        boltz = {t: float(ms.targets[i, c]) for t, c in zip(targets, cols, strict=True)}
        data[i] = (ms.smiles[i], boltz, confs)
    return pickle.dumps(data)


def test_marcel_kraken_format_gives_the_same_batches(tiny_set, tmp_path):
    """A user with MARCEL's Kraken.zip runs the same benchmark: same targets, same batches."""
    import zipfile

    from sci_moe.data.marcel import load_kraken
    from sci_moe.molecules import collate_ensembles

    _, ms = tiny_set
    targets = ("sterimol_B5", "sterimol_L", "sterimol_burB5", "sterimol_burL")  # MARCEL's
    assert set(targets) <= set(ms.target_names)
    path = tmp_path / "Kraken.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("Kraken.pickle", _as_marcel_kraken(ms, targets))
    ds = load_kraken(path, max_confs=20, targets=targets)
    assert ds.target_names == list(targets) and not ds.failures
    ours = ms.graphs(targets=list(targets))
    theirs = ds.graphs("mol")
    # MARCEL orders conformers by weight; compare in that order
    for a, b in zip(ours, theirs, strict=True):
        order = np.argsort(-a.conf_weight.numpy(), kind="stable")
        for f in ("z", "atom_attr", "bond_index", "bond_attr"):
            assert getattr(a, f).dtype == getattr(b, f).dtype
            assert torch_equal(getattr(a, f), getattr(b, f))
        np.testing.assert_allclose(a.pos.numpy()[order], b.pos.numpy(), atol=1e-4)
        np.testing.assert_allclose(a.conf_weight.numpy()[order], b.conf_weight.numpy(), rtol=1e-5)
        np.testing.assert_allclose(a.y.numpy(), b.y.numpy(), rtol=1e-6)
        np.testing.assert_allclose(a.conf_y.numpy()[order], b.conf_y.numpy(), rtol=1e-6)
    ba, bb = collate_ensembles(ours), collate_ensembles(theirs)
    fields = ("z", "atom_attr", "bond_index", "bond_attr", "atom_to_mol", "pos", "point_to_atom")
    fields += ("point_to_conf", "conf_to_mol", "conf_weight", "conf_energy", "y", "conf_y")
    for f in fields:
        x, y = getattr(ba, f), getattr(bb, f)
        assert x.dtype == y.dtype and x.shape == y.shape, f
    assert ba.num_mols == bb.num_mols == len(ms)


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())

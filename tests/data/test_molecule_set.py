"""Offline molecule set: pool, geometric labels, a tiny build, load, checksums, cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import rdMolDescriptors
from scipy.spatial.transform import Rotation

from sci_moe.data.molecule_set import (
    TARGETS,
    MoleculeSet,
    MoleculeSetConfig,
    build_molecule_set,
    geometric_labels,
    nci_pool,
)
from sci_moe.molecules.conformers import ConformerConfig
from sci_moe.molecules.graph import boltzmann_weights, collate_ensembles

pytest.importorskip("tblite")
pytest.importorskip("morfeus")


def test_nci_pool_filters():
    pool = nci_pool()
    assert len(pool) >= 500
    assert len({n for n, _ in pool}) == len(pool)
    for name, smi in pool[::25]:
        mol = Chem.MolFromSmiles(smi)
        assert name.startswith("NCI-")
        assert 4 <= rdMolDescriptors.CalcNumRotatableBonds(mol) <= 8
        assert 12 <= mol.GetNumHeavyAtoms() <= 30
        assert all(a.GetFormalCharge() == 0 for a in mol.GetAtoms())
        assert len(Chem.GetMolFrags(mol)) == 1
    assert len(nci_pool(min_rotatable=6, max_rotatable=6)) < len(pool)


def test_geometric_labels():
    # two carbon atoms 0.3 nm apart: Rg = 0.15 nm; SASA of two far-apart atoms = 2 spheres
    z = np.array([6, 6])
    pos = np.array([[[0.0, 0.0, 0.0], [0.3, 0.0, 0.0]], [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]]])
    rg, sasa = geometric_labels(z, pos, sasa_density=0.01)
    np.testing.assert_allclose(rg, [0.15, 1.5])
    r_c = 0.17 + 0.14  # CRC vdW radius of C + water probe, nm
    assert sasa[1] == pytest.approx(2 * 4 * np.pi * r_c**2, rel=0.02)
    assert sasa[0] < sasa[1]  # overlapping spheres bury surface
    # rotation + translation invariant
    R = Rotation.from_euler("xyz", [0.4, 1.2, -0.7]).as_matrix()
    rg2, sasa2 = geometric_labels(z, pos @ R.T + 0.5, sasa_density=0.01)
    np.testing.assert_allclose(rg2, rg, rtol=1e-10)
    np.testing.assert_allclose(sasa2, sasa, rtol=0.02)
    with pytest.raises(ValueError, match="positions"):
        geometric_labels(z, pos[:, :1])


TINY = [
    ("ethanol", "CCO"),
    ("typo", "C1CC"),
    ("butanol", "CCCCO"),
    ("ethanol-again", "OCC"),
    ("propylamine", "CCCN"),
    ("unused", "CCOC"),
]


def _cfg(n=3):
    return MoleculeSetConfig(
        n_molecules=n,
        conformers=ConformerConfig(num_attempts=4, max_confs=2, seed=3, prune_rms=0.1),
        sasa_density=0.5,
    )


def test_build_load_and_cache(tmp_path):
    out = tmp_path / "set"
    ms = build_molecule_set(out, _cfg(), n_jobs=1, progress=False, plot=False, molecules=TINY)
    # the invalid SMILES is reported and replaced by the next candidate
    assert ms.names == ["ethanol", "butanol", "propylamine"]
    report = json.loads((out / "report.json").read_text())
    assert report["n_molecules"] == 3 and report["n_candidates_tried"] == 5
    assert report["failures"][0]["name"] == "typo" and report["failures"][0]["stage"] == "parse"
    # the same molecule under another name and SMILES spelling is skipped, not duplicated
    assert report["failures"][1]["name"] == "ethanol-again"
    assert report["failures"][1]["stage"] == "duplicate" and report["n_duplicates_skipped"] == 1
    assert set(report["statistics"]) >= set(TARGETS)
    # labels: Boltzmann averages of the per-conformer values with GFN2 weights
    for i in range(len(ms)):
        c0, c1 = ms.conf_ptr[i], ms.conf_ptr[i + 1]
        w = boltzmann_weights(ms.xtb_energy_kj[c0:c1], ms.temperature_k)
        np.testing.assert_allclose(ms.targets[i], w @ ms.conf_targets[c0:c1])
        assert ms.xtb_energy_kj[c0:c1].min() == 0.0
    assert ms.targets[:, 0].min() > 0.5  # alcohols and amines are polar (Debye)
    # load == built; checksums verified
    back = MoleculeSet.load(out)
    assert back.content_sha256() == ms.content_sha256() == report["content_sha256"]
    assert back.names == ms.names
    sums = (out / "checksums.sha256").read_text()
    assert "molecule_set.npz" in sums and "report.json" in sums
    # graphs: atoms of the stored mol block match the stored atomic numbers, y and weights
    graphs = back.graphs()
    for i, g in enumerate(graphs):
        assert g.z.tolist() == back.numbers[back.atom_ptr[i] : back.atom_ptr[i + 1]].tolist()
        np.testing.assert_allclose(g.y.double().numpy(), back.targets[i], rtol=1e-6)
        np.testing.assert_allclose(g.pos.double().numpy(), back.conformer_positions(i), atol=1e-6)
        np.testing.assert_allclose(
            g.conf_weight.double().numpy(), back.conformer_weights(i), rtol=1e-5
        )
        assert g.conf_y.shape == (g.num_confs, len(TARGETS))
    heavy = back.dataset(heavy_only=True, targets=["dipole_debye"])
    b = collate_ensembles([heavy[i] for i in range(len(heavy))])
    assert b.y.shape == (3, 1) and int((b.z == 1).sum()) == 0
    with pytest.raises(ValueError, match="unknown targets"):
        back.graphs(targets=["logp"])
    # a rebuild reads every molecule from the cache and gives identical content
    ms2 = build_molecule_set(out, _cfg(), n_jobs=1, progress=False, plot=False, molecules=TINY)
    rep2 = json.loads((out / "report.json").read_text())
    assert rep2["cache_hits"] == {"conformers": 4, "labels": 3}
    assert ms2.content_sha256() == ms.content_sha256()
    # a corrupted file is detected
    data = bytearray((out / "molecule_set.npz").read_bytes())
    data[-10] ^= 0xFF
    (out / "molecule_set.npz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        MoleculeSet.load(out)


def test_split_marcel_protocol(tmp_path):
    ms = MoleculeSet(
        names=[f"m{i}" for i in range(20)],
        smiles=[""] * 20,
        stereo_smiles=[""] * 20,
        molblocks=[""] * 20,
        atom_ptr=np.arange(21),
        conf_ptr=np.arange(21),
        numbers=np.ones(20, dtype=int),
        positions_nm=np.zeros((20, 3)),
        mmff_energy_kj=np.zeros(20),
        xtb_energy_kj=np.zeros(20),
        conf_targets=np.zeros((20, 4)),
        targets=np.zeros((20, 4)),
    )
    tr, va, te = ms.split(seed=123)
    assert (len(tr), len(va), len(te)) == (14, 2, 4)
    assert sorted(np.concatenate([tr, va, te]).tolist()) == list(range(20))
    from sklearn.utils import shuffle

    np.testing.assert_array_equal(tr, shuffle(np.arange(20), random_state=123)[:14])
    assert not np.array_equal(ms.split(seed=1)[0], tr)
    with pytest.raises(ValueError, match="fractions"):
        ms.split(fractions=(0.5, 0.5, 0.5))


def test_cli_errors_and_missing(tmp_path, capsys):
    with pytest.raises(ValueError, match="no molecule set"):
        MoleculeSet.load(tmp_path)
    from sci_moe.cli.main import main

    with pytest.raises(SystemExit):
        main(["data", "molecules", "--full", "--n", "5", "--out", str(tmp_path)])
    # the argparse front end is on the CLI floor only (no pointer left in the data floor)
    import sci_moe.data.molecule_set as data_module

    assert not hasattr(data_module, "run_from_args")
    with pytest.raises(ValueError, match="n_molecules"):
        MoleculeSetConfig(n_molecules=0)
    assert torch.get_default_dtype() == torch.float32


def test_cli_data_molecules(tmp_path, capsys):
    import argparse

    from sci_moe.cli import data as data_cli

    parser = argparse.ArgumentParser(prog="sci-moe")
    data_cli.add_parser(parser.add_subparsers(dest="command"))
    smi = tmp_path / "in.smi"
    smi.write_text("CCO ethanol\nnot_smiles bad\nCCN\n")
    args = parser.parse_args(
        [
            "data",
            "molecules",
            "--smiles",
            str(smi),
            "--n",
            "2",
            "--max-confs",
            "2",
            "--jobs",
            "1",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "2 molecules" in out and "failed bad" in out
    assert MoleculeSet.load(tmp_path / "o").names == ["ethanol", "line3"]
    args = parser.parse_args(
        ["data", "molecules", "--smiles", str(tmp_path / "none"), "--out", "x"]
    )
    with pytest.raises(ValueError, match="does not exist"):
        args.func(args)

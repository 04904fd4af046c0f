"""Conformer ensembles: seeded embedding, pruning, Boltzmann weights, cache, failure report."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem, rdMolAlign

from sci_moe.molecules.conformers import (
    KCAL_TO_KJ,
    ConformerConfig,
    embed_ensemble,
    ensemble_cache_key,
    generate_ensembles,
)
from sci_moe.molecules.graph import boltzmann_weights

CFG = ConformerConfig(num_attempts=8, max_confs=3, seed=11)


def test_ensemble_energies_weights_and_pruning():
    ens = embed_ensemble("CCCCCO", CFG, name="pentanol")
    c = ens.num_confs
    assert 1 <= c <= 3 and ens.name == "pentanol" and ens.smiles == "CCCCCO"
    assert ens.energies_kj[0] == 0.0 and (np.diff(ens.energies_kj) >= 0).all()
    # energies are the MMFF94 energies (kJ/mol) of the stored geometries
    mol = Chem.Mol(ens.mol)
    props = AllChem.MMFFGetMoleculeProperties(mol)
    e = []
    for conf in mol.GetConformers():
        ff = AllChem.MMFFGetMoleculeForceField(mol, props, confId=conf.GetId())
        e.append(ff.CalcEnergy() * KCAL_TO_KJ)
    np.testing.assert_allclose(np.array(e) - min(e), ens.energies_kj, atol=1e-3)
    assert ens.min_energy_kj == pytest.approx(min(e), abs=1e-3)
    np.testing.assert_allclose(ens.weights, boltzmann_weights(ens.energies_kj, 298.15))
    # pairwise heavy-atom RMSD (symmetry-aware) above the threshold
    heavy = Chem.RemoveHs(mol)
    for i in range(c):
        for j in range(i):
            assert rdMolAlign.GetBestRMS(Chem.Mol(heavy), heavy, i, j) >= CFG.prune_rms
    assert ens.positions_nm.shape == (c, 18, 3)
    # seeded: same result twice
    again = embed_ensemble("CCCCCO", CFG)
    np.testing.assert_allclose(again.positions_nm, ens.positions_nm)


def test_pruning_removes_duplicates_of_rigid_molecule():
    ens = embed_ensemble("c1ccccc1", ConformerConfig(num_attempts=5, max_confs=5, seed=1))
    assert ens.num_confs == 1
    loose = embed_ensemble(
        "CCCCCO", ConformerConfig(num_attempts=8, max_confs=8, prune_rms=0.0, energy_window_kj=None)
    )
    assert loose.num_confs == 8  # no pruning, no window: every embedded conformer is kept


def test_bad_input_single():
    with pytest.raises(ValueError, match="invalid SMILES"):
        embed_ensemble("C1CC", CFG, name="broken")
    with pytest.raises(ValueError, match="MMFF94"):
        embed_ensemble("[Xe]", CFG)
    with pytest.raises(ValueError, match="force_field"):
        ConformerConfig(force_field="gaff")


def test_batch_report_cache_and_parallel(tmp_path):
    mols = ["CCO", "not-a-smiles", "[Xe]", "CC(C)CC(=O)O", Chem.MolFromSmiles("OCCN")]
    names = ["ethanol", "typo", "xenon", "acid", "aminoethanol"]
    ens, rep = generate_ensembles(
        mols,
        CFG,
        names=names,
        n_jobs=2,
        cache_dir=tmp_path / "cache",
        mp_context="fork",
        report_path=tmp_path / "report.json",
    )
    assert [e.name for e in ens] == ["ethanol", "acid", "aminoethanol"]
    assert rep.n_input == 5 and rep.n_ok == 3 and rep.n_failed == 2 and rep.n_cached == 0
    reasons = {f["name"]: (f["stage"], f["reason"]) for f in rep.failures}
    assert reasons["typo"][0] == "parse" and "not-a-smiles" in reasons["typo"][1]
    assert reasons["xenon"][0] == "forcefield"
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["n_failed"] == 2 and saved["n_confs"]["acid"] == ens[1].num_confs
    assert "typo" in rep.summary()
    # a rerun reads everything (failures too) from the cache and gives the same result
    ens2, rep2 = generate_ensembles(mols, CFG, names=names, n_jobs=1, cache_dir=tmp_path / "cache")
    assert rep2.n_cached == 5 and rep2.n_failed == 2
    for a, b in zip(ens, ens2, strict=True):
        np.testing.assert_array_equal(a.positions_nm, b.positions_nm)
        np.testing.assert_array_equal(a.energies_kj, b.energies_kj)
        assert Chem.MolToSmiles(a.mol) == Chem.MolToSmiles(b.mol)
    # serial and parallel agree (seeded per molecule)
    ens3, _ = generate_ensembles(mols, CFG, names=names, n_jobs=1)
    for a, b in zip(ens, ens3, strict=True):
        np.testing.assert_allclose(a.positions_nm, b.positions_nm)
    # a different setting is a different cache entry
    assert ensemble_cache_key("CCO", CFG) != ensemble_cache_key(
        "CCO", ConformerConfig(num_attempts=8, max_confs=3, seed=12)
    )
    # temperature only changes weights, not the cache key
    hot = ConformerConfig(num_attempts=8, max_confs=3, seed=11, temperature_k=600.0)
    assert ensemble_cache_key("CCO", CFG) == ensemble_cache_key("CCO", hot)


def test_corrupt_cache_entry_is_recomputed(tmp_path):
    _, rep = generate_ensembles(["CCO"], CFG, cache_dir=tmp_path)
    entry = next(tmp_path.rglob("*.npz"))
    entry.write_bytes(b"garbage")
    ens, rep = generate_ensembles(["CCO"], CFG, cache_dir=tmp_path)
    assert rep.n_cached == 0 and rep.n_ok == 1 and ens[0].num_confs >= 1


def test_duplicate_names_rejected():
    with pytest.raises(ValueError, match="unique"):
        generate_ensembles(["CCO", "CCN"], CFG, names=["a", "a"])


def test_to_graph_with_other_energies(float_dtype):
    ens = embed_ensemble("CCCCO", CFG)
    e = np.linspace(0.0, 3.0, ens.num_confs)
    g = ens.to_graph(y=[1.0], energies_kj=e, heavy_only=True)
    assert g.num_atoms == 5 and g.num_confs == ens.num_confs
    np.testing.assert_allclose(g.conf_weight.numpy(), boltzmann_weights(e, 298.15), rtol=1e-6)


def test_unspecified_stereocentre_gets_one_configuration():
    ens = embed_ensemble("CC(O)CCC", ConformerConfig(num_attempts=10, max_confs=5, seed=3))
    assert "@" in ens.stereo_smiles and "@" not in ens.smiles
    tags = set()
    for conf in ens.mol.GetConformers():
        m = Chem.Mol(ens.mol)
        Chem.AssignStereochemistryFrom3D(m, confId=conf.GetId())
        tags.add(Chem.MolToSmiles(Chem.RemoveHs(m)))
    assert tags == {ens.stereo_smiles}  # no mirror-image conformers
    mixed = embed_ensemble(
        "CC(O)CCC", ConformerConfig(num_attempts=10, max_confs=5, seed=3, assign_stereo=False)
    )
    assert "@" not in mixed.stereo_smiles


def test_constrained_stereo_gets_a_feasible_configuration():
    # bridgeheads of a bicyclo[2.2.2]octane look like free stereocentres; enumerating them
    # yields impossible isomers (ETKDG then spends minutes and fails); 3-D assignment works
    smi = "CCOC(=O)[CH]1C2CCC(CC2)[CH]1C(=O)OCC"
    ens = embed_ensemble(smi, ConformerConfig(num_attempts=3, max_confs=2, seed=1))
    assert ens.num_confs >= 1 and ens.stereo_smiles.count("[C@") == 4


def test_import_does_not_load_rdkit():
    # the models need no RDKit; the conformer builders load it on first use
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import sci_moe.molecules.spice.geometric_moe\n"
        "assert 'rdkit' not in sys.modules, 'geometric_moe loaded rdkit'\n"
        "import sci_moe.molecules as m\n"
        "import sci_moe.molecules.graph, sci_moe.molecules.spice.model\n"
        "import sci_moe.molecules.spice.train\n"
        "assert 'rdkit' not in sys.modules, 'sci_moe.molecules loaded rdkit'\n"
        "assert m.KCAL_TO_KJ == 4.184 and callable(m.parallel_map)\n"
        "assert m.ConformerConfig().max_confs == 10 and 'rdkit' in sys.modules\n"
        "assert 'generate_ensembles' in dir(m)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_old_module_paths_keep_working():
    import sci_moe.molecules as m
    import sci_moe.molecules.conformers as conformers
    import sci_moe.molecules.graph as graph
    from sci_moe._util import BOLTZMANN_KJ_PER_MOL_K, KJ_PER_KCAL
    from sci_moe._util import parallel_map as util_parallel_map

    for name in conformers.__all__:
        assert getattr(conformers, name) is getattr(m, name)
    for name in graph.__all__:
        assert getattr(graph, name) is getattr(m, name, getattr(graph, name))
    assert conformers.KCAL_TO_KJ == KJ_PER_KCAL and graph.KB_KJ_PER_MOL_K == BOLTZMANN_KJ_PER_MOL_K
    # the pool is _util's, with an RDKit-silencing worker initializer
    out = conformers.parallel_map(divmod, [(7, 2), (9, 4)], n_jobs=1)
    assert out == util_parallel_map(divmod, [(7, 2), (9, 4)]) == [(3, 1), (2, 1)]
    with pytest.raises(AttributeError, match="no attribute"):
        m.not_a_name  # noqa: B018

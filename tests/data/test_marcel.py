"""MARCEL loaders on tiny synthetic archives written here in the exact file layouts."""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import rdDistGeom

from sci_moe._util import RestrictedUnpickler, restricted_loads
from sci_moe.data.marcel import load_bde, load_drugs, load_ee, load_kraken
from sci_moe.molecules.graph import KB_KJ_PER_MOL_K, boltzmann_weights, collate_ensembles


def _confs(smiles: str, n: int, seed: int = 5) -> list[Chem.Mol]:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    p = rdDistGeom.ETKDGv3()
    p.randomSeed = seed
    cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=n, params=p))
    assert len(cids) == n
    out = []
    for c in cids:
        m = Chem.Mol(mol, confId=c)
        out.append(m)
    return out


def _sdf(records: list[tuple[Chem.Mol, dict]]) -> str:
    buf = io.StringIO()
    w = Chem.SDWriter(buf)
    for mol, props in records:
        m = Chem.Mol(mol)
        for k, v in props.items():
            if k == "_Name":
                m.SetProp("_Name", str(v))
            else:
                m.SetProp(k, str(v))
        w.write(m)
    w.close()
    return buf.getvalue()


def _zip(path, files: dict[str, str | bytes]):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


@pytest.fixture
def drugs_zip(tmp_path):
    eth, prop = _confs("CCO", 3), _confs("CCCN", 2)
    recs = []
    e_eth = [0.30, 0.10, 0.20]  # eV
    for k, m in enumerate(eth):
        recs.append(
            (
                m,
                {
                    "_Name": "ethanol",
                    "ID": f"e{k}",
                    "smiles": "CCO",
                    "energy": e_eth[k],
                    "ip": 7.0 + k,
                    "ea": 0.5,
                    "chi": 3.0,
                    "eta": 1,
                    "omega": 2,
                },
            )
        )
    for k, m in enumerate(prop):
        recs.append(
            (
                m,
                {
                    "_Name": "propylamine",
                    "ID": f"p{k}",
                    "smiles": "CCCN",
                    "energy": 0.05 * k,
                    "ip": 6.0,
                    "ea": 0.1,
                    "chi": 2.0,
                    "eta": 1,
                    "omega": 2,
                },
            )
        )
    # a molecule without a label row
    recs.append(
        (
            _confs("CC", 1)[0],
            {
                "_Name": "ethane",
                "ID": "x",
                "smiles": "CC",
                "energy": 0.0,
                "ip": 1,
                "ea": 1,
                "chi": 1,
                "eta": 1,
                "omega": 1,
            },
        )
    )
    csv = "name,energy,ip,ea,chi\nethanol,0.1,7.5,0.55,3.1\npropylamine,0.0,6.2,0.12,2.05\n"
    return _zip(tmp_path / "Drugs.zip", {"Drugs.sdf": _sdf(recs), "Drugs.csv": csv}), eth


def test_drugs_layout(drugs_zip, float_dtype):
    path, eth = drugs_zip
    ds = load_drugs(path, max_confs=2)
    assert ds.target_names == ["ip", "ea", "chi"] and len(ds) == 2
    assert [s.name for s in ds.samples] == ["ethanol", "propylamine"]
    np.testing.assert_allclose(ds.y, [[7.5, 0.55, 3.1], [6.2, 0.12, 2.05]])
    g = ds.samples[0].parts["mol"]
    assert g.num_confs == 2 and g.num_atoms == 9
    # the two lowest energies (0.10 and 0.20 eV) are conformers 1 and 2, in that order
    np.testing.assert_allclose(
        g.pos[0].double().numpy(), eth[1].GetConformer().GetPositions() / 10, atol=1e-5
    )
    np.testing.assert_allclose(
        g.pos[1].double().numpy(), eth[2].GetConformer().GetPositions() / 10, atol=1e-5
    )
    e_kj = np.array([0.0, 0.10]) * 96.48533212331002
    np.testing.assert_allclose(g.conf_energy.numpy(), e_kj, rtol=1e-5)
    np.testing.assert_allclose(g.conf_weight.numpy(), boltzmann_weights(e_kj, 298.15), rtol=1e-5)
    assert ds.failures == [{"name": "ethane", "reason": "no label row in Drugs.csv"}]
    b = collate_ensembles(ds.graphs())
    assert b.y.shape == (2, 3)
    assert len(load_drugs(path, limit=1)) == 1
    assert load_drugs(path, targets=("energy",)).y[1, 0] == 0.0


def test_drugs_folder_and_atom_order_mismatch(tmp_path):
    a, b = _confs("CCO", 2)
    # same name, but a different atom order in the second record
    shuffled = Chem.RenumberAtoms(b, [2, 1, 0, *range(3, b.GetNumAtoms())])
    recs = [
        (a, {"_Name": "m", "ID": "0", "smiles": "CCO", "energy": 0.0, "ip": 1, "ea": 1, "chi": 1}),
        (
            shuffled,
            {"_Name": "m", "ID": "1", "smiles": "CCO", "energy": 0.1, "ip": 1, "ea": 1, "chi": 1},
        ),
    ]
    (tmp_path / "Drugs.sdf").write_text(_sdf(recs))
    (tmp_path / "Drugs.csv").write_text("name,energy,ip,ea,chi\nm,0,1,2,3\n")
    ds = load_drugs(tmp_path)
    assert ds.samples[0].parts["mol"].num_confs == 1
    assert "atom order" in ds.failures[0]["reason"]


def _kraken_pickle() -> tuple[bytes, list]:
    confs = _confs("CP(C)C", 3)
    weights = [0.2, 0.5, 0.3]
    conformer_dict = {
        f"c{k}": (Chem.MolToMolBlock(m), weights[k], {"sterimol_B5": 5.0 + k, "sterimol_L": 6.0})
        for k, m in enumerate(confs)
    }
    boltz = {
        "sterimol_B5": 5.1,
        "sterimol_L": 6.0,
        "sterimol_burB5": 4.0,
        "sterimol_burL": 5.5,
        "extra": np.float64(1.0),
    }
    data = {17: ("CP(C)C", boltz, conformer_dict)}
    return pickle.dumps(data), confs


def test_kraken_layout_and_weights(tmp_path, float_dtype):
    blob, confs = _kraken_pickle()
    path = _zip(tmp_path / "Kraken.zip", {"Kraken.pickle": blob})
    ds = load_kraken(path, max_confs=2)
    assert len(ds) == 1 and ds.samples[0].name == "mol17"
    np.testing.assert_allclose(ds.y[0], [5.1, 6.0, 4.0, 5.5])
    g = ds.samples[0].parts["mol"]
    assert g.num_confs == 2  # the two largest weights: c1 (0.5) then c2 (0.3)
    np.testing.assert_allclose(g.conf_weight.numpy(), [0.5 / 0.8, 0.3 / 0.8], rtol=1e-6)
    kt = KB_KJ_PER_MOL_K * 298.15
    np.testing.assert_allclose(g.conf_energy.numpy(), [0.0, -kt * np.log(0.3 / 0.5)], rtol=1e-5)
    np.testing.assert_allclose(
        g.pos[0].double().numpy(), confs[1].GetConformer().GetPositions() / 10, atol=1e-5
    )


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_kraken_restricted_unpickler_refuses_code(tmp_path):
    marker = tmp_path / "pwned"
    blob = pickle.dumps({1: ("C", {}, {"c": _Evil(marker)})})
    path = _zip(tmp_path / "Kraken.zip", {"Kraken.pickle": blob})
    with pytest.raises(ValueError, match="refusing"):
        load_kraken(path)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError):
        restricted_loads(pickle.dumps(print))
    # plain containers and numpy scalars/arrays load
    obj = {"a": (1, 2.5, "x", None, True), "b": {1, 2}, "c": np.arange(3.0), "d": np.float32(2)}
    out = RestrictedUnpickler(io.BytesIO(pickle.dumps(obj))).load()
    assert out["a"] == obj["a"] and out["b"] == {1, 2} and out["d"] == 2
    np.testing.assert_array_equal(out["c"], obj["c"])
    # Kraken is read by sci_moe._util's unpickler (the one copy) with a narrower allowed set
    import sci_moe.data.marcel as marcel

    assert not hasattr(marcel, "RestrictedUnpickler")
    assert restricted_loads(pickle.dumps(object)) is object  # allowed by _util's default set
    blob = pickle.dumps({1: ("C", {}, {"c": object})})
    (tmp_path / "narrow").mkdir()
    with pytest.raises(ValueError, match=r"builtins\.object"):
        load_kraken(_zip(tmp_path / "narrow" / "Kraken.zip", {"Kraken.pickle": blob}))


def test_bde_layout(tmp_path):
    sub = _confs("CC(=O)O", 3)
    lig = _confs("CN", 2)
    sub_sdf = _sdf(
        [(m, {"Name": "rx1", "Index": k}) for k, m in enumerate(sub)]
        + [(sub[0], {"Name": "rx2", "Index": 9})]
    )
    lig_sdf = _sdf([(m, {"Name": "rx1", "Index": k}) for k, m in enumerate(lig)])
    txt = "Name  BindingEnergy\nrx1  -12.5\nrx2  3.0\n"
    path = _zip(
        tmp_path / "BDE.zip", {"BDE.txt": txt, "substrates.sdf": sub_sdf, "ligands.sdf": lig_sdf}
    )
    ds = load_bde(path, max_confs=2)
    assert len(ds) == 1 and ds.part_names == ["substrate", "ligand"]
    s = ds.samples[0]
    assert s.y.tolist() == [-12.5]
    assert s.parts["substrate"].num_confs == 2 and s.parts["ligand"].num_confs == 2
    assert (s.parts["substrate"].z != 1).all()  # hydrogens removed as in MARCEL
    assert s.parts["substrate"].num_atoms == 4
    assert any(f["name"] == "rx2" and "ligand" in f["reason"] for f in ds.failures)
    with pytest.raises(ValueError, match="choose one"):
        ds.graphs()
    assert len(ds.graphs("ligand")) == 1


def test_ee_layout_and_exclusion(tmp_path):
    confs = _confs("CC(O)C=C", 4)
    recs = []
    energies = {0: [3.0, 1.0], 1: [2.0, 5.0]}
    for config in (0, 1):
        for k in range(2):
            m = confs[2 * config + k]
            recs.append(
                (
                    m,
                    {
                        "id": f"{config}{k}",
                        "energy": energies[config][k],
                        "smiles": "CC(O)C=C",
                        "substrate_id": "sub",
                        "ligand_id": "L1",
                        "config_id": config,
                    },
                )
            )
    recs.append(
        (
            confs[0],
            {
                "id": "z",
                "energy": 0,
                "smiles": "x",
                "substrate_id": "atrop-merg-enamide-phe-bn-h-B",
                "ligand_id": "R10333",
                "config_id": 0,
            },
        )
    )
    csv = "MergeID,de\nsub_L1,85.0\natrop-merg-enamide-phe-bn-h-B_R10333,10\n"
    path = _zip(tmp_path / "EE.zip", {"EE.sdf": _sdf(recs), "EE.csv": csv})
    ds = load_ee(path, max_confs=1)
    assert [s.name for s in ds.samples] == ["sub_L1"]
    s = ds.samples[0]
    assert s.y.tolist() == [85.0] and set(s.parts) == {"config_0", "config_1"}
    # lowest energy per configuration: config 0 -> record 1 (1.0), config 1 -> record 0 (2.0)
    np.testing.assert_allclose(
        s.parts["config_0"].pos[0].double().numpy(),
        confs[1].GetConformer().GetPositions() / 10,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        s.parts["config_1"].pos[0].double().numpy(),
        confs[2].GetConformer().GetPositions() / 10,
        atol=1e-5,
    )
    assert load_ee(path, max_confs=5).samples[0].parts["config_0"].num_confs == 2


def test_bad_paths(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_drugs(tmp_path / "missing.zip")
    (tmp_path / "x.zip").write_text("not a zip")
    with pytest.raises(ValueError, match="not a zip"):
        load_drugs(tmp_path / "x.zip")
    _zip(tmp_path / "Drugs.zip", {"other.txt": "x"})
    with pytest.raises(ValueError, match=r"Drugs\.csv not found"):
        load_drugs(tmp_path / "Drugs.zip")


def test_cli_data_marcel(tmp_path, capsys):
    import argparse
    import json

    from sci_moe.cli import data as data_cli

    parser = argparse.ArgumentParser(prog="sci-moe")
    data_cli.add_parser(parser.add_subparsers(dest="command"))
    blob, _ = _kraken_pickle()
    path = _zip(tmp_path / "Kraken.zip", {"Kraken.pickle": blob})
    args = parser.parse_args(
        ["data", "marcel", str(path), "--dataset", "kraken", "--json", str(tmp_path / "s.json")]
    )
    assert args.func(args) == 0
    assert "Kraken: 1 molecules" in capsys.readouterr().out
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["conformers"] == {"mol": 3} and summary["targets"][0] == "sterimol_B5"


def test_split_is_marcels(drugs_zip):
    from sklearn.utils import shuffle

    ds = load_drugs(drugs_zip[0])
    tr, va, te = ds.split(seed=123, fractions=(0.5, 0.0, 0.5))
    idx = shuffle(range(2), random_state=123)
    assert [*tr, *va, *te] == list(idx)

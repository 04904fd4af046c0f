"""``sci-moe train spice``: config file + flags, outputs, exact resume, bad input, the device."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch
import yaml

from sci_moe.cli import train as train_cli
from sci_moe.data.molecule_set import MoleculeSet
from sci_moe.molecules.spice import load_checkpoint, load_model

SMILES = ["CCO", "CCCO", "CCN", "CCCN", "OCCO", "CCOC", "CC(C)O", "NCCO", "CCCC", "CC(N)C"]


def _tiny_set(path):
    from rdkit import Chem
    from rdkit.Chem import AllChem

    names, blocks, numbers, pos, ctarg, targ, aptr, cptr = [], [], [], [], [], [], [0], [0]
    rng = np.random.default_rng(0)
    for i, smi in enumerate(SMILES):
        mol = Chem.AddHs(Chem.MolFromSmiles(smi))
        cids = list(AllChem.EmbedMultipleConfs(mol, numConfs=2, randomSeed=i))
        names.append(f"m{i}")
        blocks.append(Chem.MolToMolBlock(mol))
        numbers += [a.GetAtomicNum() for a in mol.GetAtoms()]
        for c in cids:
            pos.append(mol.GetConformer(c).GetPositions() * 0.1)
        t = rng.normal(size=(len(cids), 2))
        ctarg.append(t)
        targ.append(t.mean(0))
        aptr.append(aptr[-1] + mol.GetNumAtoms())
        cptr.append(cptr[-1] + len(cids))
    n_conf = cptr[-1]
    ms = MoleculeSet(
        names=names,
        smiles=list(SMILES),
        stereo_smiles=list(SMILES),
        molblocks=blocks,
        atom_ptr=np.array(aptr),
        conf_ptr=np.array(cptr),
        numbers=np.array(numbers),
        positions_nm=np.concatenate(pos),
        mmff_energy_kj=np.zeros(n_conf),
        xtb_energy_kj=np.linspace(0, 3, n_conf),
        conf_targets=np.concatenate(ctarg),
        targets=np.stack(targ),
        target_names=["a", "b"],
    )
    path.mkdir()
    ms.save(path / "molecule_set.npz")
    return path


def _parser():
    p = argparse.ArgumentParser(prog="sci-moe")
    sub = p.add_subparsers(dest="command")
    train_cli.add_parser(sub)
    return p


def _run(argv):
    args = _parser().parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return _tiny_set(tmp_path_factory.mktemp("d") / "mols")


def test_train_spice_config_and_flags(tmp_path, data_dir):
    cfg = tmp_path / "spice.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "model": {"hidden": 8, "num_layers": 1, "num_experts": 4, "heads": 2},
                "train": {"epochs": 5, "batch_size": 4, "lr": 1e-3},
                "data": {"path": str(data_dir), "heavy_only": True},
            }
        )
    )
    out = tmp_path / "run"
    base = ["train", "spice", "--config", str(cfg), "--out", str(out), "--no-progress"]
    # flags override the file: 2 epochs now, then resume to 3
    assert _run([*base, "--epochs", "2"]) == 0
    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["train"]["epochs"] == 2 and resolved["model"]["hidden"] == 8
    res = json.loads((out / "results.json").read_text())
    assert res["epochs_run"] == 2 and set(res["test_mae"]) == {"a", "b"}
    assert res["n_train"] == 7 and res["n_val"] == 1 and res["n_test"] == 2
    model = load_model(out / "model.safetensors")
    assert model.config.hidden == 8 and model.config.num_experts == 4
    with pytest.raises(ValueError, match="different config"):
        _run([*base, "--epochs", "3", "--resume"])
    assert _run([*base, "--epochs", "2", "--resume"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 4  # 2 epochs of 2 batches
    # the budget and the threads may change between the pieces of a run
    assert _run([*base, "--epochs", "2", "--resume", "--max-hours", "1", "--threads", "1"]) == 0
    with pytest.raises(ValueError, match="--threads"):
        _run([*base, "--epochs", "2", "--overwrite", "--threads", "-1"])


def test_train_spice_resumes_from_the_previous_checkpoint(tmp_path, data_dir, capsys):
    out = tmp_path / "run"
    argv = ["train", "spice", "--data", str(data_dir), "--out", str(out), "--hidden", "8"]
    argv += ["--model", "deepsets", "--epochs", "2", "--batch-size", "4", "--no-progress"]
    assert _run(argv) == 0
    first = json.loads((out / "results.json").read_text())
    ck = out / "checkpoint.pt"
    ck.write_bytes(ck.read_bytes()[:100])  # damaged: the run goes back to epoch 1
    capsys.readouterr()
    assert _run([*argv, "--resume"]) == 0
    assert "checkpoint_prev.pt" in capsys.readouterr().err
    assert load_checkpoint(ck)["step"] == 4
    again = json.loads((out / "results.json").read_text())
    assert again["test_mae"] == first["test_mae"] and again["history"] == first["history"]
    (out / "checkpoint_prev.pt").write_bytes(b"junk")
    ck.write_bytes(b"junk")
    with pytest.raises(ValueError, match="no usable"):
        _run([*argv, "--resume"])


def test_train_baseline_and_errors(tmp_path, data_dir):
    out = tmp_path / "gnn"
    argv = ["train", "spice", "--data", str(data_dir), "--out", str(out), "--model", "gnn2d"]
    assert _run([*argv, "--epochs", "1", "--hidden", "8", "--targets", "b", "--no-progress"]) == 0
    assert list(json.loads((out / "results.json").read_text())["test_mae"]) == ["b"]
    with pytest.raises(ValueError, match="unknown model"):
        _run([*argv[:-1], "schnet"])
    with pytest.raises(ValueError, match="needs --model spice"):
        _run([*argv, "--upcycle-epochs", "2"])
    up = tmp_path / "up"
    base = ["train", "spice", "--data", str(data_dir), "--out", str(up), "--hidden", "8"]
    assert _run([*base, "--epochs", "2", "--upcycle-epochs", "1", "--no-progress"]) == 0
    assert yaml.safe_load((up / "config.yaml").read_text())["model"]["upcycle"] is True
    last = load_checkpoint(up / "checkpoint.pt")["model"]
    assert not bool(last["encoder.moes.0.dense"])  # upcycled after epoch 1
    with pytest.raises(ValueError, match="no data set"):
        _run(["train", "spice", "--out", str(out)])
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {hiden: 3}\n")
    with pytest.raises(ValueError, match="unknown model options"):
        _run(["train", "spice", "--config", str(bad), "--data", str(data_dir), "--out", str(out)])
    with pytest.raises(ValueError, match="no molecule set"):
        _run(["train", "spice", "--data", str(tmp_path), "--out", str(out), "--overwrite"])


def test_train_spice_device_flag_and_train_section(tmp_path, data_dir):
    small = ["--model", "deepsets", "--hidden", "8", "--epochs", "1", "--batch-size", "4"]
    base = ["train", "spice", "--data", str(data_dir), *small, "--no-progress"]
    cfg = tmp_path / "spice.yaml"
    cfg.write_text(yaml.safe_dump({"train": {"device": "cpu"}}))
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run([*base, "--config", str(cfg), "--out", str(a)]) == 0
    assert yaml.safe_load((a / "config.yaml").read_text())["train"]["device"] == "cpu"
    assert _run([*base, "--out", str(b)]) == 0  # the default: the same run, bit for bit
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    assert ra["test_mae"] == rb["test_mae"] and ra["history"] == rb["history"]
    # the device may change on --resume (like --threads)
    assert _run([*base, "--out", str(b), "--resume", "--device", "cpu"]) == 0
    with pytest.raises(ValueError, match=r"--device.*'cpu', 'cuda' or 'cuda:N'"):
        _run([*base, "--out", str(tmp_path / "c"), "--device", "gpu0"])
    assert not (tmp_path / "c").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
@pytest.mark.parametrize("where", ["flag", "file"])
def test_train_spice_cuda_without_a_gpu_is_refused_before_anything_is_written(
    tmp_path, data_dir, where
):
    out = tmp_path / "run"
    argv = ["train", "spice", "--data", str(data_dir), "--out", str(out)]
    if where == "flag":
        argv += ["--device", "cuda"]
    else:
        cfg = tmp_path / "spice.yaml"
        cfg.write_text(yaml.safe_dump({"train": {"device": "cuda"}}))
        argv += ["--config", str(cfg)]
    with pytest.raises(ValueError, match=r"--device='cuda'.*no CUDA device.*--device=cpu"):
        _run(argv)
    assert not out.exists()

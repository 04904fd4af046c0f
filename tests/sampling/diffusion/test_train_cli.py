"""``sci-moe train diffusion``: simulate a tiny alanine reference, train the staged recipe on
the engine, write a model file that loads; bad input exits 2."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe.cli.main import main
from sci_moe.sampling.diffusion import load_diffusion_model

pytest.importorskip("openmm")

TINY = [
    *("--frames", "40", "--interval-steps", "5", "--variant", "moe", "--epochs", "3"),
    *("--batches-per-epoch", "2", "--batch-size", "8", "--no-progress"),
]


def test_sci_moe_train_diffusion(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "diffusion", "--out", str(out), *TINY]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    train = res["train"]
    assert train["finished"] and train["reason"] == "completed"
    assert train["step"] == train["steps"] == 6 and len(train["phases"]) == 3
    assert [r["stage"] for r in res["history"]] == [0, 1, 2]
    assert res["data"]["frames"] == 40 and (out / "reference.npz").is_file()
    for i in (1, 2, 3):
        assert (out / f"stage{i}" / "checkpoint.pt").is_file()
    model, _, meta = load_diffusion_model(out / "model.safetensors")
    assert len(model.experts) == 3 and meta["scale"] == pytest.approx(res["data"]["scale_per_nm"])
    e = model.energy(torch.zeros(2, 5, 3) + torch.randn(1, 5, 3), torch.full((2,), 1e-5))
    assert torch.isfinite(e).all()
    # a finished run resumes to the same end; other settings are refused
    assert main([*argv, "--resume"]) == 0
    capsys.readouterr()
    assert main([*argv, "--resume", "--epochs", "4"]) == 2
    assert "--resume with other settings" in capsys.readouterr().err
    bad = ["train", "diffusion", "--out", str(tmp_path / "x")]
    assert main([*bad, "--steps", "5"]) == 2
    assert "--steps" in capsys.readouterr().err
    assert main([*bad, "--variant", "big"]) == 2
    assert main([*bad, "--variant", "moe", "--fp-epochs", "2"]) == 2
    assert main([*bad, "--data", str(tmp_path / "none.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err

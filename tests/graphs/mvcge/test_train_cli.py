"""``sci-moe train mvcge`` at tiny size; bad input."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe.cli.main import main

MVCGE = [
    "--steps", "5", "--hidden-dim", "8", "--num-nodes", "60", "--mean-degree", "4",
    "--mmd-max-nodes", "16", "--no-progress",
]  # fmt: skip


def test_train_mvcge(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "mvcge", "--out", str(out), *MVCGE]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and res["train"]["step"] == 5
    assert 0 <= res["test_accuracy"] <= 1 and 0 < res["bayes_accuracy"] <= 1
    assert 0 <= res["best_epoch"] < 5
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["model"] == "mvcge" and "classifier.weight" in saved["state_dict"]
    assert "Bayes-optimal" in capsys.readouterr().out
    late = tmp_path / "late"
    assert main(["train", "mvcge", "--out", str(late), *MVCGE, "--model", "late_fusion"]) == 0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "0"], "--steps"),
        (["--model", "view7"], "view7"),
        (["--model", "gat"], "--model"),
        (["--contrast", "2.0,0.5,0.0"], "contrast"),
        (["--top-k", "9"], "--top-k"),
    ],
)
def test_train_mvcge_bad_input(tmp_path, capsys, extra, message):
    assert main(["train", "mvcge", "--out", str(tmp_path / "r"), *MVCGE, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_mvcge_unknown_config_key(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 3\nexperts: 4\n")
    assert main(["train", "mvcge", "--out", str(tmp_path / "r"), "--config", str(cfg)]) == 2
    assert "'experts'" in capsys.readouterr().err

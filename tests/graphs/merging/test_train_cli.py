"""``sci-moe train graph-merging`` at tiny size; bad input."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe.cli.main import main

MERGING = [
    "--steps", "4", "--batch-size", "16", "--eval-every", "2", "--reassign-every", "2",
    "--finetune-steps", "3", "--d-model", "8", "--num-experts", "3", "--train-graphs", "3",
    "--val-graphs", "1", "--test-graphs", "1", "--min-nodes", "30", "--max-nodes", "40",
    "--degree", "4", "--no-progress",
]  # fmt: skip


def test_train_graph_merging(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "graph-merging", "--out", str(out), *MERGING]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and set(res["train"]["phases"]) == {"pretrain", "finetune"}
    assert res["train"]["phases"]["pretrain"]["evals"][0]["val_auc"] >= 0
    for key in ("zero_shot", "held_out_edges"):
        assert set(res[key]) == {"top1", "ensemble", "merge", "kdem"}
        assert all(0 <= m["auc"] <= 1 for m in res[key].values())
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["strategy"] == "kdem" and saved["tuned"] is not None
    assert (out / "pretrain" / "metrics.jsonl").exists()
    assert "AUC on the unseen test graphs" in capsys.readouterr().out
    # the same folder again without --resume is refused
    assert main(["train", "graph-merging", "--out", str(out), *MERGING]) == 2


def test_train_graph_merging_merge_only(tmp_path):
    out = tmp_path / "plain"
    argv = ["train", "graph-merging", "--out", str(out), *MERGING, "--strategy", "merge"]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["train"]["phases"]) == {"pretrain"}
    assert set(res["zero_shot"]) == {"top1", "ensemble", "merge"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "0"], "--steps"),
        (["--finetune-steps", "0"], "--finetune-steps"),
        (["--strategy", "average"], "--strategy"),
        (["--top-k", "4"], "--top-k"),
        (["--max-nodes", "20"], "--max-nodes"),
    ],
)
def test_train_graph_merging_bad_input(tmp_path, capsys, extra, message):
    assert main(["train", "graph-merging", "--out", str(tmp_path / "r"), *MERGING, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()

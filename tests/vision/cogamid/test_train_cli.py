"""``sci-moe train cogamid`` at tiny size: outputs, the scene option, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe.cli.main import main

TINY = [
    "--steps", "3", "--increment-steps", "2", "--batch-size", "2", "--n-train", "6",
    "--n-test", "4", "--width", "4", "--feature-dim", "4", "--n-components", "2",
    "--replay-per-class", "8", "--max-pixels-per-class", "200",
    "--scene", "image_size=16,max_objects=2", "--no-progress",
]  # fmt: skip


def test_train_cogamid(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "cogamid", "--out", str(out), *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and res["train"]["step"] == 3 + 2 + 2
    assert len(res["steps"]) == 3 and all(0 <= s["miou_all"] <= 1 for s in res["steps"])
    assert res["config"]["scene"]["image_size"] == 16
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["config"]["method"] == "gmm" and "1.means" in saved["memory"]
    assert sorted(p.name for p in out.glob("task_*")) == ["task_0", "task_1", "task_2"]
    assert "step 2: mIoU all" in capsys.readouterr().out
    # --overwrite replaces the run (its step folders' files included)
    assert main(["train", "cogamid", "--out", str(out), *TINY, "--overwrite"]) == 0


def test_train_cogamid_config_file_scene_table(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('method = "prototype"\n[scene]\nimage_size = 16\nmax_objects = 2\n')
    out = tmp_path / "run"
    argv = ["train", "cogamid", "--out", str(out), "--config", str(cfg), *TINY[:-3]]
    assert main([*argv, "--no-progress"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["method"] == "prototype" and res["config"]["scene"]["max_objects"] == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "0"], "--steps"),
        (["--method", "replay"], "--method"),
        (["--scene", "colour=3"], "colour"),
        (["--increment-steps", "-1"], "--increment-steps"),
        (["--method", "prototype", "--grc-weight", "1"], "method='gmm'"),
    ],
)
def test_train_cogamid_bad_input(tmp_path, capsys, extra, message):
    assert main(["train", "cogamid", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()

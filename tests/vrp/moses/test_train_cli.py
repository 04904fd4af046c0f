"""``sci-moe train vrp`` at tiny size: outputs, resume, bad input (exit code 2)."""

from __future__ import annotations

import json

import pytest

from sci_moe.cli.main import main
from sci_moe.vrp.moses import load_policy

TINY = [
    "--steps", "2", "--expert-steps", "1", "--gate-steps", "1", "--num-customers", "5",
    "--batch-size", "2", "--d-model", "8", "--num-heads", "2", "--num-layers", "1",
    "--rank", "2", "--val-instances", "2", "--test-instances", "1", "--no-progress",
]  # fmt: skip


def test_train_vrp_writes_model_and_results(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "vrp", "--out", str(out), *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "vrp" and res["train"]["finished"]
    assert res["train"]["step"] == 4 and set(res["train"]["phases"]) == {
        "backbone",
        "expert",
        "gated",
    }
    assert res["test_cost"]["seen_mean"] > 0 and len(res["test_cost"]) == 18
    for stage in ("backbone", "expert", "gated"):
        assert (out / stage / "checkpoint.pt").exists()
    policy, meta = load_policy(out / "model.pt")
    assert policy.mode == "gated" and meta["steps"] == [2, 1, 1]
    capsys.readouterr()
    # the same folder without --resume/--overwrite is refused, naming the way out
    assert main(["train", "vrp", "--out", str(out), *TINY]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "0"], "--steps"),
        (["--gate-steps", "-1"], "--gate-steps"),
        (["--variants", "CVRP,XVRP"], "XVRP"),
        (["--num-heads", "3"], "--num-heads"),
    ],
)
def test_train_vrp_bad_input(tmp_path, capsys, extra, message):
    assert main(["train", "vrp", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_vrp_unknown_config_key(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 2\nexperts = 4\n")
    assert main(["train", "vrp", "--out", str(tmp_path / "r"), "--config", str(cfg)]) == 2
    assert "'experts'" in capsys.readouterr().err

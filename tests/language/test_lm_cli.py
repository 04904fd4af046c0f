"""``sci-moe train lm`` at tiny size, on a small text file (not the 20 s corpus parse)."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe.cli.main import main
from sci_moe.language import MoELMConfig, MoETransformerLM, load_checkpoint

TINY = [
    "--d-model", "16", "--n-heads", "2", "--seq-len", "16", "--d-hidden", "16",
    "--num-experts", "4", "--top-k", "2", "--batch-size", "4", "--steps", "3",
    "--eval-every", "2", "--eval-batches", "1", "--no-progress",
]  # fmt: skip
TEXT = "The cat sat on the mat. A dog ran in the park, and the sun was warm. " * 40


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def _train(out, text, *extra) -> int:
    return main(["train", "lm", "--out", str(out), "--text-file", text, *TINY, *extra])


def test_train_lm_tiny_writes_results_model_and_finetunes(tmp_path, text):
    out = tmp_path / "run"
    assert _train(out, text, "--default-moe", "--selection-bias", "--bias-balancing", "0.01") == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "lm" and res["train"]["step"] == 3 and res["train"]["finished"]
    assert [e["step"] for e in res["train"]["evals"]] == [2, 3]
    assert res["val"]["step"] == 3 and res["val"]["bits_per_byte"] > 0
    assert len(res["val"]["layers"]) == 2 and len(res["val"]["layers"][0]["load"]) == 4
    saved = load_checkpoint(out / "model.pt")
    assert saved["model_config"]["moe"] == {"default_moe": True, "selection_bias": True}
    assert saved["history"]["step"] == [0, 2, 3]
    model = MoETransformerLM(MoELMConfig(**saved["model_config"]))
    model.load_state_dict(saved["model"])  # the single-process weights, all of them
    for name in ("checkpoint.pt", "metrics.jsonl", "config.yaml"):
        assert (out / name).is_file()
    # fine-tune the saved model with the specialisation losses
    ft = tmp_path / "ft"
    init = ["--init-from", str(out / "model.pt"), "--default-moe", "--selection-bias"]
    coefs = ["--orthogonality-coef", "0.1", "--variance-coef", "0.1"]
    assert _train(ft, text, *init, *coefs) == 0
    got = json.loads((ft / "results.json").read_text())
    assert got["config"]["orthogonality_coef"] == 0.1
    assert load_checkpoint(ft / "model.pt")["model_config"]["moe"]["variance_coef"] == 0.1


def test_train_lm_routing_mamba_and_resume(tmp_path, text):
    out = tmp_path / "rom"
    rom = ["--layers", "ra", "--no-positions", "--d-state", "4", "--mamba-experts", "2"]
    assert _train(out, text, *rom) == 0
    cfg = load_checkpoint(out / "model.pt")["model_config"]
    assert cfg["layers"] == "ra" and cfg["mamba"] == {"d_state": 4, "num_experts": 2}
    before = load_checkpoint(out / "checkpoint.pt")["model"]
    # a finished run resumes to the same weights; other settings are refused
    assert _train(out, text, *rom, "--resume") == 0
    after = load_checkpoint(out / "checkpoint.pt")["model"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert _train(out, text, *rom, "--resume", "--d-state", "8") == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "0"], "--steps"),
        (["--d-model", "15"], "--d-model"),
        (["--top-k", "5"], "--top-k"),
        (["--layers", "ax"], "--layers"),
        (["--eval-batches", "0"], "--eval-batches"),
        (["--bias-balancing", "0.01"], "selection_bias"),
        (["--expert-parallel"], "expert_parallel"),
    ],
)
def test_train_lm_bad_values_exit_2(tmp_path, capsys, text, extra, message):
    assert _train(tmp_path / "r", text, *extra) == 2
    assert message in capsys.readouterr().err


def test_train_lm_unknown_config_key_and_missing_text_exit_2(tmp_path, capsys, text):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 2\nnum_expert = 4\n")
    assert main(["train", "lm", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert "num_expert" in capsys.readouterr().err
    assert _train(tmp_path / "r2", str(tmp_path / "missing.txt")) == 2
    assert "text_file" in capsys.readouterr().err

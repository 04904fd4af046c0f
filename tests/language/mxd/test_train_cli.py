"""``sci-moe train mxd`` at tiny size, on activations of a tiny random Llama."""

from __future__ import annotations

import json

import pytest
import torch

from sci_moe._util import load_verified
from sci_moe.cli.main import main
from sci_moe.language.mxd import TokenWindows, collect_activations, module_sha256

VOCAB = 50  # the tiny models' vocabulary (conftest)

TINY = [
    "--top-k", "2", "--latent-multiplier", "2", "--d-hidden", "8", "--steps", "4",
    "--batch-size", "16", "--dead-window", "32", "--eval-every", "2", "--no-progress",
]  # fmt: skip


def _windows(n: int, seed: int) -> TokenWindows:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (n, 8), generator=g)
    return TokenWindows(ids, torch.arange(n) % 2, torch.arange(n))


@pytest.fixture
def activations(tiny_llama, tmp_path):
    """train/ and val/ caches of the tiny model's block-1 MLP (d = 16)."""
    root = tmp_path / "acts"
    for split, n in (("train", 12), ("val", 4)):
        collect_activations(
            tiny_llama, 1, _windows(n, n), root / split, module_sha256(tiny_llama),
            show_progress=False,
        )  # fmt: skip
    return root


@pytest.mark.parametrize("kind", ["mxd", "transcoder"])
def test_train_mxd_tiny_writes_results_and_model(tmp_path, activations, kind):
    out = tmp_path / kind
    argv = ["train", "mxd", "--out", str(out), "--activations", str(activations), "--kind", kind]
    assert main([*argv, *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "mxd" and res["train"]["step"] == 4 and res["train"]["finished"]
    assert [e["step"] for e in res["train"]["evals"]] == [2, 4]
    assert res["data"]["train_tokens"] == 96 and res["data"]["val_tokens"] == 32
    assert res["val"]["nmse"] > 0 and res["val"]["l0"] <= 2
    assert res["layer"]["parameters"] <= res["layer"]["budget"]
    saved = load_verified(out / "model.pt")
    assert saved["layer"]["kind"] == kind and saved["layer"]["d_in"] == 16
    assert (out / "checkpoint.pt").is_file() and (out / "metrics.jsonl").is_file()
    # a finished run resumes to the same result
    assert main([*argv, *TINY, "--resume"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["val"] == res["val"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "0"], "--steps"),
        (["--kind", "sae"], "--kind"),
        (["--top-k", "0"], "--top-k"),
        (["--dead-window", "0"], "--dead-window"),
        (["--latent-multiplier", "1", "--d-hidden", "64"], "num_experts"),
    ],
)
def test_train_mxd_bad_values_exit_2(tmp_path, capsys, activations, extra, message):
    argv = ["train", "mxd", "--out", str(tmp_path / "r"), "--activations", str(activations)]
    assert main([*argv, *TINY, *extra]) == 2
    assert message in capsys.readouterr().err


def test_train_mxd_unknown_key_and_missing_activations_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("steps: 2\nnum_expert: 4\n")
    assert main(["train", "mxd", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert "num_expert" in capsys.readouterr().err
    argv = ["train", "mxd", "--out", str(tmp_path / "r2"), "--activations", str(tmp_path)]
    assert main([*argv, *TINY]) == 2
    assert "no activation cache" in capsys.readouterr().err


def test_train_mxd_collects_the_activations_of_its_model(tmp_path, monkeypatch, tiny_llama):
    """Without --activations the model's MLP is recorded into OUT/activations (here the
    tiny Llama stands in for SmolLM2 and random windows for the corpus)."""
    import sci_moe.language.mxd as interpret

    class Tiny:
        model, weights_sha256 = tiny_llama, module_sha256(tiny_llama)

        def tokenize(self, text):
            raise AssertionError("the stub windows need no tokenizer")

    calls = []

    def windows(tokenize, context_len, split, max_windows_per_source):
        calls.append((split, context_len, max_windows_per_source))
        return _windows(2 * max_windows_per_source, len(calls))

    monkeypatch.setattr(interpret, "load_smollm2", Tiny)
    monkeypatch.setattr(interpret, "corpus_windows", windows)
    out = tmp_path / "run"
    flags = ["--layer", "1", "--context-len", "8", "--train-windows", "5", "--val-windows", "2"]
    assert main(["train", "mxd", "--out", str(out), *flags, *TINY]) == 0
    assert calls == [("train", 8, 5), ("val", 8, 2)]
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["train_tokens"] == 80 and res["data"]["val_tokens"] == 32
    assert (out / "activations" / "train" / "meta.json").is_file()

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


def _load_layer(saved: dict) -> torch.nn.Module:
    """The layer of a model.pt, rebuilt as the module docstring shows."""
    from sci_moe.language.mxd import MixtureOfDecoders, SkipTranscoder, Transcoder

    meta = saved["layer"]
    cls = {"mxd": MixtureOfDecoders, "transcoder": Transcoder, "skip_transcoder": SkipTranscoder}
    layer = cls[meta["kind"]](meta["d_in"], meta["d_out"], top_k=meta["top_k"], **meta["sizes"])
    layer.load_state_dict(saved["state"])
    return layer.eval()


def test_train_mxd_rescales_by_default_and_no_normalise_turns_it_off(tmp_path, activations):
    """By default the layer is trained on RMS-rescaled activations (frontier.py's
    rescaling): model.pt and results.json hold the scales, which are activation_rms of the
    training cache, and RescaledDecomposition of the saved layer maps raw x to raw y;
    --no-normalise stores scales of 1 and the raw-unit NMSE of the bare layer."""
    from sci_moe.language.mxd import (
        ActivationCache,
        RescaledDecomposition,
        activation_rms,
        evaluate_decomposition,
    )

    tr = ActivationCache(activations / "train").load()
    va = ActivationCache(activations / "val").load()
    s_x, s_y = activation_rms(tr["x"]), activation_rms(tr["y"])
    argv = ["train", "mxd", "--activations", str(activations), "--kind", "transcoder", *TINY]
    on, off = tmp_path / "on", tmp_path / "off"
    assert main([*argv, "--out", str(on)]) == 0
    assert main([*argv, "--out", str(off), "--no-normalise"]) == 0
    assert "normalise: true" in (on / "config.yaml").read_text()
    assert "normalise: false" in (off / "config.yaml").read_text()

    saved = load_verified(on / "model.pt")
    meta = saved["layer"]
    assert meta["normalise"] is True and (meta["scale_x"], meta["scale_y"]) == (s_x, s_y)
    assert s_x != 1.0 and s_y != 1.0
    layer = _load_layer(saved)
    wrapped = RescaledDecomposition(layer, meta["scale_x"], meta["scale_y"])
    x = va["x"].float()
    with torch.no_grad():
        torch.testing.assert_close(wrapped(x), layer(x / s_x).y * s_y)
    res = json.loads((on / "results.json").read_text())
    assert res["layer"]["scale_x"] == s_x and res["layer"]["normalise"] is True
    # the reported NMSE is the rescaled layer's, in the MLP's own units
    want = evaluate_decomposition(layer, va["x"].float() / s_x, va["y"].float() / s_y)
    assert res["val"]["nmse"] == pytest.approx(want["nmse"] * s_y, rel=1e-3)
    assert res["val"]["fvu"] == pytest.approx(want["fvu"], rel=1e-3)

    saved = load_verified(off / "model.pt")
    meta = saved["layer"]
    assert meta["normalise"] is False and (meta["scale_x"], meta["scale_y"]) == (1.0, 1.0)
    res = json.loads((off / "results.json").read_text())
    want = evaluate_decomposition(_load_layer(saved), va["x"], va["y"])
    assert res["val"]["nmse"] == pytest.approx(want["nmse"], rel=1e-6)


def test_train_mxd_normalise_must_be_a_bool():
    from sci_moe.cli.train.mxd import MxDRunConfig

    with pytest.raises(ValueError, match="--no-normalise"):
        MxDRunConfig(normalise="yes")

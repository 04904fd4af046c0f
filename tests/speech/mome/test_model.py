"""The recogniser on a tiny random BERT with 3 short espeak utterances: shapes, training
leaves the frozen backbone bit-identical, routing statistics, bad input."""

import math
import sys

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.speech.mome.backbones import tiny_bert  # noqa: E402

pytest.importorskip("espeakng_loader")

from sci_moe._util import load_verified  # noqa: E402
from sci_moe.speech.mome import (  # noqa: E402
    MatryoshkaRates,
    MoMEConfig,
    RecognizerConfig,
    SpeechRecognizer,
    SpeechSetConfig,
    TrainConfig,
    build_speech_set,
    evaluate,
    routing_consistency,
    train_recognizer,
)
from sci_moe.train import lr_factor, read_metrics, warmup_steps  # noqa: E402

PHRASES = ["open the door", "we like music", "rivers flow"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cfg = SpeechSetConfig(num_phrases=3, variants=1, voices=("en-us",), split=(0.34, 0.33, 0.33))
    return build_speech_set(cfg, tmp_path_factory.mktemp("speech"), False, phrases=PHRASES)


def _model(adapter="mome", rates=None, mode="avg", encoder_dim=0):
    torch.manual_seed(0)
    rates = rates or {"audio": (4, 8), "video": (1, 2)}
    cfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=MatryoshkaRates(rates, mode),
        adapter=adapter,
        mome=MoMEConfig(d_model=16, num_experts=4, top_k=2, bottleneck=2),
        bottleneck=3,
        upsample=4,
        encoder_dim=encoder_dim,
    )
    return SpeechRecognizer(tiny_bert(), cfg)


def test_data_set_split_by_phrase_and_cache(data, tmp_path_factory):
    assert sorted(len(v) for v in data.splits.values()) == [1, 1, 1]
    assert set(data.texts) == set(PHRASES)
    for name, idx in data.splits.items():
        others = np.concatenate([v for k, v in data.splits.items() if k != name])
        assert not set(data.phrase[idx]) & set(data.phrase[others])
    b = data.batch([0, 1, 2], snr_db=5.0, multiple={"audio": 8, "video": 2}, video_dropout=0.5)
    xa, ma = b.streams["audio"]
    assert xa.shape[1] % 8 == 0 and xa.shape[2] == 40 and ma.shape == xa.shape[:2]
    assert b.streams["video"][0].shape[2] == 22
    # each audio second has 25 video frames
    assert abs(b.streams["audio"][1].sum() / 100 - b.streams["video"][1].sum() / 25) < 0.2


@pytest.mark.parametrize(("mode", "encoder_dim"), [("avg", 0), ("stack", 0), ("avg", 6)])
def test_shapes_per_rate(data, mode, encoder_dim):
    model = _model(mode=mode, encoder_dim=encoder_dim)
    b = data.batch([0, 1], multiple={"audio": 8, "video": 2})
    T = b.streams["audio"][0].shape[1]
    for r in (4, 8):
        out = model(b.streams, {"audio": r})
        assert out.log_probs.shape == (2, T // r * 4, 29)
        assert out.label == f"audio={r}"
    Tv = b.streams["video"][0].shape[1]
    assert model(b.streams, {"video": 2}).log_probs.shape == (2, Tv // 2 * 4, 29)
    av = model(b.streams, {"audio": 8, "video": 1})  # fused on the longer token line
    assert av.log_probs.shape[1] == max(T // 8, Tv) * 4
    with pytest.raises(ValueError, match="not one of the model's rates"):
        model(b.streams, {"audio": 16})


@pytest.mark.parametrize("adapter", ["mome", "per_rate", "single"])
def test_training_keeps_frozen_backbone_bit_identical(data, adapter):
    model = _model(adapter, rates={"audio": (4, 8)})
    frozen = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert not any(n.startswith("backbone.") for n in trainable)
    run = train_recognizer(model, data, TrainConfig(steps=2, batch_size=2, lr=1e-2), False)
    hist = run.history
    assert len(hist) == 2 and all(math.isfinite(h["loss"]) for h in hist)
    assert run.result.reason == "completed" and run.result.step == 2
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, frozen[k]), k
    changed = [
        n
        for n, p in model.named_parameters()
        if p.requires_grad and not torch.equal(p, trainable[n])
    ]
    assert any(".adapters." in n for n in changed) and any(
        n.startswith("projectors.") for n in changed
    )
    ev = evaluate(model, data, {"audio": 8}, "test")
    assert 0.0 <= ev["cer"] and 0.0 <= ev["wer"] and len(ev["hyps"]) == 1


def test_routing_consistency_and_counts(data):
    model = _model(rates={"audio": (4, 8)})
    res = routing_consistency(
        model, data, [{"audio": 4}, {"audio": 8}], split="train", num_shuffles=20
    )
    assert len(res["js_per_layer"]) == 2
    assert 0.0 <= res["js"] <= math.log(2) and 0.0 <= res["js_shuffled"] <= math.log(2)
    for layer in res["usage"]:
        for hist in layer.values():
            assert abs(sum(hist) - 1.0) < 1e-9
    counts = model.parameter_counts()
    assert counts["adapter_active"] < counts["adapter"] < counts["trainable"]


def test_bad_input_errors(data, monkeypatch):
    with pytest.raises(ValueError, match="empty"):
        build_speech_set(SpeechSetConfig(num_phrases=3), None, False, phrases=["a b", " ", "c"])
    with pytest.raises(ValueError, match="unknown espeak-ng voice"):
        build_speech_set(
            SpeechSetConfig(num_phrases=3, voices=("xx-nowhere",)), None, False, PHRASES
        )
    with pytest.raises(ValueError, match="does not divide"):
        x = torch.randn(1, 33, 40)
        _model()({"audio": (x, torch.ones(1, 33, dtype=torch.bool))}, {"audio": 8})
    import sci_moe.speech.tts as tts

    monkeypatch.setattr(tts, "_ENGINE", None)
    monkeypatch.setitem(sys.modules, "espeakng_loader", None)
    with pytest.raises(ImportError, match="espeak"):
        build_speech_set(SpeechSetConfig(num_phrases=3), None, False, phrases=PHRASES)


def test_steps_10_trains_with_a_proper_schedule(data, tmp_path):
    """Issue 40: the one-cycle schedule raised ZeroDivisionError for steps=10 and was not a
    proper schedule for steps < 10; on the engine every step count from 1 works."""
    model = _model(rates={"audio": (4, 8)})
    cfg = TrainConfig(steps=10, batch_size=2, lr=1e-2, log_every=1, eval_every=5, progress=False)
    run = train_recognizer(model, data, cfg, out_dir=tmp_path)
    assert run.result.step == 10 and len(run.history) == 10
    assert all(math.isfinite(h["loss"]) for h in run.history)
    lrs = [r["lr"] for r in read_metrics(tmp_path / "metrics.jsonl") if "lr" in r]
    assert len(lrs) == 10 and all(0 < v <= cfg.lr for v in lrs)
    peak = lrs.index(max(lrs))
    assert max(lrs) == pytest.approx(cfg.lr) and lrs[:peak] == sorted(lrs[:peak])
    assert lrs[peak:] == sorted(lrs[peak:], reverse=True) and lrs[-1] < lrs[peak]
    assert [e["step"] for e in run.result.evals] == [5, 10]
    assert {"val_ctc", "val_cer", "val_cer[audio=4]", "val_cer[audio=8]"} <= set(
        run.result.evals[-1]
    )
    for steps in range(1, 21):  # MoME's defaults give a proper schedule for 1-20 steps
        c = TrainConfig(steps=steps)
        f = [lr_factor(s, steps, c.schedule, c.warmup, c.min_lr_ratio) for s in range(steps)]
        w = warmup_steps(steps, c.warmup)
        assert all(0 < v <= 1 for v in f) and f[w] == pytest.approx(1.0)
        assert f[:w] == sorted(f[:w]) and f[w:] == sorted(f[w:], reverse=True)


def test_exact_resume_and_trainable_checkpoint(data, tmp_path):
    cfg = TrainConfig(
        steps=6, batch_size=2, lr=1e-2, eval_every=2, progress=False, snr_db=(None, 5.0)
    )
    ref = _model(rates={"audio": (4, 8)})
    train_recognizer(ref, data, cfg, out_dir=tmp_path / "a")
    model = _model(rates={"audio": (4, 8)})
    first = train_recognizer(model, data, cfg, out_dir=tmp_path / "b", stop_after=3)
    assert first.result.reason == "interrupted" and len(first.history) == 3
    model = _model(rates={"audio": (4, 8)})  # a fresh process: rebuilt, then resumed
    rest = train_recognizer(model, data, cfg, out_dir=tmp_path / "b", resume=True)
    assert rest.result.resumed_from == 3 and [h["step"] for h in rest.history] == [3, 4, 5]
    a, b = ref.state_dict(), model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    state = load_verified(tmp_path / "b" / "checkpoint.pt")
    assert state["model"] and not any(k.startswith("backbone.") for k in state["model"])
    other = _model(rates={"audio": (4, 8)})
    with torch.no_grad():
        next(other.backbone.parameters()).add_(1.0)
    with pytest.raises(ValueError, match="another model"):
        train_recognizer(other, data, cfg, out_dir=tmp_path / "b", resume=True)


def test_explicit_cpu_device_is_the_default_run(data):
    """``device="cpu"`` trains the default run bit for bit (the validation batches and the
    test batches of ``evaluate`` are moved to the model's device, a no-op here)."""
    cfg = dict(steps=3, batch_size=2, lr=1e-2, eval_every=2, progress=False)
    runs = []
    for dev in ({}, {"device": "cpu"}):
        model = _model(rates={"audio": (4, 8)})
        res = train_recognizer(model, data, TrainConfig(**cfg, **dev)).result
        ev = evaluate(model, data, {"audio": 4}, "test")
        runs.append((model.state_dict(), res.evals, ev["hyps"]))
    (a, ea, ha), (b, eb, hb) = runs
    assert ea == eb and ha == hb and all(torch.equal(a[k], b[k]) for k in a)

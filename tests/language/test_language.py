"""Tests of the MoE language model: data split, model, training, exact resume."""

from __future__ import annotations

import pytest
import torch

from sci_moe._util import save_verified
from sci_moe.language import (
    MoELMConfig,
    MoETransformerLM,
    TextCorpus,
    TrainConfig,
    decode,
    encode,
    finetune,
    load_checkpoint,
    load_corpus,
    random_windows,
    text_corpus,
    train,
    validation_windows,
)
from sci_moe.language.train import CHECKPOINT_NAME

TINY = dict(d_model=16, n_layers=2, n_heads=2, seq_len=16, d_hidden=16, num_experts=4, top_k=2)


@pytest.fixture(scope="module")
def corpus() -> TextCorpus:
    return load_corpus()


@pytest.fixture(scope="module")
def small(corpus) -> TextCorpus:
    """A slice of the real corpus, enough for tiny training runs."""
    return TextCorpus(corpus.train[:200_000], corpus.val[:20_000], {})


def test_split_is_deterministic_and_disjoint(corpus):
    again = load_corpus.__wrapped__(0.1)  # bypass the cache: parse the files again
    assert torch.equal(again.train, corpus.train) and torch.equal(again.val, corpus.val)
    assert set(corpus.sources) == {"wikipedia", "lee_news"}
    for tr, va in corpus.sources.values():
        assert va / (tr + va) == pytest.approx(0.1, abs=1e-4)
    assert corpus.train.numel() == sum(tr for tr, _ in corpus.sources.values())
    # no validation window of 64 bytes occurs in the training text
    train_text = decode(corpus.train)
    x, _ = validation_windows(corpus.val, 64, 50)
    assert not any(decode(w) in train_text for w in x)
    assert corpus.train.dtype == torch.uint8 and corpus.vocab_size == 256


def test_text_is_clean_prose(corpus):
    text = decode(corpus.train[:200_000])
    assert "[[" not in text and "{{" not in text and "'''" not in text
    assert text.count(". ") > 800


def test_encode_roundtrip():
    s = "Autism — 21.7 million, café"
    assert decode(encode(s)) == s
    assert encode("a").tolist() == [97]


def test_random_windows_are_a_function_of_the_generator(small):
    def draw(seed):
        return random_windows(small.train, 16, 4, torch.Generator().manual_seed(seed))

    x1, y1 = draw(3)
    x2, y2 = draw(3)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(draw(99)[0], x1)
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    assert x1.shape == (4, 16) and x1.dtype == torch.long


def test_text_corpus_splits_like_load_corpus():
    c = text_corpus("abcdefghij" * 10, val_fraction=0.1)
    assert c.train.numel() == 90 and c.val.numel() == 10
    assert decode(c.train)[:10] == "abcdefghij"
    with pytest.raises(ValueError, match="val_fraction"):
        text_corpus("abc", val_fraction=1.0)
    with pytest.raises(ValueError, match="too few"):
        text_corpus("ab", val_fraction=0.5)


def test_validation_windows_fixed(small):
    a = validation_windows(small.val, 16, 8)
    b = validation_windows(small.val, 16, 8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("dense_first", [False, True])
def test_model_shapes(dense_first):
    model = MoETransformerLM(MoELMConfig(**TINY, dense_first_layer=dense_first))
    logits, aux, infos = model(torch.randint(0, 256, (3, 16)))
    assert logits.shape == (3, 16, 256)
    assert aux.dim() == 0 and aux > 0
    assert len(infos) == (1 if dense_first else 2)
    assert infos[0].routing.indices.shape == (48, 2)
    assert model.head.weight is model.tok.weight


def test_causal_masking():
    model = MoETransformerLM(MoELMConfig(**TINY)).eval()
    idx = torch.randint(0, 256, (2, 16))
    idx2 = idx.clone()
    idx2[:, 10] = (idx2[:, 10] + 1) % 256
    with torch.no_grad():
        a, _, _ = model(idx)
        b, _, _ = model(idx2)
    assert torch.equal(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_moe_options_reach_layers():
    cfg = MoELMConfig(
        **TINY,
        moe={
            "default_moe": True,
            "default_beta": 0.65,
            "selection_bias": True,
            "variance_coef": 0.1,
        },
    )
    layer = MoETransformerLM(cfg).moe_layers()[0]
    assert layer.default is not None and layer.default.beta == 0.65
    assert layer.router.config.selection_bias and layer.variance_coef == 0.1


@pytest.mark.parametrize(
    "kw",
    [
        {"d_model": 30, "n_heads": 4},
        {"top_k": 5, "num_experts": 4},
        {"n_layers": 1, "dense_first_layer": True},
        {"moe": {"default_beta": 1.5}},
        {"moe": {"num_experts": 8}},
        {"moe": {"not_an_option": 1}},
        {"seq_len": 0},
    ],
)
def test_bad_model_config(kw):
    with pytest.raises((ValueError, TypeError)):
        MoELMConfig(**{**TINY, **kw})


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"steps": 0}, "steps"),
        ({"lr": 0.0}, "lr"),
        ({"warmup": -1}, "warmup"),
        ({"bias_balancing": -1.0}, "bias_balancing"),
        ({"eval_batches": 0}, "eval_batches"),
        ({"val_fraction": 1.0}, "val_fraction"),
        ({"device": "nonsense"}, "device"),
    ],
)
def test_bad_train_config(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kw)


def test_too_long_input():
    model = MoETransformerLM(MoELMConfig(**TINY))
    with pytest.raises(ValueError, match="seq_len"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_bias_balancing_needs_selection_bias(small):
    with pytest.raises(ValueError, match="selection_bias"):
        train(MoELMConfig(**TINY), TrainConfig(steps=1, bias_balancing=1e-3), corpus=small)


def _tcfg(**kw):
    base = dict(steps=20, batch_size=8, lr=1e-2, warmup=0.1, eval_every=10, eval_batches=2)
    return TrainConfig(**{**base, **kw, "progress": False})


def test_training_reduces_loss(small):
    hist = train(MoELMConfig(**TINY, moe={"default_moe": True}), _tcfg(), corpus=small)
    assert hist["step"] == [0, 10, 20]
    assert hist["val_loss"][-1] < hist["val_loss"][0] - 1.0
    assert sum(hist["train_loss"][-5:]) < sum(hist["train_loss"][:5])
    d = hist["diagnostics"][-1][0]
    assert set(d) >= {"load", "max_violation", "entropy", "score_variance", "overlap"}
    assert sum(d["load"]) == pytest.approx(1.0)


class _Kill(Exception):
    pass


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_exact_resume(small, tmp_path):
    cfg = MoELMConfig(**TINY, moe={"default_moe": True, "selection_bias": True})
    tc = _tcfg(steps=12, eval_every=4, checkpoint_every=5, bias_balancing=1e-2)
    ref_hist, ref = train(cfg, tc, tmp_path / "a", corpus=small, return_model=True)

    def kill(step, model, hist):
        if step == 8:
            raise _Kill

    with pytest.raises(_Kill):
        train(cfg, tc, tmp_path / "b", corpus=small, callback=kill)
    assert load_checkpoint(tmp_path / "b" / CHECKPOINT_NAME)["step"] == 5
    hist, model = train(cfg, tc, tmp_path / "b", resume=True, corpus=small, return_model=True)
    _same_weights(ref, model)
    assert hist["train_loss"] == ref_hist["train_loss"]
    assert hist["val_loss"] == ref_hist["val_loss"]
    assert hist["step"] == [0, 4, 8, 12]
    ck = load_checkpoint(tmp_path / "b" / CHECKPOINT_NAME)
    assert ck["step"] == 12 and ck["history"]["val_loss"] == ref_hist["val_loss"]
    assert not list((tmp_path / "b").glob("*.tmp*"))


def test_exact_resume_after_stop_after(small, tmp_path):
    """A run interrupted on purpose (stop_after) and resumed twice ends bitwise equal."""
    cfg = MoELMConfig(**TINY, moe={"selection_bias": True, "orthogonality_coef": 0.1})
    tc = _tcfg(steps=9, eval_every=3, bias_balancing=1e-2)
    ref_hist, ref = train(cfg, tc, tmp_path / "a", corpus=small, return_model=True)
    train(cfg, tc, tmp_path / "b", corpus=small, stop_after=2)
    train(cfg, tc, tmp_path / "b", resume=True, corpus=small, stop_after=5)
    hist, model = train(cfg, tc, tmp_path / "b", resume=True, corpus=small, return_model=True)
    _same_weights(ref, model)
    assert hist == {**ref_hist, "step_time": hist["step_time"]}
    with pytest.raises(ValueError, match="other settings"):
        train(cfg, _tcfg(steps=9, eval_every=3, bias_balancing=1e-3), tmp_path / "b", True,
              corpus=small)  # fmt: skip


def test_resume_checkpoint_from_before_new_config_fields(small, tmp_path):
    cfg = MoELMConfig(**TINY)
    tc = _tcfg(steps=6, eval_every=0, checkpoint_every=3)

    def kill(step, model, hist):
        if step == 4:
            raise _Kill

    with pytest.raises(_Kill):
        train(cfg, tc, tmp_path, corpus=small, callback=kill)
    path = tmp_path / CHECKPOINT_NAME
    ck = load_checkpoint(path)
    for key in ("history", "model_config"):  # the views load_checkpoint adds
        del ck[key]
    for key in ("layers", "mamba", "positions"):  # as written before these fields existed
        del ck["meta"]["model"][key]
    save_verified(path, ck, keep_previous=False)
    train(cfg, tc, tmp_path, resume=True, corpus=small)
    assert load_checkpoint(path)["step"] == 6
    other = MoELMConfig(**TINY, positions=False)
    with pytest.raises(ValueError, match="different model config"):
        train(other, tc, tmp_path, resume=True, corpus=small)


def test_finetune_with_specialisation_losses(small, tmp_path):
    train(MoELMConfig(**TINY), _tcfg(steps=5), tmp_path / "pre", corpus=small)
    ckpt = tmp_path / "pre" / CHECKPOINT_NAME
    hist, model = finetune(
        ckpt,
        _tcfg(steps=3, eval_every=0),
        {"orthogonality_coef": 0.1, "variance_coef": 0.1},
        corpus=small,
        return_model=True,
    )
    layer = model.moe_layers()[0]
    assert layer.orthogonality_coef == 0.1 and layer.variance_coef == 0.1
    # step 0 evaluation is the pre-trained model's
    pre = load_checkpoint(ckpt)["history"]
    assert hist["val_loss"][0] == pytest.approx(pre["val_loss"][-1], rel=1e-5)
    assert hist["step"] == [0, 3]


def test_explicit_cpu_device_is_the_default_run(small):
    """``device="cpu"`` trains bit-identically to the default (``None``: the CPU here), and
    :func:`evaluate` takes windows wherever they are (moved to the model's device)."""
    from sci_moe.language import evaluate

    cfg = dict(steps=3, batch_size=4, eval_every=2, eval_batches=1, progress=False)
    runs = [
        train(MoELMConfig(**TINY), TrainConfig(**cfg, **dev), corpus=small, return_model=True)
        for dev in ({}, {"device": "cpu"})
    ]
    (h0, m0), (h1, m1) = runs
    h0.pop("step_time"), h1.pop("step_time")  # wall times
    assert h0 == h1
    s0, s1 = m0.state_dict(), m1.state_dict()
    assert all(torch.equal(s0[k], s1[k]) for k in s0)
    x, y = validation_windows(small.val, 16, 4)
    assert evaluate(m0, x, y, 2) == evaluate(m1, x, y, 2)

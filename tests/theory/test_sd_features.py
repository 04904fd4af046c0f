"""Real-feature pipeline of the empirical self-distillation demo (corpus, cache, embeddings)."""

from __future__ import annotations

import os
import pickle
import zlib

import numpy as np
import pytest

from sci_moe.theory.self_distillation import (
    EmpiricalSDConfig,
    cached_embeddings,
    clean_post,
    grouped_split,
    load_mini_newsgroups,
    newsgroup_sentences,
    probe_sd_experiment,
    split_sentences,
    text_hash,
)

POST = """From: someone@example.com
Subject: Re: launch window

In article <1@x.com> other@x.com writes:
> Quoted text that must go. It is long enough to be a sentence.
|> Also quoted, and also long enough to count.
The launch window opens in March for the outer planets. Short one.
Ion engines would give the probe far more delta-v than chemical rockets do!
--
Signature line that should be dropped entirely from the body.
"""


def test_clean_post_and_sentences():
    body = clean_post(POST)
    assert "Quoted" not in body and "quoted" not in body
    assert "writes" not in body and "Signature" not in body and "Subject" not in body
    sentences = split_sentences(body)
    assert sentences == [
        "The launch window opens in March for the outer planets.",
        "Ion engines would give the probe far more delta-v than chemical rockets do!",
    ]
    assert split_sentences("x = 1; y = 2; z = [3, 4]; w = 5 + 6 * 7 - 8. Done now.") == []
    with pytest.raises(ValueError, match="min_words"):
        split_sentences("A b c d e f.", min_words=5, max_words=2)


def test_corpus_loads_with_restricted_unpickler(tmp_path):
    corpus = load_mini_newsgroups()
    assert len(corpus["data"]) == 200 and corpus["target"].shape == (200,)
    assert sorted(corpus["target_names"]) == ["alt.atheism", "sci.space"]
    assert np.bincount(corpus["target"]).tolist() == [100, 100]
    # a pickle that references anything else is refused
    evil = tmp_path / "evil"
    evil.write_bytes(zlib.compress(pickle.dumps(os.getcwd)))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_mini_newsgroups(evil)
    with pytest.raises(FileNotFoundError):
        load_mini_newsgroups(tmp_path / "missing")
    plain = tmp_path / "plain"
    plain.write_bytes(zlib.compress(pickle.dumps({"a": 1})))
    with pytest.raises(ValueError, match="Bunch"):
        load_mini_newsgroups(plain)


def test_newsgroup_sentences():
    texts, labels, groups = newsgroup_sentences()
    assert len(texts) == len(labels) == len(groups) > 1000
    assert len(set(texts)) == len(texts)
    assert set(np.unique(labels)) == {0.0, 1.0}
    # every post has one label: groups never mix the classes
    for g in np.unique(groups):
        assert len(np.unique(labels[groups == g])) == 1
    t2, l2, _ = newsgroup_sentences(max_per_class=50, seed=1)
    assert np.bincount(l2.astype(int)).tolist() == [50, 50]
    assert set(t2) <= set(texts)
    assert t2 == newsgroup_sentences(max_per_class=50, seed=1)[0]
    with pytest.raises(ValueError, match="max_per_class"):
        newsgroup_sentences(max_per_class=0)


def test_cached_embeddings_computes_once(tmp_path):
    calls = []

    def fake_embed(texts, scale=1.0):
        calls.append(list(texts))
        return scale * np.array([[len(t), t.count("a")] for t in texts], dtype=float)

    path = tmp_path / "sub" / "emb.npz"
    texts = ["alpha", "banana", "cherry"]
    a = cached_embeddings(texts, path, embed=fake_embed, scale=2.0)
    b = cached_embeddings(texts, path, embed=fake_embed, scale=2.0)
    np.testing.assert_array_equal(a, b)
    assert len(calls) == 1 and a[1, 1] == 6.0
    assert [p.name for p in path.parent.iterdir()] == ["emb.npz"]  # no temporary files left
    c = cached_embeddings(texts[:2], path, embed=fake_embed)  # other texts: recomputed
    assert len(calls) == 2 and c.shape == (2, 2)
    cached_embeddings(texts[:2], path, embed=fake_embed, model_id="other")
    assert len(calls) == 3
    assert text_hash(["ab", "c"]) != text_hash(["a", "bc"])

    def bad_embed(texts):
        return np.zeros(len(texts))

    with pytest.raises(ValueError, match="embed returned shape"):
        cached_embeddings(texts, tmp_path / "bad.npz", embed=bad_embed)


def test_grouped_split_keeps_groups_together():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(40), 5)
    y = (groups % 2).astype(float)
    y_noisy = np.where(rng.random(len(y)) < 0.2, 1 - y, y)
    keep, held = grouped_split(y_noisy, groups, 0.3, seed=3)
    assert np.intersect1d(groups[keep], groups[held]).size == 0
    assert len(keep) + len(held) == len(y)
    assert 0.25 <= len(held) / len(y) <= 0.4
    _, h2 = grouped_split(y_noisy, groups, 0.3, seed=3)
    np.testing.assert_array_equal(held, h2)
    with pytest.raises(ValueError, match="one label only"):
        grouped_split(np.r_[np.zeros(5), np.ones(5)], np.r_[np.zeros(5), np.ones(5)], 0.3)
    with pytest.raises(ValueError, match="groups must have shape"):
        grouped_split(y, groups[:-1], 0.3)


def test_probe_sd_experiment_with_groups():
    """Tiny grouped mixture: test documents never share a group with training rows."""
    rng = np.random.default_rng(0)
    n_groups, per, N = 60, 6, 8
    groups = np.repeat(np.arange(n_groups), per)
    c = np.where(np.arange(n_groups) % 2 == 0, 1.0, -1.0)[groups]
    X = c[:, None] / np.sqrt(N) + 0.3 * rng.standard_normal((len(c), N))
    y = (1 + c) / 2
    config = EmpiricalSDConfig(n_stages=1, log10_lambdas=(-1.0, 1.0))
    err, res = probe_sd_experiment(X, y, 0.2, [0, 1], config, 0.3, groups=groups)
    assert err.shape == (2, 2) and np.all(err < 0.5)
    for seed, r in zip([0, 1], res, strict=True):
        rest, test = grouped_split(y, groups, 0.3, 10_000 + seed)
        g_rest = groups[rest]
        assert np.intersect1d(g_rest[r.train_index], g_rest[r.val_index]).size == 0
        assert np.intersect1d(g_rest, groups[test]).size == 0
    with pytest.raises(ValueError, match="seeds"):
        probe_sd_experiment(X, y, 0.2, [], config)


@pytest.mark.slow
def test_minilm_embeddings_match_mean_pooling_reference():
    """SentenceTransformer output = normalised mean of AutoModel token states (naive reference)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from sci_moe.theory.self_distillation import embed_texts, minilm_model_path

    texts = ["The shuttle reached orbit at dawn.", "Is morality possible without a god?"]
    X = embed_texts(texts, progress=False)
    assert X.shape == (2, 384) and X.dtype == np.float32
    path = str(minilm_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=1).numpy()
    np.testing.assert_allclose(X, ref, atol=1e-5)
    with pytest.raises(ValueError, match="non-empty"):
        embed_texts([])

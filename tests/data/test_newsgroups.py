"""The gensim mini-newsgroup corpus as a binary sentence task (sci_moe.data.newsgroups)."""

from __future__ import annotations

import os
import pickle
import zlib

import numpy as np
import pytest

from sci_moe.data.newsgroups import (
    clean_post,
    load_mini_newsgroups,
    newsgroup_sentences,
    split_sentences,
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


def test_corpus_lives_on_the_data_floor_only():
    import sci_moe.data as data
    import sci_moe.theory.self_distillation as sd

    assert not hasattr(data, "newsgroup_sentences")  # one path: sci_moe.data.newsgroups
    assert not hasattr(sd, "newsgroup_sentences")
    assert not hasattr(sd, "load_mini_newsgroups")

"""sci_moe.language.markov: the Markov-source text generator, its closed-form entropy rate
and its Bayes-optimal window loss."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from sci_moe.language import MarkovSources, markov_corpus, text_corpus, validation_windows


@pytest.fixture(scope="module")
def src():
    return MarkovSources.random(3, 5, 0.3, mean_length=20.0, seed=1)


def _ids(text: str) -> torch.Tensor:
    return torch.tensor(list(text.encode("ascii")))


def test_uniform_source_entropy_rate_in_closed_form():
    V, q = 4, 0.1
    m = MarkovSources(np.full((1, V, V), 1.0 / V), q, "abcd")
    hq = -(q * math.log(q) + (1 - q) * math.log(1 - q))
    want = (math.log(V) + (hq + (1 - q) * math.log(V)) / q) / (1 / q + 1)
    assert m.oracle_entropy_rate() == pytest.approx(want, rel=1e-12)


def test_oracle_rate_is_the_mean_of_the_sources_rates(src):
    singles = [
        MarkovSources(src.transitions[i : i + 1], src.end_prob, src.alphabet).oracle_entropy_rate()
        for i in range(src.num_sources)
    ]
    assert src.oracle_entropy_rate() == pytest.approx(float(np.mean(singles)), rel=1e-12)


def test_sample_matches_the_entropy_rate_of_one_source():
    """With one source the Bayes predictor is the oracle: its mean loss over a long sample
    is the closed-form entropy rate (up to sampling noise, ~0.3 % here)."""
    m = MarkovSources.random(1, 6, 0.5, mean_length=16.0, seed=3)
    ids = _ids(m.sample(400_001, seed=0))
    x, y = ids[:-1].reshape(-1, 100), ids[1:].reshape(-1, 100)  # 4000 windows
    loss = m.bayes_loss(x, y)
    assert torch.isfinite(loss).all()
    assert float(loss.mean()) == pytest.approx(m.oracle_entropy_rate(), rel=0.01)


def test_sample_statistics(src):
    text = src.sample(200_000, seed=2)
    assert len(text) == 200_000 and set(text) <= set(src.alphabet) | {"\n"}
    assert "\n\n" not in text  # every document has a letter
    share = text.count("\n") / len(text)
    assert share == pytest.approx(1 / (1 / src.end_prob + 1), rel=0.05)
    assert src.sample(5_000, seed=2) == src.sample(5_000, seed=2) != src.sample(5_000, seed=3)
    pi = src.stationary()
    assert np.allclose(pi.sum(1), 1) and np.allclose(
        np.einsum("sa,sab->sb", pi, src.transitions), pi
    )


def _brute_prob(m: MarkovSources, text: str) -> float:
    """P(text) of the stationary stream by summing over each document's source (``text``
    starts at a document boundary or inside one, equally likely for every source)."""
    pi, T, q = m.stationary(), m.transitions, m.end_prob
    idx = {c: i for i, c in enumerate(m.alphabet)}
    prob = 1.0
    for j, seg in enumerate(text.split("\n")):
        if not seg:
            continue
        ended = j < text.count("\n")  # a separator follows this segment
        total = 0.0
        for s in range(m.num_sources):
            p = pi[s, idx[seg[0]]]
            for a, b in itertools.pairwise(seg):
                p *= (1 - q) * T[s, idx[a], idx[b]]
            total += p * (q if ended else 1.0) / m.num_sources
        prob *= total
    return prob


@pytest.mark.parametrize("text", ["abcaed", "bca\ndeab", "\nabba", "ca\nb"])
def test_bayes_loss_is_the_forward_recursion(src, text):
    ids = _ids(text)
    loss = src.bayes_loss(ids[None, :-1], ids[None, 1:])[0]
    for t in range(1, len(text)):
        want = -(math.log(_brute_prob(src, text[: t + 1])) - math.log(_brute_prob(src, text[:t])))
        assert float(loss[t - 1]) == pytest.approx(want, rel=1e-9), (text, t)


def test_window_floor_lies_between_the_oracle_and_a_blind_predictor():
    m = MarkovSources.random(4, 8, 0.1, mean_length=64.0, seed=0)
    c = markov_corpus(m, 60_000)
    x, y = validation_windows(c.val, 32, 64)
    loss = m.bayes_loss(x, y)
    assert m.oracle_entropy_rate() < float(loss.mean()) < math.log(9)
    assert float(loss[:, :2].mean()) > float(loss[:, -8:].mean())  # the source is learnt


def test_corpus_is_the_text_corpus_of_the_sample(src):
    c = markov_corpus(src, 10_000, seed=4)
    ref = text_corpus(src.sample(10_000, seed=4), name="markov_sources")
    assert torch.equal(c.train, ref.train) and torch.equal(c.val, ref.val)


def test_bad_arguments():
    T = np.full((1, 2, 2), 0.5)
    with pytest.raises(ValueError, match="shape"):
        MarkovSources(np.ones((2, 2)), 0.1, "ab")
    with pytest.raises(ValueError, match="probability"):
        MarkovSources(T * 2, 0.1, "ab")
    with pytest.raises(ValueError, match="end_prob"):
        MarkovSources(T, 1.0, "ab")
    with pytest.raises(ValueError, match="alphabet"):
        MarkovSources(T, 0.1, "a\n")
    with pytest.raises(ValueError, match="alphabet_size"):
        MarkovSources.random(2, 30)
    with pytest.raises(ValueError, match="n_bytes"):
        MarkovSources(T, 0.1, "ab").sample(0)
    with pytest.raises(ValueError, match="same shape"):
        MarkovSources(T, 0.1, "ab").bayes_loss(torch.zeros(2, 3), torch.zeros(2, 4))

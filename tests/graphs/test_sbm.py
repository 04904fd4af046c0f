"""Multi-view CSBM: the exact oracle posterior vs brute force, analytic checks, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sci_moe.graphs import (
    MultiViewCSBMConfig,
    bayes_optimal_accuracy,
    bayes_posterior,
    make_multiview_csbm,
)


def test_posterior_matches_brute_force():
    cfg = MultiViewCSBMConfig(num_nodes=14, mean_degree=4, feature_dim=4, contrast=(0.7, -0.5, 0.0))
    g = make_multiview_csbm(cfg, seed=2)
    post = bayes_posterior(g)
    y = g.y.numpy()
    x = g.features()[0].double().numpy()
    N, C = 14, 4
    adj = []
    for e in g.edge_indices:
        a = np.zeros((N, N), dtype=bool)
        a[e[0].numpy(), e[1].numpy()] = True
        assert (a == a.T).all() and not a.diagonal().any()
        adj.append(a)
    for i in range(N):
        logp = np.zeros(C)
        for c in range(C):
            logp[c] = -((x[i] - cfg.means()[c]) ** 2).sum() / 2
            for v, a in enumerate(adj):
                P = cfg.edge_probabilities(v)
                for j in range(N):
                    if j != i:
                        p = P[c, y[j]]
                        logp[c] += math.log(p) if a[i, j] else math.log(1 - p)
        ref = np.exp(logp - logp.max())
        np.testing.assert_allclose(post[i], ref / ref.sum(), rtol=1e-9, atol=1e-12)


def test_features_only_bayes_accuracy_matches_the_analytic_value():
    # two classes, means s e_0 and s e_1: Bayes accuracy Phi(s sqrt(2) / (2 sigma))
    s = 1.5
    cfg = MultiViewCSBMConfig(
        num_nodes=6000,
        num_classes=2,
        partitions=((0, 0),),
        contrast=(0.0,),
        mean_degree=2,
        feature_dim=2,
        feature_signal=s,
    )
    g = make_multiview_csbm(cfg, seed=0)
    acc = bayes_optimal_accuracy(g, views=(), mask=torch.ones(6000, dtype=torch.bool))
    exact = 0.5 * (1 + math.erf(s * math.sqrt(2) / 2 / math.sqrt(2)))
    assert abs(acc.expected - exact) < 4 * acc.stderr + 1e-3
    assert abs(acc.realised - exact) < 0.03
    # a noise view adds nothing
    acc_g = bayes_optimal_accuracy(g, mask=torch.ones(6000, dtype=torch.bool))
    assert acc_g.expected == pytest.approx(acc.expected, abs=1e-12)


def test_combining_views_is_needed():
    g = make_multiview_csbm(num_nodes=600, seed=0)
    both = bayes_optimal_accuracy(g).expected
    single = [bayes_optimal_accuracy(g, views=(v,)).expected for v in range(3)]
    feats = bayes_optimal_accuracy(g, views=()).expected
    assert both > max(single) + 0.1
    assert single[2] == pytest.approx(feats, abs=1e-12)  # the noise view carries nothing
    assert min(single[:2]) > feats + 0.05


def test_generator_is_seeded_and_split():
    a = make_multiview_csbm(num_nodes=60, seed=5)
    b = make_multiview_csbm(num_nodes=60, seed=5)
    c = make_multiview_csbm(num_nodes=60, seed=6)
    assert torch.equal(a.x, b.x) and all(
        torch.equal(u, v) for u, v in zip(a.edge_indices, b.edge_indices, strict=True)
    )
    assert not torch.equal(a.x, c.x)
    masks = torch.stack([a.train_mask, a.val_mask, a.test_mask]).int()
    assert (masks.sum(0) == 1).all() and int(a.train_mask.sum()) == 12


def test_config_errors():
    with pytest.raises(ValueError, match="contrast"):
        MultiViewCSBMConfig(contrast=(0.5,))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        MultiViewCSBMConfig(contrast=(2.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="block for each"):
        MultiViewCSBMConfig(partitions=((0, 1),), contrast=(0.5,))
    with pytest.raises(TypeError):
        make_multiview_csbm(MultiViewCSBMConfig(), num_nodes=10)

"""AnyGraph-style base: unified features, propagation, link loss, competence router."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from sci_moe.graphs import make_link_graph
from sci_moe.graphs.merging import (
    AnyGraphConfig,
    AnyGraphMoE,
    PretrainConfig,
    link_loss,
    normalized_adjacency,
    pretrain,
    propagate,
    svd_embedding,
    unified_features,
)
from tests.conftest import FLOAT_TOLERANCE


def test_normalized_adjacency_and_propagation(float_dtype):
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0-1-2, node 3 isolated
    A = normalized_adjacency(ei, 4).to_dense()
    dense = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1.0]])
    deg = dense.sum(1)
    ref = dense / torch.sqrt(deg[:, None] * deg[None])
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(A, ref.to(A.dtype), atol=tol, rtol=tol)
    e0 = torch.randn(4, 3)
    ln = torch.nn.functional.layer_norm(e0, (3,))
    out = propagate(normalized_adjacency(ei, 4), e0, 2)
    torch.testing.assert_close(out, ref @ ln + ref @ ref @ ln, atol=tol, rtol=tol)
    torch.testing.assert_close(propagate(normalized_adjacency(ei, 4), e0, 0), ln)


def test_svd_embedding_pads_fixes_signs_and_spans():
    x = torch.randn(30, 5, dtype=torch.float64)
    emb = svd_embedding(x, 8)
    assert emb.shape == (30, 8) and torch.all(emb[:, 5:] == 0)
    assert torch.all(emb[:, :5].sum(0) >= 0)  # sign convention
    U, S, _ = torch.linalg.svd(x, full_matrices=False)
    torch.testing.assert_close(emb[:, :5].abs().double(), (U * S.sqrt()).abs())
    assert torch.equal(svd_embedding(x, 8, seed=1), emb)
    assert torch.all(svd_embedding(torch.zeros(4, 0), 3) == 0)


def test_unified_features_any_feature_dimension():
    for f in (0, 3, 40):
        g = make_link_graph("sbm", num_nodes=60, feature_dim=f, seed=f)
        z = unified_features(g, 16, hops=2)
        assert z.shape == (60, 16) and torch.isfinite(z).all()
    with pytest.raises(ValueError, match="hops"):
        propagate(normalized_adjacency(g.edge_index, 60), z, -1)


def test_link_loss_matches_naive(float_dtype):
    a, p, n = torch.randn(4, 3), torch.randn(4, 3), torch.randn(5, 3)
    ref = 0.0
    for b in range(4):
        pos = a[b] @ p[b]
        negs = torch.stack([a[b] @ n[j] for j in range(5)])
        ref = ref - (pos - torch.log(torch.exp(pos) + torch.exp(negs).sum()))
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(link_loss(a, p, n), ref / 4, atol=tol, rtol=tol)


def test_config_validation():
    with pytest.raises(ValueError, match="num_experts"):
        AnyGraphConfig(num_experts=0)
    with pytest.raises(ValueError, match="no training edges"):
        AnyGraphMoE(AnyGraphConfig(d_model=4, num_experts=2)).competence(
            torch.zeros(3, 4), Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=3)
        )


def test_competence_picks_the_expert_trained_on_that_family():
    """Experts 0 and 1 trained on graphs of one family each (SBM, latent geometry),
    expert 2 untouched: the competence router sends every graph of a family to its
    expert, and an untrained expert scores lower than the trained one on its graphs.

    (Zero-shot recognition of the family on freshly generated graphs is *not* reliable at
    this scale: the SVD coordinates of different graphs are not aligned; see the results
    page.)

    The competence margins here are small (~0.005 to 0.02) and depend on the seeds: after
    100 steps the ordering held for 1 of 4 data seeds (also with the hand-written loop this
    test used before the engine), after 300 steps for 4 of 5 (checked when the loop moved
    to the engine); the test runs 300 steps with the default seeds.
    """
    fams = ["sbm", "geometric"]
    train = [make_link_graph(f, 150, 8, seed=10 + i) for i, f in enumerate(fams * 2)]
    model = AnyGraphMoE(AnyGraphConfig(d_model=16, num_experts=3, num_layers=2))
    pretrain(
        model,
        train,
        PretrainConfig(steps=300, batch_size=128, lr=3e-3),
        assignment=[0, 1, 0, 1],
    )
    encoded = [model.encode(g) for g in train]
    for i, (z, g) in enumerate(zip(encoded, train, strict=True)):
        scores = model.competence(z, g, seed=5)
        assert int(scores.argmax()) == i % 2, (g.family, scores)
        assert scores[i % 2] > scores[2]
    r = model.route_graphs(encoded, train, top_k=2, seed=5)
    manual = torch.stack(
        [
            model.competence(z, g, seed=5 + i)
            for i, (z, g) in enumerate(zip(encoded, train, strict=True))
        ]
    )
    assert torch.equal(r.indices, manual.topk(2, dim=1).indices)

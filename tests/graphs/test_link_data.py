"""Generated link graphs (known link models), splits, real-graph loaders and link metrics."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch_geometric.data import Data

from sci_moe.graphs import (
    FAMILIES,
    auc_score,
    evaluate_scores,
    karate_club,
    link_probability,
    link_split,
    load_pyg_dataset,
    make_graph_collection,
    make_link_graph,
    oracle_metrics,
    ranking_metrics,
)


def _pairs(ei):
    return {(min(a, b), max(a, b)) for a, b in ei.T.tolist()}


@pytest.mark.parametrize("family", FAMILIES)
def test_family_split_is_consistent(family):
    g = make_link_graph(family, num_nodes=120, feature_dim=7, seed=3)
    assert g.x.shape == (120, 7) and g.family == family
    train, test, neg = (
        _pairs(g.edge_index),
        _pairs(g.test_edge_index),
        _pairs(g.test_neg_edge_index),
    )
    assert train and test and not train & test
    assert len(neg) == len(test) and not neg & (train | test)
    assert g.edge_index.shape[1] == 2 * len(train)  # both directions
    assert abs(len(test) / (len(test) + len(train)) - 0.15) < 0.02
    known = link_probability(g, g.test_edge_index)
    assert (known is None) == (family in ("ba", "ws"))


@pytest.mark.parametrize("family", ["sbm", "geometric"])
def test_link_probability_matches_edge_density(family):
    """The stored link model generated the edges: expected edge count within 4 sigma."""
    g = make_link_graph(family, num_nodes=300, feature_dim=3, seed=1)
    P = link_probability(g).double()
    iu = torch.triu_indices(300, 300, 1)
    p = P[iu[0], iu[1]]
    observed = len(_pairs(g.edge_index)) + len(_pairs(g.test_edge_index))
    assert abs(observed - float(p.sum())) < 4 * float((p * (1 - p)).sum().sqrt())
    oracle = oracle_metrics(g)
    assert 0.5 < oracle["auc"] <= 1.0 and 0 <= oracle["recall"] <= 1


def test_collection_varies_sizes_dims_and_families():
    col = make_graph_collection(4, 4, num_nodes=(60, 120), feature_dims=(0, 20), seed=2)
    graphs = col.train + col.unseen
    assert [g.family for g in col.train] == list(FAMILIES)
    assert [g.family for g in col.unseen] == list(FAMILIES)
    assert len({g.num_nodes for g in graphs}) > 1 and len({g.x.shape[1] for g in graphs}) > 1
    again = make_graph_collection(4, 4, num_nodes=(60, 120), feature_dims=(0, 20), seed=2)
    assert torch.equal(again.unseen[0].edge_index, col.unseen[0].edge_index)


def test_bad_graphs_raise():
    with pytest.raises(ValueError, match="no edges"):
        link_split(Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=5))
    with pytest.raises(ValueError, match="held_out"):
        link_split(Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3), held_out=1.5)
    with pytest.raises(ValueError, match="family"):
        make_link_graph("er")
    # isolated nodes and no features are allowed
    g = link_split(Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=8))
    assert g.x.shape == (8, 0)


def test_karate_club_and_offline_loader(tmp_path):
    g = karate_club(seed=0)
    assert g.num_nodes == 34 and g.x.shape == (34, 34) and g.family == "real"
    assert oracle_metrics(g) is None
    with pytest.raises(ValueError, match="never downloads"):
        load_pyg_dataset(tmp_path, "Planetoid", dataset_name="Cora")
    with pytest.raises(ValueError, match="not a folder"):
        load_pyg_dataset(tmp_path / "missing", "Planetoid", dataset_name="Cora")
    with pytest.raises(ValueError, match="not a torch_geometric"):
        load_pyg_dataset(tmp_path, "NoSuchSet")


def test_auc_matches_pair_counting():
    pos = torch.tensor([0.9, 0.4, 0.4, 0.2])
    neg = torch.tensor([0.4, 0.1, 0.3])
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    assert auc_score(pos, neg) == pytest.approx(wins / 12)


def test_ranking_metrics_by_hand():
    # path 0-1-2-3-4; training edges 0-1, 1-2; held out 2-3 and 0-4
    g = Data(
        edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]),
        test_edge_index=torch.tensor([[2, 0], [3, 4]]),
        test_neg_edge_index=torch.tensor([[0], [3]]),
        num_nodes=5,
    )
    scores = torch.zeros(5, 5)
    scores[2, 3] = scores[3, 2] = 1.0  # right
    scores[0, 3] = 2.0  # wrong first for anchor 0, 4 second
    scores[0, 4] = 1.0
    scores[4, 0] = 1.0
    out = ranking_metrics(scores, g, k=1)
    # anchors 0, 2, 3, 4: hits at k=1 for 2, 3, 4; not 0
    assert out["recall"] == pytest.approx(3 / 4)
    out = ranking_metrics(scores, g, k=2)
    assert out["recall"] == pytest.approx(1.0)
    import math

    assert out["ndcg"] == pytest.approx((3 + 1 / math.log2(3)) / 4)
    h = torch.randn(5, 3)
    m = evaluate_scores(h, g, k=2)
    assert set(m) == {"auc", "recall", "ndcg"}


def test_link_probability_matrix_uses_exact_distances():
    """All pairs at once agree with the pair path, and a node is at distance 0 from itself
    (cdist's default matrix-product formula above 25 nodes gave up to 2e-8)."""
    g = make_link_graph("geometric", num_nodes=60, feature_dim=3, seed=1)
    P = link_probability(g)
    self_p = torch.sigmoid(torch.tensor(g.radius / g.softness, dtype=P.dtype))
    assert (P.diagonal() == self_p).all()
    iu = torch.triu_indices(60, 60, 1)
    torch.testing.assert_close(P[iu[0], iu[1]], link_probability(g, iu), atol=2e-15, rtol=0)

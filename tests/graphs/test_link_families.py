"""The specialised link families (issue 45): ground-truth properties and determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.graphs import (
    ALL_FAMILIES,
    FAMILIES,
    SPECIALISED_FAMILIES,
    link_probability,
    make_graph_collection,
    make_link_graph,
    oracle_metrics,
)

NEW = [f for f in ALL_FAMILIES if f not in FAMILIES]


def _pairs(ei):
    return {(min(a, b), max(a, b)) for a, b in ei.T.tolist()}


def _all_edges(g):
    return _pairs(g.edge_index) | _pairs(g.test_edge_index)


def test_family_lists():
    assert set(SPECIALISED_FAMILIES) <= set(ALL_FAMILIES)
    assert set(FAMILIES) <= set(ALL_FAMILIES) and len(set(ALL_FAMILIES)) == len(ALL_FAMILIES)


@pytest.mark.parametrize("family", NEW)
def test_deterministic_per_seed(family):
    a = make_link_graph(family, num_nodes=80, feature_dim=16, seed=5)
    b = make_link_graph(family, num_nodes=80, feature_dim=16, seed=5)
    c = make_link_graph(family, num_nodes=80, feature_dim=16, seed=6)
    for key in ("x", "edge_index", "test_edge_index", "test_neg_edge_index"):
        assert torch.equal(a[key], b[key])
    assert a.description == b.description
    assert not torch.equal(a.edge_index, c.edge_index) or not torch.equal(a.x, c.x)


@pytest.mark.parametrize("family", NEW)
def test_link_model_generated_the_edges(family):
    """Known ``P_ij`` for every new family: edge count within 4 sigma, Bayes AUC > 0.5."""
    n = 300
    g = make_link_graph(family, num_nodes=n, feature_dim=16, seed=2)
    assert g.x.shape == (n, 16) and g.family == family
    P = link_probability(g).double()
    iu = torch.triu_indices(n, n, 1)
    p = P[iu[0], iu[1]]
    observed = len(_all_edges(g))
    assert abs(observed - float(p.sum())) < 4 * float((p * (1 - p)).sum().sqrt())
    assert abs(2 * observed / n - 8.0) < 2.5  # the target mean degree
    assert 0.5 < oracle_metrics(g)["auc"] <= 1.0


@pytest.mark.parametrize(
    ("family", "low", "high"), [("assortative", 0.75, 1.0), ("disassortative", 0.0, 0.15)]
)
def test_sbm_homophily(family, low, high):
    """Assortative: most edges inside blocks; disassortative: most edges across them."""
    g = make_link_graph(family, num_nodes=400, feature_dim=8, seed=0)
    c = g.sbm_block.numpy()
    inside = np.mean([c[u] == c[v] for u, v in _all_edges(g)])
    assert low <= inside <= high
    assert 2 <= g.sbm_probs.shape[0] <= 4


def test_chung_lu_degree_follows_weight():
    n = 400
    g = make_link_graph("chung_lu", num_nodes=n, feature_dim=4, seed=0)
    deg = np.zeros(n)
    for u, v in _all_edges(g):
        deg[u] += 1
        deg[v] += 1
    w = g.cl_weight.numpy()
    assert np.corrcoef(w, deg)[0, 1] > 0.8
    assert w.max() > 4 * np.median(w)  # heavy-tailed
    P = link_probability(g)
    assert torch.allclose(P, P.T) and float(P.max()) <= 1.0
    pairs = g.test_edge_index
    assert torch.allclose(link_probability(g, pairs), P[pairs[0], pairs[1]])


@pytest.mark.parametrize("group", range(4))
def test_feature_group_shows_the_latent_space(group):
    """Group ``g`` of the features is a scaled copy of the hidden space the links follow;
    the groups' scales fall in order, so their SVD columns come in that order."""
    fam = f"feature_group{group + 1}"
    g = make_link_graph(fam, num_nodes=120, feature_dim=18, seed=4)
    z = g.latent.numpy()
    w = z.shape[1]
    assert w == 18 // 4
    x = g.x.double().numpy()
    block = x[:, group * w : (group + 1) * w]
    ratio = block / z
    assert np.allclose(ratio, ratio.flat[0])  # exactly scale * z
    others = [x[:, k * w : (k + 1) * w] for k in range(4) if k != group]
    assert all(abs(np.corrcoef(o[:, 0], z[:, 0])[0, 1]) < 0.35 for o in others)
    scales = x[:, : 4 * w].reshape(120, 4, w).std(axis=(0, 2))
    assert np.all(np.diff(scales) < 0)
    # links follow the hidden distance: linked pairs are closer than random pairs
    e = np.array(sorted(_all_edges(g))).T
    linked = np.linalg.norm(z[e[0]] - z[e[1]], axis=1).mean()
    rand = np.linalg.norm(z[:, None] - z[None], axis=-1).mean()
    assert linked < 0.6 * rand


def test_collection_of_specialised_families():
    col = make_graph_collection(4, 4, SPECIALISED_FAMILIES, num_nodes=(40, 60), seed=1)
    assert [g.family for g in col.train] == list(SPECIALISED_FAMILIES)
    assert all(link_probability(g, g.test_edge_index) is not None for g in col.unseen)


def test_unknown_family_raises():
    with pytest.raises(ValueError, match="family must be one of"):
        make_link_graph("nope")


@pytest.mark.parametrize("family", ["heterophily", "heterophily_quiet"])
def test_heterophily_block_is_anti_predictive(family):
    """Most links join the two blocks; the block is the first feature column, loud in
    ``heterophily`` and quiet in ``heterophily_quiet``, ``h`` the next two."""
    g = make_link_graph(family, num_nodes=300, feature_dim=8, seed=1)
    b = g.het_block.numpy()
    across = np.mean([b[u] != b[v] for u, v in _all_edges(g)])
    assert across > 0.8
    x = g.x.double().numpy()
    assert np.corrcoef(x[:, 0], b)[0, 1] > 0.5
    h = g.latent.numpy()
    loud_block = family == "heterophily"
    assert (np.abs(x[:, 0]).mean() > np.abs(x[:, 1:3]).mean()) == loud_block
    assert np.allclose(x[:, 1:3] / (h - 0.5), (x[:, 1:3] / (h - 0.5))[0, 0])
    # the link model: across-block pairs (1 + rho) / (1 - rho) times as likely, same distance
    pairs = torch.tensor([[0, 0], [1, 2]])
    P = link_probability(g)
    assert torch.allclose(link_probability(g, pairs), P[pairs[0], pairs[1]])
    rho = g.het_rho
    same = torch.as_tensor(b[:, None] == b[None])
    base = torch.sigmoid(
        (g.radius - torch.cdist(g.latent, g.latent, compute_mode="donot_use_mm_for_euclid_dist"))
        / g.softness
    )
    expected = (base * torch.where(same, 1 - rho, 1 + rho)).clamp(max=1)
    assert torch.allclose(P, expected, atol=1e-9)

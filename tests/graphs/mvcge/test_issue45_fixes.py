"""Issue 45: why MvCGE lost and collapsed, and the fixes (each test fails without its fix).

* the load-equilibrium loss on the renormalised top-k weights has no gradient for any
  unselected expert (a collapsed routing stays collapsed); on the full softmax it has;
* which view carries a node's structure is lost when the views' embeddings are summed
  (mean or attention fusion) or when the router sees only the propagated features; the
  graph-aware router input with concatenated views keeps it.
"""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import bayes_optimal_accuracy, make_multiview_csbm
from sci_moe.graphs.mvcge import (
    MLP,
    AttentionFusionGCN,
    MvCGE,
    TrainConfig,
    mvcge_csbm_config,
    train_node_classifier,
)


@pytest.fixture(scope="module")
def graph():
    return make_multiview_csbm(mvcge_csbm_config("complementary", num_nodes=60), seed=2)


def _le_grad_on_unselected(graph, **kw):
    torch.manual_seed(0)
    model = MvCGE(in_dim=graph.num_features, num_classes=4, hidden_dim=8, num_experts=4, **kw)
    out = model.train()(graph.features(), graph.edge_indices)
    r = out.routings[0]
    (g,) = torch.autograd.grad(out.le_loss, r.logits)
    unselected = torch.ones_like(g, dtype=torch.bool)
    unselected.scatter_(1, r.indices, False)
    return g[unselected].abs().max()


def test_le_loss_reaches_unselected_experts_by_default(graph):
    # the default (probs) can move probability onto experts no token selects ...
    probs = _le_grad_on_unselected(graph)
    assert probs > 1e-4
    # ... the renormalised top-k weights (the former default) cannot (zero to round-off)
    assert _le_grad_on_unselected(graph, le_source="weights") < 1e-6 * probs


def _which_view_graph(n=6):
    """Class 0 is a clique in view 0 and isolated in view 1; class 1 the other way round.

    Features are constant, so only *which view* holds a node's clique tells its class.
    """
    a, b = torch.arange(n), torch.arange(n, 2 * n)

    def clique(idx):
        i, j = torch.meshgrid(idx, idx, indexing="ij")
        keep = i != j
        return torch.stack([i[keep], j[keep]])

    x = torch.ones(2 * n, 3)
    return x, [clique(a), clique(b)], n


@pytest.mark.parametrize(
    "router_input, fusion, tells_apart",
    [
        ("graph", "concat", True),
        ("graph", "mean", False),
        ("graph", "attention", False),
        ("propagated", "concat", False),
    ],
)
def test_which_view_carries_the_structure(router_input, fusion, tells_apart):
    x, edges, n = _which_view_graph()
    torch.manual_seed(0)
    model = MvCGE(
        in_dim=3,
        num_classes=2,
        hidden_dim=4,
        num_experts=4,
        top_k=2,
        router_input=router_input,
        fusion=fusion,
        num_views=2,
        dropout=0.0,
    ).eval()
    with torch.no_grad():
        z = model(x, edges).fused
    gap = float((z[:n].mean(0) - z[n:].mean(0)).abs().max())
    assert (gap > 1e-4) == tells_apart, gap


def test_graph_router_needs_its_context():
    model = MvCGE(in_dim=3, num_classes=2, hidden_dim=4)
    with pytest.raises(ValueError, match="context"):
        model.layers[0](torch.randn(2, 5, 3), views=2)
    with pytest.raises(ValueError, match="num_views"):
        MvCGE(in_dim=3, num_classes=2, fusion="concat")
    with pytest.raises(ValueError, match="router_input"):
        MvCGE(in_dim=3, num_classes=2, router_input="degree")


def test_complementary_views_each_inform_a_different_class():
    cfg = mvcge_csbm_config("complementary", num_nodes=200)
    for v, part in enumerate(cfg.partitions):
        assert part[v] != part[(v + 1) % 4] and len(set(part)) == 2
    g = make_multiview_csbm(cfg, seed=0)
    both = bayes_optimal_accuracy(g).expected
    assert all(bayes_optimal_accuracy(g, views=(v,)).expected < both - 0.1 for v in range(3))
    assert mvcge_csbm_config("consistent").partitions == ((0, 1, 2, 3),) * 3
    with pytest.raises(ValueError, match="setting"):
        mvcge_csbm_config("mixed")


def test_baselines_and_val_loss_history(graph):
    for model in (
        MLP(in_dim=graph.num_features, hidden_dim=8, num_classes=4),
        AttentionFusionGCN(3, in_dim=graph.num_features, hidden_dim=8, num_classes=4),
    ):
        torch.manual_seed(0)
        res = train_node_classifier(
            model, graph, TrainConfig(steps=4, monitor="val_loss", mode="min", progress=False)
        )
        assert len(res.history) == 4 and all("val_loss" in e for e in res.history)
        best = min(res.history, key=lambda e: e["val_loss"])
        assert res.best_epoch + 1 == best["step"]
        assert res.val_accuracy == best["val_accuracy"]

"""MvCGE: node-permutation equivariance, view-order invariance, shared experts, losses, errors."""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import make_multiview_csbm
from sci_moe.graphs.mvcge import MvCGE, MvCGEConfig


@pytest.fixture(scope="module")
def graph():
    return make_multiview_csbm(num_nodes=48, mean_degree=5, feature_dim=6, seed=3)


def _model(graph, **kw):
    kw.setdefault("hidden_dim", 8)
    return MvCGE(in_dim=graph.num_features, num_classes=4, **kw).eval()


@pytest.mark.parametrize("token", ["view", "node"])
@pytest.mark.parametrize("shared", [True, False])
def test_node_permutation_equivariance(graph, token, shared):
    model = _model(graph, token=token, shared_experts=shared, num_views=3)
    x, edges = graph.features()[0], graph.edge_indices
    perm = torch.randperm(graph.num_nodes)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    with torch.no_grad():
        out = model(x, edges)
        out_p = model(x[perm], [inv[e] for e in edges])
    assert torch.allclose(out_p.logits, out.logits[perm], atol=1e-5)
    assert torch.allclose(out_p.embeddings, out.embeddings[:, perm], atol=1e-5)


@pytest.mark.parametrize("token", ["view", "node"])
@pytest.mark.parametrize("fusion", ["attention", "mean"])
def test_view_order_invariance(graph, token, fusion):
    model = _model(graph, token=token, fusion=fusion)
    xs, edges = graph.features(), graph.edge_indices
    order = [2, 0, 1]
    with torch.no_grad():
        out = model(xs, edges)
        out_o = model([xs[v] for v in order], [edges[v] for v in order])
    assert torch.allclose(out_o.logits, out.logits, atol=1e-5)
    assert torch.allclose(out_o.embeddings, out.embeddings[order], atol=1e-5)
    assert torch.allclose(out_o.view_weights, out.view_weights[order], atol=1e-6)


def test_shared_experts_are_one_parameter_set(graph):
    model = _model(graph).train()
    n_params = sum(p.numel() for p in model.parameters())
    for layer in model.layers:
        assert layer.experts.num_experts == 4 and len(layer.routers) == 1
    # the parameter count does not depend on the number of views
    assert n_params == sum(p.numel() for p in _model(graph).parameters())
    # every view's output has a gradient on the same expert tensor
    out = model(graph.features(), graph.edge_indices, compute_losses=False)
    w = model.layers[-1].experts.weight
    grads = [
        torch.autograd.grad(out.embeddings[v].sum(), w, retain_graph=True)[0] for v in range(3)
    ]
    assert all(g.abs().sum() > 0 for g in grads)
    unshared = _model(graph, shared_experts=False, num_views=3)
    # one bank of 3 x 4 experts, one router per view
    assert unshared.layers[0].experts.num_experts == 12 and len(unshared.layers[0].routers) == 3
    n_unshared = sum(p.numel() for p in unshared.parameters())
    per_pool = sum(p.numel() for p in model.layers.parameters())
    assert n_unshared == n_params + 2 * per_pool


def test_view_tokens_route_every_node_of_a_view_alike(graph):
    model = _model(graph, token="view", top_k=1, num_experts=3)
    with torch.no_grad():
        out = model(graph.features(), graph.edge_indices)
    usage, entropy = MvCGE.expert_usage(out)
    assert usage.shape == (2, 3, 3) and entropy.shape == (2, 3)
    assert torch.allclose(usage.sum(-1), torch.ones(2, 3))
    assert torch.allclose(entropy, torch.zeros(2, 3))  # one expert per view with k = 1
    assert out.routings[0].num_tokens == 3


def test_loss_terms_and_backward(graph):
    model = _model(graph, le_weight=0.5, gd_weight=0.3).train()
    out = model(graph.features(), graph.edge_indices)
    assert out.gd_loss.item() < 0 and out.le_loss.item() >= 0
    loss = model.loss(out, graph.y, graph.train_mask)
    ce = torch.nn.functional.cross_entropy(out.logits[graph.train_mask], graph.y[graph.train_mask])
    assert torch.allclose(loss, ce + 0.5 * out.le_loss + 0.3 * out.gd_loss)
    loss.backward()
    router_w = model.layers[0].routers[0].weight
    assert router_w.grad is not None and router_w.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        assert model(graph.features(), graph.edge_indices).gd_loss.item() == 0.0


def test_bad_input(graph):
    model = _model(graph)
    x = graph.features()[0]
    with pytest.raises(ValueError, match="same shape"):
        model([x, x[:10], x], graph.edge_indices)
    with pytest.raises(ValueError, match="node set"):
        model(x[:20], graph.edge_indices)
    with pytest.raises(ValueError, match="at least one view"):
        model(x, [])
    with pytest.raises(ValueError, match="in_dim"):
        model(x[:, :3], graph.edge_indices)
    with pytest.raises(ValueError, match="num_views"):
        MvCGEConfig(in_dim=3, num_classes=2, shared_experts=False)
    with pytest.raises(ValueError, match="token"):
        MvCGEConfig(in_dim=3, num_classes=2, token="edge")
    # an empty view is allowed here (self loops only) and a disconnected one too
    empty = torch.zeros(2, 0, dtype=torch.long)
    with torch.no_grad():
        out = model(x, [graph.edge_indices[0], empty, graph.edge_indices[2]])
    assert torch.isfinite(out.logits).all()

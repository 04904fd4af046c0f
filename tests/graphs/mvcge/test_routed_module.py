"""MvCGE's routed layer (MvCGELayer, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import make_multiview_csbm
from sci_moe.graphs.mvcge import MvCGE, MvCGELayer
from sci_moe.moe import dispatch, routed_paths, slice_experts
from sci_moe.testing import assert_routed_module


@pytest.fixture(scope="module")
def graph():
    return make_multiview_csbm(num_nodes=20, mean_degree=4, feature_dim=5, seed=1)


@pytest.mark.parametrize("token", ["view", "node"])
@pytest.mark.parametrize("shared", [True, False])
def test_mvcge_routed_calls_match_the_naive_loop(graph, token, shared):
    torch.manual_seed(0)
    model = MvCGE(
        in_dim=graph.num_features,
        num_classes=4,
        hidden_dim=6,
        num_experts=3,
        token=token,
        shared_experts=shared,
        num_views=3,
        router_noise=0.1,
    ).train()
    assert all(isinstance(m, MvCGELayer) for m in model.layers)
    # one routed call per layer runs all three views (one dispatch each)
    assert assert_routed_module(model, graph.features()[0], graph.edge_indices) == 2
    assert len(routed_paths(model)) == 2 * (1 if shared else 3)


def test_unshared_views_run_as_one_concatenated_dispatch(graph):
    torch.manual_seed(1)
    model = MvCGE(
        in_dim=graph.num_features,
        num_classes=4,
        hidden_dim=6,
        num_experts=3,
        token="node",
        router_input="propagated",
        shared_experts=False,
        num_views=3,
    ).eval()
    layer = model.layers[0]
    p = torch.randn(3, graph.num_nodes, graph.num_features)
    y, info = layer(p, views=3, return_routing=True)
    assert info.routing.num_experts == 9 and layer.token_routing.num_experts == 3
    for v in range(3):
        # view v: its own router and experts [3v, 3v + 3), as if it had its own bank
        r = layer.routers[v](p[v])
        assert torch.equal(layer.token_routing.indices[v * 20 : (v + 1) * 20], r.indices)
        own = dispatch(p[v], r, slice_experts(layer.experts, 3 * v, 3 * v + 3))
        torch.testing.assert_close(y[v], own)
    with pytest.raises(ValueError, match="3 pools"):
        layer(p[:2], views=2)

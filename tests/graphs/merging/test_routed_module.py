"""The AnyGraph-style layer (AnyGraphMoE, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import make_link_graph
from sci_moe.graphs.merging import (
    AnyGraphConfig,
    AnyGraphMoE,
    ensemble_forward,
    infer_embeddings,
    selected_experts,
)
from sci_moe.moe import routed_paths
from sci_moe.testing import assert_routed_module


@pytest.fixture(scope="module")
def graph():
    return make_link_graph("sbm", 30, 4, seed=0)


@pytest.mark.parametrize(("top_k", "recalibration"), [(1, 0.0), (2, 0.0), (3, 0.5)])
def test_anygraph_routed_call_matches_the_naive_loop(graph, top_k, recalibration):
    torch.manual_seed(0)
    model = AnyGraphMoE(AnyGraphConfig(d_model=6, num_experts=3))
    with torch.no_grad():
        model.usage.copy_(torch.tensor([5.0, 1.0, 2.0]))
    z = model.encode(graph)
    kw = {"data": graph, "top_k": top_k, "recalibration": recalibration, "seed": 2}
    assert assert_routed_module(model, z, **kw) == 1
    # the graph-level router sends every node to the graph's experts
    _, info = model(z, return_routing=True, **kw)
    r = model.route_graphs([z], [graph], top_k, recalibration=recalibration, seed=2)
    assert torch.equal(info.routing.indices, r.indices.expand(z.shape[0], -1))
    assert torch.equal(info.routing.weights, r.weights.expand(z.shape[0], -1))
    assert len(routed_paths(model)) == 1


def test_ensemble_strategy_is_the_layer_forward(graph):
    torch.manual_seed(1)
    model = AnyGraphMoE(AnyGraphConfig(d_model=6, num_experts=4))
    z = model.encode(graph)
    r = model.route_graphs([z], [graph], top_k=3)
    ids, w = selected_experts(r, 0)
    ens = infer_embeddings(model, z, ids, w, "ensemble")
    assert torch.equal(ens, ensemble_forward(model.experts, z, ids, w))
    assert torch.equal(ens, model.embed(z, ids, w, mode="ensemble"))
    # the weights of one graph's routing sum to 1: the call without renormalising agrees
    torch.testing.assert_close(model(z, data=graph, top_k=3), ens)

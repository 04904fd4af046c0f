"""SPiCE's routed layers (the scalar and vector paths, RoutedModules) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule, Routing
from sci_moe.molecules.graph import collate_ensembles
from sci_moe.molecules.spice.geometric_moe import (
    GeometricMoE,
    ScalarRoutedLayer,
    VectorRoutedLayer,
)
from sci_moe.molecules.spice.model import SPiCE, SPiCEConfig
from sci_moe.testing import assert_routed_module, random_ensemble_graph


def test_spice_model_routed_calls_match_the_naive_loop():
    torch.manual_seed(0)
    cfg = SPiCEConfig(
        n_targets=2,
        atom_dim=5,
        bond_dim=3,
        hidden=8,
        num_layers=2,
        num_rbf=4,
        num_experts=4,
        top_k=2,
        cutoff_nm=0.35,
    )
    model = SPiCE(cfg).eval()
    graphs = [random_ensemble_graph(6, 3, s, 2, atom_dim=5, bond_dim=3) for s in (1, 2)]
    # two layers, each a scalar and a vector path call (in dense mode, before upcycling,
    # the dispatch applies expert 0 directly: the test below)
    assert assert_routed_module(model, collate_ensembles(graphs)) == 4


@pytest.mark.parametrize("num_experts", [1, 4])
def test_dense_mode_applies_expert_0_as_the_routed_call_would(num_experts):
    # dense mode's routing is marked single-expert, so the dispatch applies expert 0
    # directly: the same output and gradients as the routed paths called with the same
    # routing unmarked (the general sort, gather and weighted combine)
    torch.manual_seed(0)
    moe = GeometricMoE(hidden=8, num_experts=num_experts, top_k=1, dense=True).double()
    g = torch.Generator().manual_seed(3)
    h = torch.randn(7, 8, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(7, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    gh = torch.randn(7, 8, generator=g, dtype=torch.float64)
    gv = torch.randn(7, 3, 8, generator=g, dtype=torch.float64)

    def routed(h, v):
        rs, rv, hn = moe.route(h, v)
        assert rs.single_expert == 0 and rv.single_expert == 0
        assert torch.all(rs.indices == 0) and torch.all(rs.weights == 1)
        rs = rv = Routing(rs.indices, rs.weights, rs.logits, rs.probs, rs.num_experts)
        dh = moe.scalar(hn, routing=rs)
        dv = moe.vector(torch.cat([hn, v.reshape(7, 24)], 1), routing=rv).reshape(7, 3, 8)
        return h + dh, v + dv

    outs, grads = [], []
    for f in (lambda h, v: moe(h, v)[:2], routed):
        moe.zero_grad()
        h.grad = v.grad = None
        a, b = f(h, v)
        ((a * gh).sum() + (b * gv).sum()).backward()
        outs.append((a.detach(), b.detach()))
        grads.append([h.grad, v.grad] + [p.grad for p in moe.parameters() if p.grad is not None])
    for x, y in zip(outs[0], outs[1], strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    assert len(grads[0]) == len(grads[1])
    for x, y in zip(grads[0], grads[1], strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_geometric_moe_paths_are_routed_modules_and_route_alone():
    moe = GeometricMoE(hidden=8, num_experts=4, top_k=2).double()
    assert isinstance(moe.scalar, ScalarRoutedLayer) and isinstance(moe.vector, RoutedModule)
    g = torch.Generator().manual_seed(3)
    h = torch.randn(7, 8, generator=g, dtype=torch.float64)
    v = torch.randn(7, 3, 8, generator=g, dtype=torch.float64)
    assert assert_routed_module(moe, h, v) == 2
    # the vector path routes its own [h, vec(V)] tokens from the Gram features of V
    x = torch.cat([moe.norm(h), v.reshape(7, 24)], 1).detach()
    layer: VectorRoutedLayer = moe.vector
    assert torch.equal(layer.route(x).indices, layer.route_vectors(v).indices)
    assert assert_routed_module(layer, x.reshape(7, 1, 32)) == 1
    _, _, info = moe(h, v)
    torch.testing.assert_close(
        moe.vector(x, routing=info.vector_routing).reshape(7, 3, 8),
        moe(h, v)[1] - v,
    )

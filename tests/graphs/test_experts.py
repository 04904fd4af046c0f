"""GCN expert bank and propagation: dispatch vs the naive loop, propagation vs dense Â."""

from __future__ import annotations

import torch

from sci_moe.graphs import GCNExperts, GCNPropagation, gcn_normalize, pool_nodes
from sci_moe.moe import Router, dispatch
from sci_moe.testing import assert_routed_bank_matches_reference


def test_gcn_experts_match_reference(float_dtype):
    router = Router(d_model=5, num_experts=4, top_k=2)
    bank = GCNExperts(4, 5, 3)
    assert_routed_bank_matches_reference(router, bank, num_tokens=20)


def test_gcn_experts_apply_activation_inside_each_expert():
    bank = GCNExperts(2, 3, 3, activation="relu")
    router = Router(d_model=3, num_experts=2, top_k=2)
    x = torch.randn(7, 3)
    r = router(x)
    y = dispatch(x, r, bank)
    ref = sum(
        r.weights[:, j : j + 1]
        * torch.stack(
            [bank.forward_expert(int(e), x[t : t + 1])[0] for t, e in enumerate(r.indices[:, j])]
        )
        for j in range(2)
    )
    assert torch.allclose(y, ref, atol=1e-5)


def _dense_ahat(edge_index, n):
    a = torch.zeros(n, n, dtype=torch.float64)
    a[edge_index[1], edge_index[0]] = 1.0
    a = a + torch.eye(n, dtype=torch.float64)
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


def test_propagation_matches_dense_normalised_adjacency(float_dtype):
    ei = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])  # node 5 isolated
    n = 6
    x = torch.randn(n, 4)
    out = GCNPropagation()(x, *gcn_normalize(ei, n))
    ref = (_dense_ahat(ei, n) @ x.double()).to(x.dtype)
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(out[5], x[5])  # isolated node keeps its features (self loop)


def test_pool_nodes_modes():
    x = torch.tensor([[1.0, -1.0], [3.0, 5.0]])
    assert pool_nodes(x, "sum").tolist() == [[4.0, 4.0]]
    assert pool_nodes(x, "max").tolist() == [[3.0, 5.0]]
    try:
        pool_nodes(x, "median")
    except ValueError as e:
        assert "pool must be one of" in str(e)
    else:
        raise AssertionError("no error")

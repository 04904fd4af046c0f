"""Geometric MoE: equivariance, invariant routing, fast path vs naive reference, upcycling."""

from __future__ import annotations

import pytest
import torch
from e3nn.util.test import assert_equivariant

from sci_moe.moe import BiasBalancer, MoE, routed_paths
from sci_moe.moe.cap import CapRecorder, ModelSpec
from sci_moe.molecules.backbone import vectors_to_irreps
from sci_moe.molecules.spice.geometric_moe import (
    GeometricMoE,
    GeometricMoEConfig,
    GramFeatures,
    dense_routing,
)
from sci_moe.testing import (
    assert_moe_matches_reference,
    assert_routed_bank_matches_reference,
    reference_routing,
)

F, E = 8, 4


def _irr(v):
    return vectors_to_irreps(v)


def _unirr(x):
    return x.reshape(x.shape[0], F, 3).transpose(1, 2)


def test_geometric_moe_equivariant(float_dtype):
    moe = GeometricMoE(hidden=F, num_experts=E, top_k=2).to(float_dtype).eval()
    h, v = torch.randn(12, F), torch.randn(12, 3, F)

    def f(h, v):
        h2, v2, _ = moe(h, _unirr(v))
        return h2, _irr(v2)

    assert_equivariant(
        f, args_in=[h, _irr(v)], irreps_in=[f"{F}x0e", f"{F}x1o"], irreps_out=[f"{F}x0e", f"{F}x1o"]
    )


def test_vector_routing_is_invariant():
    torch.set_default_dtype(torch.float64)
    try:
        moe = GeometricMoE(hidden=F, num_experts=E, top_k=2).eval()
        h, v = torch.randn(30, F), torch.randn(30, 3, F)
        q, _ = torch.linalg.qr(torch.randn(3, 3))
        q = -q if torch.det(q) > 0 else q
        _, _, a = moe(h, v)
        _, _, b = moe(h, torch.einsum("ij,pjf->pif", q, v))
        assert torch.equal(a.vector_routing.indices, b.vector_routing.indices)
        torch.testing.assert_close(a.vector_routing.weights, b.vector_routing.weights)
        gram = GramFeatures(F, 3)
        torch.testing.assert_close(gram(v), gram(torch.einsum("ij,pjf->pif", q, v)))
        assert gram(v).shape == (30, 6)
    finally:
        torch.set_default_dtype(torch.float32)


def test_gram_features_are_the_upper_triangle_of_the_projected_gram_matrix():
    gram = GramFeatures(F, 3).double()
    v = torch.randn(11, 3, F, dtype=torch.float64)
    q = gram.proj(v)
    full = torch.einsum("pxa,pxb->pab", q, q)  # (P, r, r), symmetric
    rows, cols = torch.triu_indices(3, 3)
    torch.testing.assert_close(gram(v), gram.norm(full[:, rows, cols]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scalar_path_matches_naive_reference(dtype):
    moe = GeometricMoE(hidden=16, num_experts=E, top_k=2).to(dtype)
    layer = MoE.from_modules(moe.scalar.router, moe.scalar.experts)
    assert_moe_matches_reference(layer, torch.randn(20, 16, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vector_path_matches_naive_reference(dtype):
    # Fast path (sort + grouped GEMM) vs the token-by-token loop of sci_moe.testing, with
    # routing also recomputed naively from the Gram features; outputs and all gradients.
    moe = GeometricMoE(hidden=16, num_experts=E, top_k=2).to(dtype)
    h, v = torch.randn(20, 16, dtype=dtype), torch.randn(20, 3, 16, dtype=dtype)
    x = torch.cat([moe.norm(h), v.reshape(20, 48)], 1).detach()
    feats = moe.vector.gram(v).detach()
    idx, _ = reference_routing(moe.vector.router, feats)
    assert torch.equal(idx, moe.vector.router(feats).indices)
    assert_routed_bank_matches_reference(
        moe.vector.router, moe.vector.experts, x, router_input=feats
    )


class _Wrap(torch.nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.moe = moe

    def forward(self, h, v):
        return self.moe(h, v)


def test_routed_paths_make_spice_visible_to_tools():
    moe = GeometricMoE(hidden=F, num_experts=E, top_k=2, selection_bias=True)
    model = _Wrap(moe)
    paths = routed_paths(model)
    assert [p.name for p in paths] == ["scalar", "vector"]
    assert paths[0].router is moe.scalar.router and paths[1].experts is moe.vector.experts
    balancer = BiasBalancer(model, rate=0.1)
    assert balancer.routers == [moe.scalar.router, moe.vector.router]
    _, _, info = moe(torch.randn(30, F), torch.randn(30, 3, F))
    balancer.observe(moe.scalar.router, info.scalar_routing)
    balancer.observe(moe.vector.router, info.vector_routing)
    balancer.step()
    assert moe.scalar.router.expert_bias.abs().sum() > 0
    assert moe.vector.router.expert_bias.abs().sum() > 0
    with CapRecorder(model) as rec:
        model(torch.randn(12, F), torch.randn(12, 3, F))
    act = rec.activated()
    assert act.shape == (1, 2) and (act >= 2).all()
    assert rec.steps[0].tokens == 12
    spec = ModelSpec.from_module(model)
    assert spec.num_moe_layers == 2
    assert (
        spec.moe_layers[0].expert_params
        == sum(p.numel() for p in moe.scalar.experts.parameters()) // E
    )


def test_dense_routing_is_a_supported_routing():
    r = dense_routing(5, E, torch.zeros(1, dtype=torch.float64))
    assert r.indices.shape == (5, 1) and r.weights.dtype == torch.float64
    assert r.load.tolist() == [5.0, 0.0, 0.0, 0.0]
    torch.testing.assert_close(r.probs.sum(-1), torch.ones(5, dtype=r.probs.dtype))


def test_aux_losses_and_noise_only_in_training():
    moe = GeometricMoE(hidden=F, num_experts=E, top_k=2, noise_std=5.0)
    h, v = torch.randn(40, F), torch.randn(40, 3, F)
    _, _, info = moe(h, v)
    assert set(info.losses) == {
        "scalar/load_balance",
        "scalar/z_loss",
        "vector/load_balance",
        "vector/z_loss",
    }
    assert info.aux_loss > 0
    moe.eval()
    a = moe(h, v)[0]
    b = moe(h, v)[0]
    assert torch.equal(a, b)
    moe.train()
    assert not torch.equal(moe(h, v)[0], moe(h, v)[0])


def test_dense_mode_and_upcycling_in_place():
    moe = GeometricMoE(hidden=F, num_experts=E, top_k=2, dense=True).eval()
    h, v = torch.randn(10, F), torch.randn(10, 3, F)
    h_dense, v_dense, info = moe(h, v)
    assert torch.all(info.scalar_routing.indices == 0) and info.aux_loss == 0
    params_before = [id(p) for p in moe.parameters()]
    moe.upcycle_()
    assert not moe.is_dense
    assert [id(p) for p in moe.parameters()] == params_before
    # identical experts + weights summing to one: same output as the dense expert
    h_up, v_up, info = moe(h, v)
    torch.testing.assert_close(h_up, h_dense)
    torch.testing.assert_close(v_up, v_dense)
    assert info.scalar_routing.indices.shape == (10, 2)
    # the copies are trained: one optimiser step changes expert 3
    opt = torch.optim.SGD(moe.parameters(), lr=0.1)
    before = moe.scalar.experts.up[3].clone()
    moe.train()
    out = moe(torch.randn(50, F), torch.randn(50, 3, F))
    (out[0].square().sum() + out[1].square().sum()).backward()
    opt.step()
    assert not torch.equal(before, moe.scalar.experts.up[3])


def test_upcycling_copies_adam_moments():
    moe = GeometricMoE(hidden=F, num_experts=E, top_k=2, dense=True)
    opt = torch.optim.AdamW(moe.parameters(), lr=1e-3)
    out = moe(torch.randn(20, F), torch.randn(20, 3, F))
    (out[0].square().sum() + out[1].square().sum()).backward()
    opt.step()  # dense mode: only expert 0 has moments
    moe.upcycle_(opt)
    for bank in (moe.scalar.experts, moe.vector.experts):
        for p in bank.parameters():
            for key in ("exp_avg", "exp_avg_sq"):
                m = opt.state[p][key]
                assert float(m[0].abs().sum()) > 0
                for e in range(1, E):
                    assert torch.equal(m[e], m[0]), (key, e)


def test_config_errors():
    with pytest.raises(ValueError, match="top_k"):
        GeometricMoEConfig(hidden=8, num_experts=2, top_k=3)
    with pytest.raises(ValueError, match="hidden"):
        GeometricMoEConfig(hidden=0)
    moe = GeometricMoE(hidden=F, num_experts=E)
    with pytest.raises(ValueError, match="expected h"):
        moe(torch.randn(3, F), torch.randn(3, F, 3))

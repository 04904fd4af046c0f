"""Routing Mamba: one shared routing per block, banks == naive reference, dense limit."""

import pytest
import torch

from sci_moe.language.mamba import MambaBlock, RoMBlock, RoMConfig
from sci_moe.moe import Router, dispatch
from sci_moe.testing import assert_routed_bank_matches_reference, reference_routed_forward


def _count_router_calls(block):
    calls = []
    routers = [m for m in block.modules() if isinstance(m, Router)]
    handles = [r.register_forward_hook(lambda *a: calls.append(1)) for r in routers]
    return calls, handles


def test_one_expert_equals_dense_mamba(float_dtype):
    torch.manual_seed(0)
    dense = MambaBlock(d_model=12, d_state=4, bias=True)
    rom = RoMBlock.from_dense(dense, num_experts=1, top_k=1)
    x = torch.randn(2, 7, 12)
    y_rom, _ = rom(x)
    y = dense(x)
    tol = 1e-6 if float_dtype == torch.float32 else 1e-12
    torch.testing.assert_close(y_rom, y, atol=tol, rtol=tol)
    # gradients of the shared parts agree too
    g_rom = torch.autograd.grad(y_rom.square().sum(), [rom.A_log, rom.x_proj.weight, rom.D])
    g = torch.autograd.grad(y.square().sum(), [dense.A_log, dense.x_proj.weight, dense.D])
    for a, b in zip(g_rom, g, strict=True):
        torch.testing.assert_close(a, b, atol=10 * tol, rtol=10 * tol)


def test_shared_routing_is_computed_once_per_block():
    torch.manual_seed(0)
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2)
    calls, handles = _count_router_calls(block)
    block(torch.randn(2, 5, 8))
    assert len(calls) == 1
    block.step(torch.randn(2, 8), block.initial_state(2))
    assert len(calls) == 2
    for h in handles:
        h.remove()
    indep = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2, routing="independent")
    calls, _ = _count_router_calls(indep)
    _, info = indep(torch.randn(2, 5, 8))
    assert len(calls) == 3 and "load_balance[out]" in info.losses


def test_shared_routing_drives_all_three_banks():
    """Block output == a naive forward that loops over tokens with the same routing."""
    torch.manual_seed(2)
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2, bias=True).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    out, info = block(x)
    h = x.reshape(12, 8)
    r = block.router(h)
    torch.testing.assert_close(r.indices, info.routing.indices)
    xs = reference_routed_forward(None, block.conv_proj.experts, h, routing=r).view(2, 6, -1)
    zs = reference_routed_forward(None, block.gate_proj.experts, h, routing=r).view(2, 6, -1)
    y, _ = block.mix(xs, zs)
    ref = reference_routed_forward(None, block.out_proj.experts, y.reshape(12, -1), routing=r)
    torch.testing.assert_close(out, ref.view(2, 6, 8))


@pytest.mark.parametrize("name", ["conv", "gate", "out"])
def test_banks_match_naive_reference(float_dtype, name):
    torch.manual_seed(3)
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2, bias=True)
    bank = block.banks()[name]
    assert_routed_bank_matches_reference(
        block.router, bank, num_tokens=10, router_input=torch.randn(10, 8)
    )


def test_gradients_reach_router_and_every_bank():
    torch.manual_seed(4)
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2, load_balance_coef=0.1)
    out, info = block(torch.randn(2, 5, 8))
    (out.square().mean() + info.aux_loss).backward()
    for n, p in block.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    assert block.router.weight.grad.abs().sum() > 0


def test_stepwise_generation_equals_full_forward():
    torch.manual_seed(5)
    block = RoMBlock(d_model=8, d_state=3, num_experts=3, top_k=2).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    y, _ = block(x)
    state = block.initial_state(2)
    outs = []
    for t in range(6):
        o, state = block.step(x[:, t], state)
        outs.append(o)
    torch.testing.assert_close(torch.stack(outs, 1), y)


def test_parameter_counts_and_errors():
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=1)
    dense = MambaBlock(d_model=8, d_state=3)
    n_dense = sum(p.numel() for p in dense.parameters())
    # one expert's worth of projections + a router: dense size + 4 * 8
    assert block.active_parameters() == n_dense + 8 * 4
    with pytest.raises(ValueError, match="top_k"):
        RoMConfig(d_model=8, num_experts=2, top_k=3)
    with pytest.raises(ValueError, match="routing"):
        RoMConfig(d_model=8, routing="per-token")
    with pytest.raises(ValueError, match="RoMConfig fields"):
        RoMConfig(d_model=8, router={"top_k": 2})
    with pytest.raises(TypeError, match="MambaBlock"):
        RoMBlock.from_dense(block)
    with pytest.raises(ValueError, match="hidden_states"):
        block(torch.randn(3, 8))
    r = block.router(torch.randn(4, 8))
    with pytest.raises(ValueError, match="routing covers"):
        dispatch(torch.randn(5, 8), r, block.conv_proj.experts)


@pytest.mark.parametrize("routing", ["shared", "independent"])
def test_routed_paths_for_balancing_and_cap(routing):
    from sci_moe.moe import BiasBalancer, routed_paths

    cfg = RoMConfig(
        d_model=8, num_experts=4, top_k=2, routing=routing, router={"selection_bias": True}
    )
    block = RoMBlock(cfg)
    paths = routed_paths(block)
    assert [p.name for p in paths] == ["conv", "gate", "out"]
    assert [p.d_model for p in paths] == [8, 8, cfg.d_inner]
    routers = {id(p.router) for p in paths}
    assert len(routers) == (1 if routing == "shared" else 3)
    balancer = BiasBalancer(block)
    assert len(balancer.routers) == len(routers)  # a shared router is balanced once

"""DenseSwiGLU: the dense baseline of a top-k MoE layer (sci_moe.moe.dense)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sci_moe.moe import DenseSwiGLU, GLUExperts, MLPExperts

D, H, E, K = 16, 12, 6, 2


def _reference(layer: DenseSwiGLU, x: torch.Tensor) -> torch.Tensor:
    """The formula written out: mass of the top-k softmax times a chunk + silu SwiGLU."""
    probs = F.linear(x.float(), layer.router.weight.float()).softmax(-1)
    mass = probs.topk(layer.top_k, dim=-1).values.sum(-1, keepdim=True)
    gate, up = F.linear(x, layer.ffn.mlp.gate_up[0]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, layer.ffn.mlp.down[0]) * mass.to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_the_written_out_formula(dtype):
    torch.manual_seed(0)
    layer = DenseSwiGLU(D, H, E, K).to(dtype)
    x = torch.randn(2, 7, D, dtype=dtype)
    y = layer(x)
    assert y.shape == x.shape and y.dtype == dtype
    torch.testing.assert_close(y, _reference(layer, x))


def test_active_size_and_router_shapes():
    layer = DenseSwiGLU(d_model=D, d_hidden=H, num_experts=E, top_k=K)
    assert layer.ffn.mlp.num_experts == 1 and layer.ffn.mlp.d_hidden == K * H
    assert tuple(layer.router.weight.shape) == (E, D) and layer.router.bias is None


def test_gradients_equal_the_reference_and_reach_the_router():
    torch.manual_seed(1)
    layer = DenseSwiGLU(D, H, E, K)
    x = torch.randn(9, D, requires_grad=True)
    g = torch.randn(9, D)
    (layer(x) * g).sum().backward()
    got = [x.grad] + [p.grad for p in layer.parameters()]
    x.grad = None
    layer.zero_grad(set_to_none=True)
    (_reference(layer, x) * g).sum().backward()
    want = [x.grad] + [p.grad for p in layer.parameters()]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    assert layer.router.weight.grad.abs().sum() > 0


def test_all_experts_active_is_the_plain_swiglu():
    torch.manual_seed(2)
    layer = DenseSwiGLU(D, H, num_experts=3, top_k=3)  # probability mass 1
    x = torch.randn(5, D)
    torch.testing.assert_close(layer(x), layer.ffn(x))


@pytest.mark.parametrize("kind", ["glu", "mlp"])
def test_one_expert_bank_gradients_equal_indexing(kind):
    # a one-expert stack (SharedExperts) is squeezed instead of indexed (experts._take)
    torch.manual_seed(3)
    bank = GLUExperts(1, D, H) if kind == "glu" else MLPExperts(1, D, H, bias=True)
    with torch.no_grad():
        for p in bank.parameters():
            p.normal_()
    x = torch.randn(4, D, requires_grad=True)
    (bank.forward_expert(0, x) ** 2).sum().backward()
    got = [x.grad] + [p.grad for p in bank.parameters()]
    x.grad = None
    bank.zero_grad(set_to_none=True)
    if kind == "glu":
        gate, up = F.linear(x, bank.gate_up[0]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, bank.down[0])
    else:
        h = bank._act(F.linear(x, bank.up[0], bank.up_bias[0]))
        y = F.linear(h, bank.down[0], bank.down_bias[0])
    (y**2).sum().backward()
    want = [x.grad] + [p.grad for p in bank.parameters()]
    assert len(want) == 1 + (2 if kind == "glu" else 4)  # x and every parameter
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 7},
        {"top_k": 0},
        {"num_experts": 0},
        {"d_model": 0},
        {"d_hidden": -1},
        {"d_hidden": 2.5},
        {"top_k": True},
    ],
)
def test_rejects_bad_sizes(kwargs):
    args = {"d_model": D, "d_hidden": H, "num_experts": E, "top_k": K} | kwargs
    with pytest.raises(ValueError):
        DenseSwiGLU(**args)

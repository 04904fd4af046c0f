"""MoSES's routed layer (MoSESLinear, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule, dispatch, routed_paths
from sci_moe.testing import assert_routed_module
from sci_moe.vrp import generate_instances
from sci_moe.vrp.moses import MoSESLinear, MTVRPPolicy, PolicyConfig

FLAGS = torch.tensor([[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0]], dtype=torch.bool)


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Non-zero LoRA factors and gates (both start at zero), from the test's generator."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("mode", ["expert", "gated"])
def test_moses_policy_routed_calls_match_the_naive_loop(mode):
    cfg = PolicyConfig(d_model=8, num_heads=2, num_layers=1, d_ff=8, rank=2, gate_score="softmax")
    policy = MTVRPPolicy(cfg)
    _randomise(policy, 0)
    policy.mode = mode
    assert all(isinstance(m, RoutedModule) for m in policy.moses_layers())
    ins = generate_instances(2, 4, ["VRPTW", "OVRPB"], seed=0)
    # encoder (embed, 4 per attention layer), kv, then context + glimpse per decoding step
    assert assert_routed_module(policy, ins, num_starts=2, greedy=True) >= 6 + 2 * 4
    assert len(routed_paths(policy)) == len(policy.moses_layers())


@pytest.mark.parametrize("score", ["sigmoid", "softmax", "norm_softplus"])
@pytest.mark.parametrize("routing", ["exact", "dense"])
def test_moses_layer_every_mode(score, routing):
    layer = MoSESLinear(6, 5, rank=3, gate_score=score, routing=routing)
    _randomise(layer, 1)
    x = torch.randn(4, 7, 6, generator=torch.Generator().manual_seed(2))
    f = FLAGS[:, None, :]
    for mode in ("backbone", "expert", "gated"):
        layer.mode = mode
        assert assert_routed_module(layer, x, flags=f) == 1
        y, info = layer(x, flags=f, return_routing=True)
        r = info.routing
        # a disallowed expert is a dropped slot; the backbone (slot 0) is always used
        assert bool(r.kept[:, 0].all())
        if mode == "backbone":
            assert not bool(r.kept[:, 1:].any())
            assert torch.equal(y, layer(x, flags=f))  # the plain backbone call
        elif mode == "expert" or routing == "exact":
            assert torch.equal(r.kept[:, 1:], f.expand(4, 7, 4).reshape(-1, 4))
        if mode == "gated":
            assert torch.equal(layer.last_gate.reshape(-1, 5), r.weights.detach())
        # the bank's own grouped path (backbone as expert 0) gives the same sum
        shared = layer.shared(x.reshape(-1, 6)) if layer.shared is not None else 0
        whole = dispatch(x.reshape(-1, 6), r, layer.experts) + shared
        torch.testing.assert_close(whole.view(4, 7, 5), y)
        # a precomputed routing is used as given
        assert torch.equal(layer(x, r), y)


def test_rank_zero_layer_is_not_routed():
    layer = MoSESLinear(3, 2, rank=0)
    assert routed_paths(layer) == []
    x = torch.randn(2, 3)
    layer.mode = "gated"
    assert torch.equal(layer(x, flags=FLAGS[:2]), layer.base(x))
    with pytest.raises(ValueError, match="rank=0"):
        layer(x, return_routing=True)
    layer = MoSESLinear(3, 2, rank=1)
    layer.mode = "expert"
    with pytest.raises(ValueError, match="flags="):
        layer(x)
    with pytest.raises(ValueError, match="flags must be"):
        layer(x, flags=FLAGS[:2].float())


@pytest.mark.parametrize("score", ["sigmoid", "softmax", "norm_softplus"])
@pytest.mark.parametrize("routing", ["exact", "dense"])
@pytest.mark.parametrize("mode", ["expert", "gated"])
def test_plain_call_is_the_routed_sum(score, routing, mode):
    """The plain call (stacked products, no Routing record) equals the routed call (the
    one assert_routed_module checks), output and gradients, up to reassociation."""
    layer = MoSESLinear(6, 5, rank=3, gate_score=score, routing=routing)
    _randomise(layer, 3)
    layer.mode = mode
    x = torch.randn(4, 7, 6, generator=torch.Generator().manual_seed(4), requires_grad=True)
    f = FLAGS[:, None, :]
    gy = torch.randn(4, 7, 5, generator=torch.Generator().manual_seed(5))
    wrt = [x, *layer.parameters()]
    y_routed, _ = layer(x, flags=f, return_routing=True)
    gate_routed = layer.last_gate
    g_routed = torch.autograd.grad((y_routed * gy).sum(), wrt, allow_unused=True)
    y = layer(x, flags=f)
    g = torch.autograd.grad((y * gy).sum(), wrt, allow_unused=True)
    torch.testing.assert_close(y, y_routed)
    if mode == "gated":
        assert torch.equal(layer.last_gate, gate_routed)
    for a, b in zip(g, g_routed, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)

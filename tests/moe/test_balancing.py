import pytest
import torch
from torch import nn

from sci_moe.moe import BiasBalancer, MoE, routing_diagnostics


def test_bias_balancing_drives_skewed_router_to_balance():
    torch.manual_seed(0)
    moe = MoE(d_model=16, num_experts=8, top_k=2, selection_bias=True)
    with torch.no_grad():  # skew: experts 0 and 1 win for almost every token
        moe.router.weight[:2] += 2.0 * torch.randn(16).sign()
    x = torch.randn(512, 16).abs()
    balancer = BiasBalancer(moe, rate=0.02)
    before = routing_diagnostics(moe.route(x))["max_violation"]
    for _ in range(300):
        balancer.observe(moe, moe.route(x))
        balancer.step()
    after = routing_diagnostics(moe.route(x))["max_violation"]
    assert before > 2.0
    assert after < 0.35 * before
    # weights still come from unbiased scores
    r = moe.route(x)
    torch.testing.assert_close(
        r.weights, (lambda p: p / p.sum(-1, keepdim=True))(r.probs.gather(1, r.indices))
    )


def test_freeze_stops_updates():
    moe = MoE(d_model=8, num_experts=4, top_k=1, selection_bias=True)
    balancer = BiasBalancer(nn.Sequential(moe))
    balancer.freeze()
    balancer.observe(moe, moe.route(torch.randn(20, 8)))
    balancer.step()
    assert moe.router.expert_bias.abs().sum() == 0


def test_needs_biased_router():
    with pytest.raises(ValueError, match="selection_bias"):
        BiasBalancer(MoE(d_model=8, num_experts=4))

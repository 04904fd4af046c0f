"""Time mixture of experts: ranged and soft gating on sci_moe.moe routing."""

import pytest
import torch

from sci_moe.moe import Routing, routed_paths
from sci_moe.moe.cap import CapRecorder, ModelSpec
from sci_moe.sampling.diffusion import MLPEnergy, MLPScore, TimeMixture

RANGES = [(0.6, 1.0), (0.099, 0.6), (1e-5, 0.099)]


def _moe(gating="ranged", last=MLPEnergy):
    experts = [
        MLPScore((1, 2), (8,), t_range=RANGES[0]),
        MLPEnergy((1, 2), (8,), t_range=RANGES[1]),
        last((1, 2), (8,), t_range=RANGES[2]),
    ]
    return TimeMixture(experts, RANGES, gating)


def test_ranged_routing_and_score():
    moe = _moe()
    t = torch.tensor([1.0, 0.7, 0.6, 0.3, 0.099, 0.01, 1e-5])
    r = moe.route(t)
    assert isinstance(r, Routing)
    assert r.indices.shape == (7, 3)
    torch.testing.assert_close(r.weights.argmax(1), torch.tensor([0, 0, 1, 1, 2, 2, 2]))
    torch.testing.assert_close(r.weights.sum(1), torch.ones(7))
    x = torch.randn(7, 1, 2)
    s = moe.score(x, t)
    for i, e in enumerate([0, 0, 1, 1, 2, 2, 2]):
        torch.testing.assert_close(s[i], moe.experts[e].score(x[i : i + 1], t[i : i + 1])[0])
    assert moe.expert_at(1e-5) is moe.experts[2]
    # energy is defined where only energy experts are active
    e = moe.energy(x[4:], t[4:])
    torch.testing.assert_close(e, moe.experts[2](x[4:], t[4:]))
    with pytest.raises(ValueError, match="score network"):
        moe.energy(x, t)


def test_soft_gating_matches_naive_sum():
    torch.manual_seed(0)
    moe = _moe("soft")
    t, x = torch.rand(6), torch.randn(6, 1, 2)
    w = moe.route(t).weights
    torch.testing.assert_close(w.sum(1), torch.ones(6))
    naive = sum(w[:, e].view(-1, 1, 1) * moe.experts[e].score(x, t) for e in range(3))
    torch.testing.assert_close(moe.score(x, t), naive)
    # gradients reach the router
    moe.score(x, t, create_graph=True).pow(2).sum().backward()
    assert moe.router.weight.grad is not None and moe.router.weight.grad.abs().sum() > 0


def test_bad_ranges():
    e = [MLPEnergy((1, 2), (4,)), MLPEnergy((1, 2), (4,))]
    with pytest.raises(ValueError, match="contiguous"):
        TimeMixture(e, [(0.5, 1.0), (0.0, 0.4)])
    with pytest.raises(ValueError, match="lo < hi"):
        TimeMixture(e, [(1.0, 0.5), (0.0, 1.0)])
    with pytest.raises(ValueError, match="gating"):
        TimeMixture(e, [(0.5, 1.0), (0.0, 0.5)], gating="hard")


class _Scorer(torch.nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.moe = moe

    def forward(self, x, t):
        return self.moe.score(x, t)


@pytest.mark.parametrize("gating", ["ranged", "soft"])
def test_time_mixture_is_visible_to_moe_tools(gating):
    moe = _moe(gating)
    (path,) = routed_paths(moe)
    assert path.owner is moe and path.num_experts == 3
    assert path.top_k == (1 if gating == "ranged" else 3)
    assert path.router is (moe.gate if gating == "ranged" else moe.router)
    model = _Scorer(moe)
    t = torch.tensor([0.9, 0.8, 0.05, 0.3])
    with CapRecorder(model) as rec:
        model(torch.randn(4, 1, 2), t)
    assert rec.steps[0].tokens == 4
    if gating == "ranged":  # experts 0, 0, 2, 1: all three serve a sample
        assert rec.steps[0].counts[0].tolist() == [2, 1, 1]
    spec = ModelSpec.from_module(model)
    assert spec.num_moe_layers == 1 and spec.moe_layers[0].num_experts == 3
    total = sum(p.numel() for p in moe.experts.parameters())
    assert spec.moe_layers[0].expert_params == total // 3


def test_ranged_routing_is_built_by_from_assignments():
    moe = _moe()
    r = moe.route(torch.tensor([0.9, 0.01]))
    # probs are the one-hot gates, logits their log (finite), load counts active experts
    torch.testing.assert_close(r.probs, r.weights.float())
    assert torch.isfinite(r.logits).all() and r.load.tolist() == [1.0, 0.0, 1.0]


def test_one_time_range_calls_its_expert_and_still_routes():
    """All samples in one range (MD at t_eval): the expert's own output, bitwise, and the
    gate still runs (hooks such as MoE-CAP's recorder see the routing)."""
    moe = _moe()
    seen = []
    moe.gate.register_forward_hook(lambda m, args, out: seen.append(out))
    x = torch.randn(9, 1, 2, requires_grad=True)
    t = torch.full((9,), 1e-3)
    e = moe.energy(x, t)
    assert torch.equal(e, moe.experts[2].energy(x, t))
    assert len(seen) == 1 and seen[0].weights[:, 2].eq(1).all()
    (g,) = torch.autograd.grad(e.sum(), x)
    (g_ref,) = torch.autograd.grad(moe.experts[2].energy(x, t).sum(), x)
    assert torch.equal(g, g_ref)
    # two ranges in one batch: the general path, each sample its own expert's value
    t2 = torch.tensor([1e-3] * 4 + [0.3] * 5)
    s = moe.score(x.detach(), t2)
    torch.testing.assert_close(s[:4], moe.experts[2].score(x[:4].detach(), t2[:4]))

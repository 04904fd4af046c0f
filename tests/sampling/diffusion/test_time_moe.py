"""Time mixture of experts: ranged and soft gating on sci_moe.moe routing."""

import pytest
import torch

from sci_moe.moe import Routing
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

"""assert_routed_module: every RoutedModule call of a model against the naive loop."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import MLPExperts, MoE, RoutedModule, Router, dispatch
from sci_moe.testing import assert_routed_module


class _Slots(RoutedModule):
    """A routed layer whose router needs each token's own expert, experts = networks."""

    def __init__(self, d=6, E=3):
        super().__init__()
        self.d_model = d
        self.router = Router(d_model=d, num_experts=E, mode="slot_top_m", normalize=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(E))


class _Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.moe = MoE(d_model=6, num_experts=4, top_k=2, num_shared_experts=1)
        self.slots = _Slots()

    def forward(self, x, own):
        h = self.moe(x) + x
        return self.slots(h, own=own) + self.moe(h)  # moe called twice


def test_checks_every_call_of_every_routed_module(float_dtype):
    torch.manual_seed(0)
    model = _Model().to(float_dtype)
    x = torch.randn(2, 5, 6, dtype=float_dtype)
    assert assert_routed_module(model, x, own=torch.arange(10) % 3) == 3


class _WrongDispatch(MLPExperts):
    def forward_sorted(self, x, plan):  # forgets the last expert's rows
        y = super().forward_sorted(x, plan)
        keep = (plan.expert[: plan.num_kept] != self.num_experts - 1).unsqueeze(-1)
        return y * keep


class _Misrouted(RoutedModule):
    def __init__(self):
        super().__init__()
        self.d_model, self.router = 6, Router(d_model=6, num_experts=3, top_k=2)
        self.experts = MLPExperts(3, 6, 5)

    def run_experts(self, x, routing):  # rows sent to the wrong tokens
        return dispatch(x.roll(1, 0), routing, self.experts)


def test_catches_a_wrong_dispatch():
    torch.manual_seed(1)
    moe = MoE(d_model=6, num_experts=3, top_k=3)
    moe.experts = _WrongDispatch(3, 6, 5)
    with pytest.raises(AssertionError, match=r"MoE \(call 0\): output"):
        assert_routed_module(moe, torch.randn(8, 6))
    with pytest.raises(AssertionError, match="naive reference"):
        assert_routed_module(nn.Sequential(_Misrouted()), torch.randn(8, 6))


def test_catches_a_wrong_gradient():
    class Detached(_Misrouted):
        def run_experts(self, x, routing):  # right values, no gradient to the weights
            return dispatch(x, routing.detach(), self.experts)

    torch.manual_seed(2)
    with pytest.raises(AssertionError, match=r"grad\[(input|routing.weights)\]"):
        assert_routed_module(Detached(), torch.randn(8, 6))


def test_needs_a_routed_module():
    with pytest.raises(ValueError, match="holds no"):
        assert_routed_module(nn.Linear(3, 3), torch.randn(2, 3))

    class Skips(nn.Module):
        def __init__(self):
            super().__init__()
            self.moe = MoE(d_model=3, num_experts=2, top_k=1)

        def forward(self, x):
            return x

    with pytest.raises(AssertionError, match="no RoutedModule was called"):
        assert_routed_module(Skips(), torch.randn(2, 3))

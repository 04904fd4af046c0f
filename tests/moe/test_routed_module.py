"""RoutedModule (the routed-layer skeleton), dispatch over expert modules, the bank registry."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import (
    ExpertBank,
    LinearExperts,
    MLPExperts,
    MoE,
    MoEConfig,
    MoEInfo,
    RoutedModule,
    Router,
    dispatch,
    routed_paths,
)
from sci_moe.testing import reference_routed_forward


class _Layer(RoutedModule):
    def __init__(self, d=6, E=3, shared=False, modules=False):
        super().__init__()
        self.d_model = d
        self.router = Router(d_model=d, num_experts=E, top_k=2)
        if modules:
            self.experts = nn.ModuleList(nn.Linear(d, 4) for _ in range(E))
        else:
            self.experts = MLPExperts(E, d, 5)
        self.shared = nn.Linear(d, 4 if modules else d) if shared else None

    def auxiliary_losses(self, x, routing):
        return {"a": routing.probs.mean(), "b": 2 * routing.probs.mean()}


def test_forward_is_flatten_route_dispatch_shared_reshape():
    torch.manual_seed(0)
    layer = _Layer(shared=True)
    x = torch.randn(2, 4, 6)
    y, info = layer(x, return_routing=True)
    assert isinstance(info, MoEInfo) and y.shape == (2, 4, 6)
    x2 = x.reshape(-1, 6)
    routing = layer.router(x2)
    expected = dispatch(x2, routing, layer.experts) + layer.shared(x2)
    assert torch.equal(y.reshape(-1, 6), expected)
    assert torch.equal(info.aux_loss, info.losses["a"] + info.losses["b"])
    # a precomputed routing is used as is; not together with route options
    assert torch.equal(layer(x, routing=routing), y)
    with pytest.raises(ValueError, match="precomputed routing"):
        layer(x, routing=routing, batch=None)
    with pytest.raises(ValueError, match=r"\(\.\.\., 6\)"):
        layer(torch.randn(3, 5))


def test_expert_modules_run_through_dispatch():
    torch.manual_seed(1)
    layer = _Layer(modules=True, shared=True)
    x = torch.randn(7, 6)
    routing = layer.router(x)
    ref = reference_routed_forward(None, layer.experts, x, routing=routing, shared=layer.shared)
    torch.testing.assert_close(layer(x), ref)
    with pytest.raises(ValueError, match="needs an ExpertBank"):
        dispatch(x, routing, layer.experts, return_expert_outputs=True)
    with pytest.raises(ValueError, match="3 experts but 2 expert modules"):
        dispatch(x, routing, list(layer.experts)[:2])


def test_routed_paths_and_moe_is_a_routed_module():
    layer = _Layer(shared=True)
    (path,) = layer.routed_paths()
    assert path.router is layer.router and path.top_k == 2 and path.num_shared_experts == 1
    moe = MoE(d_model=6, num_experts=4, top_k=1)
    assert isinstance(moe, RoutedModule)
    model = nn.Sequential(layer, moe)
    assert [p.owner for p in routed_paths(model)] == [layer, moe]

    class NoRouter(RoutedModule):
        def __init__(self):
            super().__init__()
            self.d_model, self.experts = 6, MLPExperts(2, 6, 3)

    with pytest.raises(ValueError, match="no router"):
        NoRouter()(torch.randn(2, 6))


def test_bank_registry_builds_moe_banks():
    assert {"glu", "mlp", "linear", "adapter"} <= set(ExpertBank.kinds())
    assert ExpertBank.by_kind("linear") is LinearExperts
    with pytest.raises(ValueError, match="registered ExpertBank kinds"):
        MoEConfig(d_model=4, num_experts=2, expert="nope")
    try:

        class Scaled(LinearExperts, kind="test_scaled"):
            @classmethod
            def from_config(cls, config):
                bank = super().from_config(config)
                bank.weight.data.mul_(0.5)
                return bank

        moe = MoE(d_model=4, num_experts=2, top_k=1, expert="test_scaled")
        assert type(moe.experts) is Scaled and Scaled.kind == "test_scaled"
        with pytest.raises(ValueError, match="is taken by"):

            class Other(ExpertBank, kind="test_scaled"):
                pass

    finally:
        ExpertBank._registry.pop("test_scaled", None)

    # a subclass without kind= is not registered and does not inherit the kind
    class Plain(MLPExperts):
        pass

    assert Plain.kind is None and "mlp" in ExpertBank.kinds()

"""FedLEASE's fixed top-k ablation (ModelSpec(top_k=k)) next to the adaptive top-M (issue 46)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from sci_moe.federated import RoundPlan, Server, Simulator
from sci_moe.federated.fedlease import FedLEASE, LoRAMixtureLinear
from tests.federated.fedlease._tiny import tiny_clients


@pytest.mark.parametrize(("k", "M"), [(1, 3), (2, 3), (3, 3), (5, 3), (1, 1)])
def test_fixed_top_k_uses_exactly_min_k_m_experts(k, M):
    torch.manual_seed(0)
    lin = LoRAMixtureLinear(torch.nn.Linear(8, 6), num_experts=M, rank=2, top_k=k)
    with torch.no_grad():
        lin.router.weight.normal_()
        lin.experts.lora_b.normal_()
    x = torch.randn(11, 8)
    y = lin(x, own=M - 1)
    r = lin.last_routing
    assert y.shape == (11, 6)
    assert torch.equal(r.kept.sum(1), torch.full((11,), min(k, M)))
    torch.testing.assert_close(r.weights.sum(1), torch.ones(11))  # renormalised
    # the same as the explicit weighted sum of the chosen experts' LoRA updates
    e = lin.experts
    manual = e.base_layer(x)
    for j in range(r.indices.shape[1]):
        idx = r.indices[:, j]
        a = torch.einsum("ti,tri->tr", x, e.lora_a[idx])
        delta = e.scale * torch.einsum("tr,tor->to", a, e.lora_b[idx])
        manual = manual + r.weights[:, j, None] * delta
    torch.testing.assert_close(y, manual)


def test_one_expert_fixed_top_k_is_the_adaptive_layer():
    torch.manual_seed(1)
    base = torch.nn.Linear(8, 6)
    a = LoRAMixtureLinear(base, num_experts=1, rank=2)
    b = LoRAMixtureLinear(base, num_experts=1, rank=2, top_k=2)
    with torch.no_grad():
        a.experts.lora_b.normal_()
        b.experts.lora_a.copy_(a.experts.lora_a)
        b.experts.lora_b.copy_(a.experts.lora_b)
    x = torch.randn(5, 8)
    torch.testing.assert_close(a(x, own=0), b(x, own=0))


def test_bad_top_k():
    with pytest.raises(ValueError, match="top_k"):
        LoRAMixtureLinear(torch.nn.Linear(4, 4), num_experts=2, top_k=0)
    spec, _ = tiny_clients(2, 1, n=4)
    with pytest.raises(ValueError, match="top_k"):
        dataclasses.replace(spec, top_k=0)


@pytest.mark.parametrize("k", [1, 2])
def test_fedlease_with_fixed_top_k_runs_and_uses_k_experts(k):
    spec, clients = tiny_clients(6, 2, n=16, seed=0)
    spec_k = dataclasses.replace(spec, top_k=k)
    clients = [dataclasses.replace(c, spec=spec_k) for c in clients]
    strat = FedLEASE(spec_k, 6, RoundPlan(rounds=2, warmup_epochs=2, seed=0), max_clusters=4)
    server = Server(strat)
    server.run(Simulator(clients))
    assert not server.history[-1]["excluded"]
    assert strat.routers[0]["query"].shape[0] == strat.num_experts  # M scores, not 2M - 1
    for m in server.evaluate(Simulator(clients)).values():
        for used in m["experts_used"].values():
            assert used == min(k, strat.num_experts)

"""Token-group routing: load-equilibrium loss, per-group usage, JS divergence (vs naive)."""

from __future__ import annotations

import math

import pytest
import torch

from sci_moe.moe import (
    Router,
    Routing,
    group_expert_usage,
    load_equilibrium_loss,
)
from sci_moe.stats import pairwise_js_divergence
from tests.conftest import FLOAT_TOLERANCE


def _routing(T=12, E=4, k=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(T, E, generator=g, dtype=torch.get_default_dtype()).requires_grad_()
    probs = logits.softmax(-1)
    w, idx = probs.topk(k, dim=-1)
    return Routing(idx, w, logits, probs, E), logits


def _naive_le(routing, groups, G, source):
    T, E = routing.probs.shape
    losses = []
    for g in range(G):
        imp = [0.0] * E
        any_tok = False
        for t in range(T):
            if groups is not None and int(groups[t]) != g:
                continue
            any_tok = True
            for i in range(E):
                if source == "probs":
                    imp[i] = imp[i] + routing.probs[t, i]
                else:
                    for j in range(routing.indices.shape[1]):
                        if int(routing.indices[t, j]) == i:
                            imp[i] = imp[i] + routing.weights[t, j]
        if not any_tok:
            continue
        mean = sum(imp) / E
        var = sum((v - mean) ** 2 for v in imp) / E
        losses.append(var / (mean**2 + 1e-10))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("source", ["weights", "probs"])
@pytest.mark.parametrize("grouped", [False, True])
def test_load_equilibrium_matches_naive(float_dtype, source, grouped):
    tol = FLOAT_TOLERANCE[float_dtype]
    r, logits = _routing()
    groups = torch.tensor([0, 1, 2] * 4) if grouped else None
    G = 4 if grouped else 1  # group 3 is empty and skipped
    fast = load_equilibrium_loss(r, groups, G if grouped else None, source=source)
    ref = _naive_le(r, groups, G, source)
    assert torch.allclose(fast, ref, atol=tol, rtol=tol)
    (g1,) = torch.autograd.grad(fast, logits, retain_graph=True)
    (g2,) = torch.autograd.grad(ref, logits)
    assert g1.abs().sum() > 0
    assert torch.allclose(g1, g2, atol=tol, rtol=tol)


def test_load_equilibrium_extremes():
    E = 4
    idx = torch.arange(E).view(E, 1)
    uniform = Routing.from_assignments(idx, torch.ones(E, 1), E)
    assert float(load_equilibrium_loss(uniform)) == pytest.approx(0.0, abs=1e-8)
    collapsed = Routing.from_assignments(torch.zeros(E, 1, dtype=torch.long), torch.ones(E, 1), E)
    assert float(load_equilibrium_loss(collapsed)) == pytest.approx(E - 1, rel=1e-6)
    with pytest.raises(ValueError, match="source"):
        load_equilibrium_loss(uniform, source="load")
    with pytest.raises(ValueError, match="shape"):
        load_equilibrium_loss(uniform, groups=torch.zeros(3, dtype=torch.long))


def test_load_equilibrium_trains_a_collapsed_router_towards_balance():
    torch.manual_seed(0)
    router = Router(d_model=4, num_experts=4, top_k=1)
    with torch.no_grad():
        router.weight.zero_()
        router.weight[0] = 1.0
    x = torch.randn(256, 4, generator=torch.Generator().manual_seed(1)).abs()
    opt = torch.optim.SGD(router.parameters(), lr=1.0)
    first = None
    for _ in range(50):
        loss = load_equilibrium_loss(router(x), source="probs")
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.2 * first


def test_group_expert_usage_matches_counts():
    r, _ = _routing(T=12, E=4, k=2)
    groups = torch.arange(12) % 3
    usage, ent = group_expert_usage(r, groups, 3)
    for g in range(3):
        sel = r.indices[groups == g].reshape(-1)
        counts = torch.bincount(sel, minlength=4).double()
        u = counts / counts.sum()
        assert torch.allclose(usage[g].double(), u, atol=1e-6)
        h = -sum(float(p) * math.log(float(p)) for p in u if p > 0)
        assert float(ent[g]) == pytest.approx(h, abs=1e-5)
    usage, ent = group_expert_usage(r)
    assert usage.shape == (1, 4) and float(usage.sum()) == pytest.approx(1.0)


def test_weighted_usage_and_js_divergence():
    r, _ = _routing(T=6, E=4, k=2)
    groups = torch.arange(6) % 2
    usage, _ = group_expert_usage(r, groups, 2, weighted=True)
    for g in range(2):
        ref = torch.zeros(4, dtype=torch.float64)
        for t in range(6):
            if t % 2 == g:
                for j in range(2):
                    ref[r.indices[t, j]] += float(r.weights[t, j].detach())
        assert torch.allclose(usage[g].double(), ref / ref.sum(), atol=1e-6)
    p = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    # pairs: (0,1) log 2, (0,2) 0, (1,2) log 2
    assert float(pairwise_js_divergence(p)) == pytest.approx(2 * math.log(2) / 3)
    q = torch.tensor([[0.3, 0.7], [0.6, 0.4]], dtype=torch.float64)
    m = 0.5 * (q[0] + q[1])
    ref = 0.5 * (q[0] * (q[0] / m).log()).sum() + 0.5 * (q[1] * (q[1] / m).log()).sum()
    assert float(pairwise_js_divergence(q)) == pytest.approx(float(ref))
    with pytest.raises(ValueError, match="G >= 2"):
        pairwise_js_divergence(q[:1])

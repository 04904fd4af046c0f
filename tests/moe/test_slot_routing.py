"""Slot-expanded top-M routing (FedLEASE; Router mode "slot_top_m") against a naive
per-token loop (outputs and all gradients, f32/f64)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import LoRAExperts, Router, Routing, dispatch
from tests.conftest import FLOAT_TOLERANCE


def slot_expanded_top_m(slot_logits, own, normalize=False):
    """``Router(mode="slot_top_m")`` applied to the slot scores themselves (identity
    projection: ``x I^T`` is ``x`` bitwise)."""
    P = slot_logits.shape[-1]
    M = (P + 1) // 2
    router = Router(d_model=P, num_experts=M, mode="slot_top_m", normalize=normalize)
    with torch.no_grad():
        router.weight.copy_(torch.eye(P))
    return router(slot_logits, own=own)


def _naive_forward(x, G, own, bank, normalize=False):
    """Loop over tokens: softmax over slots, sort, top-M, sum weights per expert."""
    M = bank.num_experts
    rows = []
    for t in range(x.shape[0]):
        o = int(own[t])
        others = [e for e in range(M) if e != o]
        slot_expert = [o] * M + others
        z = G @ x[t]
        p = torch.exp(z - z.max())
        p = p / p.sum()
        order = sorted(range(2 * M - 1), key=lambda s: -float(p[s].detach()))[:M]
        w = {}
        for s in order:
            w[slot_expert[s]] = w.get(slot_expert[s], 0) + p[s]
        total = sum(p[s] for s in order)
        y = bank.base_layer(x[t : t + 1])[0]
        for e, we in w.items():
            if normalize:
                we = we / total
            y = y + we * bank.forward_expert(e, x[t : t + 1])[0]
        rows.append(y)
    return torch.stack(rows)


@pytest.mark.parametrize("M", [1, 2, 3, 4])
@pytest.mark.parametrize("normalize", [False, True])
def test_matches_naive_loop(float_dtype, M, normalize):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = torch.Generator().manual_seed(M)
    d_in, d_out, T = 6, 5, 17
    bank = LoRAExperts(nn.Linear(d_in, d_out), num_experts=M, rank=3)
    with torch.no_grad():
        bank.lora_b.normal_(generator=g)
    router = Router(
        d_model=d_in, num_experts=M, mode="slot_top_m", init_std=1.0, normalize=normalize
    )
    x = torch.randn(T, d_in, generator=g, requires_grad=True)
    own = torch.randint(0, M, (T,), generator=g)
    params = [x, router.weight, bank.lora_a, bank.lora_b]
    y = dispatch(x, router(x, own=own), bank)
    y_ref = _naive_forward(x, router.weight, own, bank, normalize)
    torch.testing.assert_close(y, y_ref, atol=tol, rtol=tol)
    gout = torch.randn(T, d_out, generator=g)
    grads = torch.autograd.grad(y, params, gout)
    grads_ref = torch.autograd.grad(y_ref, params, gout)
    for a, b in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_own_expert_always_selected_and_count():
    g = torch.Generator().manual_seed(1)
    for M in (1, 2, 3, 5):
        logits = torch.randn(200, 2 * M - 1, generator=g) * 5
        own = torch.randint(0, M, (200,), generator=g)
        r = slot_expanded_top_m(logits, own)
        assert (r.indices[:, 0] == own).all()
        assert (r.weights[:, 0] > 0).all()
        used = r.kept.sum(1)
        assert int(used.min()) >= 1 and int(used.max()) <= M
        # distinct experts per token, weights sum to the selected slot mass
        for t in range(200):
            kept = r.indices[t][r.kept[t]].tolist()
            assert len(set(kept)) == len(kept)
        p = torch.softmax(logits, -1)
        torch.testing.assert_close(r.weights.sum(1), p.topk(M, -1).values.sum(1))
        torch.testing.assert_close(r.probs.sum(1), torch.ones(200))
    # with random logits M = 3 reaches every count 1..3
    r = slot_expanded_top_m(torch.randn(500, 5, generator=g) * 3, 1)
    assert set(r.kept.sum(1).tolist()) == {1, 2, 3}


def test_m1_equals_own_lora():
    bank = LoRAExperts(nn.Linear(4, 3), num_experts=1, rank=2)
    with torch.no_grad():
        bank.lora_b.normal_()
    x = torch.randn(7, 4)
    r = Router(d_model=4, num_experts=1, mode="slot_top_m", init_std=1.0)(x, own=0)
    assert torch.equal(r.weights, torch.ones(7, 1))
    torch.testing.assert_close(dispatch(x, r, bank), bank.base_layer(x) + bank.forward_expert(0, x))


def test_slot_map_and_errors():
    # own expert 1 of 3: slots 0-2 point to it, slots 3 and 4 to experts 0 and 2
    for slot, expert in enumerate([1, 1, 1, 0, 2]):
        r = slot_expanded_top_m(20.0 * torch.eye(5)[slot : slot + 1], 1)
        assert int(r.probs.argmax()) == expert
    with pytest.raises(ValueError, match="own expert"):
        slot_expanded_top_m(torch.zeros(2, 3), 2)
    with pytest.raises(TypeError, match="integer"):
        slot_expanded_top_m(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(ValueError, match="d_model"):
        Router(d_model=0, num_experts=2, mode="slot_top_m")
    r = slot_expanded_top_m(torch.zeros(0, 3), 0)
    assert isinstance(r, Routing) and r.indices.shape == (0, 2)

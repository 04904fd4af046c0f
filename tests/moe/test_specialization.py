import math

import torch

from sci_moe.moe import (
    MoE,
    Routing,
    orthogonality_loss,
    routing_diagnostics,
    variance_loss,
)
from sci_moe.moe.specialization import selected_outputs


def _naive_lo(x, eps):
    total = 0.0
    T, k, _ = x.shape
    for t in range(T):
        for j in range(k):
            for l in range(k):
                if l == j:
                    continue
                coef = (x[t, j] @ x[t, l]) / (x[t, l] @ x[t, l] + eps)
                total = total + ((coef * x[t, l]) ** 2).sum()
    return total


def test_orthogonality_matches_naive_loop(float_dtype):
    x = torch.randn(7, 3, 5, requires_grad=True)
    a = orthogonality_loss(x, eps=1e-6)
    b = _naive_lo(x, 1e-6)
    torch.testing.assert_close(a, b)
    (ga,) = torch.autograd.grad(a, x)
    (gb,) = torch.autograd.grad(b, x)
    torch.testing.assert_close(ga, gb)
    torch.testing.assert_close(orthogonality_loss(x, reduction="mean"), b / 7)


def test_orthogonal_outputs_give_zero():
    x = torch.eye(3).expand(4, 3, 3)
    assert orthogonality_loss(x) == 0


def test_variance_matches_naive_loop(float_dtype):
    T, E, k = 9, 5, 2
    logits = torch.randn(T, E, requires_grad=True)
    probs = logits.softmax(-1)
    top = probs.topk(k, -1)
    w = top.values / top.values.sum(-1, keepdim=True)
    r = Routing(top.indices, w, logits, probs, E)
    s = torch.zeros(T, E)
    for t in range(T):
        for j in range(k):
            s[t, top.indices[t, j]] = w[t, j]
    want = 0.0
    for i in range(E):
        mean = sum(s[t, i] for t in range(T)) / T
        for t in range(T):
            want = want - (s[t, i] - mean) ** 2 / E
    torch.testing.assert_close(variance_loss(r), want)
    variance_loss(r).backward()
    assert logits.grad.abs().sum() > 0


def test_layer_reports_specialisation_losses():
    moe = MoE(d_model=8, num_experts=4, top_k=2, orthogonality_coef=0.1, variance_coef=0.2)
    x = torch.randn(6, 8)
    _, info = moe(x, return_routing=True)
    outs = selected_outputs(info.routing, info.expert_outputs)
    torch.testing.assert_close(info.losses["orthogonality"], orthogonality_loss(outs) / 6)
    torch.testing.assert_close(info.losses["variance"], variance_loss(info.routing) / 6)
    want = (
        0.01 * info.losses["load_balance"]
        + 0.1 * info.losses["orthogonality"]
        + 0.2 * info.losses["variance"]
    )
    torch.testing.assert_close(info.aux_loss, want)


def test_diagnostics_values():
    E = 4
    indices = torch.tensor([[0], [0], [0], [1]])
    probs = torch.full((4, E), 0.25)
    r = Routing(indices, torch.ones(4, 1), probs.log(), probs, E)
    d = routing_diagnostics(r)
    assert d["load"] == [0.75, 0.25, 0.0, 0.0]
    assert math.isclose(d["max_violation"], (3 - 1) / 1)
    assert math.isclose(d["entropy"], math.log(4), rel_tol=1e-6)
    # identical outputs for both selected experts -> overlap 1
    r2 = Routing(
        torch.tensor([[0, 1], [2, 3]]), torch.full((2, 2), 0.5), probs[:2].log(), probs[:2], E
    )
    ys = torch.ones(4, 3)
    assert math.isclose(routing_diagnostics(r2, ys)["overlap"], 1.0, rel_tol=1e-6)

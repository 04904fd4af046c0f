"""Merging primitives against naive references (values and all gradients, f32 and f64)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs import (
    ResidualMLPExperts,
    competence_routing,
    ensemble_distillation_loss,
    ensemble_forward,
    merged_forward,
    merged_parameters,
    proximity_loss,
)
from sci_moe.moe import Routing, copy_expert, merge_experts
from sci_moe.testing import assert_routed_bank_matches_reference
from tests.conftest import FLOAT_TOLERANCE


def _bank(E=4, d=6, L=2, seed=0, activation="leaky_relu"):
    torch.manual_seed(seed)
    bank = ResidualMLPExperts(E, d, L, activation)
    with torch.no_grad():  # non-trivial LayerNorm affine and biases
        for p in (bank.bias, bank.ln_weight, bank.ln_bias):
            p.add_(0.3 * torch.randn_like(p))
    return bank


def _naive_expert(theta, x, act=lambda z: torch.nn.functional.leaky_relu(z, 0.5), eps=1e-5):
    """One residual-MLP expert written out from its formula (no bank code)."""
    h = x
    for layer in range(theta["weight"].shape[0]):
        z = act(h @ theta["weight"][layer].T + theta["bias"][layer]) + h
        mu = z.mean(-1, keepdim=True)
        var = ((z - mu) ** 2).mean(-1, keepdim=True)
        h = (z - mu) / torch.sqrt(var + eps) * theta["ln_weight"][layer] + theta["ln_bias"][layer]
    return h


_NAMES = ("weight", "bias", "ln_weight", "ln_bias")


def _grads(out, tensors, seed=1):
    g = torch.Generator().manual_seed(seed)
    cot = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return torch.autograd.grad((out * cot).sum(), tensors, allow_unused=True)


def test_residual_bank_matches_reference(float_dtype):
    bank = _bank()
    idx = torch.randint(0, 4, (10, 2))
    routing = Routing.from_assignments(idx, torch.rand(10, 2), 4)
    tol = FLOAT_TOLERANCE[float_dtype]
    assert_routed_bank_matches_reference(
        None, bank, torch.randn(10, 6), routing=routing, atol=tol, rtol=tol
    )
    x = torch.randn(5, 6)
    theta = {n: getattr(bank, n)[2] for n in _NAMES}
    torch.testing.assert_close(bank.forward_expert(2, x), _naive_expert(theta, x))


@pytest.mark.parametrize("ids", [[1, 3], [0, 2, 3]])
def test_merged_forward_matches_naive_values_and_grads(float_dtype, ids):
    bank = _bank()
    x = torch.randn(7, 6, requires_grad=True)
    w = torch.rand(len(ids)).requires_grad_()
    out = merged_forward(bank, x, ids, w)
    theta = {n: sum(w[j] * getattr(bank, n)[i] for j, i in enumerate(ids)) for n in _NAMES}
    ref = _naive_expert(theta, x)
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    tensors = [x, w, *(getattr(bank, n) for n in _NAMES)]
    for a, b in zip(_grads(out, tensors), _grads(ref, tensors), strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    # the no-grad core merge is the same map
    with torch.no_grad():
        wn = w / w.sum()
        core = merge_experts(bank, ids, wn.tolist()).forward_expert(0, x)
        torch.testing.assert_close(merged_forward(bank, x, ids, wn), core, atol=tol, rtol=tol)


def test_one_hot_merge_is_that_expert(float_dtype):
    bank = _bank()
    x = torch.randn(9, 6)
    out = merged_forward(bank, x, [0, 2, 3], torch.tensor([0.0, 1.0, 0.0]))
    assert torch.equal(out, bank.forward_expert(2, x))
    core = merge_experts(bank, [0, 2, 3], [0.0, 1.0, 0.0])
    assert torch.equal(core.forward_expert(0, x), bank.forward_expert(2, x))


def test_merging_identical_experts_is_any_of_them(float_dtype):
    bank = _bank()
    copy_expert(bank, 1)  # every expert = expert 1
    x = torch.randn(9, 6)
    w = torch.tensor([0.2, 0.5, 0.3])
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(
        merged_forward(bank, x, [0, 2, 3], w), bank.forward_expert(3, x), atol=tol, rtol=tol
    )
    torch.testing.assert_close(
        ensemble_forward(bank, x, [0, 2, 3], w), bank.forward_expert(0, x), atol=tol, rtol=tol
    )


def test_merge_equals_ensemble_to_first_order_in_the_spread():
    """PPEM bound: ||f(θ̄) - Σ w f(θ_k)|| = O(Σ w ||θ_k - θ̄||²): halving the spread quarters it."""
    torch.set_default_dtype(torch.float64)
    try:
        center = _bank(E=1, d=6, seed=3, activation="gelu")  # twice differentiable
        x = torch.randn(20, 6)
        w = torch.tensor([0.5, 0.3, 0.2])
        g = torch.Generator().manual_seed(0)
        deltas = {n: torch.randn(3, *getattr(center, n).shape[1:], generator=g) for n in _NAMES}
        for n in _NAMES:  # zero weighted mean: θ̄_w is the centre
            deltas[n] -= torch.tensordot(w, deltas[n], dims=1)
        gaps, prox = [], []
        for eps in (4e-3, 2e-3, 1e-3):
            bank = ResidualMLPExperts(3, 6, 2, "gelu")
            with torch.no_grad():
                for n in _NAMES:
                    getattr(bank, n).copy_(getattr(center, n) + eps * deltas[n])
                gap = merged_forward(bank, x, [0, 1, 2], w) - ensemble_forward(
                    bank, x, [0, 1, 2], w
                )
                gaps.append(float(gap.norm()))
                prox.append(float(proximity_loss(bank, [0, 1, 2], w)))
        for i in range(2):
            assert 3.5 < gaps[i] / gaps[i + 1] < 4.5  # second order in eps
            assert 3.9 < prox[i] / prox[i + 1] < 4.1
        assert gaps[0] < 10 * prox[0] * x.shape[0] ** 0.5
    finally:
        torch.set_default_dtype(torch.float32)


def test_ensemble_forward_matches_naive(float_dtype):
    bank = _bank()
    x = torch.randn(8, 6, requires_grad=True)
    ids, w = [3, 0], torch.tensor([0.7, 0.3], requires_grad=True)
    out = ensemble_forward(bank, x, ids, w)
    ref = sum(
        w[j] * _naive_expert({n: getattr(bank, n)[i] for n in _NAMES}, x) for j, i in enumerate(ids)
    )
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    tensors = [x, *(getattr(bank, n) for n in _NAMES)]
    for a, b in zip(_grads(out, tensors), _grads(ref, tensors), strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_merged_parameters_and_selection_errors():
    bank = _bank()
    p = merged_parameters(bank, [1, 2], [0.5, 0.5])
    assert p["weight"].shape == (1, 2, 6, 6)
    with pytest.raises(ValueError, match="k <= 4"):
        merged_forward(bank, torch.randn(2, 6), [0, 1, 2, 3, 0], torch.ones(5))
    with pytest.raises(ValueError, match="one weight per"):
        merged_forward(bank, torch.randn(2, 6), [0, 1], torch.ones(3))
    with pytest.raises(ValueError, match="lie in"):
        ensemble_forward(bank, torch.randn(2, 6), [0, 7], torch.ones(2))


@pytest.mark.parametrize("kind", ["mse", "kl"])
def test_distillation_loss_matches_naive(float_dtype, kind):
    s = torch.randn(5, 4, requires_grad=True)
    t = torch.randn(5, 4, requires_grad=True)
    loss = ensemble_distillation_loss(s, t, kind, temperature=2.0)
    if kind == "mse":
        ref = sum(((s[r] - t[r].detach()) ** 2).sum() for r in range(5)) / 5
    else:
        ref = 0.0
        for r in range(5):
            p = torch.softmax(t[r].detach() / 2.0, -1)
            q = torch.softmax(s[r] / 2.0, -1)
            ref = ref + (p * (p.log() - q.log())).sum()
        ref = 4.0 * ref / 5
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(loss, ref, atol=tol, rtol=tol)
    (gs,) = torch.autograd.grad(loss, [s], retain_graph=True)
    (gr,) = torch.autograd.grad(ref, [s])
    torch.testing.assert_close(gs, gr, atol=tol, rtol=tol)
    loss.backward()
    assert t.grad is None  # the teacher is stopped
    assert float(ensemble_distillation_loss(t, t, kind)) == pytest.approx(0.0, abs=tol)
    with pytest.raises(ValueError, match="kind"):
        ensemble_distillation_loss(s, t, "l1")


def test_proximity_loss_matches_naive(float_dtype):
    bank = _bank()
    ids, w = [0, 2, 3], torch.tensor([2.0, 1.0, 1.0])
    loss = proximity_loss(bank, ids, w)
    wn = w / w.sum()
    ref = 0.0
    for n in _NAMES:
        t = getattr(bank, n)
        mean = sum(wn[j] * t[i] for j, i in enumerate(ids))
        ref = ref + sum(wn[j] * ((t[i] - mean) ** 2).sum() for j, i in enumerate(ids))
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(loss, ref, atol=tol, rtol=tol)
    tensors = [getattr(bank, n) for n in _NAMES]
    for a, b in zip(
        torch.autograd.grad(loss, tensors), torch.autograd.grad(ref, tensors), strict=True
    ):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    copy_expert(bank, 0)
    assert float(proximity_loss(bank, ids, w)) == pytest.approx(0.0, abs=tol)


def test_competence_routing():
    scores = torch.tensor([[0.6, 0.9, 0.7], [0.8, 0.5, 0.55]])
    r = competence_routing(scores, 2, temperature=0.1)
    assert r.indices.tolist() == [[1, 2], [0, 2]]
    e = torch.exp(torch.tensor([0.9, 0.7]) / 0.1)
    torch.testing.assert_close(r.weights[0], (e / e.sum()).to(r.weights.dtype))
    assert r.probs.shape == (2, 3)
    # AnyGraph's recalibration: the heavily used expert 1 loses to expert 2
    usage = torch.tensor([1.0, 10.0, 1.0])
    r = competence_routing(scores, 1, usage=usage, recalibration=0.8)
    factor = (1 - usage / usage.sum()) * 0.8 + 1 - 0.4
    assert r.indices[:, 0].tolist() == (scores * factor).argmax(1).tolist()
    assert r.indices[0, 0] == 2
    with pytest.raises(ValueError, match="top_k"):
        competence_routing(scores, 4)
    with pytest.raises(ValueError, match="usage"):
        competence_routing(scores, 1, recalibration=0.5)

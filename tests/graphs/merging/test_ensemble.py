"""The output ensemble, KD-to-ensemble and proximity losses against naive references.

Values and all gradients in float32 and float64; the second-order merge-ensemble gap
that motivates PPEM.
"""

from __future__ import annotations

import pytest
import torch

from sci_moe.graphs.merging import ensemble_distillation_loss, ensemble_forward, proximity_loss
from sci_moe.moe import ResidualMLPExperts, copy_expert, merged_forward
from sci_moe.moe.grouped import grouped_mm_supported
from tests.conftest import FLOAT_TOLERANCE
from tests.moe._residual import NAMES, naive_expert, randn, residual_bank


def _grads(out, tensors, seed=1):
    g = torch.Generator().manual_seed(seed)
    cot = torch.randn(out.shape, generator=g, dtype=out.dtype)
    return torch.autograd.grad((out * cot).sum(), tensors, allow_unused=True)


def test_ensemble_of_identical_experts_is_any_of_them(float_dtype):
    bank = residual_bank()
    copy_expert(bank, 1)  # every expert = expert 1
    x = randn(9, 6, seed=1)
    w = torch.tensor([0.2, 0.5, 0.3])
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(
        ensemble_forward(bank, x, [0, 2, 3], w), bank.forward_expert(0, x), atol=tol, rtol=tol
    )


def test_merge_equals_ensemble_to_first_order_in_the_spread():
    """PPEM bound: ||f(θ̄) - Σ w f(θ_k)|| = O(Σ w ||θ_k - θ̄||²): halving the spread quarters it.

    Deterministic whatever ran before: every tensor is float64 by explicit dtype (the
    default dtype is neither read nor changed) and drawn from this test's generator; the
    ensemble runs the exact float64 path (padded ``bmm``, not ``torch._grouped_mm``),
    checked against the sum of single-expert forwards, so the gaps (``~1e-4..1e-3``)
    are far above round-off (``~1e-15``) and their ratios are 4.00 +- 0.01.
    """
    f64 = torch.float64
    g = torch.Generator().manual_seed(3)
    center = residual_bank(E=1, d=6, seed=3, activation="gelu", dtype=f64)  # C^2 expert
    x = torch.randn(20, 6, generator=g, dtype=f64)
    w = torch.tensor([0.5, 0.3, 0.2], dtype=f64)
    deltas = {
        n: torch.randn(3, *getattr(center, n).shape[1:], generator=g, dtype=f64) for n in NAMES
    }
    for n in NAMES:  # zero weighted mean: θ̄_w is the centre
        deltas[n] -= torch.tensordot(w, deltas[n], dims=1)
    gaps, prox = [], []
    bank = ResidualMLPExperts(3, 6, 2, "gelu").to(f64)
    assert not grouped_mm_supported(x, bank.weight[:, 0])
    for eps in (4e-3, 2e-3, 1e-3):
        with torch.no_grad():
            for n in NAMES:
                getattr(bank, n).copy_(getattr(center, n) + eps * deltas[n])
            ensemble = ensemble_forward(bank, x, [0, 1, 2], w)
            naive = sum(w[k] * bank.forward_expert(k, x) for k in range(3))
            torch.testing.assert_close(ensemble, naive, atol=1e-12, rtol=0)
            gap = merged_forward(bank, x, [0, 1, 2], w) - ensemble
            gaps.append(float(gap.norm()))
            prox.append(float(proximity_loss(bank, [0, 1, 2], w)))
    for i in range(2):
        assert 3.5 < gaps[i] / gaps[i + 1] < 4.5, gaps  # second order in eps
        assert 3.9 < prox[i] / prox[i + 1] < 4.1, prox
    assert gaps[0] < 10 * prox[0] * x.shape[0] ** 0.5


def test_ensemble_forward_matches_naive(float_dtype):
    bank = residual_bank()
    x = randn(8, 6, seed=1, requires_grad=True)
    ids, w = [3, 0], torch.tensor([0.7, 0.3], requires_grad=True)
    out = ensemble_forward(bank, x, ids, w)
    ref = sum(
        w[j] * naive_expert({n: getattr(bank, n)[i] for n in NAMES}, x) for j, i in enumerate(ids)
    )
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)
    tensors = [x, *(getattr(bank, n) for n in NAMES)]
    for a, b in zip(_grads(out, tensors), _grads(ref, tensors), strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", ["mse", "kl"])
def test_distillation_loss_matches_naive(float_dtype, kind):
    s = randn(5, 4, seed=1, requires_grad=True)
    t = randn(5, 4, seed=2, requires_grad=True)
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
    assert float(ensemble_distillation_loss(t, t, kind).detach()) == pytest.approx(0.0, abs=tol)
    with pytest.raises(ValueError, match="kind"):
        ensemble_distillation_loss(s, t, "l1")
    with pytest.raises(ValueError, match="one shape"):
        ensemble_distillation_loss(s, t[:3], kind)


def test_proximity_loss_matches_naive(float_dtype):
    bank = residual_bank()
    ids, w = [0, 2, 3], torch.tensor([2.0, 1.0, 1.0])
    loss = proximity_loss(bank, ids, w)
    wn = w / w.sum()
    ref = 0.0
    for n in NAMES:
        t = getattr(bank, n)
        mean = sum(wn[j] * t[i] for j, i in enumerate(ids))
        ref = ref + sum(wn[j] * ((t[i] - mean) ** 2).sum() for j, i in enumerate(ids))
    tol = FLOAT_TOLERANCE[float_dtype]
    torch.testing.assert_close(loss, ref, atol=tol, rtol=tol)
    tensors = [getattr(bank, n) for n in NAMES]
    for a, b in zip(
        torch.autograd.grad(loss, tensors), torch.autograd.grad(ref, tensors), strict=True
    ):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
    copy_expert(bank, 0)
    assert float(proximity_loss(bank, ids, w)) == pytest.approx(0.0, abs=tol)


def test_selection_errors():
    bank = residual_bank()
    x = randn(2, 6, seed=1)
    with pytest.raises(ValueError, match="lie in"):
        ensemble_forward(bank, x, [0, 7], torch.ones(2))
    with pytest.raises(ValueError, match="k <= 4"):
        ensemble_forward(bank, x, [0, 1, 2, 3, 0], torch.ones(5))
    with pytest.raises(ValueError, match="one weight per"):
        proximity_loss(bank, [0, 1], torch.ones(3))
    with pytest.raises(ValueError, match="at least one"):
        proximity_loss(bank, [], [])
    with pytest.raises(ValueError, match=">= 0"):
        proximity_loss(bank, [0, 1], [1.0, -1.0])

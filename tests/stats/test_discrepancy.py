"""Squared MMD and the pairwise discrepancy loss against direct sums (values + grads)."""

from __future__ import annotations

import pytest
import torch

from sci_moe.stats import mmd2, pairwise_discrepancy_loss
from tests.conftest import FLOAT_TOLERANCE


def _randn(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.get_default_dtype())


def _naive_mmd2(x, y, bw, unbiased):
    def k(a, b):
        return sum(torch.exp(-((a - b) ** 2).sum() / s) for s in bw) / len(bw)

    n, m = len(x), len(y)
    kxx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if not (unbiased and i == j))
    kyy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if not (unbiased and i == j))
    kxy = sum(k(x[i], y[j]) for i in range(n) for j in range(m))
    dxx = n * (n - 1) if unbiased else n * n
    dyy = m * (m - 1) if unbiased else m * m
    return kxx / dxx + kyy / dyy - 2 * kxy / (n * m)


@pytest.mark.parametrize("unbiased", [False, True])
def test_mmd2_matches_naive(float_dtype, unbiased):
    tol = 10 * FLOAT_TOLERANCE[float_dtype]
    x = _randn(6, 3, seed=1).requires_grad_()
    y = (_randn(5, 3, seed=2) + 0.7).requires_grad_()
    bw = [0.5, 2.0, 8.0]
    fast = mmd2(x, y, bw, unbiased)
    ref = _naive_mmd2(x, y, bw, unbiased)
    assert torch.allclose(fast, ref, atol=tol, rtol=tol)
    g1 = torch.autograd.grad(fast, (x, y), retain_graph=True)
    g2 = torch.autograd.grad(ref, (x, y))
    for a, b in zip(g1, g2, strict=True):
        assert torch.allclose(a, b, atol=tol, rtol=tol)


def test_mmd2_properties():
    x = _randn(20, 4, seed=1)
    assert float(mmd2(x, x, [1.0])) == pytest.approx(0.0, abs=1e-6)
    far = mmd2(x, x + 10.0, [1.0])
    near = mmd2(x, x + 0.1, [1.0])
    assert 0 < float(near) < float(far) <= 2.0 + 1e-6
    assert float(mmd2(x, x + 1.0)) > 0  # median-heuristic bandwidths
    with pytest.raises(ValueError, match="positive"):
        mmd2(x, x, [0.0])
    with pytest.raises(ValueError, match="same d"):
        mmd2(x, _randn(3, 5, seed=2))


def test_pairwise_discrepancy_is_minus_mean_pairwise_mmd(float_dtype):
    tol = 10 * FLOAT_TOLERANCE[float_dtype]
    h = _randn(3, 7, 2, seed=1).requires_grad_()
    bw = [1.0, 4.0]
    fast = pairwise_discrepancy_loss(h, bw)
    ref = (
        -(
            _naive_mmd2(h[0], h[1], bw, False)
            + _naive_mmd2(h[0], h[2], bw, False)
            + _naive_mmd2(h[1], h[2], bw, False)
        )
        / 3
    )
    assert torch.allclose(fast, ref, atol=tol, rtol=tol)
    (g1,) = torch.autograd.grad(fast, h, retain_graph=True)
    (g2,) = torch.autograd.grad(ref, h)
    assert torch.allclose(g1, g2, atol=tol, rtol=tol)
    # symmetric in the order of the sets
    assert torch.allclose(pairwise_discrepancy_loss(h[[2, 0, 1]], bw), fast, atol=tol)
    with pytest.raises(ValueError, match="two"):
        pairwise_discrepancy_loss(h[:1], bw)

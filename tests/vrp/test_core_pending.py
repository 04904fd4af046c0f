import math

import pytest
import torch

from sci_moe.vrp import masked_dense_gate


def _naive(logits, score, mask, scaling, eps):
    T, E = logits.shape
    rows = []
    for t in range(T):
        allowed = [e for e in range(E) if mask[t, e]]
        row = []
        for e in range(E):
            z = logits[t, e]
            if e not in allowed:
                row.append(z * 0)
            elif score == "softmax":
                row.append(torch.exp(z) / sum(torch.exp(logits[t, f]) for f in allowed))
            elif score == "sigmoid":
                row.append(1 / (1 + torch.exp(-z)))
            else:
                sp = [torch.log1p(torch.exp(logits[t, f])) for f in allowed]
                row.append(torch.log1p(torch.exp(z)) / (sum(sp) + eps))
        rows.append(torch.stack(row) * scaling)
    return torch.stack(rows)


@pytest.mark.parametrize("score", ["softmax", "sigmoid", "norm_softplus"])
def test_masked_dense_gate_matches_naive(score, float_dtype):
    tol = 1e-5 if float_dtype == torch.float32 else 1e-12
    logits = torch.randn(7, 5, requires_grad=True)
    mask = torch.rand(7, 5) < 0.6
    mask[:, 0] = True
    w = masked_dense_gate(logits, score, mask, scaling=2.0)
    ref = _naive(logits, score, mask, 2.0, 1e-9)
    torch.testing.assert_close(w, ref, atol=tol, rtol=tol)
    gout = torch.randn_like(w)
    (g1,) = torch.autograd.grad(w, logits, gout)
    (g2,) = torch.autograd.grad(ref, logits, gout)
    torch.testing.assert_close(g1, g2, atol=tol, rtol=tol)
    assert (w[~mask] == 0).all() and (g1[~mask] == 0).all()
    if score != "sigmoid":
        torch.testing.assert_close(w.sum(-1), torch.full((7,), 2.0), atol=1e-6, rtol=1e-6)


def test_masked_dense_gate_errors():
    with pytest.raises(ValueError, match="score must be"):
        masked_dense_gate(torch.zeros(2, 3), "relu")
    with pytest.raises(ValueError, match="at least one"):
        masked_dense_gate(torch.zeros(2, 3), "softmax", torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="shape"):
        masked_dense_gate(torch.zeros(3), "softmax")
    w = masked_dense_gate(torch.zeros(1, 4), "sigmoid")
    assert torch.allclose(w, torch.full((1, 4), 0.5))
    assert math.isclose(
        float(masked_dense_gate(torch.zeros(1, 4), "norm_softplus").sum()), 1, rel_tol=1e-6
    )

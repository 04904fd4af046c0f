"""Router scores (gate_scores, RouterConfig(score=...)) and the dense router's mask against
naive per-element references: outputs and all gradients, float32 and float64."""

import math

import pytest
import torch

from sci_moe.moe import MoE, Router, RouterConfig
from sci_moe.moe.gates import GATE_SCORES, gate_scores
from tests.conftest import FLOAT_TOLERANCE


def masked_dense_gate(logits, score="sigmoid", mask=None, scaling=1.0):
    """Weights of ``Router(mode="dense", normalize=False)`` on ``logits`` (identity projection)."""
    E = logits.shape[-1]
    router = Router(
        d_model=E, num_experts=E, mode="dense", score=score, normalize=False, scaling=scaling
    ).to(logits.dtype)
    with torch.no_grad():
        router.weight.copy_(torch.eye(E))
    router.weight.requires_grad_(False)
    return router(logits, mask=mask).weights


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _naive_row(z, allowed, score, eps):
    """Gate of one row ``z`` (list of scalars) over the ``allowed`` expert ids."""
    out = []
    for e in range(len(z)):
        if e not in allowed:
            out.append(z[e] * 0)
        elif score == "softmax":
            out.append(torch.exp(z[e]) / sum(torch.exp(z[f]) for f in allowed))
        elif score == "sigmoid":
            out.append(1 / (1 + torch.exp(-z[e])))
        else:
            sp = [torch.log1p(torch.exp(z[f])) for f in allowed]
            out.append(torch.log1p(torch.exp(z[e])) / (sum(sp) + eps))
    return torch.stack(out)


def _naive(logits, score, mask, scaling, eps):
    T, E = logits.shape
    rows = []
    for t in range(T):
        allowed = [e for e in range(E) if mask[t, e]]
        rows.append(_naive_row([logits[t, e] for e in range(E)], allowed, score, eps) * scaling)
    return torch.stack(rows)


@pytest.mark.parametrize("score", GATE_SCORES)
def test_masked_dense_gate_matches_naive(score, float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(1)
    logits = torch.randn(7, 5, generator=g).requires_grad_()
    mask = torch.rand(7, 5, generator=g) < 0.6
    mask[:, 0] = True
    w = masked_dense_gate(logits, score, mask, scaling=2.0)
    ref = _naive(logits, score, mask, 2.0, 1e-9)
    assert w.dtype == float_dtype
    torch.testing.assert_close(w, ref, atol=tol, rtol=tol)
    gout = torch.randn(w.shape, generator=g)
    (g1,) = torch.autograd.grad(w, logits, gout)
    (g2,) = torch.autograd.grad(ref, logits, gout)
    torch.testing.assert_close(g1, g2, atol=tol, rtol=tol)
    assert (w[~mask] == 0).all() and (g1[~mask] == 0).all()
    if score != "sigmoid":
        torch.testing.assert_close(w.sum(-1), torch.full((7,), 2.0), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("score", GATE_SCORES)
def test_mask_of_shape_e_and_none(score, float_dtype):
    g = _gen(2)
    logits = torch.randn(4, 3, generator=g)
    row = torch.tensor([True, False, True])
    torch.testing.assert_close(
        masked_dense_gate(logits, score, row), masked_dense_gate(logits, score, row.expand(4, 3))
    )
    # no mask: the plain score
    torch.testing.assert_close(masked_dense_gate(logits, score), gate_scores(logits, score))


@pytest.mark.parametrize("score", GATE_SCORES)
def test_gate_scores_matches_naive(score, float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(3)
    logits = (3 * torch.randn(2, 3, 4, generator=g)).requires_grad_()
    s = gate_scores(logits, score, eps=1e-3)
    flat = logits.reshape(-1, 4)
    ref = torch.stack(
        [_naive_row([z[e] for e in range(4)], range(4), score, 1e-3) for z in flat]
    ).reshape(2, 3, 4)
    torch.testing.assert_close(s, ref, atol=tol, rtol=tol)
    gout = torch.randn(s.shape, generator=g)
    (g1,) = torch.autograd.grad(s, logits, gout)
    (g2,) = torch.autograd.grad(ref, logits, gout)
    torch.testing.assert_close(g1, g2, atol=tol, rtol=tol)


def _naive_router(x, weight, mode, top_k, normalize, scaling, eps):
    """Per token: logits, norm-softplus scores, the top-k ids, their weights."""
    indices, weights, probs = [], [], []
    E = weight.shape[0]
    for t in range(x.shape[0]):
        z = [sum(x[t, i] * weight[e, i] for i in range(x.shape[1])) for e in range(E)]
        p = _naive_row(z, range(E), "norm_softplus", eps)
        ids = list(range(E)) if mode == "dense" else p.detach().topk(top_k).indices.tolist()
        w = torch.stack([p[e] for e in ids])
        if normalize:
            w = w / w.sum()
        indices.append(ids)
        weights.append(w * scaling)
        probs.append(p)
    return torch.tensor(indices), torch.stack(weights), torch.stack(probs)


@pytest.mark.parametrize("mode", ["topk", "dense"])
@pytest.mark.parametrize("normalize", [True, False])
def test_router_norm_softplus_matches_naive(mode, normalize, float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(4)
    router = Router(
        d_model=3,
        num_experts=4,
        top_k=2,
        mode=mode,
        score="norm_softplus",
        normalize=normalize,
        scaling=1.5,
    )
    with torch.no_grad():
        router.weight.copy_(torch.randn(4, 3, generator=g))
    x = torch.randn(6, 3, generator=g).requires_grad_()
    r = router(x)
    idx, w, p = _naive_router(x, router.weight, mode, 2, normalize, 1.5, 1e-9)
    assert torch.equal(r.indices, idx)
    torch.testing.assert_close(r.probs, p, atol=tol, rtol=tol)
    torch.testing.assert_close(r.weights, w, atol=tol, rtol=tol)
    gw, gp = torch.randn(w.shape, generator=g), torch.randn(p.shape, generator=g)
    params = [x, router.weight]
    fast = torch.autograd.grad((r.weights * gw).sum() + (r.probs * gp).sum(), params)
    ref = torch.autograd.grad((w * gw).sum() + (p * gp).sum(), params)
    for a, b in zip(fast, ref, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_router_existing_scores_unchanged():
    """softmax / sigmoid routers give exactly the scores they gave before norm_softplus."""
    g = _gen(5)
    x = torch.randn(8, 4, generator=g)
    for score, fn in (("softmax", lambda z: z.softmax(-1)), ("sigmoid", torch.sigmoid)):
        router = Router(d_model=4, num_experts=3, top_k=2, score=score)
        r = router(x)
        assert torch.equal(r.probs, fn(r.logits))


def test_moe_layer_with_norm_softplus(float_dtype):
    g = _gen(6)
    moe = MoE(d_model=8, num_experts=4, top_k=2, score="norm_softplus")
    x = torch.randn(2, 5, 8, generator=g)
    y, info = moe(x, return_routing=True)
    assert y.shape == x.shape and torch.isfinite(y).all()
    torch.testing.assert_close(info.routing.probs.sum(-1), torch.ones(10), atol=1e-6, rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="score must be"):
        gate_scores(torch.zeros(2, 3), "relu")
    with pytest.raises(ValueError, match="score must be"):
        RouterConfig(d_model=2, num_experts=2, score="relu")
    with pytest.raises(ValueError, match="at least one"):
        masked_dense_gate(torch.zeros(2, 3), "softmax", torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="shape"):
        masked_dense_gate(torch.zeros(3), "softmax", torch.ones(3, dtype=torch.bool))
    w = masked_dense_gate(torch.zeros(1, 4), "sigmoid")
    assert torch.allclose(w, torch.full((1, 4), 0.5))
    assert math.isclose(
        float(masked_dense_gate(torch.zeros(1, 4), "norm_softplus").sum()), 1, rel_tol=1e-6
    )

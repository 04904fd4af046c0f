"""Routing.concat against a naive per-group dispatch.

Outputs and all gradients, float32 and float64."""

import pytest
import torch

from sci_moe.moe import (
    MLPExperts,
    Router,
    Routing,
    dispatch,
    router_z_loss,
    slice_experts,
)
from tests.conftest import FLOAT_TOLERANCE


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("mode", ["dense", "topk"])
@pytest.mark.parametrize("score", ["softmax", "sigmoid", "norm_softplus"])
def test_concat_matches_separate_dispatch(float_dtype, mode, score):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(1)
    E1, E2, d = 3, 2, 4
    bank = MLPExperts(E1 + E2, d, 5, activation="tanh", bias=True)
    r1 = Router(d_model=d, num_experts=E1, mode=mode, top_k=2, score=score)
    r2 = Router(d_model=d, num_experts=E2, mode=mode, top_k=1, score=score)
    x1 = torch.randn(6, d, generator=g).requires_grad_()
    x2 = torch.randn(4, d, generator=g).requires_grad_()
    routing = Routing.concat([r1(x1), r2(x2)])
    assert routing.num_experts == E1 + E2
    fast = dispatch(torch.cat([x1, x2]), routing, bank)
    # naive: every token, every slot, its own expert of the stacked bank
    ref = []
    for x, r, off in ((x1, r1(x1), 0), (x2, r2(x2), E1)):
        for t in range(x.shape[0]):
            acc = 0
            for e, w in zip(r.indices[t].tolist(), r.weights[t], strict=True):
                acc = acc + w * bank.forward_expert(e + off, x[t : t + 1])[0]
            ref.append(acc)
    ref = torch.stack(ref)
    torch.testing.assert_close(fast, ref, atol=tol, rtol=tol)
    gout = torch.randn(fast.shape, generator=g)
    params = [x1, x2, r1.weight, r2.weight, *bank.parameters()]
    gf = torch.autograd.grad(fast, params, gout)
    gr = torch.autograd.grad(ref, params, gout)
    for a, b in zip(gf, gr, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_concat_keeps_probs_and_logits_history(float_dtype):
    """probs/logits are each group's block (zeros / -1e4 outside), with their gradients."""
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(2)
    r1 = Router(d_model=3, num_experts=2, top_k=1)
    r2 = Router(d_model=3, num_experts=3, top_k=2)
    x1, x2 = torch.randn(4, 3, generator=g), torch.randn(5, 3, generator=g)
    a, b = r1(x1), r2(x2)
    r = Routing.concat([a, b])
    ref_p = torch.block_diag(a.probs, b.probs)
    torch.testing.assert_close(r.probs, ref_p, atol=tol, rtol=tol)
    torch.testing.assert_close(r.logits[:4, :2], a.logits)
    torch.testing.assert_close(r.logits[4:, 2:], b.logits)
    assert (r.logits[:4, 2:] == -1e4).all() and (r.logits[4:, :2] == -1e4).all()
    torch.testing.assert_close(r.logits.softmax(-1), ref_p, atol=tol, rtol=tol)
    w = torch.randn(r.probs.shape, generator=g)
    lf = (r.probs * w).sum() + (r.weights**2).sum() + router_z_loss(r)
    lr = (
        (a.probs * w[:4, :2]).sum()
        + (b.probs * w[4:, 2:]).sum()
        + (a.weights**2).sum()
        + (b.weights**2).sum()
        + (4 * router_z_loss(a) + 5 * router_z_loss(b)) / 9
    )
    torch.testing.assert_close(lf, lr, atol=tol, rtol=tol)
    params = [r1.weight, r2.weight]
    for x, y in zip(
        torch.autograd.grad(lf, params, retain_graph=True),
        torch.autograd.grad(lr, params),
        strict=True,
    ):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


def test_concat_equals_sliced_banks(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    g = _gen(3)
    bank = MLPExperts(4, 3, 6, bias=True)
    ra = Router(d_model=3, num_experts=2, mode="dense")
    xa, xb = torch.randn(5, 3, generator=g), torch.randn(3, 3, generator=g)
    a, b = ra(xa), ra(xb)
    y = dispatch(torch.cat([xa, xb]), Routing.concat([a, b]), bank)
    ya = dispatch(xa, a, slice_experts(bank, 0, 2))
    yb = dispatch(xb, b, slice_experts(bank, 2, 4))
    torch.testing.assert_close(y, torch.cat([ya, yb]), atol=tol, rtol=tol)


def test_function_form_equals_classmethod():
    g = _gen(4)
    router = Router(d_model=3, num_experts=3, top_k=2)
    r = router(torch.randn(4, 3, generator=g))
    one, two = Routing.concat([r, r, r]), Routing.concat((r, r, r))
    for name in ("indices", "weights", "logits", "probs"):
        assert torch.equal(getattr(one, name), getattr(two, name))
    assert one.num_experts == two.num_experts == 9
    single = Routing.concat([r])
    assert torch.equal(single.indices, r.indices) and torch.equal(single.probs, r.probs)


def test_dropped_slots_and_probs():
    a = Routing.from_assignments(torch.tensor([[0, 2]]), torch.tensor([[1.0, 0.0]]), 2)
    b = Routing.from_assignments(torch.tensor([[1]]), torch.ones(1, 1), 3)
    r = Routing.concat([a, b])
    assert r.indices.tolist() == [[0, 5], [3, 5]]
    assert r.weights.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert r.probs.tolist() == [[1, 0, 0, 0, 0], [0, 0, 0, 1, 0]]
    torch.testing.assert_close(r.logits.softmax(-1), r.probs)
    assert r.load.tolist() == [1, 0, 0, 1, 0]


def test_errors():
    with pytest.raises(ValueError, match="at least one"):
        Routing.concat([])
    with pytest.raises(ValueError, match="at least one"):
        Routing.concat([])
    with pytest.raises(TypeError, match="not a Routing"):
        Routing.concat([torch.zeros(2)])

"""concat_routings against a naive per-group dispatch: outputs and all gradients."""

import pytest
import torch

from sci_moe.functional import concat_routings
from sci_moe.moe import MLPExperts, Router, Routing, dispatch, slice_experts
from tests.conftest import FLOAT_TOLERANCE


@pytest.mark.parametrize("mode", ["dense", "topk"])
def test_concat_matches_separate_dispatch(float_dtype, mode):
    tol = FLOAT_TOLERANCE[float_dtype]
    E1, E2, d = 3, 2, 4
    bank = MLPExperts(E1 + E2, d, 5, activation="tanh", bias=True)
    r1 = Router(d_model=d, num_experts=E1, mode=mode, top_k=2)
    r2 = Router(d_model=d, num_experts=E2, mode=mode, top_k=1)
    x1 = torch.randn(6, d, requires_grad=True)
    x2 = torch.randn(4, d, requires_grad=True)
    routing = concat_routings([r1(x1), r2(x2)])
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
    g = torch.randn_like(fast)
    params = [x1, x2, r1.weight, r2.weight, *bank.parameters()]
    gf = torch.autograd.grad(fast, params, g)
    gr = torch.autograd.grad(ref, params, g)
    for a, b in zip(gf, gr, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_concat_equals_sliced_banks(float_dtype):
    tol = FLOAT_TOLERANCE[float_dtype]
    bank = MLPExperts(4, 3, 6, bias=True)
    ra = Router(d_model=3, num_experts=2, mode="dense")
    xa, xb = torch.randn(5, 3), torch.randn(3, 3)
    a, b = ra(xa), ra(xb)
    y = dispatch(torch.cat([xa, xb]), concat_routings([a, b]), bank)
    ya = dispatch(xa, a, slice_experts(bank, 0, 2))
    yb = dispatch(xb, b, slice_experts(bank, 2, 4))
    torch.testing.assert_close(y, torch.cat([ya, yb]), atol=tol, rtol=tol)


def test_dropped_slots_and_probs():
    a = Routing.from_assignments(torch.tensor([[0, 2]]), torch.tensor([[1.0, 0.0]]), 2)
    b = Routing.from_assignments(torch.tensor([[1]]), torch.ones(1, 1), 3)
    r = concat_routings([a, b])
    assert r.indices.tolist() == [[0, 5], [3, 5]]
    assert r.weights.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert r.probs.tolist() == [[1, 0, 0, 0, 0], [0, 0, 0, 1, 0]]
    torch.testing.assert_close(r.logits.softmax(-1), r.probs)
    assert r.load.tolist() == [1, 0, 0, 1, 0]


def test_errors():
    with pytest.raises(ValueError, match="at least one"):
        concat_routings([])
    with pytest.raises(TypeError, match="not a Routing"):
        concat_routings([torch.zeros(2)])

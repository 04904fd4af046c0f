"""The core contract: dispatch() = whole bank output, Routing.from_assignments, one forward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import (
    Dispatcher,
    LocalDispatch,
    LoRAExperts,
    MLPExperts,
    MoE,
    Router,
    Routing,
    dispatch,
    routed_paths,
)
from sci_moe.testing import (
    assert_moe_matches_reference,
    assert_routed_bank_matches_reference,
    default_tolerance,
    reference_routed_forward,
)

D, E = 8, 4


def _lora():
    bank = LoRAExperts(nn.Linear(D, 6), num_experts=E, rank=2)
    nn.init.normal_(bank.lora_b)
    return bank


def test_dispatch_includes_the_bank_base(float_dtype):
    bank, router = _lora(), Router(d_model=D, num_experts=E, top_k=2)
    x = torch.randn(11, D)
    r = router(x)
    y = dispatch(x, r, bank)
    ref = reference_routed_forward(router, bank, x, routing=r)
    atol, rtol = default_tolerance(float_dtype)
    torch.testing.assert_close(y, ref, atol=atol, rtol=rtol)
    # include_base=False is the routed delta only; the difference is exactly W0 x + b0
    delta = dispatch(x, r, bank, include_base=False)
    torch.testing.assert_close(y - delta, bank.base_layer(x), atol=atol, rtol=rtol)
    # the layer and the free function agree
    moe = MoE.from_modules(router, bank)
    torch.testing.assert_close(moe(x, routing=r), y, atol=atol, rtol=rtol)
    assert_routed_bank_matches_reference(router, bank, x)
    assert_moe_matches_reference(moe, x)


def test_dispatch_with_return_expert_outputs_keeps_the_base():
    bank, router = _lora(), Router(d_model=D, num_experts=E, top_k=2)
    x = torch.randn(5, D)
    r = router(x)
    y, ys = dispatch(x, r, bank, return_expert_outputs=True)
    torch.testing.assert_close(y, dispatch(x, r, bank))
    assert ys.shape == (r.plan.num_kept, 6)


def test_from_assignments_defaults_and_dispatch(float_dtype):
    idx = torch.tensor([[0, 2], [3, E], [1, 1]])
    w = torch.tensor([[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    r = Routing.from_assignments(idx, w, E)
    assert r.num_experts == E and r.top_k == 2
    assert r.load.tolist() == [1.0, 2.0, 1.0, 1.0]  # the dropped slot is not counted
    expected = torch.tensor([[0.25, 0, 0.75, 0], [0, 0, 0, 1.0], [0, 1.0, 0, 0]])
    torch.testing.assert_close(r.probs, expected.to(r.probs.dtype))
    assert torch.isfinite(r.logits).all()
    bank = MLPExperts(E, D, 5)
    x = torch.randn(3, D)
    atol, rtol = default_tolerance(float_dtype)
    torch.testing.assert_close(
        dispatch(x, r, bank),
        reference_routed_forward(None, bank, x, routing=r),
        atol=atol,
        rtol=rtol,
    )
    # weights keep their autograd history
    wg = w.clone().requires_grad_(True)
    dispatch(x, Routing.from_assignments(idx, wg, E), bank).sum().backward()
    assert (wg.grad[0] != 0).all() and wg.grad[1, 1] == 0  # a dropped slot gets nothing


def test_from_assignments_rejects_bad_input():
    idx, w = torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)
    with pytest.raises(ValueError, match="in \\[0, 4\\]"):
        Routing.from_assignments(idx + 5, w, 4)
    with pytest.raises(ValueError, match="shape"):
        Routing.from_assignments(idx, torch.ones(3, 2), 4)
    with pytest.raises(TypeError, match="integer"):
        Routing.from_assignments(idx.float(), w, 4)
    with pytest.raises(ValueError, match="probs"):
        Routing.from_assignments(idx, w, 4, probs=torch.ones(3, 3))


def test_moe_has_one_forward_with_a_local_dispatcher():
    moe = MoE(d_model=D, num_experts=E, top_k=2)
    assert isinstance(moe.dispatcher, LocalDispatch)

    class Counting(LocalDispatch):
        calls = 0

        def __call__(self, *args, **kwargs):
            Counting.calls += 1
            return super().__call__(*args, **kwargs)

    torch.manual_seed(0)
    a = MoE(d_model=D, num_experts=E, default_moe=True, orthogonality_coef=0.1)
    torch.manual_seed(0)
    b = MoE(
        d_model=D, num_experts=E, default_moe=True, orthogonality_coef=0.1, dispatcher=Counting()
    )
    x = torch.randn(9, D)
    ya, ia = a(x, return_routing=True)
    yb, ib = b(x, return_routing=True)
    assert Counting.calls == 1
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)
    assert set(ia.losses) == set(ib.losses) == {"load_balance", "z_loss", "orthogonality"}
    torch.testing.assert_close(a.default.ema, b.default.ema, rtol=0, atol=0)
    with pytest.raises(TypeError, match="Dispatcher"):
        MoE(d_model=D, num_experts=E, dispatcher=object())
    assert issubclass(Counting, Dispatcher)


def test_routing_of_the_wrong_size_is_rejected():
    moe = MoE(d_model=D, num_experts=E)
    r = moe.route(torch.randn(3, D))
    with pytest.raises(ValueError, match="tokens"):
        moe(torch.randn(4, D), routing=r)


def test_moe_exposes_its_routed_path():
    moe = MoE(d_model=D, num_experts=E, top_k=2, num_shared_experts=2)
    (p,) = routed_paths(nn.Sequential(moe, nn.Linear(D, D)))
    assert p.owner is moe and p.router is moe.router and p.experts is moe.experts
    assert (p.num_experts, p.top_k, p.d_model, p.num_shared_experts) == (E, 2, D, 2)
    assert p.label == "MoE"
    with pytest.raises(TypeError):
        routed_paths("not a module")


def test_face_names_are_public():
    import sci_moe.moe as face

    for name in face.__all__:
        obj = getattr(face, name)
        assert obj.__doc__, f"sci_moe.moe.{name} needs a docstring"

"""A routing marked ``single_expert`` (every token to one expert with weight 1) takes the
dispatch's shortcut (the expert on all rows, no sort/gather/combine): the same outputs and
gradients as the general path on the same tensors left unmarked."""

import importlib

import pytest
import torch
from torch import nn

from sci_moe.moe import (
    GLUExperts,
    LinearExperts,
    LoRAExperts,
    MLPExperts,
    MoE,
    ResidualMLPExperts,
    Routing,
    dispatch,
    set_grouped_path,
)
from sci_moe.moe.routing import make_plan

# the module (the package's ``dispatch`` attribute is the function)
dispatch_module = importlib.import_module("sci_moe.moe.dispatch")

D = 8


def _bank(kind, E):
    if kind == "linear":
        return LinearExperts(E, D, 6, bias=True)
    if kind == "mlp":
        return MLPExperts(E, D, 12, "silu", bias=True)
    if kind == "glu":
        return GLUExperts(E, D, 12)
    if kind == "residual":
        return ResidualMLPExperts(E, D, num_layers=2)
    bank = LoRAExperts(nn.Linear(D, 6), E, rank=3)
    nn.init.normal_(bank.lora_b)  # B starts at zero: make the routed term nonzero
    return bank


def _unmarked(r):
    """The same tensors without the mark: the general path."""
    return Routing(r.indices, r.weights, r.logits, r.probs, r.num_experts, source=r.source)


@pytest.fixture
def forced_path(request):
    set_grouped_path(request.param)
    yield request.param
    set_grouped_path(None)


def _run(bank, x, routing, weights_grad, return_outputs=False):
    """Output, optional expert outputs, and gradients of a fixed projection."""
    bank.zero_grad()
    x = x.detach().requires_grad_(True)
    w = routing.weights.detach().requires_grad_(weights_grad)
    r = Routing(
        routing.indices,
        w,
        routing.logits,
        routing.probs,
        routing.num_experts,
        source=routing.source,
        single_expert=routing.single_expert,
    )
    out = dispatch(x, r, bank, return_expert_outputs=return_outputs)
    y, ys = out if return_outputs else (out, None)
    g = torch.Generator().manual_seed(5)
    gy = torch.randn(y.shape, generator=g, dtype=y.dtype)
    loss = (y * gy).sum()
    if ys is not None:
        loss = loss + (ys * torch.randn(ys.shape, generator=g, dtype=ys.dtype)).sum()
    loss.backward()
    grads = [x.grad] + [p.grad for p in bank.parameters() if p.requires_grad]
    if weights_grad:
        grads.append(w.grad)
    return y.detach(), None if ys is None else ys.detach(), grads


@pytest.mark.parametrize("forced_path", ["auto", "per_expert"], indirect=True)
@pytest.mark.parametrize("kind", ["linear", "mlp", "glu", "residual", "lora"])
@pytest.mark.parametrize("E,e", [(1, 0), (4, 0), (4, 3)])
@pytest.mark.parametrize("weights_grad", [False, True])
def test_shortcut_equals_the_general_path(forced_path, kind, E, e, weights_grad):
    torch.manual_seed(0)
    bank = _bank(kind, E).double()
    x = torch.randn(11, D, dtype=torch.float64)
    marked = Routing.one_expert(11, E, e, dtype=torch.float64)
    fast = _run(bank, x, marked, weights_grad)
    slow = _run(bank, x, _unmarked(marked), weights_grad)
    torch.testing.assert_close(fast[0], slow[0], rtol=1e-12, atol=1e-12)
    assert len(fast[2]) == len(slow[2])
    for a, b in zip(fast[2], slow[2], strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["linear", "mlp", "glu", "lora"])
@pytest.mark.parametrize("weights_grad", [False, True])
def test_shortcut_is_the_expert_bit_for_bit(kind, weights_grad):
    # the general path multiplies by exactly 1 and sums one slot; the shortcut is the
    # expert itself (times 1.0 where the weights require grad): bit-equal to it
    torch.manual_seed(1)
    bank = _bank(kind, 4)
    x = torch.randn(9, D)
    r = Routing.one_expert(9, 4, 2)
    r.weights.requires_grad_(weights_grad)
    y = dispatch(x, r, bank)
    base = bank.base(x)
    want = bank.forward_expert(2, x) + (0 if base is None else base)
    assert torch.equal(y, want)
    assert torch.equal(dispatch(x, r, bank, include_base=False), bank.forward_expert(2, x))


def test_shortcut_runs_no_plan_sort_or_gather(monkeypatch):
    # the marked routing never reaches the sort, the gather or the combine
    def forbidden(*args, **kwargs):
        raise AssertionError("general path taken")

    monkeypatch.setattr(dispatch_module, "gather_by_expert", forbidden)
    monkeypatch.setattr(dispatch_module, "combine_by_token", forbidden)
    monkeypatch.setattr(dispatch_module, "_per_expert", forbidden)
    bank = GLUExperts(4, D, 12)
    r = Routing.one_expert(5, 4, 1)
    dispatch(torch.randn(5, D), r, bank)
    assert r._plan is None


def test_return_expert_outputs_and_base():
    torch.manual_seed(2)
    bank = _bank("lora", 4).double()
    x = torch.randn(10, D, dtype=torch.float64)
    marked = Routing.one_expert(10, 4, 1, dtype=torch.float64)
    fast = _run(bank, x, marked, True, return_outputs=True)
    slow = _run(bank, x, _unmarked(marked), True, return_outputs=True)
    for a, b in zip(fast[:2] + tuple(fast[2]), slow[:2] + tuple(slow[2]), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_expert_modules_and_gather_routing():
    torch.manual_seed(3)
    mods = nn.ModuleList(nn.Sequential(nn.Linear(D, 5), nn.Tanh()) for _ in range(3)).double()
    x = torch.randn(7, D, dtype=torch.float64)
    r = Routing.one_expert(7, 3, 2, dtype=torch.float64)
    torch.testing.assert_close(dispatch(x, r, mods), dispatch(x, _unmarked(r), mods))
    assert torch.equal(dispatch(x, r, mods), mods[2](x))
    # a gather routing (rows x[source]) over a marked routing
    src = torch.tensor([4, 0, 0, 6])
    g = Routing.one_expert(4, 3, 1, dtype=torch.float64)
    g = Routing(g.indices, g.weights, g.logits, g.probs, 3, source=src, single_expert=1)
    bank = MLPExperts(3, D, 12, "silu").double()
    torch.testing.assert_close(
        dispatch(x, g, bank), dispatch(x, _unmarked(g), bank), rtol=1e-12, atol=1e-12
    )


def test_moe_layer_with_a_marked_routing():
    torch.manual_seed(4)
    moe = MoE(d_model=D, num_experts=4, top_k=1, d_hidden=16, expert="glu").double()
    x = torch.randn(2, 6, D, dtype=torch.float64)
    r = Routing.one_expert(12, 4, 3, dtype=torch.float64)
    torch.testing.assert_close(
        moe(x, routing=r), moe(x, routing=_unmarked(r)), rtol=1e-12, atol=1e-12
    )


def test_one_expert_is_from_assignments_marked_with_its_plan():
    r = Routing.one_expert(6, 5, 3, dtype=torch.float64)
    ref = Routing.from_assignments(
        torch.full((6, 1), 3), torch.ones(6, 1, dtype=torch.float64), num_experts=5
    )
    assert r.single_expert == 3 and ref.single_expert is None
    for name in ("indices", "weights", "logits", "probs"):
        a, b = getattr(r, name), getattr(ref, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    plan, want = r.plan, make_plan(ref.indices, 5)
    for name in ("order", "inverse", "token", "expert", "counts", "offsets"):
        a, b = getattr(plan, name), getattr(want, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    assert plan.num_kept == want.num_kept == 6
    assert r.detach().single_expert == 3
    assert Routing.concat([r, r]).single_expert is None
    assert Routing.one_expert(0, 2).plan.num_kept == 0


def test_single_expert_mark_is_checked():
    r = Routing.one_expert(3, 4)
    with pytest.raises(ValueError, match="single_expert"):
        Routing(r.indices, r.weights, r.logits, r.probs, 4, single_expert=4)
    with pytest.raises(ValueError, match="top-1"):
        two = torch.zeros(3, 2, dtype=torch.long)
        Routing(two, torch.ones(3, 2), r.logits, r.probs, 4, single_expert=0)
    with pytest.raises(ValueError, match="single_expert"):
        Routing.one_expert(3, 4, 7)

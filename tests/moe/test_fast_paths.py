"""Every CPU path of the dispatch (padded bmm, grouped_mm, the per-expert loop, the measured
rules, the fused GLU, the index_add_ sums) == the naive reference: outputs, all gradients,
double backward."""

import pytest
import torch

from sci_moe.moe import (
    GLUExperts,
    MLPExperts,
    MoE,
    Routing,
    grouped_path,
    set_grouped_path,
)
from sci_moe.moe.dispatch import per_expert_path
from sci_moe.moe.glu import glu_product
from sci_moe.testing import assert_moe_matches_reference, reference_moe_forward


@pytest.fixture
def forced_path(request):
    set_grouped_path(request.param)
    yield request.param
    set_grouped_path(None)


@pytest.mark.parametrize(
    "forced_path", ["bmm", "grouped_mm", "per_expert", "chunked", "auto"], indirect=True
)
@pytest.mark.parametrize("expert", ["glu", "mlp", "linear"])
@pytest.mark.parametrize("E,k", [(4, 2), (8, 1), (16, 4)])
def test_every_path_matches_reference(forced_path, expert, E, k, float_dtype):
    # d=32, hidden=64: aligned, so grouped_mm is valid in float32 (float64 is always bmm).
    moe = MoE(d_model=32, num_experts=E, top_k=k, d_hidden=64, expert=expert)
    assert_moe_matches_reference(moe, num_tokens=29)


@pytest.mark.parametrize(
    "forced_path", ["bmm", "grouped_mm", "per_expert", "chunked"], indirect=True
)
@pytest.mark.parametrize(
    "options", [dict(capacity_factor=0.5), dict(mode="expert_choice", capacity_factor=1.0)]
)
def test_dropped_slots_on_every_path(forced_path, options, float_dtype):
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=32, **options)
    assert_moe_matches_reference(moe, num_tokens=24)


@pytest.fixture
def cpu_capability(monkeypatch):
    """Pretend torch's CPU capability (the size rule depends on it)."""

    def set_to(name):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: name)

    return set_to


def test_measured_rule_takes_bmm_only_on_avx2(cpu_capability):
    rule_case = (torch.zeros(8 * 1024, 64), torch.zeros(8, 128, 64))
    for name in ("AVX512", "DEFAULT"):
        cpu_capability(name)
        assert grouped_path(*rule_case) == "grouped_mm"
    cpu_capability("AVX2")
    assert grouped_path(*rule_case) == "bmm"


def test_measured_rule_takes_bmm_only_for_few_narrow_experts_with_many_rows(cpu_capability):
    cpu_capability("AVX2")
    w_small = torch.zeros(8, 128, 64)
    assert grouped_path(torch.zeros(8 * 1024, 64), w_small) == "bmm"
    assert grouped_path(torch.zeros(8 * 1024 - 1, 64), w_small) == "grouped_mm"
    assert grouped_path(torch.zeros(9 * 1024, 64), torch.zeros(9, 128, 64)) == "grouped_mm"
    assert grouped_path(torch.zeros(8 * 1024, 256), torch.zeros(8, 512, 256)) == "grouped_mm"
    assert grouped_path(torch.zeros(4, 64).double(), w_small.double()) == "bmm"
    set_grouped_path("bmm")
    try:
        assert grouped_path(torch.zeros(4, 64), w_small) == "bmm"
    finally:
        set_grouped_path(None)
    with pytest.raises(ValueError, match="path must be one of"):
        set_grouped_path("loop")


def test_bf16_rule_takes_bmm_for_many_small_experts_with_few_rows_on_avx512(cpu_capability):
    bf = torch.bfloat16
    w = torch.zeros(32, 256, 128, dtype=bf)  # d = 128 SwiGLU gate_up: 256 x 128
    rows = torch.zeros(32 * 128, 128, dtype=bf)
    cpu_capability("AVX512")
    assert grouped_path(rows, w) == "bmm"
    assert grouped_path(rows[:1], w) == "bmm"
    assert grouped_path(torch.zeros(32 * 128 + 1, 128, dtype=bf), w) == "grouped_mm"
    assert grouped_path(rows.float(), w.float()) == "grouped_mm"  # float32: grouped_mm
    assert grouped_path(rows, torch.zeros(16, 256, 128, dtype=bf)) == "grouped_mm"  # E < 32
    w_256 = torch.zeros(32, 256, 256, dtype=bf)  # d = 256 down projection: too large
    assert grouped_path(torch.zeros(64, 256, dtype=bf), w_256) == "grouped_mm"
    for name in ("AVX2", "DEFAULT"):
        cpu_capability(name)
        assert grouped_path(rows, w) == "grouped_mm"


def _output_and_grads(moe, x, path):
    """Output, input gradient and parameter gradients of ``moe(x)`` on a forced path."""
    set_grouped_path(path)
    try:
        moe.zero_grad(set_to_none=True)
        x.grad = None
        y = moe(x)
        yf = y.to(torch.promote_types(y.dtype, torch.float32))  # bf16 -> f32; f64 stays
        (yf * torch.linspace(-1, 1, y.numel(), dtype=yf.dtype).view_as(y)).sum().backward()
        return [y.detach(), x.grad] + [p.grad for p in moe.parameters()]
    finally:
        set_grouped_path(None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bf16_rule_layer_matches_grouped_mm_and_reference(dtype, cpu_capability):
    """A layer the bfloat16 rule sends to the padded bmm (E = 32, d = 64, few rows) gives
    the forced grouped_mm's output and gradients and the naive reference's (bfloat16
    tolerance); in float32 the rule does not apply (checked) and the same holds."""
    cpu_capability("AVX512")
    torch.manual_seed(0)
    moe = MoE(d_model=64, num_experts=32, top_k=2, d_hidden=64, expert="glu").to(dtype)
    x = torch.randn(96, 64, dtype=dtype, requires_grad=True)
    rows = x[:1].expand(96 * 2, -1)
    want = "bmm" if dtype == torch.bfloat16 else "grouped_mm"
    assert grouped_path(rows, moe.experts.gate_up) == want
    assert grouped_path(rows, moe.experts.down) == want
    outs = [_output_and_grads(moe, x, path) for path in ("auto", "grouped_mm")]
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-4)
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a.float(), b.float(), **tol)
    assert_moe_matches_reference(moe, x=x.detach())  # default tolerance of the dtype


def test_rule_path_is_the_bmm_and_equals_grouped_mm(float_dtype, cpu_capability):
    # 8 experts, width 32, >= 1024 rows per expert: the rule picks the padded bmm. The
    # naive reference over 8k tokens is slow: compare with the forced grouped_mm path
    # (checked against the reference above) in float32, with the reference in float64
    # (where both forced paths are the bmm) on a slice.
    cpu_capability("AVX2")
    torch.manual_seed(0)
    moe = MoE(d_model=32, num_experts=8, top_k=1, d_hidden=32, expert="linear")
    x = torch.randn(8 * 1024 + 5, 32, requires_grad=True)
    assert grouped_path(x, moe.experts.weight) == ("bmm")
    outs = [_output_and_grads(moe, x, path) for path in ("auto", "grouped_mm")]
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert_moe_matches_reference(moe, x=x.detach()[:40])


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu"])
def test_glu_product_gradients_and_double_backward(activation):
    gu = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: glu_product(t, activation), (gu,))
    if activation != "relu":  # relu'' is zero a.e. but not smooth for finite differences
        assert torch.autograd.gradgradcheck(lambda t: glu_product(t, activation), (gu,))
    gate, up = gu.chunk(2, -1)
    act = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu}.get(
        activation, torch.relu
    )
    torch.testing.assert_close(glu_product(gu, activation), act(gate) * up)
    with pytest.raises(ValueError, match="even last dimension"):
        glu_product(torch.zeros(2, 3))


def _double_backward(moe, x):
    """Forces and all second-order gradients of the layer and of the naive reference."""
    results = []
    for fn in (moe, lambda v: reference_moe_forward(moe, v)):
        moe.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        energy = (fn(xi) ** 2).sum()
        (force,) = torch.autograd.grad(energy, xi, create_graph=True)
        (force**2).sum().backward()
        results.append([force.detach(), xi.grad] + [p.grad for p in moe.parameters()])
    return results


@pytest.mark.parametrize("expert", ["glu", "mlp"])
def test_double_backward_matches_reference(expert):
    """Forces-style use: grad of the output w.r.t. x with create_graph, then backward."""
    torch.manual_seed(0)
    moe = MoE(d_model=16, num_experts=4, top_k=2, d_hidden=16, expert=expert).double()
    x = torch.randn(11, 16, dtype=torch.float64)
    for a, b in zip(*_double_backward(moe, x), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("forced_path", ["grouped_mm", "per_expert"], indirect=True)
@pytest.mark.parametrize("expert", ["glu", "mlp"])
def test_grouped_mm_double_backward_matches_reference(forced_path, expert):
    """float32 on the CPU grouped_mm path (row padding to the alignment), 13 rows."""
    torch.manual_seed(0)
    moe = MoE(d_model=16, num_experts=4, top_k=2, d_hidden=16, expert=expert)
    x = torch.randn(13, 16)
    assert grouped_path(x, moe.experts.down) == "grouped_mm"
    for a, b in zip(*_double_backward(moe, x), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("d_in,rows", [(64, 4), (64, 40), (8, 3)])
def test_padded_bmm_both_layouts_match_per_expert_matmuls(d_in, rows):
    """The padded bmm transposes the smaller tensor (2 max_count < d_in: the output, else
    the weight gradient); both forms give the per-expert result, its gradients and a
    double backward (float64, gradcheck/gradgradcheck), rows unequal per expert."""
    from sci_moe.moe.grouped import _padded_bmm

    torch.manual_seed(0)
    counts = torch.tensor([rows, 0, rows + 2, 1])
    expert = torch.repeat_interleave(torch.arange(4), counts)
    x = torch.randn(int(counts.sum()), d_in, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 6, d_in, dtype=torch.float64, requires_grad=True)
    want = torch.cat([x[expert == e] @ w[e].t() for e in range(4)])
    torch.testing.assert_close(_padded_bmm(x, w, counts, expert), want)
    fn = lambda a, b: _padded_bmm(a, b, counts, expert)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w))
    assert torch.autograd.gradgradcheck(fn, (x, w))
    w32 = w.detach().float().requires_grad_(True)
    _padded_bmm(x.detach().float(), w32, counts, expert).sum().backward()
    assert w32.grad.is_contiguous()


def test_grouped_mm_gives_zero_weight_gradients_to_experts_without_rows():
    from sci_moe.moe.grouped import grouped_linear

    torch.manual_seed(0)
    w = torch.randn(4, 8, 16, requires_grad=True)
    x = torch.randn(6, 16, requires_grad=True)
    counts = torch.tensor([0, 4, 0, 2])
    offsets = torch.cumsum(counts, 0).to(torch.int32)
    set_grouped_path("grouped_mm")
    try:
        y = grouped_linear(x, w, counts, offsets)
    finally:
        set_grouped_path(None)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    want_w = torch.zeros_like(w)
    want_w[1] = g[:4].t() @ x[:4]
    want_w[3] = g[4:].t() @ x[4:]
    want_x = torch.cat([g[:4] @ w[1], g[4:] @ w[3]]).detach()
    torch.testing.assert_close(w.grad, want_w)
    torch.testing.assert_close(x.grad, want_x)
    torch.testing.assert_close(y, torch.cat([x[:4] @ w[1].t(), x[4:] @ w[3].t()]))


def _combine_node(y):
    """Name of the autograd node that made ``y``, under the layer's final reshape."""
    node = y.grad_fn
    while "View" in type(node).__name__:
        node = node.next_functions[0][0]
    return type(node).__name__


def _routing(T, k, E):
    """Token ``t`` slot ``j`` -> expert ``(t + j) mod E``: every expert gets ``T k / E`` rows."""
    idx = (torch.arange(T).view(-1, 1) + torch.arange(k)).remainder(E)
    return Routing.from_assignments(idx, torch.ones(T, k), num_experts=E)


def test_per_expert_rule_boundaries():
    """The loop needs a (T k, 2 d_hidden) intermediate of >= 32 MiB, >= 2 MiB and >= 512
    rows of it per expert; only banks with a per-expert width; set_grouped_path forces it
    on or off."""
    bank = GLUExperts(8, 256, 256)  # width 512: 2 KiB per float32 row
    x = torch.zeros(4096, 256)
    assert per_expert_path(x, _routing(4096, 4, 8).plan, bank)  # 16384 rows: exactly 32 MiB
    assert not per_expert_path(x, _routing(4095, 4, 8).plan, bank)  # 4 rows short
    assert not per_expert_path(x.bfloat16(), _routing(4096, 4, 8).plan, bank)  # 16 MiB
    assert per_expert_path(x.bfloat16(), _routing(4096, 8, 8).plan, bank)
    # 32 experts: 64 MiB is 2 MiB per expert (the loop), 32 MiB only 1 MiB (sorted path).
    many = GLUExperts(32, 256, 256)
    assert per_expert_path(x, _routing(4096, 8, 32).plan, many)
    assert not per_expert_path(x, _routing(4096, 4, 32).plan, many)
    # d = 1024 (8 KiB rows), 16 experts: 32 MiB and 2 MiB each, but only 256 rows each.
    wide = GLUExperts(16, 1024, 1024)
    assert not per_expert_path(torch.zeros(4096, 1024), _routing(4096, 1, 16).plan, wide)
    assert per_expert_path(torch.zeros(4096, 1024), _routing(4096, 2, 16).plan, wide)
    plan = _routing(4096, 8, 8).plan
    assert not per_expert_path(x, plan, MLPExperts(8, 256, 512))  # no per-expert width
    for path, want in (("grouped_mm", False), ("bmm", False), ("per_expert", True)):
        set_grouped_path(path)
        try:
            assert per_expert_path(x, plan, bank) is want
            assert per_expert_path(x[:8], _routing(8, 1, 8).plan, bank) is want
            assert not per_expert_path(x, plan, MLPExperts(8, 256, 512))
        finally:
            set_grouped_path(None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_per_expert_loop_matches_grouped_path_and_reference(dtype):
    """The loop (forced; uneven rows, an expert without rows) gives the sorted path's
    output and gradients and the naive reference's, in the dtype's tolerance; the layer
    really ran the loop (its output comes from index_add_, not the combine)."""
    torch.manual_seed(0)
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=48, expert="glu").to(dtype)
    x = torch.randn(37, 32, dtype=dtype, requires_grad=True)
    routing = moe.router(x.detach())
    idx = routing.indices.clone()
    idx[idx == 5] = 6  # expert 5 gets no rows
    routing = Routing.from_assignments(idx, routing.weights.detach(), 8)
    set_grouped_path("per_expert")
    try:
        assert "IndexAdd" in _combine_node(moe(x, routing=routing))
    finally:
        set_grouped_path(None)
    assert "CombineByToken" in _combine_node(moe(x, routing=routing))
    outs = [_output_and_grads(moe, x, path) for path in ("per_expert", "grouped_mm")]
    tol = {
        torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
        torch.float32: dict(atol=1e-5, rtol=1e-4),
        torch.float64: dict(atol=1e-12, rtol=1e-10),
    }[dtype]
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a.float(), b.float(), **tol)
    set_grouped_path("per_expert")
    try:
        assert_moe_matches_reference(moe, x=x.detach())
        assert_moe_matches_reference(moe, x=x.detach(), routing=routing)
    finally:
        set_grouped_path(None)


def test_auto_rule_takes_the_loop_at_a_large_shape_and_matches_the_sorted_path():
    """T = 2048, k = 8, E = 8, d = 256 (64 MiB of [gate; up] rows): the automatic path is
    the loop, with the forced sorted path's output and gradients."""
    torch.manual_seed(0)
    moe = MoE(d_model=256, num_experts=8, top_k=8, d_hidden=256, expert="glu")
    x = torch.randn(2048, 256, requires_grad=True)
    assert per_expert_path(x, moe.router(x.detach()).plan, moe.experts)
    assert "IndexAdd" in _combine_node(moe(x))
    outs = [_output_and_grads(moe, x, path) for path in ("auto", "grouped_mm")]
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)

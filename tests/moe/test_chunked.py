"""The cache-blocked sorted path (sci_moe.moe.chunked): its chunks, its measured rule, and
the chunked layer == the sorted path and the naive reference (outputs, all gradients,
float32/float64/bfloat16, uneven and empty experts, dropped slots, double backward)."""

import pytest
import torch

import sci_moe.moe.chunked as chunked_mod
import sci_moe.moe.experts as experts_mod
from sci_moe.moe import GLUExperts, MLPExperts, MoE, Routing, chunked_path, set_grouped_path
from sci_moe.moe.chunked import expert_chunks
from sci_moe.moe.dispatch import per_expert_path
from sci_moe.testing import assert_moe_matches_reference, reference_moe_forward


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 40 bfloat16 / 20 float32 / 10 float64 rows of width 96 (the tests' banks):
    several per layer."""
    monkeypatch.setattr(chunked_mod, "_CHUNK_BYTES", 40 * 96 * 2)


@pytest.fixture
def chunked_calls(monkeypatch):
    """Count the calls of the chunked path (and run it)."""
    calls = []
    real = experts_mod.chunked_forward

    def spy(*args, **kwargs):
        x, plan, width = args[0], args[1], args[4]
        row_bytes = width * x.element_size()
        calls.append(len(expert_chunks(plan.counts.tolist(), row_bytes, chunked_mod._CHUNK_BYTES)))
        return real(*args, **kwargs)

    monkeypatch.setattr(experts_mod, "chunked_forward", spy)
    return calls


@pytest.fixture
def cpu_capability(monkeypatch):
    def set_to(name):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: name)

    return set_to


def _forced(path):
    set_grouped_path(path)
    return path


def _routing(T, k, E):
    idx = (torch.arange(T).view(-1, 1) + torch.arange(k)).remainder(E)
    return Routing.from_assignments(idx, torch.ones(T, k), num_experts=E)


def test_expert_chunks_cover_all_rows_within_the_budget():
    assert expert_chunks([3, 0, 2, 5, 1, 0], 10, 50) == [
        (0, 3, 0, 5),
        (3, 4, 5, 10),
        (4, 6, 10, 11),
    ]
    assert expert_chunks([9, 1], 10, 50) == [(0, 1, 0, 9), (1, 2, 9, 10)]  # one too large
    assert expert_chunks([0, 0, 0], 10, 50) == [(0, 3, 0, 0)]
    counts = torch.randint(0, 30, (17,)).tolist()
    chunks = expert_chunks(counts, 4, 200)
    assert [c[0] for c in chunks[1:]] == [c[1] for c in chunks[:-1]]  # contiguous experts
    assert chunks[0][:1] == (0,) and chunks[-1][1] == 17 and chunks[-1][3] == sum(counts)
    for e0, e1, r0, r1 in chunks:
        assert r1 - r0 == sum(counts[e0:e1])
        assert (r1 - r0) * 4 <= 200 or e1 - e0 == 1


def test_rule_boundaries(cpu_capability):
    """float32, width <= 512, >= 16384 sorted rows, on AVX-512 only; forced on and off."""
    cpu_capability("AVX512")
    bank = GLUExperts(8, 256, 256)  # width 512
    x = torch.zeros(1, 256)
    assert chunked_path(x, _routing(4096, 4, 8).plan, bank)  # 16384 rows
    assert not chunked_path(x, _routing(4095, 4, 8).plan, bank)
    assert not chunked_path(x.bfloat16(), _routing(4096, 4, 8).plan, bank)
    assert not chunked_path(x.double(), _routing(4096, 4, 8).plan, bank)
    wide = GLUExperts(8, 256, 512)  # width 1024
    assert not chunked_path(x, _routing(4096, 4, 8).plan, wide)
    assert not chunked_path(x, _routing(4096, 4, 8).plan, MLPExperts(8, 256, 256))
    for name in ("AVX2", "DEFAULT"):
        cpu_capability(name)
        assert not chunked_path(x, _routing(4096, 4, 8).plan, bank)
    small = _routing(8, 1, 8).plan
    try:
        for path, want in (("chunked", True), ("grouped_mm", False), ("bmm", False)):
            _forced(path)
            assert chunked_path(x, small, bank) is want
            assert not chunked_path(x, small, MLPExperts(8, 256, 256))
        _forced("per_expert")
        assert not chunked_path(x, small, bank)
        _forced("chunked")  # the loop stays off while the chunks are forced
        assert not per_expert_path(torch.zeros(4096, 256), _routing(4096, 8, 8).plan, bank)
    finally:
        set_grouped_path(None)


def _output_and_grads(moe, x, path, routing=None):
    set_grouped_path(path)
    try:
        moe.zero_grad(set_to_none=True)
        x.grad = None
        y = moe(x, routing=routing)
        yf = y.to(torch.promote_types(y.dtype, torch.float32))
        (yf * torch.linspace(-1, 1, y.numel(), dtype=yf.dtype).view_as(y)).sum().backward()
        return [y.detach(), x.grad] + [p.grad for p in moe.parameters()]
    finally:
        set_grouped_path(None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_forced_chunks_match_sorted_path_and_reference(dtype, small_chunks, chunked_calls):
    """Uneven rows, an expert without rows: several chunks, the sorted path's output and
    gradients, and the naive reference's (default tolerance of the dtype)."""
    torch.manual_seed(0)
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=48, expert="glu").to(dtype)
    x = torch.randn(67, 32, dtype=dtype, requires_grad=True)
    routing = moe.router(x.detach())
    idx = routing.indices.clone()
    idx[idx == 5] = 6  # expert 5 gets no rows
    routing = Routing.from_assignments(idx, routing.weights.detach(), 8)
    outs = [_output_and_grads(moe, x, p, routing) for p in ("chunked", "grouped_mm")]
    assert len(chunked_calls) == 1 and chunked_calls[0] >= 3
    tol = {
        torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
        torch.float32: dict(atol=1e-5, rtol=1e-4),
        torch.float64: dict(atol=1e-12, rtol=1e-10),
    }[dtype]
    for a, b in zip(*outs, strict=True):
        if a is None or b is None:  # the router weight, under a fixed routing
            assert a is None and b is None
            continue
        torch.testing.assert_close(a.float(), b.float(), **tol)
    try:
        _forced("chunked")
        assert_moe_matches_reference(moe, x=x.detach())
        assert_moe_matches_reference(moe, x=x.detach(), routing=routing)
    finally:
        set_grouped_path(None)
    assert len(chunked_calls) == 3


@pytest.mark.parametrize(
    "options", [dict(capacity_factor=0.5), dict(mode="expert_choice", capacity_factor=1.0)]
)
def test_forced_chunks_with_dropped_slots(options, small_chunks, float_dtype):
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=48, expert="glu", **options)
    try:
        _forced("chunked")
        assert_moe_matches_reference(moe, num_tokens=48)
    finally:
        set_grouped_path(None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forced_chunks_double_backward_matches_reference(dtype, small_chunks, chunked_calls):
    """Forces-style: grad of the energy with create_graph, then backward of the forces."""
    torch.manual_seed(0)
    moe = MoE(d_model=16, num_experts=6, top_k=2, d_hidden=48, expert="glu").to(dtype)
    x = torch.randn(61, 16, dtype=dtype)
    results = []
    for fn in (moe, lambda v: reference_moe_forward(moe, v)):
        moe.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        try:
            _forced("chunked")
            energy = (fn(xi) ** 2).sum()
            (force,) = torch.autograd.grad(energy, xi, create_graph=True)
            (force**2).sum().backward()
        finally:
            set_grouped_path(None)
        results.append([force.detach(), xi.grad] + [p.grad for p in moe.parameters()])
    assert chunked_calls and chunked_calls[0] >= 2
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, **tol)


def test_auto_rule_takes_the_chunks_at_a_rule_shape(cpu_capability, chunked_calls):
    """T = 4096, k = 4, E = 8, d = 64 (16384 sorted rows, width 128): the automatic path
    is chunked (2 MiB chunks), with the forced sorted path's output and gradients."""
    cpu_capability("AVX512")
    torch.manual_seed(0)
    moe = MoE(d_model=64, num_experts=8, top_k=4, d_hidden=64, expert="glu")
    x = torch.randn(4096, 64, requires_grad=True)
    assert not per_expert_path(x, moe.router(x.detach()).plan, moe.experts)
    auto = _output_and_grads(moe, x, "auto")
    assert len(chunked_calls) == 1 and chunked_calls[0] >= 4
    sorted_ = _output_and_grads(moe, x, "grouped_mm")
    assert len(chunked_calls) == 1
    for a, b in zip(auto, sorted_, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)

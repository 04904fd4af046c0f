"""benchmarks/moe_layer/paths.py --chunk-ab: the expert chunks and the cache-blocked bank
(== the sorted path, outputs and all gradients); benchmarks/moe_layer/run.py without
transformers."""

import pytest
import torch

from sci_moe.moe import GLUExperts, Routing
from sci_moe.moe.chunked import expert_chunks
from sci_moe.moe.permute import gather_by_expert
from tests.benchmarks.conftest import load_benchmark


@pytest.fixture(scope="module")
def paths():
    with load_benchmark("moe_layer/paths.py", "moe_layer_paths_under_test") as mod:
        yield mod


def test_expert_chunks_cover_the_rows_within_the_budget(paths):
    chunks = expert_chunks([3, 0, 2, 5, 1, 0], row_bytes=10, budget=50)
    assert chunks == [(0, 3, 0, 5), (3, 4, 5, 10), (4, 6, 10, 11)]
    # an expert above the budget is a chunk of its own; an empty bank is one chunk
    assert expert_chunks([9, 1], 10, 50) == [(0, 1, 0, 9), (1, 2, 9, 10)]
    assert expert_chunks([0, 0], 10, 50) == [(0, 2, 0, 0)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chunked_bank_matches_the_sorted_path(paths, dtype):
    torch.manual_seed(0)
    bank = GLUExperts(6, 16, 24).to(dtype)
    idx = torch.randint(0, 6, (23, 2))
    idx[idx == 4] = 5  # expert 4 gets no rows
    plan = Routing.from_assignments(idx, torch.ones(23, 2), num_experts=6).plan
    x = torch.randn(23, 16, dtype=dtype, requires_grad=True)
    g = torch.randn(46, 16, dtype=dtype)
    results = []
    for fn in (
        bank.forward_sorted,
        lambda xs, p: paths.chunked_forward_sorted(bank, xs, p, budget=10 * 48 * 8),
    ):
        bank.zero_grad(set_to_none=True)
        x.grad = None
        y = fn(gather_by_expert(x, plan), plan)
        (y * g).sum().backward()
        results.append([y.detach(), x.grad, bank.gate_up.grad, bank.down.grad])
    counts = plan.counts.tolist()
    assert len(expert_chunks(counts, 48 * 8, 10 * 48 * 8)) > 2  # really chunked
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b)


def test_layer_cases_build_without_transformers():
    with load_benchmark("moe_layer/run.py", "moe_layer_under_test") as ml:
        case = ml.Case(8, 16, 4, 2, "float32")
        steps = ml.build(case, seed=0, transformers=False)
        assert ml.HF not in steps and {ml.SCI, ml.DENSE} <= set(steps)
        times = ml.measure(case, seed=0, repeats=1, transformers=False)
        assert ml.HF not in times and len(times[ml.SCI]) == 1


def test_dense_baseline_has_the_grouped_ops_flops(paths):
    # d=8 (f=16), E=3 experts x 5 rows: the dense GEMMs run all 15 rows on one weight
    fs = paths.formulations(8, 3, 5, torch.float32)
    assert tuple(fs[("forward", "dense")]().shape) == tuple(fs[("forward", "grouped_mm")]().shape)
    assert tuple(fs[("dgrad", "dense")]().shape) == tuple(fs[("dgrad", "grouped_mm")]().shape)
    assert tuple(fs[("wgrad", "grouped_mm")]().shape) == (3, 16, 8)
    assert tuple(fs[("wgrad", "dense")]().shape) == (16, 8)  # same FLOPs, one weight
    fs[("fwd+bwd", "dense")]()  # forward and backward run

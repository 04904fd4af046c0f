"""benchmarks/moe_layer/fused_ab.py: the candidate fused GLU node == the core's sorted path
(outputs, all gradients, double backward; float32 and float64), its rule, the quick run's
rows and the summaries."""

import json

import pytest
import torch

from sci_moe.moe import GLUExperts, MoE, Routing
from sci_moe.moe.permute import gather_by_expert
from tests.benchmarks.conftest import load_benchmark

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-4), torch.float64: dict(atol=1e-12, rtol=1e-10)}


@pytest.fixture(scope="module")
def ab():
    with load_benchmark("moe_layer/fused_ab.py", "moe_layer_fused_ab_under_test") as mod:
        yield mod


def _bank_problem(dtype):
    torch.manual_seed(0)
    bank = GLUExperts(6, 16, 24).to(dtype)
    idx = torch.randint(0, 6, (23, 2))
    idx[idx == 4] = 5  # expert 4 gets no rows
    plan = Routing.from_assignments(idx, torch.ones(23, 2), num_experts=6).plan
    return bank, plan


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_candidate_matches_the_sorted_path(ab, dtype):
    bank, plan = _bank_problem(dtype)
    x = torch.randn(23, 16, dtype=dtype, requires_grad=True)
    g = torch.randn(46, 16, dtype=dtype)
    results = []
    for fn in (
        bank.forward_sorted,
        lambda xs, p: ab.fused_glu_mlp(xs, bank.gate_up, bank.down, p.counts.tolist()),
    ):
        bank.zero_grad(set_to_none=True)
        x.grad = None
        y = fn(gather_by_expert(x, plan), plan)
        (y * g).sum().backward()
        results.append([y.detach(), x.grad, bank.gate_up.grad, bank.down.grad])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, **TOL[dtype])
    assert not results[1][2][4].any() and not results[1][3][4].any()  # the empty expert


def test_candidate_double_backward_and_frozen_weights(ab):
    bank, plan = _bank_problem(torch.float64)
    xs = gather_by_expert(torch.randn(23, 16, dtype=torch.float64), plan)
    counts = plan.counts.tolist()
    results = []
    for fn in (
        lambda v: bank.forward_sorted(v, plan),
        lambda v: ab.fused_glu_mlp(v, bank.gate_up, bank.down, counts),
    ):
        bank.zero_grad(set_to_none=True)
        v = xs.clone().requires_grad_(True)
        (force,) = torch.autograd.grad((fn(v) ** 2).sum(), v, create_graph=True)
        (force**2).sum().backward()
        results.append([force.detach(), v.grad, bank.gate_up.grad, bank.down.grad])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float64])
    bank.requires_grad_(False)  # frozen bank, create_graph: only the input's gradient
    v = xs.clone().requires_grad_(True)
    y = ab.fused_glu_mlp(v, bank.gate_up, bank.down, counts)
    (gv,) = torch.autograd.grad(y.sum(), v, create_graph=True)
    torch.testing.assert_close(gv, torch.autograd.grad(bank.forward_sorted(v, plan).sum(), v)[0])


def test_candidate_rule(ab):
    f32 = torch.float32
    assert ab.candidate_rule(96 * 8, 8, 512, f32)
    assert not ab.candidate_rule(96 * 8 - 1, 8, 512, f32)
    assert not ab.candidate_rule(1024 * 8, 8, 512, f32)  # 2 MiB per expert
    assert not ab.candidate_rule(96 * 8, 8, 1024, f32)
    assert not ab.candidate_rule(96 * 8, 8, 512, torch.bfloat16)


def test_quick_run_writes_rows_for_both_sides_of_the_rule(ab, tmp_path):
    out = tmp_path / "ab.json"
    assert ab.main(["--quick", "--threads", "1", "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    cases = [r["case"] for r in rows]
    assert "T=256,d=64,E=8,k=4,float32 fused (rule; package grouped_mm)" in cases
    assert "T=256,d=64,E=32,k=1,float32 fused (no rule; package grouped_mm)" in cases
    summary = {
        (r["case"], r["metric"]): r["value"] for r in rows if r["case"].startswith("summary")
    }
    assert summary[("summary fused x package, rule takes it", "cases")] == 1
    assert summary[("summary fused x package, rule leaves it", "cases")] == 1
    assert all(r["value"] > 0 for r in rows if r["metric"] == "ms")


def test_loop_cases_are_skipped(ab):
    # T = 4096, d = 256, E = 8, k = 8: the per-expert loop's case (64 MiB intermediate).
    assert ab.case_contestants(4096, 256, 8, 8, "float32") is None


def test_summaries_split_by_rule_and_by_width(ab):
    Row = ab.Row
    pkg = "package grouped_mm"
    rows = [
        Row(f"T=1,d=128,E=8,k=1,float32 fused (rule; {pkg})", "ms", 1, "ms", "", 1.2),
        Row(f"T=1,d=128,E=8,k=2,float32 fused (no rule; {pkg})", "ms", 1, "ms", "", 0.9),
        Row(f"T=1,d=64,E=8,k=1,float32 dense (rule; {pkg})", "ms", 1, "ms", "", 0.5),
        Row(f"T=1,d=128,E=8,k=1,float32 dense (rule; {pkg})", "ms", 1, "ms", "", 0.8),
        Row("T=1,d=128,E=8,k=1,bfloat16 dense (no rule; package bmm)", "ms", 1, "ms", "", 0.1),
    ]
    got = {(r.case, r.metric): r.value for r in ab.summary_rows(rows)}
    assert got[("summary fused x package, rule takes it", "median")] == 1.2
    assert got[("summary fused x package, rule leaves it", "median")] == 0.9
    assert got[("summary package x dense, float32 d>=128", "median")] == 0.8
    assert got[("summary package x dense, float32 d>=128", "cases")] == 1


def test_layer_with_the_candidate_matches_the_package(ab):
    """The benchmark's own check: the candidate patched into a layer step."""
    with load_benchmark("moe_layer/run.py", "moe_layer_under_test_fused") as ml:
        steps = ml.build(ml.Case(64, 32, 4, 2, "float32"), seed=0, transformers=False)
    sci = steps[ml.SCI]
    assert isinstance(sci.module, MoE)
    want = sci()
    grads = {n: g.clone() for n, g in sci.grads().items()}
    got = ab.fused_step(sci, sci.module.experts)()
    torch.testing.assert_close(got, want, **TOL[torch.float32])
    for n, g in sci.grads().items():
        torch.testing.assert_close(g, grads[n], **TOL[torch.float32])
    assert "forward_sorted" not in vars(sci.module.experts)  # the patch is undone

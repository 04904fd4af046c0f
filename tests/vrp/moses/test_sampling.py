import math

import pytest
import torch
from scipy.stats import chisquare

from sci_moe.vrp import actions_to_routes, check_solution, generate_instances, solution_cost
from sci_moe.vrp.moses import MTVRPPolicy, PolicyConfig
from sci_moe.vrp.moses.model import _inverse_cdf, _sample

_NEG = float("-inf")


def _lp(logits):
    return torch.tensor(logits, dtype=torch.float32).log_softmax(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_frequencies_match_the_probabilities(dtype):
    # 20,000 seeded draws of one distribution with masked entries (first, middle, last):
    # masked nodes never appear, the others pass a chi-square test at p > 1e-6
    # (deterministic given the seed; a wrong sampler gives p far below it).
    lp = _lp([_NEG, 0.3, -2.0, _NEG, 1.5, -6.0, 0.0, _NEG]).to(dtype)
    n = 20_000
    g = torch.Generator().manual_seed(123)
    a = _sample(lp.expand(n, -1), n, torch.arange(n), g)
    counts = torch.bincount(a, minlength=lp.numel())
    ok = torch.isfinite(lp)
    assert int(counts[~ok].sum()) == 0
    p = lp[ok].double().exp()
    expected = p / p.sum() * n
    assert chisquare(counts[ok].double().numpy(), expected.numpy()).pvalue > 1e-6


def test_sample_never_picks_a_masked_node():
    # Adversarial rows: the last node(s) masked, tiny probabilities next to large ones, a
    # single feasible node (first, middle, last), many masked nodes between feasible ones.
    g = torch.Generator().manual_seed(5)
    M, R = 12, 3000
    logits = torch.randn(R, M, generator=g) * 30  # probabilities from 1 down to ~1e-300
    keep = torch.rand(R, M, generator=g) < 0.3
    keep[: R // 3, -1] = False  # last node masked
    keep[: R // 3, -2] = torch.rand(R // 3, generator=g) < 0.5
    keep[torch.arange(R), torch.randint(0, M - 2, (R,), generator=g)] = True  # one feasible
    single = torch.zeros(3, M, dtype=torch.bool)
    single[0, 0] = single[1, M // 2] = single[2, -1] = True
    keep = torch.cat([keep, single])
    logits = torch.cat([logits, torch.zeros(3, M)])
    for dtype in (torch.float32, torch.float64):
        lp = logits.to(dtype).masked_fill(~keep, _NEG).log_softmax(-1)
        n = lp.shape[0]
        for _ in range(20):
            a = _sample(lp, n, torch.arange(n), g)
            assert bool(keep[torch.arange(n), a].all())
        # the ends of the unit interval, where the rounding of the cumulative sum bites:
        # the node drawn always has a positive probability (in the dtype of lp)
        for u in (0.0, 1e-300, 0.5, math.nextafter(1.0, 0.0), 1.0):
            a = _inverse_cdf(lp, torch.full((n,), u, dtype=torch.float64))
            assert bool((lp[torch.arange(n), a].exp() > 0).all())
        u = torch.rand(3, dtype=torch.float64, generator=g)
        assert torch.equal(_inverse_cdf(lp[-3:], u), torch.tensor([0, M // 2, M - 1]))


def test_sample_does_not_depend_on_the_finished_instances():
    # The uniforms are drawn for all B P rows: the running instances' actions are those
    # they would get with every instance running.
    B, P, M = 5, 4, 9
    lp = torch.randn(B * P, M, generator=torch.Generator().manual_seed(1)).log_softmax(-1)
    full = _sample(lp, B, torch.arange(B), torch.Generator().manual_seed(2))
    inst = torch.tensor([0, 3, 4])
    rows = (inst[:, None] * P + torch.arange(P)).reshape(-1)
    part = _sample(lp[rows], B, inst, torch.Generator().manual_seed(2))
    assert torch.equal(part, full[rows])


def test_policy_sampling_is_seeded_and_greedy_ignores_the_generator():
    torch.manual_seed(0)
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    ins = generate_instances(3, 8, ["CVRP", "VRPTW", "OVRPBL"], seed=4)
    with torch.no_grad():
        a1, lp1, c1 = pol(ins, generator=torch.Generator().manual_seed(9))
        a2, lp2, c2 = pol(ins, generator=torch.Generator().manual_seed(9))
        a3, _, _ = pol(ins, generator=torch.Generator().manual_seed(10))
        ag1 = pol(ins, greedy=True, generator=torch.Generator().manual_seed(1))
        ag2 = pol(ins, greedy=True)
    assert torch.equal(a1, a2) and torch.equal(lp1, lp2) and torch.equal(c1, c2)
    assert not torch.equal(a1, a3)
    assert bool(torch.isfinite(lp1).all()) and bool((lp1 <= 0).all())
    for b in range(3):
        for p in range(8):
            routes = actions_to_routes(a1[b, p])
            assert check_solution(ins, b, routes) == []
            assert solution_cost(ins, b, routes) == pytest.approx(float(c1[b, p]), rel=1e-5)
    assert all(torch.equal(x, y) for x, y in zip(ag1, ag2, strict=True))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_sample_on_cuda_with_a_cpu_generator_draws_the_cpu_numbers():
    """A policy on a GPU samples its actions from the CPU generator (the one that drew the
    instances): the same uniforms, hence the same nodes, as on the CPU."""
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(12, 7, generator=g).log_softmax(-1)
    lp[::2, 3] = _NEG
    inst = torch.arange(4)
    cpu = _sample(lp, 4, inst, torch.Generator().manual_seed(5))
    gpu = _sample(lp.cuda(), 4, inst.cuda(), torch.Generator().manual_seed(5))
    assert gpu.device.type == "cuda" and torch.equal(gpu.cpu(), cpu)
    torch.manual_seed(0)
    pol = MTVRPPolicy(PolicyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=16, rank=2))
    ins = generate_instances(3, 8, ["CVRP", "VRPTW", "OVRPBL"], seed=4)
    with torch.no_grad():
        a_cpu, _, c_cpu = pol(ins, generator=torch.Generator().manual_seed(9))
        pol.cuda()
        a_gpu, _, c_gpu = pol(ins.to(device="cuda"), generator=torch.Generator().manual_seed(9))
    assert torch.equal(a_gpu.cpu(), a_cpu)
    assert torch.allclose(c_gpu.cpu(), c_cpu, rtol=1e-5)

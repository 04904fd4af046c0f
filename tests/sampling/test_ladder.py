"""Geometric and acceptance-adapted ladders."""

from __future__ import annotations

import math

import pytest
import torch

from sci_moe.sampling.tempering import (
    RWMH,
    ParallelTempering,
    TemperingConfig,
    adaptive_ladder,
    geometric_ladder,
)


def test_geometric_ladder():
    b = geometric_ladder(0.01, 5, dtype=torch.float64)
    assert b[0] == pytest.approx(0.01) and b[-1] == 1.0
    ratios = b[1:] / b[:-1]
    assert torch.allclose(ratios, ratios[0].expand(4))
    for bad in [(0.0, 5), (1.0, 5), (0.1, 1)]:
        with pytest.raises(ValueError):
            geometric_ladder(*bad)


def test_adaptive_ladder_hits_target_swap_acceptance():
    d = 20

    def lp(x):
        return -0.5 * (x**2).sum(1)

    x0 = torch.randn(32, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    betas = adaptive_ladder(
        lp, x0, beta_min=0.05, target_acceptance=0.4, step_size=0.5, n_steps=200, seed=0
    )
    assert betas[0] == pytest.approx(0.05) and betas[-1] == 1.0
    assert bool((betas[1:] > betas[:-1]).all())
    cfg = TemperingConfig(betas, RWMH(0.5), n_local_steps=5, weights="sams")
    res = ParallelTempering(lp, cfg).run(x0[:8], 1000, seed=0)
    acc = res.level_acceptance
    # all pairs near the target (the merged last step may be easier)
    assert float(acc.min()) > 0.3 and float(acc.max()) < 0.6
    assert float(acc.median()) == pytest.approx(0.4, abs=0.06)


def test_adaptive_ladder_validation():
    def lp(x):
        return -0.5 * (x**2).sum(1)

    x0 = torch.zeros(4, 1)
    with pytest.raises(ValueError, match="beta_min"):
        adaptive_ladder(lp, x0, beta_min=1.5)
    with pytest.raises(ValueError, match="target_acceptance"):
        adaptive_ladder(lp, x0, beta_min=0.1, target_acceptance=1.0)
    with pytest.raises(ValueError, match="pilot chains"):
        adaptive_ladder(lp, torch.zeros(1, 1), beta_min=0.1)
    with pytest.raises(ValueError, match="max_levels"):
        adaptive_ladder(
            lp, torch.randn(8, 50), beta_min=1e-3, target_acceptance=0.9, max_levels=4, n_steps=20
        )


def _gauss(x):
    return -0.5 * (x**2).sum(1)


@pytest.mark.parametrize("d", [1, 2, 8])
@pytest.mark.parametrize("stuck", [False, True])
def test_adaptive_ladder_reaches_target_on_gaussians(d, stuck):
    """Issue 27: a 1-D Gaussian with beta_min 1e-4 gave [1e-4, 1] and PT swaps of 0.01.

    ``stuck``: pilot chains all at 0 with a step 1e-4 (nothing moves): the old rule read
    sigma = 0 and jumped straight to beta_min. Tolerance: every neighbour pair within
    [0.25, 0.6] of a 0.4 target (the hottest pair, the merged last step, may be easier, up to
    0.85), the median within 0.07.
    """
    gen = torch.Generator().manual_seed(1)
    if stuck:
        x0, step = torch.zeros(16, d, dtype=torch.float64), 1e-4
    else:
        x0, step = torch.randn(16, d, dtype=torch.float64, generator=gen), 1.0
    betas = adaptive_ladder(
        _gauss, x0, beta_min=1e-4, target_acceptance=0.4, n_steps=200, step_size=step, seed=0
    )
    assert betas[0] == pytest.approx(1e-4) and betas[-1] == 1.0
    assert bool((betas[1:] > betas[:-1]).all())
    assert len(betas) >= 4  # never [1e-4, 1]
    cfg = TemperingConfig(betas, RWMH(1.0), n_local_steps=5, weights="sams")
    x = torch.randn(8, d, dtype=torch.float64, generator=gen)
    acc = ParallelTempering(_gauss, cfg).run(x, 600, seed=0).level_acceptance
    assert 0.25 < float(acc[0]) < 0.85, acc
    assert float(acc[1:].min()) > 0.25 and float(acc[1:].max()) < 0.6, acc
    assert float(acc.median()) == pytest.approx(0.4, abs=0.07), acc


def test_swap_acceptance_estimator():
    from sci_moe.sampling.tempering.ladder import swap_acceptance

    lp = torch.tensor([-1.0, -2.0])
    assert swap_acceptance(lp, lp, 1.0, 1.0) == 1.0
    # beta_a > beta_b: a hotter sample with a lower log p is always taken by the colder level
    assert swap_acceptance(torch.tensor([-2.0]), torch.tensor([-1.0]), 1.0, 0.5) == 1.0
    assert swap_acceptance(torch.tensor([-1.0]), torch.tensor([-3.0]), 1.0, 0.5) == pytest.approx(
        math.exp(-1.0)
    )


@pytest.mark.parametrize(
    "args", [(0.1, 2.5), (0.1, "4"), (0.1, True), ("0.1", 4), (0.1, torch.tensor(4.0))]
)
def test_geometric_ladder_bad_types_raise_value_error(args):
    """Issue 27: geometric_ladder(0.1, 2.5) raised a torch TypeError."""
    with pytest.raises(ValueError, match=r"beta_min|n_levels"):
        geometric_ladder(*args)


def test_geometric_ladder_accepts_integer_likes():
    import numpy as np

    assert torch.equal(geometric_ladder(0.1, np.int64(4)), geometric_ladder(0.1, 4))


def test_adaptive_ladder_rejects_nan_x0():
    x0 = torch.zeros(4, 2)
    x0[2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"pilot chains \[2\]"):
        adaptive_ladder(_gauss, x0, beta_min=0.1)

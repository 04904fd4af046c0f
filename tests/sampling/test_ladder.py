"""Geometric and acceptance-adapted ladders."""

from __future__ import annotations

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
    betas = adaptive_ladder(lp, x0, beta_min=0.05, target_acceptance=0.4, step_size=0.5, seed=0)
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

"""Toy systems with exact densities and the Mueller-Brown data recipe."""

import numpy as np
import pytest
import torch

from sci_moe.data.toy import (
    GaussianMixture,
    muller_brown_density,
    muller_brown_samples,
    two_mode_mixture_1d,
    two_mode_mixture_2d,
)
from sci_moe.sampling.diffusion import VPSDE


def test_mixture_density_normalised_and_moments():
    torch.set_default_dtype(torch.float64)
    try:
        mix = GaussianMixture(
            [[0.0, 1.0], [2.0, -1.0]],
            [[[1.0, 0.3], [0.3, 0.5]], [[0.4, 0.0], [0.0, 0.9]]],
            [0.3, 0.7],
        )
        g = torch.linspace(-8, 10, 361)
        X, Y = torch.meshgrid(g, g, indexing="ij")
        p = mix.log_prob(torch.stack([X.ravel(), Y.ravel()], -1)).exp()
        assert float(p.sum() * (g[1] - g[0]) ** 2) == pytest.approx(1.0, abs=1e-6)
        s = mix.sample(20000, torch.Generator().manual_seed(0))
        torch.testing.assert_close(s.mean(0), mix.mean(), atol=0.04, rtol=0)
        torch.testing.assert_close(torch.cov(s.T), mix.covariance(), atol=0.06, rtol=0)
        # the diffused density at t -> 0 is the density itself; at t = 1 close to N(0, I)
        x = s[:5]
        sde = VPSDE()
        torch.testing.assert_close(mix.diffused_log_prob(x, torch.zeros(5), sde), mix.log_prob(x))
        std = -0.5 * x.pow(2).sum(1) - np.log(2 * np.pi)
        torch.testing.assert_close(
            mix.diffused_log_prob(x, torch.ones(5), sde), std, atol=0.05, rtol=0
        )
    finally:
        torch.set_default_dtype(torch.float32)


def test_paper_toys_and_errors():
    assert two_mode_mixture_2d().weights.tolist() == pytest.approx([0.2, 0.8])
    assert two_mode_mixture_1d().dim == 1
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture([[0.0], [1.0]], 1.0, [1.0, -1.0])
    with pytest.raises(ValueError, match="covs"):
        GaussianMixture([[0.0, 0.0]], torch.ones(2, 2, 2))


def test_muller_brown_density_and_samples():
    prob, xe, ye = muller_brown_density(bins=50, oversample=2)
    assert prob.shape == (50, 50) and prob.sum() == pytest.approx(1.0)
    i, j = np.unravel_index(prob.argmax(), prob.shape)
    # most probable bin at the deepest minimum (-0.558, 1.442)
    assert abs((xe[i] + xe[i + 1]) / 2 + 0.558) < 0.1 and abs((ye[j] + ye[j + 1]) / 2 - 1.442) < 0.1
    x = muller_brown_samples(400, n_walkers=40, stride=10, burn_in=200, seed=0, progress=False)
    assert x.shape == (400, 2) and np.isfinite(x).all()
    assert (x[:, 0] > -1.8).all() and (x[:, 0] < 1.1).all()
    y = muller_brown_samples(400, n_walkers=40, stride=10, burn_in=200, seed=0, progress=False)
    np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError):
        muller_brown_samples(0)


def _muller_brown_reference(n, walkers, stride, burn_in, seed, mass=0.5):
    """The generator as it was: ``PotentialForces(MuellerBrown())`` in LangevinBAOAB."""
    from sci_moe.sampling.md import LangevinBAOAB, MuellerBrown, PotentialForces

    gen = torch.Generator().manual_seed(seed)
    prov = PotentialForces(MuellerBrown(), torch.tensor([mass], dtype=torch.float64))
    integ = LangevinBAOAB(5e-3, friction_per_ps=1.0, kT=23.0)
    x0 = torch.tensor((-0.558, 1.442), dtype=torch.float64).expand(walkers, 1, 2).clone()
    state = integ.init_state(prov, x0, gen)
    state = integ.step(state, prov, gen, n_steps=burn_in)
    out = []
    for _ in range(-(-n // walkers)):
        state = integ.step(state, prov, gen, n_steps=stride)
        out.append(state.positions[:, 0].numpy().copy())
    return np.stack(out).transpose(1, 0, 2).reshape(-1, 2)[:n], state


def test_muller_brown_fast_provider_bit_identical():
    from sci_moe.data.toy import _muller_brown_provider
    from sci_moe.sampling.md import MuellerBrown

    ref, state = _muller_brown_reference(300, 30, 7, 50, seed=3)
    x = muller_brown_samples(300, n_walkers=30, stride=7, burn_in=50, seed=3, progress=False)
    np.testing.assert_array_equal(x, ref)
    e, f = _muller_brown_provider(MuellerBrown(), 0.5).energy_and_forces(state.positions)
    e0, f0 = MuellerBrown().energy_and_forces(state.positions)
    assert torch.equal(e, e0) and torch.equal(f, f0)

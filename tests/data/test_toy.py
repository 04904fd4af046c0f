"""Toy systems with exact densities and the Mueller-Brown data recipe."""

import numpy as np
import pytest
import torch

from sci_moe.data.toy import (
    muller_brown_density,
    muller_brown_samples,
    two_mode_mixture_1d,
    two_mode_mixture_2d,
)


def test_paper_toys():
    assert two_mode_mixture_2d().weights.tolist() == pytest.approx([0.2, 0.8])
    assert two_mode_mixture_1d().dim == 1


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

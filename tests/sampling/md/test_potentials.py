"""Analytic potentials: forces == -grad E, exact normalisation, input checks."""

import math

import pytest
import torch

from sci_moe.sampling.md import (
    DoubleWell,
    GaussianMixturePotential,
    MuellerBrown,
    autograd_energy_and_forces,
)
from sci_moe.stats import GaussianMixture
from sci_moe.testing import assert_forces_match_energy
from tests.conftest import FLOAT_TOLERANCE


def _gmm(dim=2):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(3, dim, dim, generator=g, dtype=torch.float64)
    cov = a @ a.transpose(1, 2) * 0.3 + 0.5 * torch.eye(dim, dtype=torch.float64)
    means = torch.randn(3, dim, generator=g, dtype=torch.float64) * 2
    return GaussianMixturePotential(means, cov, weights=[0.2, 0.3, 0.5], kT=2.5)


POTENTIALS = {
    "dw1": lambda: DoubleWell(dim=1, barrier=3.0, tilt=0.4),
    "dw2": lambda: DoubleWell(dim=2, barrier=1.5, scale=1.3, stiffness=2.0, n_particles=3),
    "mb": lambda: MuellerBrown(scale=0.5, n_particles=2),
    "gmm": _gmm,
    "gmm_iso": lambda: GaussianMixturePotential([[0.0], [3.0]], [0.5, 2.0], kT=1.0),
}


@pytest.mark.parametrize("name", sorted(POTENTIALS))
def test_analytic_forces_match_autograd(name, float_dtype):
    pot = POTENTIALS[name]()
    x = torch.randn(7, pot.n_particles, pot.dim) * 0.8
    energy, forces = pot.energy_and_forces(x)
    e_ref, f_ref = autograd_energy_and_forces(pot, x)
    assert energy.shape == (7,) and forces.shape == x.shape
    assert energy.dtype == float_dtype and forces.dtype == float_dtype
    tol = FLOAT_TOLERANCE[float_dtype]
    scale = 1 + f_ref.abs().max()
    torch.testing.assert_close(energy, e_ref, rtol=tol, atol=tol * (1 + e_ref.abs().max()))
    torch.testing.assert_close(forces, f_ref, rtol=tol, atol=tol * scale)


def test_forces_match_finite_differences():
    pot = MuellerBrown()
    x = torch.tensor([[[-0.3, 0.9]], [[0.5, 0.1]]], dtype=torch.float64)
    assert_forces_match_energy(pot.energy_and_forces, x, step=1e-6, rtol=1e-7, atol=1e-6)


def test_mueller_brown_minima():
    pot = MuellerBrown()
    for xy, e in [((-0.558, 1.442), -146.70), ((0.623, 0.028), -108.17), ((-0.050, 0.467), -80.77)]:
        x = torch.tensor([[xy]], dtype=torch.float64)
        energy, forces = pot.energy_and_forces(x)
        assert abs(float(energy) - e) < 0.05
        assert float(forces.norm()) < 1.0  # (rounded) stationary point


def test_gmm_log_prob_is_exact_density():
    pot = _gmm()
    comp = torch.distributions.MultivariateNormal(pot.means, covariance_matrix=pot.covariances)
    ref = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(pot.weights), comp)
    x = torch.randn(50, 1, 2, dtype=torch.float64) * 3
    torch.testing.assert_close(pot.log_prob(x), ref.log_prob(x[:, 0]))
    torch.testing.assert_close(-pot(x) / pot.kT, ref.log_prob(x[:, 0]))


def test_gmm_samples_match_moments():
    pot = _gmm()
    x = pot.sample(200_000, torch.Generator().manual_seed(0))[:, 0]
    mean = (pot.weights[:, None] * pot.means).sum(0)
    assert torch.allclose(x.mean(0), mean, atol=0.03)


@pytest.mark.parametrize("dim", [1, 2])
def test_double_well_log_prob_normalised(dim):
    pot = DoubleWell(dim=dim, barrier=2.0, tilt=0.3, stiffness=1.5)
    kT = 0.7
    g = torch.linspace(-4, 4, 801, dtype=torch.float64)
    if dim == 1:
        total = torch.trapezoid(pot.log_prob(g[:, None, None], kT).exp(), g)
    else:
        xx, yy = torch.meshgrid(g, g, indexing="ij")
        x = torch.stack([xx, yy], -1).reshape(-1, 1, 2)
        dens = pot.log_prob(x, kT).exp().reshape(801, 801)
        total = torch.trapezoid(torch.trapezoid(dens, g), g)
    assert math.isclose(float(total), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize(
    "bad",
    [
        torch.zeros(4, 2),  # no walker axis
        torch.zeros(4, 1, 3),  # wrong dim
        torch.zeros(4, 2, 2),  # wrong particle count
        torch.tensor([[[0.0, float("nan")]]]),
        torch.zeros(2, 1, 2, dtype=torch.long),
    ],
)
def test_bad_positions_raise(bad):
    with pytest.raises(ValueError):
        MuellerBrown().energy_and_forces(bad)


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        DoubleWell(barrier=-1)
    with pytest.raises(ValueError):
        MuellerBrown(scale=0)
    with pytest.raises(ValueError):
        GaussianMixturePotential([[0.0, 0.0]], torch.tensor([[[1.0, 2.0], [2.0, 1.0]]]))
    with pytest.raises(ValueError):
        GaussianMixturePotential([[0.0], [1.0]], weights=[0.5, -0.5])
    with pytest.raises(ValueError):
        DoubleWell().log_prob(torch.zeros(1, 1, 1), kT=0.0)


def test_gaussian_mixture_density_and_potential_agree():
    """The mixture density (sci_moe.stats) and its Boltzmann energy give the same log p."""
    mix = GaussianMixture([[0.0, 1.0], [2.0, -1.0]], [0.5, 2.0], [0.3, 0.7], dtype=torch.float64)
    pot = GaussianMixturePotential.from_mixture(mix, kT=2.5)
    assert isinstance(pot, GaussianMixturePotential) and pot.kT == 2.5
    x = torch.randn(6, 2, dtype=torch.float64)
    torch.testing.assert_close(pot.log_prob(x[:, None]), mix.log_prob(x))
    torch.testing.assert_close(pot(x[:, None]), -2.5 * mix.log_prob(x))
    assert_forces_match_energy(pot.energy_and_forces, x[:, None])

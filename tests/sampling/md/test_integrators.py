"""Torch integrators: Boltzmann sampling within statistical error, determinism, input checks."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from sci_moe.sampling.md import (
    DoubleWell,
    GaussianMixturePotential,
    LangevinBAOAB,
    MDState,
    OverdampedEulerMaruyama,
    PotentialForces,
    kinetic_energy,
)
from sci_moe.sampling.md.forces import ForceProvider


def _run(integrator, provider, x0, n_burn, n_keep, every, seed=0):
    g = torch.Generator().manual_seed(seed)
    state = integrator.init_state(provider, x0, g)
    state = integrator.step(state, provider, g, n_burn)
    out, kin = [], []
    for _ in range(n_keep):
        state = integrator.step(state, provider, g, every)
        out.append(state.positions.clone())
        kin.append(kinetic_energy(state.velocities, provider.masses))
    return torch.cat(out), torch.cat(kin), state


def _chi2_pvalue(samples: np.ndarray, edges: np.ndarray, probs: np.ndarray, n_indep: int) -> float:
    """Chi-square p-value of a histogram against exact bin probabilities.

    ``samples`` may hold several (nearly independent) snapshots of ``n_indep`` walkers; the
    counts are rescaled to ``n_indep`` effective samples so that the test stays honest.
    """
    counts, _ = np.histogram(samples, edges)
    counts = counts * (n_indep / len(samples))
    expected = probs * n_indep
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    return float(stats.chi2.sf(chi2, keep.sum() - 1))


def _double_well_reference(pot, kT, edges):
    g = np.linspace(edges[0], edges[-1], 200001)
    x = torch.tensor(g, dtype=torch.float64)[:, None, None]
    p = pot.log_prob(x, kT).exp().numpy()
    cdf = np.concatenate([[0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(g))])
    probs = np.diff(np.interp(edges, g, cdf))
    mean = np.trapezoid(g * p, g)
    m2 = np.trapezoid(g**2 * p, g)
    return probs, mean, m2


@pytest.mark.parametrize("kind", ["baoab", "overdamped"])
def test_double_well_1d_boltzmann(kind):
    kT, w = 1.0, 4000
    pot = DoubleWell(dim=1, barrier=1.5, tilt=0.5)
    prov = PotentialForces(pot, masses=[2.0])
    if kind == "baoab":
        integ = LangevinBAOAB(timestep_ps=0.05, friction_per_ps=2.0, kT=kT)
        n_burn, n_keep, every = 600, 5, 100
    else:
        prov = PotentialForces(pot, masses=[1.0])
        integ = OverdampedEulerMaruyama(timestep_ps=0.005, friction_per_ps=1.0, kT=kT)
        n_burn, n_keep, every = 1200, 4, 200
    x0 = torch.full((w, 1, 1), -1.0, dtype=torch.float64)  # all start in the left well
    x, kin, _ = _run(integ, prov, x0, n_burn, n_keep, every)
    xs = x[:, 0, 0].numpy()
    edges = np.linspace(-2.2, 2.2, 23)
    probs, mean, m2 = _double_well_reference(pot, kT, edges)
    # walkers are independent; snapshots of one walker are correlated: use W as sample size
    se = math.sqrt(m2 - mean**2) / math.sqrt(w)
    assert abs(xs.mean() - mean) < 4 * se
    assert abs((xs**2).mean() - m2) < 4 * np.std(xs**2) / math.sqrt(w)
    assert _chi2_pvalue(xs, edges, probs, w) > 1e-3
    if kind == "baoab":  # equipartition: <m v^2 / 2> = kT/2 per degree of freedom
        assert abs(kin.mean().item() - 0.5 * kT) < 4 * 0.5 * kT * math.sqrt(2 / len(kin))


def test_gaussian_mixture_2d_boltzmann_baoab():
    """2-D mixture with correlated components: means, covariance and 2-D histogram."""
    cov = torch.tensor([[[0.6, 0.3], [0.3, 0.4]], [[0.3, -0.1], [-0.1, 0.5]]], dtype=torch.float64)
    pot = GaussianMixturePotential([[-1.0, 0.0], [1.0, 0.5]], cov, weights=[0.35, 0.65], kT=1.0)
    prov = PotentialForces(pot, masses=[1.0])
    integ = LangevinBAOAB(timestep_ps=0.05, friction_per_ps=1.0, kT=1.0)
    w = 4000
    x0 = torch.zeros(w, 1, 2, dtype=torch.float64)
    x, _, _ = _run(integ, prov, x0, 200, 3, 50, seed=1)
    x = x[:, 0]
    ref = pot.sample(400_000, torch.Generator().manual_seed(5))[:, 0]
    mean_ref, cov_ref = ref.mean(0), torch.cov(ref.T)
    sd = ref.std(0)
    assert ((x.mean(0) - mean_ref).abs() < 4 * sd / math.sqrt(w)).all()
    assert (torch.cov(x.T) - cov_ref).abs().max() < 0.05
    # 2-D histogram on 6x6 bins against exact bin probabilities (from i.i.d. samples)
    edges = np.linspace(-3, 3, 7)
    h_ref, _, _ = np.histogram2d(ref[:, 0].numpy(), ref[:, 1].numpy(), [edges, edges])
    h, _, _ = np.histogram2d(x[:, 0].numpy(), x[:, 1].numpy(), [edges, edges])
    probs = (h_ref / len(ref)).ravel()
    counts = h.ravel() * (w / len(x))
    keep = probs * w > 5
    chi2 = ((counts[keep] - probs[keep] * w) ** 2 / (probs[keep] * w)).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


def test_double_well_2d_overdamped_and_per_walker_temperature():
    """Per-walker temperatures: the harmonic direction has variance kT_w / k for each walker."""
    pot = DoubleWell(dim=2, barrier=1.0, stiffness=2.0)
    prov = PotentialForces(pot)
    kts = torch.tensor([0.5, 2.0], dtype=torch.float64).repeat_interleave(2000)
    integ = OverdampedEulerMaruyama(timestep_ps=0.002, friction_per_ps=1.0, kT=kts)
    x, _, _ = _run(integ, prov, torch.zeros(4000, 1, 2, dtype=torch.float64), 1000, 1, 1)
    y = x[:, 0, 1]
    for sl, kt in ((slice(0, 2000), 0.5), (slice(2000, 4000), 2.0)):
        var = float((y[sl] ** 2).mean())
        assert abs(var - kt / 2.0) < 4 * (kt / 2.0) * math.sqrt(2 / 2000)


@pytest.mark.parametrize("cls", [LangevinBAOAB, OverdampedEulerMaruyama])
def test_deterministic_and_exact_resume(cls):
    prov = PotentialForces(DoubleWell(dim=2, n_particles=3))
    integ = cls(timestep_ps=0.01, kT=1.0)
    x0 = torch.randn(5, 3, 2, dtype=torch.float64)
    g = torch.Generator().manual_seed(42)
    s = integ.step(integ.init_state(prov, x0, g), prov, g, 20)
    g2 = torch.Generator().manual_seed(42)
    s2 = integ.init_state(prov, x0, g2)
    s2 = integ.step(s2, prov, g2, 7)
    saved = MDState.from_state_dict(s2.clone().state_dict())
    rng = g2.get_state()
    g3 = torch.Generator()
    g3.set_state(rng)
    s3 = integ.step(saved, prov, g3, 13)
    assert s3.step == s.step == 20
    assert torch.equal(s3.positions, s.positions) and torch.equal(s3.velocities, s.velocities)
    assert torch.equal(s3.energy, s.energy)
    g4 = torch.Generator().manual_seed(43)
    s4 = integ.step(integ.init_state(prov, x0, g4), prov, g4, 20)
    assert not torch.equal(s4.positions, s.positions)


def test_bad_input_raises():
    prov = PotentialForces(DoubleWell())
    for kw in ({"timestep_ps": -0.1}, {"timestep_ps": 0.0}, {"timestep_ps": float("nan")}):
        with pytest.raises(ValueError):
            LangevinBAOAB(**kw)
    with pytest.raises(ValueError):
        LangevinBAOAB(0.01, temperature_k=-1)
    with pytest.raises(ValueError):
        LangevinBAOAB(0.01, friction_per_ps=0)
    integ = LangevinBAOAB(0.01, kT=1.0)
    with pytest.raises(ValueError, match="NaN"):
        integ.init_state(prov, torch.tensor([[[float("nan")]]]))
    with pytest.raises(ValueError):
        integ.init_state(prov, torch.zeros(3, 1))
    state = integ.init_state(prov, torch.zeros(3, 1, 1))
    with pytest.raises(ValueError):
        integ.step(state, prov, None, -1)
    with pytest.raises(ValueError):
        LangevinBAOAB(0.01, kT=torch.ones(4)).init_state(prov, torch.zeros(3, 1, 1))

    class Constrained(PotentialForces):
        n_constraints = 2

    with pytest.raises(ValueError, match="constraints"):
        integ.init_state(Constrained(DoubleWell()), torch.zeros(1, 1, 1))
    assert issubclass(PotentialForces, ForceProvider)


def test_temperature_units():
    """temperature_k and kT agree through kB (kJ/mol/K)."""
    a = LangevinBAOAB(0.002, temperature_k=300.0)
    assert math.isclose(float(a.kT), 300 * 0.00831446261815324)
    assert math.isclose(float(a.temperature_k), 300.0)

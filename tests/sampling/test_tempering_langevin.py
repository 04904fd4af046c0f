"""Langevin BAOAB as the local kernel of simulated / parallel tempering."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sci_moe.sampling.tempering import (
    BAOAB,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    energy_log_prob,
    geometric_ladder,
    level_histogram,
    masked_mean,
    round_trips,
    sample,
)

W = torch.tensor([0.3, 0.7], dtype=torch.float64)
MU = torch.tensor([-5.0, 5.0], dtype=torch.float64)
L = 6
BETAS = geometric_ladder(0.01, L, dtype=torch.float64)


def mixture_lp(x):
    w, mu = W.to(x.dtype), MU.to(x.dtype)
    return torch.logsumexp(w.log() - 0.5 * (x - mu) ** 2 - 0.5 * math.log(2 * math.pi), dim=1)


def exact_log_z(betas):
    grid = np.linspace(-80, 80, 160001)
    lp = mixture_lp(torch.tensor(grid)[:, None]).numpy()
    lz = np.array([np.log(np.trapezoid(np.exp(b * lp), grid)) for b in betas.numpy()])
    return lz - lz[-1]


LOG_Z = exact_log_z(BETAS)
X0 = torch.full((32, 1), -5.0, dtype=torch.float64)  # every chain starts in the 0.3 mode


def gauss_lp(x):
    return -0.5 * (x**2).sum(1)


@pytest.mark.parametrize("beta", [0.25, 1.0])
def test_baoab_samples_the_tempered_gaussian(beta):
    # BAOAB samples a harmonic potential's configurations exactly at any stable timestep,
    # so Var(x) = 1/beta; its full-step velocities are Maxwell-Boltzmann at temperature
    # 1/beta only up to O(h^2): Var(v) = (1/beta) (1 - h^2/4) for omega = 1.
    h, n = 0.5, 4000
    k = BAOAB(step_size=h, friction=1.0)
    x0 = torch.zeros(64, 2, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    xs, acc = sample(k, gauss_lp, x0, n, beta=beta, generator=gen)
    var = float(xs[500:].var())
    se = (1 / beta) * math.sqrt(2 * 20 / xs[500:].numel())  # tau ~ 20 steps
    assert abs(var - 1 / beta) < 4 * se, (var, 1 / beta)
    assert bool((acc == 1).all())
    # one more step to read velocities
    s = k.step(xs[-1], gauss_lp, beta, generator=gen)
    vs = [s.velocities]
    for _ in range(300):
        s = k.step(
            s.x, gauss_lp, beta, generator=gen, lp=s.log_prob, velocities=vs[-1], grad=s.grad
        )
        vs.append(s.velocities)
    vvar = float(torch.stack(vs).var())
    assert abs(vvar - (1 / beta) * (1 - h**2 / 4)) < 0.05 / beta


@pytest.mark.parametrize("mode", ["rescale", "resample"])
def test_level_change_maps_maxwell_boltzmann_to_the_new_temperature(mode):
    k = BAOAB(velocities=mode)
    gen = torch.Generator().manual_seed(1)
    n = 200_000
    x = torch.zeros(n, 1, dtype=torch.float64)
    b_old = torch.full((n,), 0.2, dtype=torch.float64)
    b_new = torch.full((n,), 0.8, dtype=torch.float64)
    v = k.init_velocities(x, b_old, gen)
    assert abs(float(v.var()) - 5.0) < 0.05
    mask = torch.arange(n) % 2 == 0
    v2 = k.change_level(v, b_old, b_new, mask, gen)
    assert abs(float(v2[mask].var()) - 1.25) < 0.015
    assert torch.equal(v2[~mask], v[~mask])
    if mode == "rescale":
        assert torch.allclose(v2[mask], v[mask] * 0.5)


@pytest.mark.parametrize("mode", ["rescale", "resample"])
def test_st_baoab_reproduces_mode_weights_where_langevin_is_stuck(mode):
    k = BAOAB(step_size=0.25, friction=1.0, velocities=mode)
    cfg = TemperingConfig(BETAS, k, n_local_steps=3, log_weights=torch.tensor(-LOG_Z))
    res = SimulatedTempering(mixture_lp, cfg).run(X0, 1500, seed=1)
    top = res.levels[300:] == L - 1
    w, se = masked_mean((res.x[300:, :, 0] > 0).double(), top)
    assert abs(w - 0.7) < 3 * se + 0.01 and se < 0.03, (w, se)  # + BAOAB's O(h^2) bias
    assert np.all(np.abs(level_histogram(res.levels, L) - 1 / L) < 0.04)
    assert round_trips(res.levels, L).sum() > 50
    # plain Langevin from the same start stays in the 0.3 mode (a rare chain may cross)
    s, _ = sample(k, mixture_lp, X0, 1500, seed=1)
    stuck = float((s[..., 0] > 0).double().mean())
    assert stuck < 0.1 and abs(stuck - 0.7) > 20 * se


def test_pt_baoab_reproduces_mode_weights():
    cfg = TemperingConfig(BETAS, BAOAB(step_size=0.25), n_local_steps=3)
    res = ParallelTempering(mixture_lp, cfg).run(X0[:8], 1500, seed=2)
    f = (res.x[300:, L - 1 :: L, 0] > 0).double()
    w, se = masked_mean(f, torch.ones_like(f, dtype=torch.bool))
    assert abs(w - 0.7) < 3 * se + 0.01 and se < 0.04, (w, se)
    assert round_trips(res.levels, L).sum() > 50


def test_st_baoab_velocities_follow_the_level_temperature():
    # 2-level ST on a 1-D Gaussian with exact weights: after rescaling at every level move,
    # the velocity variance at each level is 1/beta (up to BAOAB's O(h^2) factor).
    betas = torch.tensor([0.25, 1.0], dtype=torch.float64)
    g = torch.tensor([-0.5 * math.log(4.0), 0.0], dtype=torch.float64)  # -log Z_beta
    k = BAOAB(step_size=0.2, friction=2.0)
    st = SimulatedTempering(gauss_lp, TemperingConfig(betas, k, log_weights=g))
    gen = torch.Generator().manual_seed(3)
    x = torch.zeros(256, 1, dtype=torch.float64)
    res = st.run(x, 1500, generator=gen)
    # the velocities are internal; check the position marginals and level balance instead
    lev = res.levels[200:]
    for i, b in enumerate(betas.tolist()):
        xv = res.x[200:, :, 0][lev == i]
        assert abs(float(xv.var()) - 1 / b) < 0.06 / b
    assert abs(float((lev == 1).double().mean()) - 0.5) < 0.03
    # and the kernel's own velocities after rescaling: v ~ N(0, 1/beta_new)
    v = k.init_velocities(x, betas[0], gen)
    v2 = k.change_level(
        v, betas[:1].expand(256), betas[1:].expand(256), torch.ones(256, dtype=bool)
    )
    assert torch.allclose(v2, v * 0.5)


def test_energy_log_prob_adapter():
    def energy(pos):  # (W, N, D) -> (W,): harmonic wells, kJ/mol
        return 3.0 * (pos**2).sum((1, 2))

    lp = energy_log_prob(energy, 2.0, (2, 3))
    x = torch.randn(5, 6, dtype=torch.float64)
    assert torch.allclose(lp(x), -1.5 * (x**2).sum(1))
    with pytest.raises(ValueError, match="shape"):
        lp(torch.zeros(5, 4))
    with pytest.raises(ValueError, match="kT"):
        energy_log_prob(energy, 0.0, (2, 3))


def test_mass_per_coordinate():
    # heavy coordinate moves slowly but samples the same distribution
    k = BAOAB(step_size=0.3, mass=torch.tensor([1.0, 16.0], dtype=torch.float64))
    xs, _ = sample(k, gauss_lp, torch.zeros(64, 2, dtype=torch.float64), 3000, seed=4)
    var = xs[500:].var(dim=(0, 1))
    assert torch.allclose(var, torch.ones(2, dtype=torch.float64), atol=0.15)
    with pytest.raises(ValueError, match="entries"):
        k.step(torch.zeros(4, 3), gauss_lp)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"step_size": 0.0}, "step_size"),
        ({"friction": -1.0}, "friction"),
        ({"mass": -1.0}, "mass"),
        ({"velocities": "keep"}, "velocities"),
    ],
)
def test_bad_baoab_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BAOAB(**kwargs)


def test_unstable_timestep_raises():
    def stiff(x):
        return -5000.0 * (x**2).sum(1)

    with pytest.raises(ValueError, match="reduce step_size"):
        sample(BAOAB(step_size=1.0), stiff, torch.ones(4, 1, dtype=torch.float64), 200, seed=0)


def test_matches_md_engine_baoab_at_temperature_kT0_over_beta():
    # Level beta of the tempering kernel is md-engine's LangevinBAOAB at kT = kT0 / beta:
    # with the same start, velocities and generator, the trajectories agree to rounding.
    md = pytest.importorskip("sci_moe.sampling.md")
    mb = md.potentials.MuellerBrown(scale=0.05)
    W, h, gamma = 6, 0.01, 2.0
    beta = torch.linspace(0.3, 1.0, W, dtype=torch.float64)
    x0 = torch.tensor([[-0.55, 1.44]], dtype=torch.float64) + 0.01 * torch.arange(W)[:, None]
    v0 = torch.randn(W, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    lp = energy_log_prob(mb, 1.0, (1, 2))  # kT0 = 1 in the potential's units
    k, gen = BAOAB(step_size=h, friction=gamma), torch.Generator().manual_seed(7)
    x, v, s = x0, v0, None
    for _ in range(50):
        cache = {} if s is None else {"lp": s.log_prob, "grad": s.grad}
        s = k.step(x, lp, beta, generator=gen, velocities=v, **cache)
        x, v = s.x, s.velocities
    integ = md.integrators.LangevinBAOAB(timestep_ps=h, friction_per_ps=gamma, kT=1.0 / beta)
    prov = md.forces.PotentialForces(mb, masses=torch.ones(1, dtype=torch.float64))
    st = integ.init_state(prov, x0[:, None, :], velocities=v0[:, None, :])
    st = integ.step(st, prov, generator=torch.Generator().manual_seed(7), n_steps=50)
    torch.testing.assert_close(st.positions[:, 0], x, rtol=0, atol=1e-12)
    torch.testing.assert_close(st.velocities[:, 0], v, rtol=0, atol=1e-11)
    torch.testing.assert_close(-st.energy, lp(x), rtol=0, atol=1e-11)

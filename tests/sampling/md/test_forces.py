"""Force providers: learned-model forces == -grad E, OpenMM forces == OpenMM, input checks."""

import numpy as np
import openmm
import openmm.unit as u
import pytest
import torch

from sci_moe.sampling.md import (
    LangevinBAOAB,
    ModelForces,
    MuellerBrown,
    OpenMMForces,
    PotentialForces,
    build_system,
)
from sci_moe.testing import assert_forces_match_energy


class PairEnergy(torch.nn.Module):
    """Small invariant energy: an MLP of all pairwise distances, summed."""

    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(1, 16), torch.nn.SiLU(), torch.nn.Linear(16, 1)
        )

    def forward(self, x):
        d = torch.cdist(x, x)
        iu = torch.triu_indices(x.shape[1], x.shape[1], 1)
        r = d[:, iu[0], iu[1]]
        return self.mlp(r[..., None]).squeeze(-1).sum(-1)


def test_model_forces_are_minus_grad_energy():
    model = PairEnergy().double()
    prov = ModelForces(model, masses=np.ones(5))
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    e, f = prov.energy_and_forces(x)
    assert e.shape == (4,) and f.shape == (4, 5, 3) and not e.requires_grad
    torch.testing.assert_close(e, model(x))
    # central finite differences, every coordinate of walker 2
    assert_forces_match_energy(prov.energy_and_forces, x[2:3], step=1e-6, rtol=1e-6, atol=1e-7)
    # walkers are independent: batched forces equal one-walker-at-a-time forces
    for w in range(4):
        torch.testing.assert_close(prov.energy_and_forces(x[w : w + 1])[1][0], f[w])


def test_functional_model_forces_equal_autograd(monkeypatch):
    """``compile=True`` (compiler a no-op, then a failing one): the autograd energies/forces."""
    from sci_moe.sampling.md import forces as forces_mod

    model = PairEnergy().double()
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    e0, f0 = ModelForces(model, masses=np.ones(5)).energy_and_forces(x)
    monkeypatch.setattr(forces_mod.torch, "compile", lambda fn, **kw: fn)
    e1, f1 = ModelForces(model, masses=np.ones(5), compile=True).energy_and_forces(x)
    assert not e1.requires_grad and not f1.requires_grad
    torch.testing.assert_close(e1, e0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f1, f0, rtol=1e-12, atol=1e-12)

    def broken(fn, **kw):
        def call(*a, **k):
            raise RuntimeError("no compiler here")

        return call

    monkeypatch.setattr(forces_mod.torch, "compile", broken)
    prov = ModelForces(model, masses=np.ones(5), compile=True)
    with pytest.warns(RuntimeWarning, match="using autograd"):
        e2, f2 = prov.energy_and_forces(x)
    torch.testing.assert_close(e2, e0)
    torch.testing.assert_close(f2, f0)
    torch.testing.assert_close(prov.energy_and_forces(x)[1], f0)  # no second warning needed


def test_model_forces_check_inputs():
    prov = ModelForces(PairEnergy(), masses=np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        prov.energy_and_forces(torch.full((1, 5, 3), float("nan")))
    with pytest.raises(ValueError):
        prov.energy_and_forces(torch.zeros(1, 4, 3))
    with pytest.raises(ValueError):
        ModelForces(PairEnergy(), masses=[1.0, -1.0])

    class Bad(torch.nn.Module):
        def forward(self, x):
            return x.sum((1, 2))[:, None]

    with pytest.raises(ValueError, match="shape"):
        ModelForces(Bad(), masses=np.ones(5)).energy_and_forces(torch.zeros(2, 5, 3))


def test_potential_forces_masses():
    prov = PotentialForces(MuellerBrown(n_particles=2))
    assert torch.equal(prov.masses, torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError):
        PotentialForces(MuellerBrown(), masses=[1.0, 2.0])
    with pytest.raises(TypeError):
        PotentialForces(lambda x: x)


@pytest.mark.parametrize("solvent", [None, "obc"])
def test_openmm_forces_match_openmm(solvent):
    _, system, pos = build_system("amber99sbildn", implicit_solvent=solvent)
    prov = OpenMMForces(system, platform="Reference")
    rng = np.random.default_rng(0)
    walkers = pos[None] + 0.005 * rng.standard_normal((3, 22, 3))
    e, f = prov.energy_and_forces(torch.tensor(walkers))
    ctx = openmm.Context(
        system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference")
    )
    for w in range(3):
        ctx.setPositions(walkers[w])
        st = ctx.getState(getEnergy=True, getForces=True)
        e_ref = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
        f_ref = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)
        assert abs(float(e[w]) - e_ref) < 1e-8 * max(1, abs(e_ref))
        np.testing.assert_allclose(f[w].numpy(), f_ref, rtol=1e-10, atol=1e-8)
    # forces are -dE/dx (central finite differences of every coordinate)
    x0 = torch.tensor(walkers[:1])
    assert_forces_match_energy(prov.energy_and_forces, x0, step=1e-5, rtol=1e-4, atol=1e-3)
    assert np.isclose(float(prov.masses.sum()), 144.17, atol=0.05)  # amu


def test_openmm_forces_errors():
    _, system, pos = build_system("amber99sbildn", implicit_solvent=None, constraints="hbonds")
    prov = OpenMMForces(system, platform="Reference")
    assert prov.n_constraints == 12
    with pytest.raises(ValueError, match="constraints"):
        LangevinBAOAB(0.001).init_state(prov, torch.tensor(pos[None]))
    with pytest.raises(ValueError, match="platform"):
        OpenMMForces(system, platform="NoSuchPlatform")
    with pytest.raises(ValueError):
        prov.energy_and_forces(torch.zeros(1, 21, 3, dtype=torch.float64))
    with pytest.raises(TypeError):
        OpenMMForces("not a system")


def test_baoab_with_openmm_forces_thermalises_alanine():
    """Units check end to end (amu, nm, ps, kJ/mol, K): the kinetic temperature is ~300 K."""
    from sci_moe.sampling.md import temperature

    _, system, pos = build_system("amber99sbildn", implicit_solvent=None)
    prov = OpenMMForces(system, platform="Reference")
    integ = LangevinBAOAB(0.001, temperature_k=300.0, friction_per_ps=20.0)
    g = torch.Generator().manual_seed(0)
    state = integ.init_state(prov, torch.tensor(pos)[None].repeat(4, 1, 1), g)
    state = integ.step(state, prov, g, 150)
    temps = []
    for _ in range(30):
        state = integ.step(state, prov, g, 10)
        temps.append(temperature(state.velocities, prov.masses))
    assert 270 < float(torch.stack(temps).mean()) < 330
    assert np.isfinite(state.energy.numpy()).all()

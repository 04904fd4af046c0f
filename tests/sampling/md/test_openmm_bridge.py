"""A learned energy model driving OpenMM through PythonForce: forces, reporters, errors."""

import io

import numpy as np
import openmm
import openmm.app as app
import openmm.unit as u
import pytest
import torch

from sci_moe.sampling.md import ModelForces, OpenMMForces, alanine_dipeptide_pdb, build_system
from sci_moe.sampling.md.openmm_bridge import model_force, model_simulation, model_system


class ElasticNetwork(torch.nn.Module):
    """Harmonic springs between all atom pairs around a reference structure (kJ/mol, nm)."""

    def __init__(self, x0, k=200.0):
        super().__init__()
        self.register_buffer(
            "d0", torch.cdist(torch.as_tensor(x0)[None], torch.as_tensor(x0)[None])
        )
        self.k = k

    def forward(self, x):
        return 0.5 * self.k * ((torch.cdist(x, x) - self.d0) ** 2).sum((1, 2)) / 2


@pytest.fixture(scope="module")
def ala():
    pdb = app.PDBFile(str(alanine_dipeptide_pdb()))
    _, system, pos = build_system(implicit_solvent=None)
    masses = np.array([system.getParticleMass(i)._value for i in range(22)])
    return pdb.topology, masses, pos


def test_python_force_matches_model_forces(ala):
    _, masses, pos = ala
    model = ElasticNetwork(pos).double()
    rng = np.random.default_rng(0)
    walkers = torch.tensor(pos[None] + 0.01 * rng.standard_normal((4, 22, 3)))
    via_openmm = OpenMMForces(model_system(model, masses), platform="Reference")
    e1, f1 = via_openmm.energy_and_forces(walkers)
    e2, f2 = ModelForces(model, masses).energy_and_forces(walkers)
    torch.testing.assert_close(e1, e2, rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(f1, f2, rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(via_openmm.masses, torch.tensor(masses))


def test_model_force_adds_to_a_force_field_system(ala):
    """A learned correction on top of amber: total = amber + model."""
    _, _, pos = ala
    model = ElasticNetwork(pos).double()
    _, amber, _ = build_system(implicit_solvent=None)
    _, both, _ = build_system(implicit_solvent=None)
    both.addForce(model_force(model))
    x = torch.tensor(pos[None] + 0.01)
    ea, fa = OpenMMForces(amber, platform="Reference").energy_and_forces(x)
    eb, fb = OpenMMForces(both, platform="Reference").energy_and_forces(x)
    em, fm = ModelForces(model, np.ones(22)).energy_and_forces(x)
    torch.testing.assert_close(eb, ea + em)
    torch.testing.assert_close(fb, fa + fm)


def test_model_simulation_runs_with_reporters(ala):
    top, masses, pos = ala
    model = ElasticNetwork(pos).double()
    buf = io.StringIO()
    sim = model_simulation(model, top, masses, pos, temperature_k=300, timestep_fs=1.0, seed=1)
    sim.reporters.append(
        app.StateDataReporter(buf, 50, step=True, potentialEnergy=True, temperature=True)
    )
    sim.step(300)
    rows = [r.split(",") for r in buf.getvalue().strip().splitlines()[1:]]
    assert [int(r[0]) for r in rows] == list(range(50, 301, 50))
    temps = np.array([float(r[2]) for r in rows])
    assert np.isfinite(temps).all() and (temps > 50).all() and (temps < 1000).all()
    # same seed, same trajectory (Reference platform is deterministic)
    sim2 = model_simulation(model, top, masses, pos, temperature_k=300, timestep_fs=1.0, seed=1)
    sim2.step(300)
    p1 = sim.context.getState(getPositions=True).getPositions(asNumpy=True)
    p2 = sim2.context.getState(getPositions=True).getPositions(asNumpy=True)
    assert np.array_equal(p1.value_in_unit(u.nanometer), p2.value_in_unit(u.nanometer))


def test_non_finite_model_stops_the_simulation(ala):
    top, masses, pos = ala

    class Exploding(torch.nn.Module):
        def forward(self, x):
            return (x**2).sum((1, 2)) * float("nan")

    with pytest.raises(openmm.OpenMMException, match="non-finite energy"):
        sim = model_simulation(Exploding(), top, masses, pos)
        sim.step(2)


def test_bad_input(ala):
    top, masses, pos = ala
    model = ElasticNetwork(pos).double()
    with pytest.raises(ValueError, match="timestep"):
        model_simulation(model, top, masses, pos, timestep_fs=-1.0)
    with pytest.raises(ValueError, match="positions"):
        model_simulation(model, top, masses, pos[:5])
    with pytest.raises(ValueError, match="masses"):
        model_system(model, [1.0, -1.0])
    assert isinstance(model_force(model, particles=[0, 1]), openmm.PythonForce)

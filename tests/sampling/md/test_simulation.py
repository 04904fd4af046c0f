"""Run loop: exact resume after a crash between checkpoints, failure detection, time limits,
the OpenMM engine. (The hard-kill resume test runs the CLI: tests/cli/test_md_cli.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sci_moe.sampling.md import (
    DoubleWell,
    LangevinBAOAB,
    MuellerBrown,
    OverdampedEulerMaruyama,
    Potential,
    PotentialForces,
)
from sci_moe.sampling.md.checkpoint import load_checkpoint
from sci_moe.sampling.md.openmm_engine import OpenMMSimulation
from sci_moe.sampling.md.reporters import (
    CheckpointReporter,
    LogReporter,
    Reporter,
    TrajectoryReporter,
)
from sci_moe.sampling.md.simulation import Simulation, SimulationFailure


def _mb_sim(out, seed=1, walkers=3, integrator=None, ckpt=30, every=10, **kw):
    provider = PotentialForces(MuellerBrown(), torch.full((1,), 0.5))
    x0 = torch.tensor([[[-0.558, 1.442]]], dtype=torch.float64).repeat(walkers, 1, 1)
    reporters = [
        TrajectoryReporter(out / "traj.dcd", every),
        LogReporter(out / "log.csv", every),
        CheckpointReporter(out / "ckpt.pt", ckpt),
    ]
    integrator = integrator or LangevinBAOAB(0.005, kT=23.0)
    return Simulation(provider, integrator, x0, reporters, seed=seed, **kw)


def _frames(out, walkers=3):
    import mdtraj
    from openmm.app import PDBFile

    from sci_moe.sampling.md.reporters import dummy_topology, walker_paths

    top = out / "top.pdb"
    with open(top, "w") as fh:
        PDBFile.writeFile(dummy_topology(1), np.zeros((1, 3)), fh)
    return np.stack(
        [mdtraj.load(str(p), top=str(top)).xyz for p in walker_paths(out / "traj.dcd", walkers)]
    )


def _log(out):
    return [",".join(r.split(",")[:4]) for r in (out / "log.csv").read_text().splitlines()]


def test_chunking_does_not_change_the_trajectory(tmp_path):
    a = _mb_sim(tmp_path / "a")
    a.run(37)
    b = _mb_sim(tmp_path / "b")
    for n in (5, 1, 20, 11):
        b.run(n)
    assert a.current_step == b.current_step == 37
    assert torch.equal(a.state.positions, b.state.positions)
    assert torch.equal(a.state.velocities, b.state.velocities)


class Crash(Reporter):
    """Simulates a crash between checkpoints (after frames were written)."""

    def __init__(self, at):
        super().__init__(at)

    def report(self, simulation, snapshot):
        raise KeyboardInterrupt("crash")


def test_resume_after_crash_equals_uninterrupted(tmp_path):
    full = _mb_sim(tmp_path / "full")
    full.run(100)
    full.close()
    crashed = _mb_sim(tmp_path / "run")
    crashed.reporters.insert(0, Crash(75))  # last checkpoint at step 60, frames up to 70
    with pytest.raises(KeyboardInterrupt):
        crashed.run(100)
    assert _frames(tmp_path / "run").shape[1] == 7
    resumed = _mb_sim(tmp_path / "run", seed=99)  # the seed is replaced by the checkpoint
    resumed.load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert resumed.current_step == 60
    assert _frames(tmp_path / "run").shape[1] == 6  # frames after the checkpoint truncated
    resumed.run(40)
    resumed.close()
    np.testing.assert_array_equal(_frames(tmp_path / "run"), _frames(tmp_path / "full"))
    assert _log(tmp_path / "run") == _log(tmp_path / "full")


class _NaNAfter(Potential):
    """Harmonic, but the energy is NaN once x > 0.5 (a broken force field)."""

    def __init__(self):
        super().__init__(dim=1)

    def energy_per_particle(self, x):
        e = 0.5 * x[..., 0] ** 2
        return torch.where(x[..., 0] > 0.5, torch.full_like(e, float("nan")), e)


def test_nan_stops_with_step_and_keeps_checkpoint(tmp_path):
    provider = PotentialForces(_NaNAfter())
    x0 = torch.full((2, 1, 1), -1.0, dtype=torch.float64)
    # Nearly deterministic flight: almost no friction or noise, a large initial velocity.
    integ = LangevinBAOAB(0.01, kT=1e-6, friction_per_ps=1e-6)
    state = integ.init_state(
        provider, x0, velocities=torch.full((2, 1, 1), 20.0, dtype=torch.float64)
    )
    sim = Simulation(
        provider,
        integ,
        state,
        [LogReporter(tmp_path / "log.csv", 1), CheckpointReporter(tmp_path / "c.pt", 3)],
    )
    with pytest.raises(SimulationFailure) as info:
        sim.run(50)
    err = info.value
    # The first step whose energy is NaN, found by replaying the integrator alone.
    replay = integ.init_state(
        provider, x0, velocities=torch.full((2, 1, 1), 20.0, dtype=torch.float64)
    )
    step = None
    for n in range(1, 51):
        replay = integ.step(replay, provider)
        if not torch.isfinite(replay.energy).all():
            step = n
            break
    assert step is not None and step > 3
    assert err.step == step and "non-finite potential energy" in err.cause
    assert f"step {step}" in str(err) and "checkpoint" in str(err)
    assert err.checkpoint_step == (step - 1) // 3 * 3
    assert load_checkpoint(tmp_path / "c.pt")["step"] == err.checkpoint_step
    rows = (tmp_path / "log.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == list(range(1, step))  # no bad row


def test_energy_jump_detected(tmp_path):
    provider = PotentialForces(DoubleWell(dim=1, barrier=2.0))
    x0 = torch.full((1, 1, 1), -1.0, dtype=torch.float64)
    # A huge timestep with kT=1 blows the quartic well up within a few steps.
    sim = Simulation(provider, LangevinBAOAB(0.9, kT=1.0), x0, [], seed=0, energy_jump_kj_mol=50.0)
    with pytest.raises(SimulationFailure, match=r"jumped by .* \(threshold 50 kJ/mol\)") as info:
        sim.run(1000)
    assert info.value.step >= 1 and info.value.walker == 0


def test_max_hours_stops_after_checkpoint_and_resumes(tmp_path):
    sim = _mb_sim(tmp_path, ckpt=1000)
    res = sim.run(100, max_hours=1e-12)
    assert res.status == "time-limit" and res.final_step == 1
    assert load_checkpoint(tmp_path / "ckpt.pt")["step"] == 1
    sim.close()
    again = _mb_sim(tmp_path, ckpt=1000)
    again.load_checkpoint(tmp_path / "ckpt.pt")
    assert again.run(99).status == "completed" and again.current_step == 100
    full = _mb_sim(tmp_path / "full", ckpt=1000)
    full.run(100)
    assert torch.equal(full.state.positions, again.state.positions)


def test_overdamped_has_no_temperature(tmp_path):
    integ = OverdampedEulerMaruyama(0.001, kT=23.0)
    sim = _mb_sim(tmp_path, integrator=integ)
    sim.run(20)
    sim.close()
    snap = sim.snapshot()
    assert snap.temperature is None and snap.velocities is None
    assert _log(tmp_path)[1].split(",")[3] == ""


def test_bad_arguments():
    provider = PotentialForces(DoubleWell(dim=1))
    x0 = torch.zeros(1, 1, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="check_interval"):
        Simulation(provider, LangevinBAOAB(0.01, kT=1.0), x0, check_interval=0)
    with pytest.raises(ValueError, match=r"\(W, N, D\)"):
        Simulation(provider, LangevinBAOAB(0.01, kT=1.0), torch.zeros(1, 1))
    sim = Simulation(provider, LangevinBAOAB(0.01, kT=1.0), x0)
    with pytest.raises(ValueError, match="n_steps"):
        sim.run(-1)
    with pytest.raises(ValueError, match="max_hours"):
        sim.run(1, max_hours=-1)


def test_temperature_of_langevin_walkers(tmp_path):
    # 2-D harmonic-in-y double well: equipartition gives T = kT / kB on average.
    provider = PotentialForces(DoubleWell(dim=2), torch.ones(1))
    x0 = torch.tensor([[[-1.0, 0.0]]], dtype=torch.float64).repeat(256, 1, 1)
    sim = Simulation(provider, LangevinBAOAB(0.01, kT=1.0, friction_per_ps=5.0), x0, seed=3)
    sim.run(200)
    t = sim.snapshot().temperature
    assert abs(t.mean() * 0.00831446261815324 - 1.0) < 0.15


def test_openmm_engine_resume_is_exact(tmp_path):
    from sci_moe.sampling.md import build_system

    top, system, pos = build_system(implicit_solvent=None)

    def make(out):
        reps = [
            TrajectoryReporter(out / "traj.dcd", 25, top),
            LogReporter(out / "log.csv", 25),
            CheckpointReporter(out / "ckpt.pt", 50),
        ]
        return OpenMMSimulation(
            system,
            pos,
            reps,
            topology=top,
            timestep_ps=0.001,
            seed=2,
            deterministic=True,
            minimize=False,
        )

    full = make(tmp_path / "full")
    full.run(150)
    full.close()
    run = make(tmp_path / "run")
    run.reporters.insert(0, Crash(125))
    with pytest.raises(KeyboardInterrupt):
        run.run(150)
    resumed = make(tmp_path / "run")
    resumed.load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert resumed.current_step == 100
    resumed.run(50)
    resumed.close()
    import mdtraj

    pdb = tmp_path / "top.pdb"
    from openmm.app import PDBFile

    with open(pdb, "w") as fh:
        PDBFile.writeFile(top, pos * 10, fh)
    a = mdtraj.load(str(tmp_path / "full" / "traj.dcd"), top=str(pdb)).xyz
    b = mdtraj.load(str(tmp_path / "run" / "traj.dcd"), top=str(pdb)).xyz
    assert a.shape == (6, 22, 3)
    np.testing.assert_array_equal(a, b)
    assert _log(tmp_path / "run") == _log(tmp_path / "full")
    temps = [float(r.split(",")[3]) for r in _log(tmp_path / "full")[1:]]
    assert all(50 < t < 700 for t in temps)


def test_openmm_engine_explosion_is_caught():
    from sci_moe.sampling.md import build_system

    _, system, pos = build_system(implicit_solvent=None)
    sim = OpenMMSimulation(system, pos, timestep_ps=0.05, minimize=False, seed=0)
    with pytest.raises(SimulationFailure, match="MD stopped at step") as info:
        sim.run(2000)
    assert info.value.step <= 2000 and info.value.checkpoint_step is None


def test_resume_from_checkpoint_before_the_first_frame(tmp_path):
    full = _mb_sim(tmp_path / "full", ckpt=7)
    full.run(30)
    full.close()
    run = _mb_sim(tmp_path / "run", ckpt=7)
    run.reporters.insert(0, Crash(12))  # checkpoint at 7 (no frame yet), frame at 10, crash
    with pytest.raises(KeyboardInterrupt):
        run.run(30)
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["step"] == 7
    resumed = _mb_sim(tmp_path / "run", ckpt=7)
    resumed.load_checkpoint(tmp_path / "run" / "ckpt.pt")
    resumed.run(23)
    resumed.close()
    np.testing.assert_array_equal(_frames(tmp_path / "run"), _frames(tmp_path / "full"))
    assert _log(tmp_path / "run") == _log(tmp_path / "full")

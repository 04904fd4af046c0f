"""OpenMM's own integrator behind the run API of :mod:`sci_moe.sampling.md.simulation`.

:class:`OpenMMSimulation` runs ``openmm.LangevinMiddleIntegrator`` on an ``openmm.System``
(a force field, or a learned model through
:func:`~sci_moe.sampling.md.openmm_bridge.model_system`) with this package's reporters,
stability checks, atomic checkpoints (OpenMM's binary context checkpoint inside) and exact
resume, like :class:`~sci_moe.sampling.md.simulation.Simulation` does for the torch
integrators.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .reporters import Snapshot
from .simulation import KB_KJ_PER_MOL_K, _RunLoop

__all__ = ["OpenMMSimulation"]


class OpenMMSimulation(_RunLoop):
    """OpenMM's ``LangevinMiddleIntegrator`` on an ``openmm.System``, with this package's
    reporters, checks and checkpoints (one walker).

    Parameters
    ----------
    system : openmm.System
    positions : array_like, shape (N, 3)
        Initial positions, nm.
    reporters : sequence of Reporter
    topology : openmm.app.Topology, optional
    timestep_ps, temperature_k, friction_per_ps : float
        Integrator parameters (ps, K, 1/ps).
    seed : int
        Seeds the integrator's random numbers and the initial velocities.
    platform : str
        OpenMM platform (default ``"CPU"``).
    deterministic : bool
        ``DeterministicForces=true`` (and one thread on CPU): bitwise reproducible runs and
        resumes.
    minimize : bool
        Minimise the energy before drawing velocities (fresh starts only).
    check_interval, energy_jump_kj_mol, metadata
        As for :class:`Simulation`; default ``check_interval`` 50, since reading the energy
        costs OpenMM an extra force evaluation (its CPU platform also stops on NaN
        coordinates at every force evaluation; the message then names the step range).
    """

    engine = "openmm"

    def __init__(
        self,
        system,
        positions,
        reporters=(),
        *,
        topology=None,
        timestep_ps: float = 0.002,
        temperature_k: float = 300.0,
        friction_per_ps: float = 1.0,
        seed: int = 0,
        platform: str = "CPU",
        deterministic: bool = False,
        minimize: bool = True,
        check_interval: int = 50,
        energy_jump_kj_mol: float | None = 1.0e4,
        metadata: dict | None = None,
    ):
        import openmm
        from openmm import unit

        if not timestep_ps > 0 or not temperature_k > 0 or not friction_per_ps >= 0:
            raise ValueError(
                "timestep and temperature must be positive and friction non-negative, got "
                f"{timestep_ps} ps, {temperature_k} K, {friction_per_ps} /ps"
            )
        positions = np.asarray(positions, dtype=np.float64)
        n = system.getNumParticles()
        if positions.shape != (n, 3):
            raise ValueError(f"positions must have shape ({n}, 3), got {positions.shape}")
        self.system, self.topology = system, topology
        self.timestep_ps = float(timestep_ps)
        self.temperature_k = float(temperature_k)
        self.integrator = openmm.LangevinMiddleIntegrator(
            temperature_k * unit.kelvin, friction_per_ps / unit.picosecond, timestep_ps
        )
        # OpenMM treats seed 0 as "pick one at random".
        self.integrator.setRandomNumberSeed(int(seed) % 2_147_483_646 + 1)
        try:
            plat = openmm.Platform.getPlatformByName(platform)
        except Exception:
            names = [
                openmm.Platform.getPlatform(i).getName()
                for i in range(openmm.Platform.getNumPlatforms())
            ]
            raise ValueError(f"unknown OpenMM platform {platform!r}; available: {names}") from None
        # DeterministicForces alone is not bitwise reproducible on the CPU platform with
        # implicit solvent (checked, OpenMM 8.6.1); one thread is.
        props = {}
        names = plat.getPropertyNames()
        if deterministic and "DeterministicForces" in names:
            props["DeterministicForces"] = "true"
        if deterministic and "Threads" in names:
            props["Threads"] = "1"
        self.context = openmm.Context(system, self.integrator, plat, props)
        self.context.setPositions(positions)
        if minimize:
            openmm.LocalEnergyMinimizer.minimize(self.context, 10.0, 500)
        self.context.setVelocitiesToTemperature(temperature_k, int(seed) % 2_147_483_646 + 1)
        self.current_step = 0
        self.n_walkers, self.n_particles, self.dim = 1, n, 3
        self._masses = np.array(
            [system.getParticleMass(i).value_in_unit(unit.dalton) for i in range(n)]
        )
        dof = 3 * int((self._masses > 0).sum()) - system.getNumConstraints()
        if any(isinstance(f, openmm.CMMotionRemover) for f in system.getForces()):
            dof -= 3
        self.n_dof = dof
        self._init_loop(reporters, check_interval, energy_jump_kj_mol, metadata)

    def _advance(self, n: int) -> None:
        import openmm

        try:
            self.integrator.step(n)
        except openmm.OpenMMException as err:
            self.current_step += n
            self._fail(
                self.current_step,
                f"OpenMM error between steps {self.current_step - n} and "
                f"{self.current_step}: {str(err).splitlines()[0]}",
                0,
            )
        self.current_step += n

    def _get(self, positions: bool, velocities: bool, energy: bool):
        from openmm import unit

        st = self.context.getState(
            getPositions=positions, getVelocities=velocities, getEnergy=energy
        )
        nm, kj = unit.nanometer, unit.kilojoule_per_mole
        pos = (
            np.asarray(st.getPositions(asNumpy=True).value_in_unit(nm))[None] if positions else None
        )
        vel = (
            np.asarray(st.getVelocities(asNumpy=True).value_in_unit(nm / unit.picosecond))[None]
            if velocities
            else None
        )
        pe = np.array([st.getPotentialEnergy().value_in_unit(kj)]) if energy else None
        ke = np.array([st.getKineticEnergy().value_in_unit(kj)]) if energy else None
        return pos, vel, pe, ke

    def _check_state(self):
        pos, _, pe, _ = self._get(True, False, True)
        return pos, pe, None

    def snapshot(self, include=frozenset({"positions", "velocities", "energy", "temperature"})):
        need_e = bool({"energy", "temperature"} & include)
        pos, vel, pe, ke = self._get("positions" in include, "velocities" in include, need_e)
        snap = Snapshot(self.current_step, self.time_ps, positions=pos, velocities=vel)
        if need_e:
            # OpenMM's kinetic energy is corrected for the leapfrog half-step offset.
            snap.potential_energy, snap.kinetic_energy = pe, ke
            snap.temperature = 2.0 * ke / (self.n_dof * KB_KJ_PER_MOL_K)
        return snap

    def _engine_state(self) -> dict[str, Any]:
        blob = self.context.createCheckpoint()
        return {"openmm_checkpoint": torch.frombuffer(bytearray(blob), dtype=torch.uint8)}

    def _load_engine_state(self, state: dict[str, Any]) -> None:
        self.context.loadCheckpoint(state["openmm_checkpoint"].numpy().tobytes())

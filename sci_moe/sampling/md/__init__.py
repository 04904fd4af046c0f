"""Molecular dynamics: potentials, force providers, integrators, the run loop and reporters.

The engine (:mod:`.potentials`, :mod:`.forces`, :mod:`.integrators`, :mod:`.openmm_bridge`)
computes energies and forces and advances walkers; the run layer (:mod:`.simulation`,
:mod:`.openmm_engine`, :mod:`.reporters`, :mod:`.checkpoint`, :mod:`.config`,
:mod:`.systems`, :mod:`.analysis`) runs them with OpenMM-style reporters, atomic checkpoints
and exact resume, and is what ``sci-moe md run`` / ``sci-moe md analyse`` use.

Positions are tensors of shape ``(W, N, D)``: ``W`` independent walkers, ``N`` particles,
``D`` spatial dimensions, in OpenMM units (nm, ps, amu, kJ/mol, K).
"""

from . import analysis, checkpoint, config, openmm_engine, reporters, simulation, systems
from .config import MDConfig
from .forces import ForceProvider, ModelForces, OpenMMForces, PotentialForces
from .integrators import (
    KB_KJ_PER_MOL_K,
    LangevinBAOAB,
    MDState,
    OverdampedEulerMaruyama,
    baoab_steps,
    kinetic_energy,
    temperature,
)
from .openmm_bridge import ModelComputation, model_force, model_simulation, model_system
from .openmm_engine import OpenMMSimulation
from .potentials import (
    DoubleWell,
    GaussianMixturePotential,
    MuellerBrown,
    Potential,
    autograd_energy_and_forces,
    check_positions,
)
from .reporters import (
    CheckpointReporter,
    LogReporter,
    ProgressReporter,
    Reporter,
    ReportRequest,
    Snapshot,
    TrajectoryReporter,
    TrajectoryWriter,
    register_trajectory_writer,
    trajectory_writers,
)
from .simulation import RunResult, Simulation, SimulationFailure

__all__ = [
    "KB_KJ_PER_MOL_K",
    "CheckpointReporter",
    "DoubleWell",
    "ForceProvider",
    "GaussianMixturePotential",
    "LangevinBAOAB",
    "LogReporter",
    "MDConfig",
    "MDState",
    "ModelComputation",
    "ModelForces",
    "MuellerBrown",
    "OpenMMForces",
    "OpenMMSimulation",
    "OverdampedEulerMaruyama",
    "Potential",
    "PotentialForces",
    "ProgressReporter",
    "ReportRequest",
    "Reporter",
    "RunResult",
    "Simulation",
    "SimulationFailure",
    "Snapshot",
    "TrajectoryReporter",
    "TrajectoryWriter",
    "analysis",
    "autograd_energy_and_forces",
    "baoab_steps",
    "check_positions",
    "checkpoint",
    "config",
    "kinetic_energy",
    "register_trajectory_writer",
    "model_force",
    "model_simulation",
    "model_system",
    "openmm_engine",
    "reporters",
    "simulation",
    "systems",
    "temperature",
    "trajectory_writers",
]

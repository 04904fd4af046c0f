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
from .alanine import (
    ALANINE_ATOM_SETS,
    ALANINE_ATOMS,
    ALANINE_BONDS,
    ATOM_NAMES,
    BACKBONE_ATOMS,
    HEAVY_ATOMS,
    PHI_ATOMS,
    PSI_ATOMS,
    alanine_dipeptide_pdb,
    alanine_phi_psi,
    build_system,
    phi_psi,
)
from .analysis import analyse_run
from .checkpoint import load_checkpoint, save_checkpoint
from .config import MDConfig, load_config_file, resolve_config, write_config
from .dihedrals import dihedrals
from .forcefields import FORCEFIELDS, IMPLICIT_SOLVENTS, create_system, forcefield_files
from .forces import ForceProvider, ModelForces, OpenMMForces, PotentialForces
from .gaussian_mixture import GaussianMixturePotential
from .histograms import angle_counts, angle_histogram, js_divergence, pmf_error
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
    MuellerBrown,
    Potential,
    autograd_energy_and_forces,
    check_positions,
)
from .reference import reference_histogram, shipped_reference
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
from .shipped import shipped_file, shipped_files
from .simulation import RunResult, Simulation, SimulationFailure
from .systems import build_md_system, default_model_path, register_model_loader

__all__ = [
    "ALANINE_ATOMS",
    "ALANINE_ATOM_SETS",
    "ALANINE_BONDS",
    "ATOM_NAMES",
    "BACKBONE_ATOMS",
    "FORCEFIELDS",
    "HEAVY_ATOMS",
    "IMPLICIT_SOLVENTS",
    "KB_KJ_PER_MOL_K",
    "PHI_ATOMS",
    "PSI_ATOMS",
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
    "alanine_dipeptide_pdb",
    "alanine_phi_psi",
    "analyse_run",
    "analysis",
    "angle_counts",
    "angle_histogram",
    "autograd_energy_and_forces",
    "baoab_steps",
    "build_md_system",
    "build_system",
    "check_positions",
    "checkpoint",
    "config",
    "create_system",
    "default_model_path",
    "dihedrals",
    "forcefield_files",
    "js_divergence",
    "kinetic_energy",
    "load_checkpoint",
    "load_config_file",
    "model_force",
    "model_simulation",
    "model_system",
    "openmm_engine",
    "phi_psi",
    "pmf_error",
    "reference_histogram",
    "register_model_loader",
    "register_trajectory_writer",
    "reporters",
    "resolve_config",
    "save_checkpoint",
    "shipped_file",
    "shipped_files",
    "shipped_reference",
    "simulation",
    "systems",
    "temperature",
    "trajectory_writers",
    "write_config",
]

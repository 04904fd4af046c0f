"""Molecular dynamics engine: analytic potentials, force providers and torch integrators.

Positions are tensors of shape ``(W, N, D)``: ``W`` independent walkers, ``N`` particles,
``D`` spatial dimensions, in OpenMM units (nm, ps, amu, kJ/mol, K).
"""

from .forces import ForceProvider, ModelForces, OpenMMForces, PotentialForces
from .integrators import (
    KB_KJ_PER_MOL_K,
    LangevinBAOAB,
    MDState,
    OverdampedEulerMaruyama,
    kinetic_energy,
    temperature,
)
from .openmm_bridge import ModelComputation, model_force, model_simulation, model_system
from .potentials import (
    DoubleWell,
    GaussianMixturePotential,
    MuellerBrown,
    Potential,
    autograd_energy_and_forces,
    check_positions,
)

__all__ = [
    "KB_KJ_PER_MOL_K",
    "DoubleWell",
    "ForceProvider",
    "GaussianMixturePotential",
    "LangevinBAOAB",
    "MDState",
    "ModelComputation",
    "ModelForces",
    "MuellerBrown",
    "OpenMMForces",
    "OverdampedEulerMaruyama",
    "Potential",
    "PotentialForces",
    "autograd_energy_and_forces",
    "check_positions",
    "kinetic_energy",
    "model_force",
    "model_simulation",
    "model_system",
    "temperature",
]

"""Force providers: one interface for analytic potentials, learned models and OpenMM systems.

A :class:`ForceProvider` maps walker positions of shape ``(W, N, D)`` to energies ``(W,)``
in kJ/mol and forces ``(W, N, D)`` in kJ/mol/nm (reduced units for toy potentials) and
knows the particle masses ``(N,)`` in amu. The torch integrators in
:mod:`sci_moe.sampling.md.integrators` accept any provider.
"""

from __future__ import annotations

import abc

import numpy as np
import torch
from torch import Tensor

from ..._util import CompiledOrEager
from .potentials import Potential, autograd_energy_and_forces, check_positions

__all__ = [
    "ForceProvider",
    "ModelForces",
    "OpenMMForces",
    "PotentialForces",
]


def _as_masses(masses: Tensor | np.ndarray | list | None, n: int | None) -> Tensor:
    if masses is None:
        if n is None:
            raise ValueError("give masses (amu), shape (N,)")
        return torch.ones(n, dtype=torch.float64)
    m = torch.as_tensor(np.asarray(masses, dtype=np.float64))
    if m.ndim != 1 or (n is not None and m.shape[0] != n):
        raise ValueError(f"masses must have shape (N,) = ({n},), got {tuple(m.shape)}")
    if not bool((m > 0).all()) or not bool(torch.isfinite(m).all()):
        raise ValueError("masses must be positive and finite (massless/virtual sites unsupported)")
    return m


class ForceProvider(abc.ABC):
    """Energies and forces of ``W`` walkers at once.

    The integrators update their position tensor in place between calls, so a provider
    must not keep a reference to ``positions`` (copy what it wants to remember).

    Attributes
    ----------
    masses : Tensor, shape (N,)
        Particle masses in amu (float64).
    n_constraints : int
        Holonomic constraints of the underlying system; the torch integrators need 0.
    """

    masses: Tensor
    n_constraints: int = 0

    @property
    def n_particles(self) -> int:
        """Number of particles ``N``."""
        return int(self.masses.shape[0])

    dim: int | None = None

    def check(self, positions: Tensor) -> None:
        """Raise ``ValueError`` unless ``positions`` has shape ``(W, N, D)`` and is finite."""
        check_positions(positions, self.n_particles, self.dim)

    @abc.abstractmethod
    def energy_and_forces(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Energies and forces.

        Parameters
        ----------
        positions : Tensor, shape (W, N, D)
            nm (or reduced units).

        Returns
        -------
        energy : Tensor, shape (W,)
            kJ/mol.
        forces : Tensor, shape (W, N, D)
            kJ/mol/nm, :math:`-\\partial E/\\partial x`.
        """

    def __call__(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        return self.energy_and_forces(positions)


class PotentialForces(ForceProvider):
    """Forces of a :class:`~sci_moe.sampling.md.potentials.Potential` (analytic or autograd).

    Parameters
    ----------
    potential : Potential
    masses : array-like, shape (N,), optional
        Default: all ones.
    """

    def __init__(self, potential: Potential, masses: Tensor | np.ndarray | None = None) -> None:
        if not isinstance(potential, Potential):
            raise TypeError(f"potential must be a Potential, got {type(potential).__name__}")
        self.potential = potential
        self.dim = potential.dim
        self.masses = _as_masses(masses, potential.n_particles)

    def energy_and_forces(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        return self.potential.energy_and_forces(positions)


class ModelForces(ForceProvider):
    """Forces :math:`F = -\\nabla_x E_\\theta(x)` of a learned energy model, batched over walkers.

    Parameters
    ----------
    energy_model : torch.nn.Module
        Maps positions ``(W, N, D)`` (nm) to energies ``(W,)`` (kJ/mol).
    masses : array-like, shape (N,)
        amu.
    dim : int
        ``D`` (3 for molecules).
    check_inputs : bool
        Validate shapes and finiteness of the positions on every call.
    compile : bool
        Energy and forces from one ``torch.func.grad_and_value`` of the model,
        ``torch.compile``-d (a small model at a few hundred walkers is per-op overhead
        on a CPU: ~2x fewer microseconds per call, measured in
        ``benchmarks/energy_diffusion/speed.py``; compiling costs CPU-seconds, and one
        graph per walker count). Equal to the autograd forces to float rounding; if
        compiling fails, a warning is given and autograd is used.
    """

    def __init__(
        self,
        energy_model: torch.nn.Module,
        masses: Tensor | np.ndarray,
        dim: int = 3,
        check_inputs: bool = True,
        compile: bool = False,
    ) -> None:
        if not callable(energy_model):
            raise TypeError("energy_model must be a callable torch.nn.Module")
        self.model = energy_model
        self.masses = _as_masses(masses, None)
        self.dim = int(dim)
        self.check_inputs = check_inputs
        self._compiled = (
            CompiledOrEager(
                self._functional,
                lambda x: autograd_energy_and_forces(self.model, x),
                "the model forces",
                "autograd",
            )
            if compile
            else None
        )

    def _functional(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        def total(x):
            e = self.model(x)
            return e.sum(), e

        g, (_, e) = torch.func.grad_and_value(total, has_aux=True)(positions)
        return e, -g

    def energy_and_forces(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        if self.check_inputs:
            self.check(positions)
        if self._compiled is None or self._compiled.failed:
            return autograd_energy_and_forces(self.model, positions)
        e, f = self._compiled(positions.detach())
        if e.shape != positions.shape[:1]:
            raise ValueError(
                f"the energy model must return shape (W,) = ({positions.shape[0]},), "
                f"got {tuple(e.shape)}"
            )
        return e.detach(), f.detach()


class OpenMMForces(ForceProvider):
    """Energies and forces of an OpenMM ``System``, one walker after another in one Context.

    Parameters
    ----------
    system : openmm.System
    platform : str
        OpenMM platform name (``"CPU"``, ``"Reference"``, ``"CUDA"``).
    properties : dict, optional
        Platform properties, e.g. ``{"Threads": "1"}`` or ``{"DeterministicForces": "true"}``.
    n_contexts : int
        Contexts to cycle through (only useful with several devices); 1 by default.

    Notes
    -----
    Masses come from the system (amu). Positions are converted to float64 numpy per walker,
    so this costs a host round trip per walker; for many walkers of a learned model use
    :class:`ModelForces` instead.
    """

    dim = 3

    def __init__(
        self,
        system,
        platform: str = "CPU",
        properties: dict[str, str] | None = None,
        n_contexts: int = 1,
    ) -> None:
        import openmm

        if not isinstance(system, openmm.System):
            raise TypeError(f"system must be an openmm.System, got {type(system).__name__}")
        n = system.getNumParticles()
        mass = [system.getParticleMass(i).value_in_unit(openmm.unit.dalton) for i in range(n)]
        self.masses = _as_masses(mass, n)
        self.n_constraints = system.getNumConstraints()
        self.system = system
        try:
            plat = openmm.Platform.getPlatformByName(platform)
        except Exception as err:  # OpenMMException
            names = [
                openmm.Platform.getPlatform(i).getName()
                for i in range(openmm.Platform.getNumPlatforms())
            ]
            raise ValueError(f"unknown OpenMM platform {platform!r}; available: {names}") from err
        self.contexts = []
        for _ in range(max(1, int(n_contexts))):
            integ = openmm.VerletIntegrator(0.001)
            ctx = openmm.Context(system, integ, plat, dict(properties or {}))
            self.contexts.append((ctx, integ))
        self.platform = platform

    def energy_and_forces(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        import openmm.unit as u

        self.check(positions)
        pos = positions.detach().to("cpu", torch.float64).numpy()
        w = pos.shape[0]
        energy = np.empty(w)
        forces = np.empty_like(pos)
        for i in range(w):
            ctx = self.contexts[i % len(self.contexts)][0]
            ctx.setPositions(pos[i])
            st = ctx.getState(getEnergy=True, getForces=True)
            energy[i] = st.getPotentialEnergy().value_in_unit(u.kilojoule_per_mole)
            forces[i] = st.getForces(asNumpy=True).value_in_unit(u.kilojoule_per_mole / u.nanometer)
        return (
            torch.from_numpy(energy).to(positions.device, positions.dtype),
            torch.from_numpy(forces).to(positions.device, positions.dtype),
        )

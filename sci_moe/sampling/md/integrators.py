"""Stochastic integrators in torch for many independent walkers at once.

:class:`LangevinBAOAB` (Leimkuhler & Matthews, Appl. Math. Res. Express 2013, 34) samples
the Boltzmann distribution :math:`\\propto e^{-E(x)/k_BT}` with a configurational bias of
order :math:`\\Delta t^2` that is very small in practice; :class:`OverdampedEulerMaruyama`
is the Brownian (overdamped Langevin) limit. Units are OpenMM's: nm, ps, amu, kJ/mol, K
(``kB = 0.00831446261815324`` kJ/mol/K). Toy potentials in reduced units pass ``kT``
directly. All randomness comes from the ``torch.Generator`` passed in, so checkpointing
the generator state (``generator.get_state()``) with an :class:`MDState` gives exact resume.

:func:`baoab_steps` is the one BAOAB update of sci-moe: :class:`LangevinBAOAB` runs it on
MD states, and the tempering kernel :class:`sci_moe.sampling.tempering.BAOAB` runs it on
flat chains with per-chain timesteps and temperatures ``1/beta`` (reduced units).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from ..._util import BOLTZMANN_KJ_PER_MOL_K
from .forces import ForceProvider

__all__ = [
    "KB_KJ_PER_MOL_K",
    "LangevinBAOAB",
    "MDState",
    "OverdampedEulerMaruyama",
    "baoab_steps",
    "kinetic_energy",
    "temperature",
]

KB_KJ_PER_MOL_K = BOLTZMANN_KJ_PER_MOL_K
"""Boltzmann constant in kJ/mol/K (OpenMM's value); alias of
``sci_moe._util.BOLTZMANN_KJ_PER_MOL_K``."""


@dataclass
class MDState:
    """State of ``W`` walkers.

    Attributes
    ----------
    positions : Tensor, shape (W, N, D)
        nm.
    velocities : Tensor, shape (W, N, D)
        nm/ps (zeros for overdamped dynamics).
    forces : Tensor, shape (W, N, D)
        kJ/mol/nm at ``positions``.
    energy : Tensor, shape (W,)
        Potential energy, kJ/mol, at ``positions``.
    step : int
        Integration steps taken.
    """

    positions: Tensor
    velocities: Tensor
    forces: Tensor
    energy: Tensor
    step: int = 0

    def state_dict(self) -> dict:
        """Plain dict of tensors and ints (loadable with ``torch.load(weights_only=True)``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_state_dict(cls, d: dict) -> MDState:
        """Inverse of :meth:`state_dict`."""
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    def clone(self) -> MDState:
        """Deep copy."""
        return MDState(
            self.positions.clone(),
            self.velocities.clone(),
            self.forces.clone(),
            self.energy.clone(),
            self.step,
        )


def kinetic_energy(velocities: Tensor, masses: Tensor) -> Tensor:
    """Kinetic energy per walker, kJ/mol, shape ``(W,)``; velocities nm/ps, masses amu."""
    m = masses.to(velocities.dtype).to(velocities.device)
    return 0.5 * (m[None, :, None] * velocities**2).sum((1, 2))


def temperature(velocities: Tensor, masses: Tensor, n_constraints: int = 0) -> Tensor:
    """Instantaneous temperature per walker, K: :math:`2 E_{kin} / (n_{dof} k_B)`.

    ``n_dof = N * D - n_constraints`` (no centre-of-mass removal in these integrators).
    """
    n_dof = velocities.shape[1] * velocities.shape[2] - n_constraints
    return 2 * kinetic_energy(velocities, masses) / (n_dof * KB_KJ_PER_MOL_K)


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return v


class _Integrator:
    """Shared parameter handling: timestep, temperature or kT, friction."""

    def __init__(
        self,
        timestep_ps: float,
        temperature_k: float | Tensor = 300.0,
        friction_per_ps: float = 1.0,
        kT: float | Tensor | None = None,
    ) -> None:
        self.timestep_ps = _positive("timestep_ps", timestep_ps)
        self.friction_per_ps = _positive("friction_per_ps", friction_per_ps)
        if kT is None:
            t = torch.as_tensor(temperature_k, dtype=torch.float64)
            if not bool((t > 0).all()) or not bool(torch.isfinite(t).all()) or t.ndim > 1:
                raise ValueError(
                    f"temperature_k must be a positive float or a (W,) tensor, got {temperature_k}"
                )
            self._kT = t * KB_KJ_PER_MOL_K
        else:
            t = torch.as_tensor(kT, dtype=torch.float64)
            if not bool((t > 0).all()) or not bool(torch.isfinite(t).all()) or t.ndim > 1:
                raise ValueError(f"kT must be a positive energy or a (W,) tensor, got {kT}")
            self._kT = t

    @property
    def kT(self) -> Tensor:
        """Thermal energy (kJ/mol or reduced units), scalar or per walker ``(W,)``."""
        return self._kT

    @property
    def temperature_k(self) -> Tensor:
        """Temperature in K (``kT / kB``)."""
        return self._kT / KB_KJ_PER_MOL_K

    def _kT_like(self, x: Tensor) -> Tensor:
        kt = self._kT.to(device=x.device, dtype=x.dtype)
        if kt.ndim == 1:
            if kt.shape[0] != x.shape[0]:
                raise ValueError(f"{kt.shape[0]} per-walker temperatures for {x.shape[0]} walkers")
            return kt[:, None, None]
        return kt

    @staticmethod
    def _check_provider(provider: ForceProvider) -> None:
        if getattr(provider, "n_constraints", 0):
            raise ValueError(
                "the torch integrators do not apply constraints; build the OpenMM system with "
                "constraints=None (or use OpenMM's own integrators for constrained systems)"
            )

    @staticmethod
    def _check_steps(n_steps: int) -> int:
        if int(n_steps) != n_steps or n_steps < 0:
            raise ValueError(f"n_steps must be a non-negative integer, got {n_steps}")
        return int(n_steps)

    def _noise(self, like: Tensor, generator: torch.Generator | None) -> Tensor:
        return torch.randn(like.shape, dtype=like.dtype, device=like.device, generator=generator)


def baoab_steps(
    x: Tensor,
    v: Tensor,
    forces: Tensor,
    energy: Tensor,
    energy_and_forces: Callable[[Tensor], tuple[Tensor, Tensor]],
    n_steps: int,
    *,
    timestep: float | Tensor,
    kT: float | Tensor,
    inv_mass: float | Tensor,
    friction: float,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""``n_steps`` BAOAB steps (Leimkuhler & Matthews 2013), **in place** on ``x`` and ``v``.

    .. math::

        v \leftarrow v + \tfrac h2 F(x)/m;\quad x \leftarrow x + \tfrac h2 v;\quad
        v \leftarrow c\,v + \sqrt{(1-c^2)\,k_BT/m}\;\xi;\quad x \leftarrow x + \tfrac h2 v;
        \quad v \leftarrow v + \tfrac h2 F(x)/m,\qquad c = e^{-\gamma h},

    one force evaluation per step (the last B's forces are returned for the next call).

    Parameters
    ----------
    x, v : Tensor, same shape, e.g. (W, N, D) or (B, d)
        Positions and velocities; overwritten (pass clones to keep the originals).
    forces : Tensor, shape of ``x``
        :math:`F(x) = -\nabla E(x)` at the input positions.
    energy : Tensor
        Whatever ``energy_and_forces`` returned with ``forces`` (returned if ``n_steps == 0``).
    energy_and_forces : callable, ``x -> (energy, forces)``
        Forces in energy per length (or :math:`\nabla \log p` in reduced units, with
        ``kT = 1/beta``).
    n_steps : int
    timestep : float or Tensor broadcastable to ``x``
        :math:`h` (ps); a tensor, e.g. shape (B, 1), gives per-walker timesteps.
    kT : float or Tensor broadcastable to ``x``
        Thermal energy in the unit of the energy, per walker if a tensor.
    inv_mass : float or Tensor broadcastable to ``x``
        :math:`1/m` (1/amu).
    friction : float
        :math:`\gamma` (1/ps), >= 0.
    generator : torch.Generator, optional
        Source of the O-step noise (one standard normal per coordinate and step).

    Returns
    -------
    (x, v, energy, forces)
    """
    if isinstance(timestep, Tensor):
        half = 0.5 * timestep
        c = torch.exp(-friction * timestep)
    else:
        half = 0.5 * timestep
        c = math.exp(-friction * timestep)
    kick = half * inv_mass
    noise_scale = torch.sqrt((1 - c * c) * kT * inv_mass)
    noise = torch.empty_like(v)
    f, e = forces, energy
    for _ in range(n_steps):
        v.addcmul_(f, kick)  # B
        if isinstance(half, Tensor):
            x.addcmul_(v, half)  # A
        else:
            x.add_(v, alpha=half)
        v.mul_(c).addcmul_(noise.normal_(generator=generator), noise_scale)  # O
        if isinstance(half, Tensor):
            x.addcmul_(v, half)  # A
        else:
            x.add_(v, alpha=half)
        e, f = energy_and_forces(x)
        v.addcmul_(f, kick)  # B
    return x, v, e, f


class LangevinBAOAB(_Integrator):
    """Langevin dynamics with the BAOAB splitting (Leimkuhler & Matthews 2013).

    One step of length :math:`h`:

    .. math::

        v &\\leftarrow v + \\tfrac{h}{2} F(x)/m \\quad (B) \\\\
        x &\\leftarrow x + \\tfrac{h}{2} v \\quad (A) \\\\
        v &\\leftarrow c\\,v + \\sqrt{(1 - c^2) k_BT/m}\\,\\xi,\\quad c = e^{-\\gamma h}
            \\quad (O) \\\\
        x &\\leftarrow x + \\tfrac{h}{2} v \\quad (A) \\\\
        v &\\leftarrow v + \\tfrac{h}{2} F(x)/m \\quad (B)

    with one force evaluation per step (the last B's forces are reused by the next step).

    Parameters
    ----------
    timestep_ps : float
        ``h`` in ps (reduced time units for toys).
    temperature_k : float or Tensor of shape (W,)
        K; per-walker temperatures are allowed (e.g. for tempering).
    friction_per_ps : float
        :math:`\\gamma`, 1/ps.
    kT : float or Tensor of shape (W,), optional
        Thermal energy in the potential's units; overrides ``temperature_k`` (toy potentials).
    """

    def init_state(
        self,
        provider: ForceProvider,
        positions: Tensor,
        generator: torch.Generator | None = None,
        velocities: Tensor | None = None,
    ) -> MDState:
        """Evaluate forces at ``positions`` and draw Maxwell-Boltzmann velocities.

        Parameters
        ----------
        provider : ForceProvider
        positions : Tensor, shape (W, N, D)
        generator : torch.Generator, optional
            Source of the velocities (on ``positions``' device).
        velocities : Tensor, shape (W, N, D), optional
            Given instead of drawn.

        Returns
        -------
        MDState
        """
        self._check_provider(provider)
        provider.check(positions)
        energy, forces = provider.energy_and_forces(positions)
        if velocities is None:
            m = provider.masses.to(positions.device, positions.dtype)[None, :, None]
            velocities = self._noise(positions, generator) * torch.sqrt(
                self._kT_like(positions) / m
            )
        elif velocities.shape != positions.shape:
            raise ValueError(
                f"velocities must have the positions' shape {tuple(positions.shape)}, "
                f"got {tuple(velocities.shape)}"
            )
        return MDState(positions.clone(), velocities.clone(), forces, energy, 0)

    def step(
        self,
        state: MDState,
        provider: ForceProvider,
        generator: torch.Generator | None = None,
        n_steps: int = 1,
    ) -> MDState:
        """Advance every walker by ``n_steps`` BAOAB steps.

        Parameters
        ----------
        state : MDState
            Not modified.
        provider : ForceProvider
        generator : torch.Generator, optional
        n_steps : int

        Returns
        -------
        MDState
            The new state (``step`` increased by ``n_steps``).
        """
        n_steps = self._check_steps(n_steps)
        self._check_provider(provider)
        # Work on private copies, updated in place (fewer allocations per step).
        x, v = state.positions.clone(), state.velocities.clone()
        inv_m = 1.0 / provider.masses.to(x.device, x.dtype)[None, :, None]
        x, v, e, f = baoab_steps(
            x,
            v,
            state.forces,
            state.energy,
            provider.energy_and_forces,
            n_steps,
            timestep=self.timestep_ps,
            kT=self._kT_like(x),
            inv_mass=inv_m,
            friction=self.friction_per_ps,
            generator=generator,
        )
        return MDState(x, v, f, e, state.step + n_steps)


class OverdampedEulerMaruyama(_Integrator):
    """Overdamped (Brownian) Langevin dynamics, Euler-Maruyama discretisation.

    .. math::

        x \\leftarrow x + \\frac{F(x)}{m\\gamma} h + \\sqrt{\\frac{2 k_BT h}{m\\gamma}}\\,\\xi

    Stationary distribution :math:`\\propto e^{-E/k_BT}` up to :math:`O(h)` bias.
    Velocities in the state stay zero.

    Parameters
    ----------
    timestep_ps, temperature_k, friction_per_ps, kT
        As :class:`LangevinBAOAB`.
    """

    def init_state(
        self,
        provider: ForceProvider,
        positions: Tensor,
        generator: torch.Generator | None = None,
    ) -> MDState:
        """Evaluate forces at ``positions`` (velocities are zeros; ``generator`` is unused)."""
        self._check_provider(provider)
        provider.check(positions)
        energy, forces = provider.energy_and_forces(positions)
        return MDState(positions.clone(), torch.zeros_like(positions), forces, energy, 0)

    def step(
        self,
        state: MDState,
        provider: ForceProvider,
        generator: torch.Generator | None = None,
        n_steps: int = 1,
    ) -> MDState:
        """Advance every walker by ``n_steps`` Euler-Maruyama steps (see :class:`LangevinBAOAB`)."""
        n_steps = self._check_steps(n_steps)
        self._check_provider(provider)
        x, f, e = state.positions.clone(), state.forces, state.energy
        h = self.timestep_ps
        mobility = 1.0 / (
            provider.masses.to(x.device, x.dtype)[None, :, None] * self.friction_per_ps
        )
        drift = h * mobility
        noise_scale = torch.sqrt(2 * self._kT_like(x) * h * mobility)
        noise = torch.empty_like(x)
        for _ in range(n_steps):
            x.addcmul_(f, drift).addcmul_(noise.normal_(generator=generator), noise_scale)
            e, f = provider.energy_and_forces(x)
        return MDState(x, state.velocities, f, e, state.step + n_steps)

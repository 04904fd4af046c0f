r"""Underdamped Langevin dynamics (BAOAB) as a local kernel for simulated / parallel tempering.

A tempering level :math:`\beta` targets :math:`\pi_\beta(x) \propto p(x)^\beta`. Writing
:math:`p(x) \propto e^{-U(x)/k_BT_0}` (``log_prob`` is the *reduced* log-density, so
:math:`U/k_BT_0 = -\log p`), the tempered target is the Boltzmann distribution of the same
potential at temperature :math:`T = T_0/\beta`. The kernel therefore integrates

.. math::

    dx = v\,dt,\qquad m\,dv = \nabla\log p(x)\,dt - \gamma m v\,dt
         + \sqrt{2\gamma m\,\theta}\;dW,\qquad \theta = 1/\beta,

in reduced units (energies in :math:`k_BT_0`, so the "temperature" of level :math:`\beta`
is :math:`\theta = 1/\beta` and the velocity distribution is :math:`N(0, \theta/m)`), with the
BAOAB splitting of Leimkuhler and Matthews (2013), run by the md integrator's
:func:`sci_moe.sampling.md.baoab_steps` (the one BAOAB of sci-moe):

.. math::

    v \leftarrow v + \tfrac{h}{2m}\nabla\log p(x);\quad x \leftarrow x + \tfrac h2 v;\quad
    v \leftarrow c\,v + \sqrt{(1-c^2)\,\theta/m}\;\xi;\quad x \leftarrow x + \tfrac h2 v;\quad
    v \leftarrow v + \tfrac{h}{2m}\nabla\log p(x),

:math:`c = e^{-\gamma h}`. The timestep is **not** scaled with the level: the stability
limit of the Verlet part, :math:`h < 2/\omega` with :math:`\omega^2` the largest curvature of
:math:`-\log p` over :math:`m`, does not depend on temperature (the hot levels move faster
because their velocities are larger). BAOAB is not Metropolised: its configurational
bias is :math:`O(h^2)` (and zero for a harmonic potential).

**Velocities at a level change.** The simulated-tempering state is :math:`(l, x, v)` with
:math:`v \mid l \sim N(0, \theta_l/m)` independent of :math:`x`. After an accepted move
:math:`l \to l'`, ``velocities="rescale"`` maps :math:`v \mapsto v\sqrt{\beta_l/\beta_{l'}}`
(OpenMM's ``ExpandedEnsembleSampler`` default; Sugita-Okamoto for replica exchange): the
Jacobian :math:`(\beta_l/\beta_{l'})^{d/2}` cancels the ratio of the two Maxwell-Boltzmann
normalisations, so the level-move acceptance stays the purely configurational
:math:`\min\{1, e^{(\beta_{l'}-\beta_l)\log p(x) + g_{l'} - g_l}\}` and the joint target
is preserved exactly. ``"resample"`` draws fresh :math:`v \sim N(0, \theta_{l'}/m)` (a full
momentum refresh: also exact, but it forgets the direction of motion). Parallel-tempering
swaps carry each replica's velocities to its new level with the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from .. import md
from .kernels import KernelStep, LogProb, _check_x, as_batch
from .kernels import _lp_grad as _lp_and_grad

__all__ = ["BAOAB", "energy_log_prob"]

_VELOCITY_MODES = ("rescale", "resample")


@dataclass
class BAOAB:
    """Langevin BAOAB kernel on the tempered target ``p(x)**beta`` (temperature ``1/beta``).

    Parameters
    ----------
    step_size : float
        Timestep ``h`` in the time unit of the reduced dynamics (the same at every level).
    friction : float
        Collision rate :math:`\\gamma` (per time unit); 0 gives deterministic Verlet.
    mass : float or Tensor, shape (d,)
        Mass per coordinate (for ``N`` atoms in 3-D, repeat each atom's mass three times).
    velocities : {"rescale", "resample"}
        What happens to a chain's velocities when its level changes (see module docs).

    Notes
    -----
    ``step`` returns a :class:`KernelStep` whose ``velocities`` and ``grad`` (of the
    untempered ``log_prob``) must be passed back on the next call; ``accepted`` is all
    ``True`` (dynamics has no rejection). ``log_prob`` must be differentiable in torch.
    """

    step_size: float = 0.01
    friction: float = 1.0
    mass: float | Tensor = 1.0
    velocities: str = "rescale"

    uses_velocities: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not (self.step_size > 0 and math.isfinite(self.step_size)):
            raise ValueError(f"step_size must be a positive finite float, got {self.step_size}")
        if not (self.friction >= 0 and math.isfinite(self.friction)):
            raise ValueError(f"friction must be >= 0 and finite, got {self.friction}")
        m = torch.as_tensor(self.mass, dtype=torch.float64)
        if m.ndim > 1 or not bool((m > 0).all()):
            raise ValueError("mass must be a positive float or a 1-D tensor (d,) of masses > 0")
        if self.velocities not in _VELOCITY_MODES:
            raise ValueError(
                f"velocities must be one of {_VELOCITY_MODES}, got {self.velocities!r}"
            )

    def _mass(self, x: Tensor) -> Tensor:
        m = torch.as_tensor(self.mass, dtype=x.dtype, device=x.device)
        if m.ndim == 1 and m.shape[0] != x.shape[1]:
            raise ValueError(f"mass has {m.shape[0]} entries but x has d = {x.shape[1]}")
        return m

    def init_velocities(
        self, x: Tensor, beta: float | Tensor, generator: torch.Generator | None = None
    ) -> Tensor:
        """Maxwell-Boltzmann velocities :math:`N(0, 1/(\\beta m))`, shape ``(B, d)``."""
        _check_x(x)
        b = as_batch(beta, x.shape[0], x)
        std = (1.0 / (b[:, None] * self._mass(x))).sqrt()
        return std * torch.randn(x.shape, generator=generator, dtype=x.dtype)

    def change_level(
        self,
        v: Tensor,
        beta_old: Tensor,
        beta_new: Tensor,
        mask: Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Velocities after chains in ``mask`` moved from ``beta_old`` to ``beta_new``.

        Parameters
        ----------
        v : Tensor, shape (B, d)
        beta_old, beta_new : Tensor, shape (B,)
        mask : Tensor, shape (B,), bool
            Chains whose level changed (others keep ``v``).
        """
        if self.velocities == "rescale":
            scale = torch.where(mask, (beta_old / beta_new).sqrt(), torch.ones_like(beta_old))
            return v * scale[:, None]
        # resample: a fresh draw for the chains that moved (drawn for all, for a fixed
        # random-number consumption independent of which chains moved)
        fresh = self.init_velocities(v, beta_new, generator)
        return torch.where(mask[:, None], fresh, v)

    def step(
        self,
        x: Tensor,
        log_prob: LogProb,
        beta: float | Tensor = 1.0,
        *,
        generator: torch.Generator | None = None,
        step_size: float | Tensor | None = None,
        lp: Tensor | None = None,
        velocities: Tensor | None = None,
        grad: Tensor | None = None,
    ) -> KernelStep:
        """One BAOAB step for every chain.

        Parameters
        ----------
        x : Tensor, shape (B, d)
        log_prob : callable, ``(B, d) -> (B,)``, differentiable
        beta : float or Tensor, shape (B,)
            Inverse temperature per chain (temperature ``1/beta`` in units of ``k_B T_0``).
        generator : torch.Generator, optional
        step_size : float or Tensor, shape (B,), optional
            Per-chain timestep; defaults to ``self.step_size``.
        lp, grad : Tensor, shapes (B,) and (B, d), optional
            Cached ``log_prob(x)`` and its gradient (both or neither).
        velocities : Tensor, shape (B, d), optional
            Current velocities; drawn from Maxwell-Boltzmann when missing.

        Returns
        -------
        KernelStep
            With ``velocities`` and ``grad`` at the new state filled in.
        """
        _check_x(x)
        B = x.shape[0]
        beta_t = as_batch(beta, B, x)[:, None]
        h = as_batch(self.step_size if step_size is None else step_size, B, x)[:, None]
        m = self._mass(x)
        if lp is None or grad is None:
            lp, grad = _lp_and_grad(log_prob, x)
        v = self.init_velocities(x, beta_t[:, 0], generator) if velocities is None else velocities
        # the md integrator's BAOAB update (sci_moe.sampling.md.baoab_steps) in reduced
        # units: forces grad log p, thermal energy 1/beta, per-chain timesteps
        x, v, lp, grad = md.baoab_steps(
            x.clone(),
            v.clone(),
            grad,
            lp,
            lambda y: _lp_and_grad(log_prob, y),
            1,
            timestep=h,
            kT=1.0 / beta_t,
            inv_mass=1.0 / m,
            friction=self.friction,
            generator=generator,
        )
        if not bool(torch.isfinite(lp).all() and torch.isfinite(v).all()):
            raise ValueError(
                "BAOAB produced non-finite energies or velocities: the timestep is above the "
                "stability limit of this potential; reduce step_size"
            )
        return KernelStep(x, lp, torch.ones(B, dtype=torch.bool), velocities=v, grad=grad)


def energy_log_prob(
    energy: Callable[[Tensor], Tensor], kT: float, shape: tuple[int, int]
) -> Callable[[Tensor], Tensor]:
    """Reduced log-density :math:`\\log p(x) = -E(x)/k_BT` of an energy on ``(W, N, D)``.

    Adapts a potential with the MD-engine convention (``energy(positions (W, N, D)) -> (W,)``,
    e.g. :class:`sci_moe.sampling.md.potentials.MuellerBrown` or a
    ``ForceProvider``'s energies) to the flat ``(B, N * D) -> (B,)`` log-densities of the
    tempering samplers. Tempering level ``beta`` then samples the potential at
    temperature ``kT / beta``.

    Parameters
    ----------
    energy : callable, ``(W, N, D) -> (W,)``
        Energy in the same unit as ``kT`` (kJ/mol with ``kT = k_B T``, or reduced units).
    kT : float
        Thermal energy of the target level (``beta = 1``).
    shape : (N, D)
        Particles and spatial dimensions of one configuration.
    """
    if not kT > 0:
        raise ValueError(f"kT must be positive, got {kT}")
    n, dim = (int(s) for s in shape)
    if n < 1 or dim < 1:
        raise ValueError(f"shape must be (N, D) with N, D >= 1, got {shape}")

    def log_prob(x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != n * dim:
            raise ValueError(f"x must have shape (B, {n * dim}), got {tuple(x.shape)}")
        return -energy(x.reshape(x.shape[0], n, dim)) / kT

    return log_prob

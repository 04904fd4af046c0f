"""Analytic potentials for testing samplers and integrators.

Every potential maps walker positions ``x`` of shape ``(W, N, D)`` (``W`` independent
walkers, ``N`` particles, ``D`` spatial dimensions) to energies of shape ``(W,)``. The
particles of a toy potential are independent copies: the energy is a sum over particles.
Toy potentials live in reduced units; give the integrator ``kT`` explicitly. Forces
``-dE/dx`` come from an analytic form where one is written here, otherwise from autograd.

Each potential has ``log_prob(x, kT)``, the exact normalised log-density of the Boltzmann
distribution :math:`p(x) \\propto \\exp(-E(x)/kT)` where it is available in closed form or by
one-dimensional quadrature (double well, Gaussian mixture), and the unnormalised
``-E(x)/kT`` otherwise (Muller-Brown; see :attr:`Potential.normalized`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "DoubleWell",
    "MuellerBrown",
    "Potential",
    "autograd_energy_and_forces",
    "check_positions",
]


def check_positions(x: Tensor, n_particles: int | None = None, dim: int | None = None) -> None:
    """Raise ``ValueError`` unless ``x`` is a finite floating tensor of shape ``(W, N, D)``.

    Parameters
    ----------
    x : Tensor, shape (W, N, D)
        Positions of ``W`` walkers.
    n_particles, dim : int, optional
        Expected ``N`` and ``D``.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 3:
        raise ValueError(
            f"positions must have shape (W, N, D) = (walkers, particles, dims), got "
            f"{tuple(x.shape)}; add a walker axis with x[None] for a single configuration"
        )
    if not x.is_floating_point():
        raise ValueError(f"positions must be a floating tensor, got dtype {x.dtype}")
    if n_particles is not None and x.shape[1] != n_particles:
        raise ValueError(f"expected {n_particles} particles (x.shape[1]), got {x.shape[1]}")
    if dim is not None and x.shape[2] != dim:
        raise ValueError(f"expected {dim} spatial dimensions (x.shape[2]), got {x.shape[2]}")
    if not bool(torch.isfinite(x).all()):
        bad = (~torch.isfinite(x)).flatten(1).any(1).nonzero().flatten().tolist()
        raise ValueError(f"positions contain NaN or inf (walkers {bad[:10]}); reduce the timestep")


class Potential(torch.nn.Module):
    """Base class: an energy ``E(x)`` of walker positions, summed over particles.

    Subclasses implement :meth:`forward` (and may implement :meth:`analytic_forces`).

    Attributes
    ----------
    dim : int
        Spatial dimension ``D``.
    n_particles : int
        Number of particles ``N``.
    normalized : bool
        Whether :meth:`log_prob` is normalised.
    """

    normalized: bool = False

    def __init__(self, dim: int, n_particles: int = 1) -> None:
        super().__init__()
        if int(n_particles) < 1:
            raise ValueError(f"n_particles must be >= 1, got {n_particles}")
        self.dim = int(dim)
        self.n_particles = int(n_particles)

    def energy_per_particle(self, x: Tensor) -> Tensor:
        """Energy of each particle, shape ``(W, N)``, for ``x`` of shape ``(W, N, D)``."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """Energy of each walker.

        Parameters
        ----------
        x : Tensor, shape (W, N, D)

        Returns
        -------
        Tensor, shape (W,)
        """
        return self.energy_per_particle(x).sum(-1)

    def analytic_forces(self, x: Tensor) -> Tensor | None:
        """Closed-form forces ``-dE/dx`` of shape ``(W, N, D)``, or ``None`` to use autograd."""
        return None

    def energy_and_forces(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Energies and forces :math:`F = -\\nabla_x E`.

        Parameters
        ----------
        x : Tensor, shape (W, N, D)

        Returns
        -------
        energy : Tensor, shape (W,)
        forces : Tensor, shape (W, N, D)
        """
        check_positions(x, self.n_particles, self.dim)
        forces = self.analytic_forces(x)
        if forces is not None:
            with torch.no_grad():
                return self(x), forces
        return autograd_energy_and_forces(self, x)

    def log_prob(self, x: Tensor, kT: float) -> Tensor:
        """Log-density of the Boltzmann distribution at temperature ``kT`` (energy units).

        Unnormalised (``-E/kT``) unless :attr:`normalized`.

        Parameters
        ----------
        x : Tensor, shape (W, N, D)
        kT : float

        Returns
        -------
        Tensor, shape (W,)
        """
        _check_kT(kT)
        return -self(x) / kT


def autograd_energy_and_forces(
    fn: torch.nn.Module, x: Tensor, create_graph: bool = False
) -> tuple[Tensor, Tensor]:
    """Energy ``fn(x)`` of shape ``(W,)`` and forces ``-dE/dx`` by autograd, batched over walkers.

    Walkers are independent, so the gradient of ``E.sum()`` gives every walker's forces in
    one backward pass. Results are detached unless ``create_graph``.
    """
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        energy = fn(xg)
        if energy.shape != (x.shape[0],):
            raise ValueError(
                f"the energy model must return shape (W,) = ({x.shape[0]},), "
                f"got {tuple(energy.shape)}"
            )
        (grad,) = torch.autograd.grad(energy.sum(), xg, create_graph=create_graph)
    if create_graph:
        return energy, -grad
    return energy.detach(), -grad.detach()


def _check_kT(kT: float) -> None:
    if not (float(kT) > 0 and math.isfinite(float(kT))):
        raise ValueError(f"kT must be a positive finite energy, got {kT}")


class DoubleWell(Potential):
    """Double well along the first coordinate, harmonic in the others.

    .. math::

        E(x) = h\\left(\\frac{x_1^2}{s^2} - 1\\right)^2 + c\\,x_1
               + \\frac{k}{2}\\sum_{i=2}^{D} x_i^2

    per particle: minima near :math:`x_1 = \\pm s` separated by a barrier of height ``h``
    (for ``c = 0``), tilted by ``c``.

    Parameters
    ----------
    dim : int
        1 or 2 (any ``D >= 1`` works).
    barrier : float
        ``h``, energy units.
    scale : float
        ``s``, the minima's position.
    tilt : float
        ``c``, asymmetry between the wells.
    stiffness : float
        ``k`` of the harmonic directions.
    n_particles : int
        Independent particles.
    """

    normalized = True

    def __init__(
        self,
        dim: int = 1,
        barrier: float = 2.0,
        scale: float = 1.0,
        tilt: float = 0.0,
        stiffness: float = 1.0,
        n_particles: int = 1,
    ) -> None:
        super().__init__(dim, n_particles)
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if not (barrier > 0 and scale > 0 and stiffness > 0):
            raise ValueError(
                f"barrier, scale and stiffness must be positive, got {barrier}, {scale}, "
                f"{stiffness}"
            )
        self.barrier, self.scale, self.tilt, self.stiffness = barrier, scale, tilt, stiffness

    def energy_per_particle(self, x: Tensor) -> Tensor:
        x1 = x[..., 0]
        e = self.barrier * ((x1 / self.scale) ** 2 - 1) ** 2 + self.tilt * x1
        if self.dim > 1:
            e = e + 0.5 * self.stiffness * (x[..., 1:] ** 2).sum(-1)
        return e

    def analytic_forces(self, x: Tensor) -> Tensor:
        x1 = x[..., 0]
        s2 = self.scale**2
        f1 = -(4 * self.barrier * ((x1**2) / s2 - 1) * x1 / s2 + self.tilt)
        rest = -self.stiffness * x[..., 1:]
        return torch.cat([f1[..., None], rest], dim=-1)

    def log_normalizer(self, kT: float) -> float:
        """``log Z`` of one particle, :math:`Z = \\int e^{-E/kT} dx` (quadrature in x_1)."""
        _check_kT(kT)
        # The density is negligible where E - E_min > 60 kT; the quartic bounds the range.
        half = self.scale * (
            1.0 + (60.0 * kT / self.barrier + abs(self.tilt) / self.barrier) ** 0.25
        )
        half = max(half, 2 * self.scale)
        g = torch.linspace(-half, half, 400001, dtype=torch.float64)
        e = self.barrier * ((g / self.scale) ** 2 - 1) ** 2 + self.tilt * g
        logw = -e / kT
        m = logw.max()
        log_z1 = float(m + torch.log(torch.trapezoid(torch.exp(logw - m), g)))
        log_rest = 0.5 * (self.dim - 1) * math.log(2 * math.pi * kT / self.stiffness)
        return log_z1 + log_rest

    def log_prob(self, x: Tensor, kT: float) -> Tensor:
        return -self(x) / kT - self.n_particles * self.log_normalizer(kT)


class MuellerBrown(Potential):
    """The Muller-Brown potential (Muller & Brown, Theor. Chim. Acta 53, 75 (1979)).

    .. math::

        E(x, y) = \\mathrm{scale} \\sum_{k=1}^{4} A_k \\exp\\big(a_k (x - x^0_k)^2
                  + b_k (x - x^0_k)(y - y^0_k) + c_k (y - y^0_k)^2\\big)

    with A = (-200, -100, -170, 15), a = (-1, -1, -6.5, 0.7), b = (0, 0, 11, 0.6),
    c = (-10, -10, -6.5, 0.7), x0 = (1, 0, -0.5, -1), y0 = (0, 0.5, 1.5, 1). The ScoreMD
    data (Plainer et al. 2025) use ``scale = 1`` with ``kT = 23``, mass 0.5, friction 1 and
    timestep 5e-3. Minima near (-0.558, 1.442), (0.623, 0.028), (-0.050, 0.467).

    Parameters
    ----------
    scale : float
        Multiplies the energy.
    n_particles : int
        Independent particles.
    """

    A = (-200.0, -100.0, -170.0, 15.0)
    a = (-1.0, -1.0, -6.5, 0.7)
    b = (0.0, 0.0, 11.0, 0.6)
    c = (-10.0, -10.0, -6.5, 0.7)
    x0 = (1.0, 0.0, -0.5, -1.0)
    y0 = (0.0, 0.5, 1.5, 1.0)

    def __init__(self, scale: float = 1.0, n_particles: int = 1) -> None:
        super().__init__(2, n_particles)
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be a positive finite float, got {scale}")
        self.scale = float(scale)

    def _terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
        p = {
            k: torch.tensor(getattr(self, k), dtype=x.dtype, device=x.device)
            for k in ("A", "a", "b", "c", "x0", "y0")
        }
        dx = x[..., 0:1] - p["x0"]
        dy = x[..., 1:2] - p["y0"]
        ex = p["A"] * torch.exp(p["a"] * dx**2 + p["b"] * dx * dy + p["c"] * dy**2)
        return dx, dy, ex, [p["a"], p["b"], p["c"]]

    def energy_per_particle(self, x: Tensor) -> Tensor:
        return self.scale * self._terms(x)[2].sum(-1)

    def analytic_forces(self, x: Tensor) -> Tensor:
        dx, dy, ex, (a, b, c) = self._terms(x)
        gx = (ex * (2 * a * dx + b * dy)).sum(-1)
        gy = (ex * (b * dx + 2 * c * dy)).sum(-1)
        return -self.scale * torch.stack([gx, gy], dim=-1)

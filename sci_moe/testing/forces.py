"""Check that forces are the negative gradient of the energy, by central finite differences.

Every force provider in sci-moe (analytic potentials, learned energy models, OpenMM
systems, diffusion models used as force fields) promises ``F = -dE/dx``. This assertion
checks that promise against the energy alone, independently of how the forces were
computed (closed form, autograd, OpenMM), so it also catches a sign error or a units
mismatch (kJ/mol/nm vs kJ/mol/Angstrom) in the force path.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["assert_forces_match_energy", "finite_difference_forces"]

EnergyAndForces = Callable[[Tensor], tuple[Tensor, Tensor]]


def finite_difference_forces(
    energy: Callable[[Tensor], Tensor], positions: Tensor, step: float = 1e-5
) -> Tensor:
    r"""Forces by central differences of the energy, one coordinate at a time.

    .. math:: F_{wi} \approx -\frac{E(x + h e_i) - E(x - h e_i)}{2h}

    Parameters
    ----------
    energy : callable
        Maps positions of shape (W, N, D) to energies of shape (W,) (kJ/mol for nm).
    positions : Tensor, shape (W, N, D)
        Evaluate in float64 for a meaningful comparison.
    step : float
        Displacement ``h`` in the positions' unit (nm).

    Returns
    -------
    Tensor, shape (W, N, D)
        ``-dE/dx`` in energy per position unit (kJ/mol/nm).
    """
    if positions.dim() != 3:
        raise ValueError(
            f"positions must have shape (walkers, particles, dims), got {tuple(positions.shape)}"
        )
    if step <= 0:
        raise ValueError(f"step must be positive, got {step}")
    x = positions.detach()
    flat = x.reshape(x.shape[0], -1)
    out = torch.empty_like(flat)
    with torch.no_grad():
        for i in range(flat.shape[1]):
            plus, minus = flat.clone(), flat.clone()
            plus[:, i] += step
            minus[:, i] -= step
            e_plus = energy(plus.view_as(x))
            e_minus = energy(minus.view_as(x))
            out[:, i] = -(e_plus - e_minus) / (2 * step)
    return out.view_as(x)


def assert_forces_match_energy(
    energy_and_forces: EnergyAndForces,
    positions: Tensor,
    *,
    step: float = 1e-5,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """Assert that the forces of ``energy_and_forces`` equal ``-grad E`` by finite differences.

    Parameters
    ----------
    energy_and_forces : callable
        Maps positions (W, N, D) to ``(energy (W,), forces (W, N, D))``, e.g.
        :meth:`sci_moe.sampling.md.ForceProvider.energy_and_forces`.
    positions : Tensor, shape (W, N, D)
        Where to check; use float64 and positions away from singularities.
    step : float
        Finite-difference displacement (nm).
    rtol, atol : float
        Tolerances of :func:`torch.testing.assert_close` on the forces.

    Raises
    ------
    AssertionError
        With the largest deviation, if the forces differ from the finite differences.

    Examples
    --------
    >>> import torch
    >>> from sci_moe.sampling.md import MuellerBrown, PotentialForces
    >>> provider = PotentialForces(MuellerBrown(), torch.ones(1))
    >>> x = torch.tensor([[[-0.5, 1.4]]], dtype=torch.float64)
    >>> assert_forces_match_energy(provider.energy_and_forces, x)
    """
    energy, forces = energy_and_forces(positions)
    if forces.shape != positions.shape:
        raise AssertionError(
            f"forces have shape {tuple(forces.shape)}, positions {tuple(positions.shape)}"
        )
    if energy.shape != positions.shape[:1]:
        raise AssertionError(
            f"energy has shape {tuple(energy.shape)}, expected ({positions.shape[0]},)"
        )
    numeric = finite_difference_forces(lambda x: energy_and_forces(x)[0], positions, step)
    torch.testing.assert_close(
        forces.detach().to(numeric.dtype),
        numeric,
        rtol=rtol,
        atol=atol,
        msg=lambda m: f"forces differ from -grad(energy) by finite differences: {m}",
    )

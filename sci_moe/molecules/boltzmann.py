"""Boltzmann weights of conformer energies (kJ/mol, K)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._util import BOLTZMANN_KJ_PER_MOL_K

__all__ = ["KB_KJ_PER_MOL_K", "boltzmann_weights"]

#: Boltzmann constant in kJ/mol/K (alias of ``sci_moe._util.BOLTZMANN_KJ_PER_MOL_K``).
KB_KJ_PER_MOL_K = BOLTZMANN_KJ_PER_MOL_K


def boltzmann_weights(
    energies_kj: np.ndarray | Sequence[float], temperature_k: float
) -> np.ndarray:
    r"""Boltzmann weights of conformer energies.

    .. math:: w_c = \frac{\exp(-(E_c - E_\min)/k_B T)}{\sum_{c'} \exp(-(E_{c'} - E_\min)/k_B T)}

    Parameters
    ----------
    energies_kj : array_like, shape (C,)
        Conformer energies in kJ/mol (any common offset).
    temperature_k : float
        Temperature in K (> 0).

    Returns
    -------
    numpy.ndarray, shape (C,), float64
        Non-negative weights summing to 1.
    """
    e = np.asarray(energies_kj, dtype=np.float64).reshape(-1)
    if e.size == 0:
        raise ValueError("boltzmann_weights needs at least one energy")
    if not np.all(np.isfinite(e)):
        raise ValueError(f"conformer energies must be finite, got {e}")
    if not temperature_k > 0:
        raise ValueError(f"temperature_k must be > 0 K, got {temperature_k}")
    x = -(e - e.min()) / (BOLTZMANN_KJ_PER_MOL_K * temperature_k)
    w = np.exp(x)
    return w / w.sum()

"""Physical constants and unit conversions (CODATA 2018, as OpenMM uses them).

OpenMM's units (nm, ps, kJ/mol, K, amu) are the units of every public boundary of sci-moe;
these are the factors that bring other units there.
"""

from __future__ import annotations

__all__ = [
    "BOLTZMANN_KJ_PER_MOL_K",
    "KJ_PER_EV",
    "KJ_PER_HARTREE",
    "KJ_PER_KCAL",
    "kt_kj_per_mol",
]

#: Molar gas constant R = N_A k_B, kJ/(mol K) (OpenMM's ``MOLAR_GAS_CONSTANT_R``).
BOLTZMANN_KJ_PER_MOL_K = 0.00831446261815324
#: Hartree -> kJ/mol.
KJ_PER_HARTREE = 2625.4996394799
#: eV -> kJ/mol.
KJ_PER_EV = 96.48533212331002
#: kcal (thermochemical) -> kJ.
KJ_PER_KCAL = 4.184


def kt_kj_per_mol(temperature_k: float) -> float:
    """Thermal energy :math:`k_B T` in kJ/mol at ``temperature_k`` (K).

    Raises
    ------
    ValueError
        If the temperature is not positive.
    """
    t = float(temperature_k)
    if not t > 0:
        raise ValueError(f"temperature must be > 0 K, got {temperature_k!r}")
    return BOLTZMANN_KJ_PER_MOL_K * t

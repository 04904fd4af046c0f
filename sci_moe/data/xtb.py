"""GFN2-xTB single points with ``tblite`` and Boltzmann-averaged ensemble labels.

GFN2-xTB (Bannwarth, Ehlert & Grimme, JCTC 15, 1652 (2019)) through the ``tblite``
Python API: energy, dipole moment and orbital energies of each conformer; the ensemble
label is the Boltzmann average at temperature :math:`T` with weights from the GFN2
energies,

.. math:: \\langle y \\rangle = \\sum_c w_c y_c, \\qquad
          w_c = \\frac{e^{-(E_c - E_\\min)/k_B T}}{\\sum_{c'} e^{-(E_{c'} - E_\\min)/k_B T}}.

``tblite`` uses OpenMP: with more than one thread per process it is 20-30x slower on a
busy 2-core machine, so :func:`xtb_ensemble_labels` workers run with one thread each
(``OMP_NUM_THREADS=1`` set before ``tblite`` is imported in the worker) and parallelise
over molecules instead.

Units: positions in nm at the interface (converted to Bohr for ``tblite``), energies in
kJ/mol, dipoles in Debye, orbital energies in eV.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._util import KJ_PER_HARTREE, parallel_map

__all__ = [
    "BOHR_PER_NM",
    "DEBYE_PER_EBOHR",
    "EV_PER_HARTREE",
    "KJ_PER_HARTREE",
    "XTBConfig",
    "XTBResult",
    "vertical_ip_ea",
    "xtb_ensemble_labels",
    "xtb_singlepoint",
]

#: nm -> Bohr (1 Bohr = 0.052917721067 nm).
BOHR_PER_NM = 1.0 / 0.052917721067
# KJ_PER_HARTREE (Hartree -> kJ/mol, CODATA 2018) is sci_moe._util's, re-exported here.
#: Hartree -> eV.
EV_PER_HARTREE = 27.211386245988
#: e * Bohr -> Debye.
DEBYE_PER_EBOHR = 2.541746473

_METHODS = ("GFN2-xTB", "GFN1-xTB", "IPEA1-xTB")


@dataclass
class XTBConfig:
    """Settings of the ``tblite`` single points.

    Parameters
    ----------
    method : {"GFN2-xTB", "GFN1-xTB", "IPEA1-xTB"}
    accuracy : float
        ``tblite`` numerical accuracy (lower is tighter).
    max_iterations : int
        SCF iterations before giving up.
    solvent : str, optional
        ALPB implicit solvent (e.g. ``"water"``); None for gas phase.
    """

    method: str = "GFN2-xTB"
    accuracy: float = 1.0
    max_iterations: int = 250
    solvent: str | None = None

    def __post_init__(self) -> None:
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if not self.accuracy > 0:
            raise ValueError(f"accuracy must be > 0, got {self.accuracy}")
        if self.max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {self.max_iterations}")


@dataclass
class XTBResult:
    """One single point.

    Attributes
    ----------
    energy_kj : float
        Total energy, kJ/mol.
    dipole_debye : numpy.ndarray, shape (3,)
        Dipole vector in Debye (origin-independent for neutral molecules).
    homo_ev, lumo_ev, gap_ev : float
        Frontier orbital energies and HOMO-LUMO gap, eV.
    charges : numpy.ndarray, shape (N,)
        Atomic partial charges (e).
    """

    energy_kj: float
    dipole_debye: np.ndarray
    homo_ev: float
    lumo_ev: float
    gap_ev: float
    charges: np.ndarray

    @property
    def dipole_norm_debye(self) -> float:
        return float(np.linalg.norm(self.dipole_debye))


def _check_geometry(numbers, positions_nm):
    numbers = np.asarray(numbers, dtype=np.int64).reshape(-1)
    pos = np.asarray(positions_nm, dtype=np.float64)
    if pos.shape != (numbers.size, 3):
        raise ValueError(f"positions must be (N={numbers.size}, 3) in nm, got {pos.shape}")
    if numbers.size == 0 or (numbers < 1).any() or (numbers > 86).any():
        raise ValueError("atomic numbers must be in 1..86 (GFN2-xTB elements)")
    if not np.isfinite(pos).all():
        raise ValueError("positions contain NaN/Inf")
    return numbers, pos


def xtb_singlepoint(
    numbers: Sequence[int] | np.ndarray,
    positions_nm: np.ndarray,
    charge: int = 0,
    uhf: int = 0,
    config: XTBConfig | None = None,
) -> XTBResult:
    """GFN2-xTB (or GFN1/IPEA1) single point of one geometry.

    Parameters
    ----------
    numbers : array_like, shape (N,)
        Atomic numbers.
    positions_nm : numpy.ndarray, shape (N, 3)
        Positions in nm.
    charge : int
        Total charge (e).
    uhf : int
        Number of unpaired electrons.
    config : XTBConfig, optional

    Raises
    ------
    ValueError
        Bad geometry, or the SCF failed (the message carries tblite's reason).
    """
    from tblite.interface import Calculator

    cfg = config or XTBConfig()
    numbers, pos = _check_geometry(numbers, positions_nm)
    try:
        calc = Calculator(
            cfg.method, numbers, pos * BOHR_PER_NM, charge=float(charge), uhf=int(uhf)
        )
        calc.set("verbosity", 0)
        calc.set("accuracy", float(cfg.accuracy))
        calc.set("max-iter", int(cfg.max_iterations))
        if cfg.solvent:
            calc.add("alpb-solvation", cfg.solvent)
        res = calc.singlepoint()
    except Exception as err:  # tblite raises RuntimeError on SCF failure / bad input
        raise ValueError(f"tblite {cfg.method} failed: {err}") from None
    eps = np.asarray(res.get("orbital-energies"), dtype=np.float64).reshape(-1)
    occ = np.asarray(res.get("orbital-occupations"), dtype=np.float64)
    if occ.ndim == 2:  # spin-resolved: total occupation per orbital
        occ = occ.sum(0)
    occ = occ.reshape(-1)
    occupied = np.nonzero(occ > 0.5)[0]
    if occupied.size == 0 or occupied[-1] + 1 >= eps.size:
        raise ValueError("no HOMO/LUMO pair (no occupied or no virtual orbital)")
    homo = eps[occupied[-1]] * EV_PER_HARTREE
    lumo = eps[occupied[-1] + 1] * EV_PER_HARTREE
    return XTBResult(
        energy_kj=float(res.get("energy")) * KJ_PER_HARTREE,
        dipole_debye=np.asarray(res.get("dipole"), dtype=np.float64) * DEBYE_PER_EBOHR,
        homo_ev=float(homo),
        lumo_ev=float(lumo),
        gap_ev=float(lumo - homo),
        charges=np.asarray(res.get("charges"), dtype=np.float64),
    )


def vertical_ip_ea(
    numbers: Sequence[int] | np.ndarray,
    positions_nm: np.ndarray,
    charge: int = 0,
    config: XTBConfig | None = None,
    neutral: XTBResult | None = None,
    ea: bool = True,
) -> tuple[float, float]:
    """Vertical ionisation potential and electron affinity by Delta-SCF, eV.

    .. math:: \\mathrm{IP} = E(q+1) - E(q), \\qquad \\mathrm{EA} = E(q) - E(q-1)

    at the given (closed-shell) geometry; the ion runs are open-shell (``uhf=1``), as in
    MARCEL's Drugs-75K labels. The electronegativity is :math:`\\chi = (\\mathrm{IP} +
    \\mathrm{EA}) / 2`. Plain GFN2-xTB overestimates IPs by a few eV (IPEA1-xTB is the
    corrected parametrisation); trends over conformers are what the benchmark uses.

    Parameters
    ----------
    numbers : array_like, shape (N,)
    positions_nm : numpy.ndarray, shape (N, 3)
        Positions in nm.
    charge : int
        Charge of the reference state (e).
    config : XTBConfig, optional
    neutral : XTBResult, optional
        The reference single point if already computed (saves one run).
    ea : bool
        Also run the anion; EA is NaN when False.

    Returns
    -------
    ip_ev, ea_ev : float

    Raises
    ------
    ValueError
        An SCF failed (see :func:`xtb_singlepoint`).
    """
    ref = neutral or xtb_singlepoint(numbers, positions_nm, charge, 0, config)
    cation = xtb_singlepoint(numbers, positions_nm, charge + 1, 1, config)
    ip = (cation.energy_kj - ref.energy_kj) / KJ_PER_HARTREE * EV_PER_HARTREE
    if not ea:
        return float(ip), float("nan")
    anion = xtb_singlepoint(numbers, positions_nm, charge - 1, 1, config)
    e_a = (ref.energy_kj - anion.energy_kj) / KJ_PER_HARTREE * EV_PER_HARTREE
    return float(ip), float(e_a)


def _electronic_job(numbers, positions_nm, charge, cfg) -> dict:
    """Worker: vertical IP / EA (Delta-SCF, eV) of every conformer of one molecule."""
    import tblite.interface  # noqa: F401 - load its OpenMP runtime before limiting it
    from threadpoolctl import threadpool_limits

    ip, ea = [], []
    with threadpool_limits(1, user_api="openmp"):
        for k, pos in enumerate(np.asarray(positions_nm)):
            try:
                a, b = vertical_ip_ea(numbers, pos, charge, cfg)
            except ValueError as err:
                return {"failed": True, "reason": f"conformer {k}: {err}"}
            ip.append(a)
            ea.append(b)
    return {"ip_ev": np.asarray(ip), "ea_ev": np.asarray(ea)}


def _ensemble_job(numbers, positions_nm, charge, uhf, cfg) -> dict:
    """Single points of every conformer of one molecule (plain arrays out), one thread."""
    import tblite.interface  # noqa: F401 - load its OpenMP runtime before limiting it
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="openmp"):
        return _ensemble_job_unlimited(numbers, positions_nm, charge, uhf, cfg)


def _ensemble_job_unlimited(numbers, positions_nm, charge, uhf, cfg) -> dict:
    out = {"energy_kj": [], "dipole_debye": [], "homo_ev": [], "lumo_ev": [], "gap_ev": []}
    for k, pos in enumerate(np.asarray(positions_nm)):
        try:
            r = xtb_singlepoint(numbers, pos, charge, uhf, cfg)
        except ValueError as err:
            return {"failed": True, "reason": f"conformer {k}: {err}"}
        out["energy_kj"].append(r.energy_kj)
        out["dipole_debye"].append(r.dipole_debye)
        out["homo_ev"].append(r.homo_ev)
        out["lumo_ev"].append(r.lumo_ev)
        out["gap_ev"].append(r.gap_ev)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def xtb_ensemble_labels(
    molecules: Sequence[tuple],
    config: XTBConfig | None = None,
    n_jobs: int = 1,
    progress: bool = False,
    on_result=None,
    mp_context: str = "forkserver",
) -> list[dict]:
    """Per-conformer GFN2-xTB properties of many conformer ensembles, in parallel.

    Parameters
    ----------
    molecules : sequence of tuple
        One ``(numbers, positions_nm, charge, uhf)`` tuple per molecule: ``numbers``
        shape (N,), ``positions_nm`` shape (C, N, 3) in nm.
    config : XTBConfig, optional
    n_jobs : int
        Worker processes, one OpenMP thread each (also in this process when 1).
    progress : bool
        tqdm progress bar.
    on_result : callable, optional
        ``on_result(index, result)`` called as each molecule finishes (e.g. to cache it).
    mp_context : str
        Start method of the workers (see :func:`sci_moe.molecules.parallel_map`).

    Returns
    -------
    list of dict
        Per molecule, either arrays ``energy_kj, homo_ev, lumo_ev, gap_ev`` (C,) and
        ``dipole_debye`` (C, 3), or ``{"failed": True, "reason": str}``.
    """
    cfg = config or XTBConfig()
    jobs = [tuple(m) for m in molecules]
    for j in jobs:
        if len(j) != 4:
            raise ValueError("each molecule must be (numbers, positions_nm, charge, uhf)")
    return parallel_map(
        _ensemble_job,
        [(*j, cfg) for j in jobs],
        n_jobs=n_jobs,
        progress=progress,
        desc="GFN2-xTB",
        on_result=on_result,
        mp_context=mp_context,
        unit="mol",
    )

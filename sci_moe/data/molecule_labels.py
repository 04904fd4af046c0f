"""Per-conformer labels of the molecule set: GFN2-xTB properties, radius of gyration, SASA.

Run in worker processes (:func:`_label_job`, one thread each); :func:`_label_key` is the
content hash under which a molecule's labels are cached.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np

from .molecule_set_store import _FORMAT_VERSION
from .xtb import XTBConfig, _ensemble_job

if TYPE_CHECKING:
    from ..molecules import ConformerEnsemble

__all__ = ["geometric_labels"]


def geometric_labels(
    numbers: np.ndarray, positions_nm: np.ndarray, sasa_density: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """Radius of gyration and SASA of each conformer.

    .. math:: R_g = \\sqrt{\\sum_i m_i |r_i - r_\\mathrm{com}|^2 / \\sum_i m_i}

    Parameters
    ----------
    numbers : numpy.ndarray, shape (N,)
    positions_nm : numpy.ndarray, shape (C, N, 3)
    sasa_density : float
        Area per surface point (A^2) of ``morfeus.SASA`` (Shrake-Rupley, CRC radii,
        probe 1.4 A).

    Returns
    -------
    rg_nm : numpy.ndarray, shape (C,)
        Mass-weighted radius of gyration, nm.
    sasa_nm2 : numpy.ndarray, shape (C,)
        Solvent-accessible surface area, nm^2.
    """
    from morfeus import SASA
    from rdkit import Chem

    numbers = np.asarray(numbers, dtype=np.int64)
    pos = np.asarray(positions_nm, dtype=np.float64)
    if pos.ndim == 2:
        pos = pos[None]
    if pos.shape[1:] != (numbers.size, 3):
        raise ValueError(f"positions must be (C, N={numbers.size}, 3), got {pos.shape}")
    table = Chem.GetPeriodicTable()
    m = np.array([table.GetAtomicWeight(int(z)) for z in numbers])
    com = (m[None, :, None] * pos).sum(1) / m.sum()
    rg = np.sqrt((m[None] * ((pos - com[:, None]) ** 2).sum(-1)).sum(1) / m.sum())
    sasa = np.array([SASA(numbers, p * 10.0, density=sasa_density).area for p in pos]) * 0.01
    return rg, sasa


def _label_job(numbers, positions_nm, charge, uhf, xtb_cfg, sasa_density) -> dict:
    """Worker: GFN2-xTB and geometric labels of one ensemble."""
    t0 = time.process_time()
    res = _ensemble_job(numbers, positions_nm, charge, uhf, xtb_cfg)
    if not res.get("failed"):
        try:
            res["rg_nm"], res["sasa_nm2"] = geometric_labels(numbers, positions_nm, sasa_density)
        except Exception as err:
            res = {"failed": True, "reason": f"geometry labels: {type(err).__name__}: {err}"}
    res["cpu_s"] = np.float64(time.process_time() - t0)
    return res


def _label_key(ens: ConformerEnsemble, xtb: XTBConfig, sasa_density: float) -> str:
    """Cache key of a molecule's labels under the builder's ``xtb`` and ``sasa_density``."""
    import tblite

    h = hashlib.sha256()
    h.update(np.ascontiguousarray(ens.atomic_numbers, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(ens.positions_nm, dtype=np.float64).tobytes())
    meta = {
        "xtb": asdict(xtb),
        "sasa_density": sasa_density,
        "tblite": getattr(tblite, "__version__", "?"),
        "charge": _charge(ens),
        "v": _FORMAT_VERSION,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def _charge(ens: ConformerEnsemble) -> tuple[int, int]:
    atoms = list(ens.mol.GetAtoms())
    return sum(a.GetFormalCharge() for a in atoms), sum(a.GetNumRadicalElectrons() for a in atoms)

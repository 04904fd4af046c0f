"""Per-conformer descriptors of a phosphorus ligand: sterics around P (morfeus) and GFN2.

As in Kraken (Gensch et al., JACS 144, 1205 (2022)), the steric descriptors are taken
for the ligand bound to a dummy metal placed on the P lone-pair axis,
:data:`METAL_P_DISTANCE` = 2.28 A from P, opposite the mean of the three P-substituent
bond vectors (element Pd for the radii; it is excluded from every descriptor):

* Sterimol B1, B5, L (A) along the metal -> P axis (``morfeus.Sterimol``, CRC radii),
  and buried Sterimol B5, L (``Sterimol.bury``: atoms outside a 5.5 A sphere on P
  deleted, radii x 0.5), the two MARCEL Kraken targets besides B5 and L;
* percent buried volume (%) in a 3.5 A sphere on the metal (``morfeus.BuriedVolume``,
  Bondi radii x 1.17, hydrogens included);
* solid angle (sr) and the solid cone angle (deg, the cone of the same solid angle) seen
  from the metal (``morfeus.SolidAngle``) — the exact Tolman-type cone angle
  (``morfeus.ConeAngle``) costs ~6 s per conformer without ``libconeangle``;
* GFN2-xTB (``tblite``) HOMO energy (eV) and the vertical ionisation potential by
  Delta-SCF (cation, ``uhf=1``; eV).

:func:`_ligand_label_job` runs in worker processes (one thread each).
"""

from __future__ import annotations

import time

import numpy as np

from .xtb import XTBConfig, vertical_ip_ea, xtb_singlepoint

__all__ = [
    "DESCRIPTORS",
    "DESCRIPTOR_UNITS",
    "METAL_P_DISTANCE",
    "dummy_metal",
    "steric_descriptors",
]

#: Per-conformer descriptors, in column order.
DESCRIPTORS = (
    "sterimol_B1",
    "sterimol_B5",
    "sterimol_L",
    "sterimol_burB5",
    "sterimol_burL",
    "vbur",
    "solid_angle",
    "cone_angle",
    "homo_ev",
    "ip_ev",
)
#: Units of :data:`DESCRIPTORS`.
DESCRIPTOR_UNITS = {
    "sterimol_B1": "A",
    "sterimol_B5": "A",
    "sterimol_L": "A",
    "sterimol_burB5": "A",
    "sterimol_burL": "A",
    "vbur": "%",
    "solid_angle": "sr",
    "cone_angle": "deg",
    "homo_ev": "eV",
    "ip_ev": "eV",
}
#: Dummy metal - P distance (A), as in Kraken.
METAL_P_DISTANCE = 2.28
_METAL_Z = 46  # Pd


def dummy_metal(positions_a: np.ndarray, p_index: int, neighbours) -> np.ndarray:
    """Position of the dummy metal on the P lone-pair axis.

    Parameters
    ----------
    positions_a : numpy.ndarray, shape (N, 3)
        One conformer, Angstrom.
    p_index : int
        0-based index of P.
    neighbours : sequence of int
        0-based indices of P's (three) substituent atoms.

    Returns
    -------
    numpy.ndarray, shape (3,)
        :data:`METAL_P_DISTANCE` from P, opposite the mean unit P-substituent vector.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0, 0, 0.5], [1, 0, 0], [-0.5, 0.87, 0], [-0.5, -0.87, 0]])
    >>> m = dummy_metal(x, 0, [1, 2, 3])
    >>> round(float(np.linalg.norm(m - x[0])), 2), bool(m[2] > x[0, 2])
    (2.28, True)
    """
    x = np.asarray(positions_a, dtype=np.float64)
    v = x[list(neighbours)] - x[p_index]
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    d = -v.mean(0)
    norm = np.linalg.norm(d)
    if norm < 1e-6:
        raise ValueError("P is planar (no lone-pair axis); check the geometry")
    return x[p_index] + METAL_P_DISTANCE * d / norm


def steric_descriptors(
    numbers: np.ndarray,
    positions_a: np.ndarray,
    p_index: int,
    neighbours,
    vbur_density: float = 0.005,
    solid_density: float = 0.01,
) -> dict[str, float]:
    """Kraken-style steric descriptors of one conformer (see the module docstring).

    Parameters
    ----------
    numbers : numpy.ndarray, shape (N,)
    positions_a : numpy.ndarray, shape (N, 3)
        Angstrom.
    p_index : int
        0-based index of P.
    neighbours : sequence of int
        0-based indices of P's substituent atoms.
    vbur_density, solid_density : float
        Grid densities of ``BuriedVolume`` (A^3 per point) and ``SolidAngle``.

    Returns
    -------
    dict
        ``sterimol_B1, sterimol_B5, sterimol_L, sterimol_burB5, sterimol_burL`` (A),
        ``vbur`` (%), ``solid_angle``
        (sr), ``cone_angle`` (deg).
    """
    from morfeus import BuriedVolume, SolidAngle, Sterimol

    x = np.asarray(positions_a, dtype=np.float64)
    el = [int(z) for z in numbers] + [_METAL_Z]
    xyz = np.vstack([x, dummy_metal(x, p_index, neighbours)])
    m = len(el)  # morfeus indices are 1-based
    st = Sterimol(el, xyz, m, p_index + 1, excluded_atoms=[m])
    bv = BuriedVolume(el, xyz, m, include_hs=True, radius=3.5, density=vbur_density)
    sa = SolidAngle(el, xyz, m, density=solid_density)
    b1, b5, length = float(st.B_1_value), float(st.B_5_value), float(st.L_value)
    st.bury(sphere_radius=5.5, method="delete", radii_scale=0.5)
    return {
        "sterimol_B1": b1,
        "sterimol_B5": b5,
        "sterimol_L": length,
        "sterimol_burB5": float(st.B_5_value),
        "sterimol_burL": float(st.L_value),
        "vbur": 100.0 * float(bv.fraction_buried_volume),
        "solid_angle": float(sa.solid_angle),
        "cone_angle": float(sa.cone_angle),
    }


def _ligand_label_job(
    numbers, positions_nm, p_index, neighbours, charge, xtb_cfg: XTBConfig, densities
) -> dict:
    """Worker: GFN2 energies / HOMO / IP and sterics of every conformer of one ligand."""
    import tblite.interface  # noqa: F401 - load its OpenMP runtime before limiting it
    from threadpoolctl import threadpool_limits

    t0 = time.process_time()
    out: dict[str, list] = {"energy_kj": [], **{d: [] for d in DESCRIPTORS}}
    with threadpool_limits(1, user_api="openmp"):
        for k, pos in enumerate(np.asarray(positions_nm)):
            try:
                ref = xtb_singlepoint(numbers, pos, charge, 0, xtb_cfg)
                ip, _ = vertical_ip_ea(numbers, pos, charge, xtb_cfg, neutral=ref, ea=False)
            except ValueError as err:
                return {"failed": True, "reason": f"conformer {k}: {err}"}
            try:
                st = steric_descriptors(numbers, pos * 10.0, p_index, neighbours, *densities)
            except Exception as err:
                return {
                    "failed": True,
                    "reason": f"conformer {k}: sterics: {type(err).__name__}: {err}",
                }
            out["energy_kj"].append(ref.energy_kj)
            out["homo_ev"].append(ref.homo_ev)
            out["ip_ev"].append(ip)
            for name, v in st.items():
                out[name].append(v)
    res = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    res["cpu_s"] = np.float64(time.process_time() - t0)
    return res

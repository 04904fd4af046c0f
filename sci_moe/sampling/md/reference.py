"""Alanine-dipeptide phi/psi references: the shipped histograms, files and trajectories.

:func:`reference_histogram` is the one reader of a reference; it returns the same
dictionary for every source (a shipped name, a ``.npz`` of counts, angles or positions, or a
trajectory file). The shipped references are built by
:func:`sci_moe.data.alanine_reference.make_reference_histogram`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .alanine import alanine_phi_psi
from .histograms import angle_counts, normalise
from .shipped import shipped_files, shipped_files_dir

__all__ = ["REFERENCE_PREFIX", "reference_histogram", "shipped_reference"]

#: Shipped references are ``<REFERENCE_PREFIX><forcefield>_<solvent>_<T>K.npz``.
REFERENCE_PREFIX = "alanine_dipeptide_reference_"


def shipped_reference(
    forcefield: str = "amber99sbildn", implicit_solvent: str | None = "obc", temperature_k=300
) -> Path | None:
    """The alanine-dipeptide phi/psi reference shipped in ``sci_moe/sampling/files``.

    Prefers ``alanine_dipeptide_reference_<forcefield>_<solvent>_<T>K.npz`` (solvent
    ``vacuum`` for ``None``), else any shipped reference, else ``None``.
    """
    name = f"{forcefield}_{implicit_solvent or 'vacuum'}_{round(float(temperature_k))}K"
    exact = shipped_files_dir() / f"{REFERENCE_PREFIX}{name}.npz"
    if exact.is_file():
        return exact
    files = shipped_files(f"{REFERENCE_PREFIX}*.npz")
    return files[0] if files else None


def _rebin(counts: np.ndarray, bins: int, name: str) -> np.ndarray:
    b = counts.shape[0]
    if counts.shape != (b, b):
        raise ValueError(f"{name}: the reference histogram must be square, got {counts.shape}")
    if b == bins:
        return counts
    if b % bins:
        raise ValueError(
            f"{name} has {b} x {b} bins, which cannot be merged into {bins} x {bins}; "
            f"use --bins {b} or a divisor of it"
        )
    f = b // bins
    return counts.reshape(bins, f, bins, f).sum((1, 3))


def _is_name(reference) -> bool:
    if not isinstance(reference, str):
        return False
    p = Path(reference)
    return p.suffix == "" and len(p.parts) == 1 and not p.exists()


def _result(counts, bins, description, metadata=None, **extra) -> dict:
    edges = np.linspace(-np.pi, np.pi, bins + 1)
    return {
        "p": normalise(counts),
        "counts": counts,
        "edges": edges,
        "description": description,
        "metadata": metadata or {},
        **extra,
    }


def reference_histogram(
    reference="amber99sbildn_obc_300K", bins: int = 64, topology=None, atom_indices=None
) -> dict:
    """phi/psi histogram of an alanine-dipeptide reference.

    Parameters
    ----------
    reference : str or Path
        A shipped name (``"amber99sbildn_obc_300K"``: the file
        ``sci_moe/sampling/files/alanine_dipeptide_reference_<name>.npz``); a ``.npz`` with
        ``counts`` or ``histogram`` (B x B over :math:`[-\\pi, \\pi]^2`, phi along axis 0;
        merged into ``bins`` when ``bins`` divides B), ``phi_psi`` (F, 2) radians or
        ``positions`` (F, 22, 3) nm; or a trajectory (``.dcd``, ``.xtc``, ``.h5``) read with
        ``topology`` (a PDB path).
    bins : int
        Bins per axis.
    topology : str or Path, optional
        For trajectories.
    atom_indices : sequence of int, optional
        For coarse-grained positions/trajectories (see
        :func:`~sci_moe.sampling.md.alanine.alanine_phi_psi`).

    Returns
    -------
    dict
        ``p`` (bins, bins) probabilities (sum 1; phi along axis 0), ``counts`` (bins, bins)
        the unnormalised histogram (int64 for shipped files), ``edges`` (bins + 1,) rad,
        ``description`` (str), ``metadata`` (dict; for shipped files the force field,
        temperature, simulated ns and convergence between halves), and for shipped files
        also ``counts_first_half`` / ``counts_second_half``.
    """
    if int(bins) != bins or bins < 2:
        raise ValueError(f"bins must be an integer >= 2, got {bins}")
    if _is_name(reference):
        path = shipped_files_dir() / f"{REFERENCE_PREFIX}{reference}.npz"
        if not path.is_file():
            found = shipped_files(f"{REFERENCE_PREFIX}*.npz")
            avail = [p.stem[len(REFERENCE_PREFIX) :] for p in found]
            raise ValueError(f"no shipped reference histogram {reference!r}; available: {avail}")
    else:
        path = Path(reference)
    if not path.is_file():
        raise ValueError(f"reference {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["metadata"])) if "metadata" in z else {}
            for key in ("counts", "histogram"):
                if key in z:
                    counts = _rebin(np.asarray(z[key]), bins, path.name)
                    halves = {
                        k: _rebin(np.asarray(z[k]), bins, path.name)
                        for k in ("counts_first_half", "counts_second_half")
                        if k in z
                    }
                    return _result(counts, bins, f"{path.name} ({key})", meta, **halves)
            if "phi_psi" in z:
                angles = z["phi_psi"]
            elif "positions" in z:
                pos = z["positions"]
                angles = alanine_phi_psi(pos, atom_indices if pos.shape[1] != 22 else None)
            else:
                raise ValueError(
                    f"{path.name} holds none of 'histogram', 'phi_psi', 'positions': {list(z)}"
                )
        counts = angle_counts(angles, bins)[0]
        return _result(counts, bins, f"{path.name} ({len(angles)} frames)", meta)
    import mdtraj

    if topology is None:
        raise ValueError(f"reading the trajectory {path.name} needs a topology (PDB)")
    try:
        traj = mdtraj.load(str(path), top=str(topology))
    except Exception as err:
        raise ValueError(f"cannot read reference trajectory {path}: {err}") from None
    angles = alanine_phi_psi(traj.xyz, atom_indices if traj.n_atoms != 22 else None)
    counts = angle_counts(angles, bins)[0]
    return _result(counts, bins, f"{path.name} ({traj.n_frames} frames)")

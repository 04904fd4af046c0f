"""Files the sampling field ships and needs at run time (``sci_moe/sampling/files``).

* ``alanine-dipeptide.pdb``: ACE-ALA-NME, 22 atoms, vacuum-minimised (built by
  :func:`sci_moe.data.alanine_pdb.build_pdb`);
* ``alanine_dipeptide_reference_<forcefield>_<solvent>_<T>K.npz``: phi/psi reference
  histograms (built by :func:`sci_moe.data.alanine_reference.make_reference_histogram`);
* ``alanine_energy_model.safetensors``: the learned 5-bead energy model (built by
  ``scripts/train_alanine_energy_model.py``).

They are package data of ``sci_moe.sampling`` (see ``pyproject.toml``) and are found with
:mod:`importlib.resources`, so they work from a wheel as from a source tree.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["shipped_file", "shipped_files", "shipped_files_dir"]


def shipped_files_dir() -> Path:
    """The folder of the shipped files (``sci_moe/sampling/files``)."""
    return Path(str(resources.files("sci_moe.sampling").joinpath("files")))


def shipped_file(name: str, *, hint: str = "reinstall sci-moe") -> Path:
    """Path of the shipped file ``name``.

    Raises
    ------
    FileNotFoundError
        If it is missing (the message says how to get it back: ``hint``).
    """
    path = shipped_files_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; {hint}")
    return path


def shipped_files(pattern: str) -> list[Path]:
    """Shipped files matching the glob ``pattern``, sorted (empty if none)."""
    folder = shipped_files_dir()
    return sorted(folder.glob(pattern)) if folder.is_dir() else []

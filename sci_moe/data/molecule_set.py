"""Offline conformer-ensemble benchmark: NCI molecules, RDKit ensembles, GFN2-xTB labels.

Built entirely by code from data that ships with RDKit's wheel (no download):

1. **Molecules**: the NCI set ``rdkit/Data/NCI/first_5K.smi``, filtered to flexible,
   drug-sized, neutral single-fragment molecules (4-8 rotatable bonds, 12-30 heavy atoms,
   elements H C N O F P S Cl Br I); a seeded random choice of ``n_molecules``.
2. **Ensembles**: :func:`sci_moe.molecules.conformers.generate_ensembles` (ETKDGv3,
   MMFF94, symmetry-aware pruning, at most 10 conformers within 10 kcal/mol).
3. **Labels** per conformer: GFN2-xTB (``tblite``) energy, dipole moment (Debye) and
   HOMO-LUMO gap (eV); radius of gyration (mass-weighted, nm) and solvent-accessible
   surface area (``morfeus``, probe 1.4 A, nm^2). The molecule label is the Boltzmann
   average at ``temperature_k`` with weights from the **GFN2** energies,
   :math:`\\langle y\\rangle = \\sum_c w_c y_c`.

Work is parallel over molecules (one thread per process), every molecule's result is
cached under a content hash, failures are listed in ``report.json``, and the output files
get sha256 checksums (``checksums.sha256``, ``sha256sum -c`` format). One command builds
the full set::

    sci-moe data molecules --full --out DIR

(~50 molecules by default; ``--full`` = 500). RDKit ensembles are a stand-in for MARCEL's
(Auto3D / CREST / DFT) ensembles, not the same distribution.

The pieces live in one module each (this module re-exports them): candidates in
:mod:`~sci_moe.data.nci`, labels in :mod:`~sci_moe.data.molecule_labels`, the stored set
in :mod:`~sci_moe.data.molecule_set_store` and the builder in
:mod:`~sci_moe.data.molecule_set_build`; the command line is :mod:`sci_moe.cli.data`
(``sci-moe data molecules``).
"""

from __future__ import annotations

from .molecule_labels import geometric_labels
from .molecule_set_build import MoleculeSetConfig, build_molecule_set
from .molecule_set_store import (
    CHECKSUM_FILE,
    DATA_FILE,
    REPORT_FILE,
    TARGET_UNITS,
    TARGETS,
    MoleculeSet,
)
from .nci import nci_pool

__all__ = [
    "CHECKSUM_FILE",
    "DATA_FILE",
    "REPORT_FILE",
    "TARGETS",
    "TARGET_UNITS",
    "MoleculeSet",
    "MoleculeSetConfig",
    "build_molecule_set",
    "geometric_labels",
    "nci_pool",
]

"""Alanine dipeptide (ACE-ALA-NME, 22 atoms): the builders, and the old import path.

The concepts live where they are used at run time, in the sampling field, and are
re-exported here so that ``sci_moe.data.alanine_dipeptide.<name>`` keeps working:

* atoms, dihedrals, the shipped PDB, OpenMM systems: :mod:`sci_moe.sampling.md.alanine`
  (:data:`PHI_ATOMS`, :func:`phi_psi`, :func:`build_system`, ...) and
  :func:`sci_moe.sampling.md.dihedrals`;
* the shipped phi/psi reference and the histogram JS divergence:
  :func:`sci_moe.sampling.md.reference_histogram`, :func:`sci_moe.sampling.md.js_divergence`
  (:func:`js_divergence_counts` is that function).

The builders are here: :func:`build_pdb` (:mod:`sci_moe.data.alanine_pdb`) and
:func:`generate_reference` / :func:`load_reference` / :func:`make_reference_histogram`
(:mod:`sci_moe.data.alanine_reference`).
"""

from __future__ import annotations

from ..sampling.md import (
    ATOM_NAMES,
    BACKBONE_ATOMS,
    HEAVY_ATOMS,
    PHI_ATOMS,
    PSI_ATOMS,
    alanine_dipeptide_pdb,
    build_system,
    dihedrals,
    phi_psi,
    reference_histogram,
)
from ..sampling.md import js_divergence as js_divergence_counts
from .alanine_pdb import build_pdb
from .alanine_reference import (
    generate_reference,
    load_reference,
    make_reference_histogram,
    phi_psi_histogram,
)

__all__ = [
    "ATOM_NAMES",
    "BACKBONE_ATOMS",
    "HEAVY_ATOMS",
    "PHI_ATOMS",
    "PSI_ATOMS",
    "alanine_dipeptide_pdb",
    "build_pdb",
    "build_system",
    "dihedrals",
    "generate_reference",
    "js_divergence_counts",
    "load_reference",
    "make_reference_histogram",
    "phi_psi",
    "phi_psi_histogram",
    "reference_histogram",
]

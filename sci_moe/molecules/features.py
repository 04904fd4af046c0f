"""Atom and bond featurisation of RDKit molecules (one-hot, OGB-like).

Degrees and hydrogen counts include implicit hydrogens, so a heavy-atom graph
(``Chem.RemoveHs``) has the same rows as the heavy atoms of the all-atom graph.

The categories follow OGB's ``atom_to_feature_vector`` / ``bond_to_feature_vector`` (as
MARCEL and SPiCE use them) with a compact element vocabulary: every categorical feature
is one-hot encoded with a trailing "other" slot, so unseen values never raise. The column
layout is listed in :data:`ATOM_FEATURE_NAMES` and :data:`BOND_FEATURE_NAMES`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # RDKit is imported when a molecule is featurised, not on import
    from rdkit import Chem

__all__ = [
    "ATOM_FEATURE_DIM",
    "ATOM_FEATURE_NAMES",
    "BOND_FEATURE_DIM",
    "BOND_FEATURE_NAMES",
    "ELEMENTS",
    "atom_features",
    "bond_features",
    "bond_index",
]

#: Elements with their own one-hot slot (everything else goes to "other").
ELEMENTS = ("H", "B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Br", "I")

_DEGREES = (0, 1, 2, 3, 4, 5, 6)
_CHARGES = (-2, -1, 0, 1, 2)
_NUM_HS = (0, 1, 2, 3, 4)
# RDKit enum members by name (resolved on first use, so importing this module does not
# load RDKit); ``str(member)`` is the name, as in the column names.
_HYBRID = ("S", "SP", "SP2", "SP3", "SP3D", "SP3D2")
# CIP labels (canonical): RDKit's CW/CCW tag is relative to the order of an atom's
# neighbours, so the same enantiomer written as different SMILES got different features.
_CHIRAL = ("none", "R", "S")
_RING_SIZES = (3, 4, 5, 6, 7, 8)

_BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
_STEREO = ("STEREONONE", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS")


@functools.cache
def _enums() -> dict[str, tuple]:
    """The RDKit enum members of the categorical features, in column order."""
    from rdkit import Chem

    return {
        "hybridization": tuple(getattr(Chem.HybridizationType, n) for n in _HYBRID),
        "bond_type": tuple(getattr(Chem.BondType, n) for n in _BOND_TYPES),
        "stereo": tuple(getattr(Chem.BondStereo, n) for n in _STEREO),
    }


def _names(prefix: str, values) -> list[str]:
    return [f"{prefix}={v}" for v in values] + [f"{prefix}=other"]


#: Column names of :func:`atom_features`.
ATOM_FEATURE_NAMES: tuple[str, ...] = tuple(
    _names("element", ELEMENTS)
    + _names("degree", _DEGREES)
    + _names("formal_charge", _CHARGES)
    + _names("num_hs", _NUM_HS)
    + _names("hybridization", _HYBRID)
    + _names("chirality", _CHIRAL)
    + ["aromatic", "in_ring"]
    + [f"in_ring_size={r}" for r in _RING_SIZES]
)
#: Column names of :func:`bond_features`.
BOND_FEATURE_NAMES: tuple[str, ...] = tuple(
    _names("bond_type", _BOND_TYPES) + _names("stereo", _STEREO) + ["conjugated", "in_ring"]
)
#: Width ``Fa`` of the atom features.
ATOM_FEATURE_DIM = len(ATOM_FEATURE_NAMES)
#: Width ``Fb`` of the bond features.
BOND_FEATURE_DIM = len(BOND_FEATURE_NAMES)


def _one_hot(value, choices) -> list[float]:
    out = [0.0] * (len(choices) + 1)
    try:
        out[choices.index(value)] = 1.0
    except ValueError:
        out[-1] = 1.0
    return out


def _cip_labels(mol: Chem.Mol) -> list[str]:
    """CIP label per atom: ``"R"``, ``"S"``, ``"none"`` (no tetrahedral tag) or ``"?"``.

    Computed on a copy (the caller's molecule is not modified) with RDKit's legacy
    ``AssignStereochemistry`` (canonical-rank based, cheap); ``"?"`` (a tagged atom that is
    not a true stereocentre or has no label) falls in the "other" column.
    """
    from rdkit import Chem

    m = Chem.Mol(mol)
    Chem.AssignStereochemistry(m, cleanIt=True, force=True)
    out = []
    for a in m.GetAtoms():
        if a.HasProp("_CIPCode"):
            out.append(a.GetProp("_CIPCode"))
        elif a.GetChiralTag() == Chem.ChiralType.CHI_UNSPECIFIED:
            out.append("none")
        else:
            out.append("?")
    return out


def atom_features(mol: Chem.Mol) -> np.ndarray:
    """One-hot atom features.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
        Molecule (with or without explicit hydrogens; ``num_hs`` counts all hydrogens,
        explicit neighbours included, so a heavy-atom graph keeps that information).

    Returns
    -------
    numpy.ndarray, shape (n_atoms, ATOM_FEATURE_DIM), float32
        Columns as in :data:`ATOM_FEATURE_NAMES`. Chirality is the CIP label
        (``chirality=R``/``S``; ``none`` for atoms without a tetrahedral tag), which does not
        depend on the atom order or on how the SMILES was written.
    """
    enums = _enums()
    ring_info = mol.GetRingInfo()
    cip = _cip_labels(mol)
    rows = []
    for atom in mol.GetAtoms():
        idx = atom.GetIdx()
        row = (
            _one_hot(atom.GetSymbol(), ELEMENTS)
            + _one_hot(atom.GetTotalDegree(), _DEGREES)
            + _one_hot(atom.GetFormalCharge(), _CHARGES)
            + _one_hot(atom.GetTotalNumHs(includeNeighbors=True), _NUM_HS)
            + _one_hot(atom.GetHybridization(), enums["hybridization"])
            + _one_hot(cip[idx], _CHIRAL)
            + [float(atom.GetIsAromatic()), float(atom.IsInRing())]
            + [float(ring_info.IsAtomInRingOfSize(idx, r)) for r in _RING_SIZES]
        )
        rows.append(row)
    return np.asarray(rows, dtype=np.float32).reshape(-1, ATOM_FEATURE_DIM)


def bond_index(mol: Chem.Mol) -> np.ndarray:
    """Bond graph in both directions.

    Returns
    -------
    numpy.ndarray, shape (2, 2 * n_bonds), int64
        Bond ``b`` of RDKit appears as columns ``2b`` (begin -> end) and ``2b + 1``
        (end -> begin).
    """
    pairs = []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        pairs += [(i, j), (j, i)]
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2).T.copy()


def bond_features(mol: Chem.Mol) -> np.ndarray:
    """One-hot bond features, each bond twice (same order as :func:`bond_index`).

    Returns
    -------
    numpy.ndarray, shape (2 * n_bonds, BOND_FEATURE_DIM), float32
    """
    enums = _enums()
    rows = []
    for bond in mol.GetBonds():
        row = (
            _one_hot(bond.GetBondType(), enums["bond_type"])
            + _one_hot(bond.GetStereo(), enums["stereo"])
            + [float(bond.GetIsConjugated()), float(bond.IsInRing())]
        )
        rows += [row, row]
    return np.asarray(rows, dtype=np.float32).reshape(-1, BOND_FEATURE_DIM)

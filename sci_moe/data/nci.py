"""Candidate molecules from the NCI file that ships with RDKit (``Data/NCI/first_5K.smi``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

__all__ = ["nci_pool"]

_ALLOWED_ELEMENTS = ("H", "C", "N", "O", "F", "P", "S", "Cl", "Br", "I")


@functools.lru_cache(maxsize=1)
def _nci_table() -> tuple[tuple, ...]:
    """(name, smiles, heavy atoms, rotatable bonds, elements, usable) of every NCI entry."""
    from rdkit import Chem, RDConfig, RDLogger
    from rdkit.Chem import rdMolDescriptors

    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    if not path.exists():
        raise ValueError(f"RDKit's NCI file is missing ({path}); reinstall rdkit")
    rows = []
    RDLogger.DisableLog("rdApp.*")
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            smi, ident = parts[0], parts[1]
            mol = Chem.MolFromSmiles(smi)
            if mol is None:
                continue
            usable = len(Chem.GetMolFrags(mol)) == 1 and not any(
                a.GetFormalCharge() or a.GetNumRadicalElectrons() for a in mol.GetAtoms()
            )
            rows.append(
                (
                    f"NCI-{ident}",
                    smi,
                    mol.GetNumHeavyAtoms(),
                    rdMolDescriptors.CalcNumRotatableBonds(mol),
                    frozenset(a.GetSymbol() for a in mol.GetAtoms()),
                    usable,
                )
            )
    finally:
        RDLogger.EnableLog("rdApp.*")
    return tuple(rows)


def nci_pool(
    min_rotatable: int = 4,
    max_rotatable: int = 8,
    min_heavy: int = 12,
    max_heavy: int = 30,
    elements: Sequence[str] = _ALLOWED_ELEMENTS,
) -> list[tuple[str, str]]:
    """Candidate molecules from RDKit's shipped NCI file ``Data/NCI/first_5K.smi``.

    Keeps neutral single-fragment molecules with no radicals, only ``elements``, and the
    given ranges of rotatable bonds (``rdMolDescriptors.CalcNumRotatableBonds``) and heavy
    atoms (910 entries with the defaults and RDKit 2026.09; 18 of them repeat an earlier
    molecule, which :func:`build_molecule_set` skips).

    Returns
    -------
    list of (name, smiles)
        ``name`` is ``"NCI-<id>"`` from the file; file order.
    """
    allowed = frozenset(elements)
    return [
        (name, smi)
        for name, smi, heavy, rot, elems, usable in _nci_table()
        if usable
        and elems <= allowed
        and min_heavy <= heavy <= max_heavy
        and min_rotatable <= rot <= max_rotatable
    ]


def _canonical(smiles: str) -> str | None:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        mol = Chem.MolFromSmiles(smiles)
    finally:
        RDLogger.EnableLog("rdApp.*")
    return None if mol is None else Chem.MolToSmiles(mol)

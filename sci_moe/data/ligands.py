"""Kraken-like monodentate organophosphorus ligands PR1R2R3, enumerated by code.

Three classes, built combinatorially from substituent lists rich in rotatable bonds
(alkyl chains, benzyl / phenethyl, aryl ethers, alkoxy ethers):

* **phosphines** ``P(R1)(R2)(R3)``: every multiset of three :data:`CARBON_GROUPS`;
* **phosphites** ``P(OR1)(OR2)(OR3)``: every multiset of three :data:`ALKOXY_GROUPS`;
* **aminophosphines** ``P(NR2)_x R_{3-x}``, x = 1..3: :data:`AMINO_GROUPS` with
  :data:`CARBON_GROUPS`.

:func:`ligand_pool` lists them in a fixed order (class, then canonical SMILES), deduplicated
by canonical SMILES; :func:`choose_ligands` takes a seeded random choice. A stand-in for
Kraken's 1,558 ligands (Gensch et al., JACS 144, 1205 (2022)), not the same distribution.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

__all__ = [
    "ALKOXY_GROUPS",
    "AMINO_GROUPS",
    "CARBON_GROUPS",
    "LIGAND_CLASSES",
    "choose_ligands",
    "ligand_pool",
]

#: Carbon-bound substituents (SMILES, first atom bonded to P).
CARBON_GROUPS = (
    "CC",  # ethyl
    "CCCC",  # n-butyl
    "CCCCCC",  # n-hexyl
    "CC(C)C",  # isobutyl
    "C(C)C",  # isopropyl
    "C(C)(C)C",  # tert-butyl
    "C1CCCCC1",  # cyclohexyl
    "Cc1ccccc1",  # benzyl
    "CCc1ccccc1",  # phenethyl
    "c1ccccc1",  # phenyl
    "c1ccc(OC)cc1",  # 4-anisyl
    "c1ccccc1OC",  # 2-anisyl
    "c1ccc(OCC)cc1",  # 4-ethoxyphenyl
    "c1ccccc1C",  # o-tolyl
    "CCOC",  # 2-methoxyethyl
    "CCCOCC",  # 3-ethoxypropyl
    "Cc1ccc(OC)cc1",  # 4-methoxybenzyl
    "CC(C)(C)c1ccccc1",  # neophyl-like (2-methyl-2-phenylpropyl)
)
#: Alkoxy / aryloxy substituents of phosphites (SMILES, first atom O bonded to P).
ALKOXY_GROUPS = (
    "OC",
    "OCC",
    "OC(C)C",
    "OCCCC",
    "OCc1ccccc1",
    "Oc1ccccc1",
    "Oc1ccccc1C",
    "OCCOC",
    "OCCCCCC",
    "Oc1ccc(OC)cc1",
)
#: Amino substituents of aminophosphines (SMILES, first atom N bonded to P).
AMINO_GROUPS = (
    "N(C)C",
    "N(CC)CC",
    "N(CCCC)CCCC",
    "N1CCCC1",
    "N1CCOCC1",
    "N(C)c1ccccc1",
    "N(C)Cc1ccccc1",
)
LIGAND_CLASSES = ("phosphine", "phosphite", "aminophosphine")
_PREFIX = {"phosphine": "PR3", "phosphite": "POR3", "aminophosphine": "PNR2"}


def _smiles(groups) -> str:
    return "P" + "".join(f"({g})" for g in groups[:-1]) + groups[-1]


@functools.lru_cache(maxsize=1)
def _pool() -> tuple[tuple[str, str, str], ...]:
    from rdkit import Chem

    raw = {"phosphine": [], "phosphite": [], "aminophosphine": []}
    for combo in itertools.combinations_with_replacement(CARBON_GROUPS, 3):
        raw["phosphine"].append(combo)
    for combo in itertools.combinations_with_replacement(ALKOXY_GROUPS, 3):
        raw["phosphite"].append(combo)
    for x in (1, 2, 3):
        for amines in itertools.combinations_with_replacement(AMINO_GROUPS, x):
            for rest in itertools.combinations_with_replacement(CARBON_GROUPS, 3 - x):
                raw["aminophosphine"].append(amines + rest)
    rows, seen = [], set()
    for cls in LIGAND_CLASSES:
        canon = []
        for combo in raw[cls]:
            mol = Chem.MolFromSmiles(_smiles(combo))
            if mol is None:  # pragma: no cover - the lists above are valid
                raise ValueError(f"bad substituent SMILES in {combo}")
            canon.append(Chem.MolToSmiles(mol))
        for k, smi in enumerate(sorted(set(canon))):
            if smi in seen:
                continue
            seen.add(smi)
            rows.append((f"{_PREFIX[cls]}-{k:04d}", smi, cls))
    return tuple(rows)


def ligand_pool(classes=LIGAND_CLASSES) -> list[tuple[str, str, str]]:
    """Every enumerated ligand, in a fixed order.

    Parameters
    ----------
    classes : sequence of str
        Any of :data:`LIGAND_CLASSES`.

    Returns
    -------
    list of (name, smiles, class)
        ``name`` is ``"<prefix>-<k>"`` (prefix ``PR3`` / ``POR3`` / ``PNR2`` by class, k =
        rank of the canonical SMILES in its class), e.g. ``"PR3-0012"``, ``"PNR2-0500"``.

    Examples
    --------
    >>> pool = ligand_pool()
    >>> len(pool), pool[0][0], pool[0][2]
    (3145, 'PR3-0000', 'phosphine')
    """
    bad = [c for c in classes if c not in LIGAND_CLASSES]
    if bad:
        raise ValueError(f"unknown ligand classes {bad}; choose from {LIGAND_CLASSES}")
    return [r for r in _pool() if r[2] in classes]


def choose_ligands(n: int, seed: int = 0, classes=LIGAND_CLASSES) -> list[tuple[str, str, str]]:
    """A seeded random order of :func:`ligand_pool` with the classes interleaved.

    Each class is shuffled with ``numpy.random.default_rng(seed)`` and the classes are
    taken in turn (phosphine, phosphite, aminophosphine, ...) until a class runs out, so
    a small set holds all three classes in equal parts. ``n`` only truncates the order:
    the first ``n`` of a larger choice are the smaller choice.

    Returns
    -------
    list of (name, smiles, class), length ``min(n, pool size)``
    """
    if n < 1:
        raise ValueError(f"n must be >= 1 ligand, got {n}")
    rng = np.random.default_rng(seed)
    pool = ligand_pool(classes)
    queues = []
    for cls in classes:
        rows = [r for r in pool if r[2] == cls]
        queues.append([rows[i] for i in rng.permutation(len(rows))])
    out = []
    for k in range(max(len(q) for q in queues)):
        for q in queues:
            if k < len(q):
                out.append(q[k])
    return out[:n]

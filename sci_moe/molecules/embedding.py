"""Conformer ensemble of one molecule: settings, embedding, pruning, the result.

Recipe (RDKit 2024+): seeded ETKDGv3 embedding (Riniker & Landrum 2015; Wang et al. 2020)
of ``num_attempts`` conformers, MMFF94 optimisation, an energy window, greedy
symmetry-aware heavy-atom RMSD pruning in order of increasing energy
(``rdMolAlign.GetBestRMS``), at most ``max_confs`` conformers kept, energies in kJ/mol
and Boltzmann weights at ``temperature_k``. Many molecules at once, cached and in
parallel: :func:`sci_moe.molecules.generate_ensembles`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem, rdDistGeom, rdMolAlign

from .._util import KJ_PER_KCAL
from .boltzmann import boltzmann_weights
from .ensemble_graph import EnsembleGraph

__all__ = [
    "ConformerConfig",
    "ConformerEnsemble",
    "embed_ensemble",
    "ensemble_from_arrays",
    "set_conformers",
]

_FORCE_FIELDS = ("mmff94", "mmff94s")


@dataclass
class ConformerConfig:
    """Settings of :func:`embed_ensemble`.

    Parameters
    ----------
    num_attempts : int
        Conformers ETKDGv3 tries to embed.
    max_confs : int
        Conformers kept (lowest energies after pruning).
    seed : int
        ETKDG ``randomSeed``, an integer >= 0 (results are reproducible for a fixed seed and
        RDKit; RDKit's ``-1``, a random seed, is refused).
    prune_rms : float
        Heavy-atom RMSD threshold in Angstrom for symmetry-aware pruning after
        optimisation (0 switches pruning off); also ETKDG's ``pruneRmsThresh`` before it.
    energy_window_kj : float or None
        Drop conformers more than this above the lowest (kJ/mol); None keeps all.
    temperature_k : float
        Temperature of the Boltzmann weights (K).
    force_field : {"mmff94", "mmff94s"}
        MMFF variant for optimisation and energies.
    max_iters : int
        MMFF optimisation iterations per conformer.
    max_matches : int
        Symmetry matches tried per RMSD (``GetBestRMS(maxMatches=...)``).
    assign_stereo : bool
        Give unspecified stereocentres and double bonds a definite configuration (that of
        one seeded ETKDG embedding, so always a feasible one) so the ensemble holds one
        stereoisomer, not a mixture of mirror images; the result is
        :attr:`ConformerEnsemble.stereo_smiles`.
    """

    num_attempts: int = 30
    max_confs: int = 10
    seed: int = 0xF00D
    prune_rms: float = 0.5
    energy_window_kj: float | None = 10.0 * KJ_PER_KCAL
    temperature_k: float = 298.15
    force_field: str = "mmff94"
    max_iters: int = 2000
    max_matches: int = 10000
    assign_stereo: bool = True

    def __post_init__(self) -> None:
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, numbers.Integral)
            or self.seed < 0
        ):
            raise ValueError(
                f"seed must be an integer >= 0, got {self.seed!r} (RDKit reads -1 as "
                "'random', which is not reproducible)"
            )
        if self.num_attempts < 1:
            raise ValueError(f"num_attempts must be >= 1, got {self.num_attempts}")
        if self.max_confs < 1:
            raise ValueError(f"max_confs must be >= 1, got {self.max_confs}")
        if self.prune_rms < 0:
            raise ValueError(f"prune_rms must be >= 0 Angstrom, got {self.prune_rms}")
        if self.energy_window_kj is not None and not self.energy_window_kj > 0:
            raise ValueError(f"energy_window_kj must be > 0 or None, got {self.energy_window_kj}")
        if not self.temperature_k > 0:
            raise ValueError(f"temperature_k must be > 0 K, got {self.temperature_k}")
        if self.force_field not in _FORCE_FIELDS:
            raise ValueError(
                f"force_field must be one of {_FORCE_FIELDS}, got {self.force_field!r}"
            )
        if self.max_iters < 1 or self.max_matches < 1:
            raise ValueError("max_iters and max_matches must be >= 1")


@dataclass
class ConformerEnsemble:
    """Conformers of one molecule, in order of increasing energy.

    Attributes
    ----------
    name : str
        Identifier given by the user (or generated).
    smiles : str
        Input SMILES (canonical SMILES for RDKit-molecule input).
    mol : rdkit.Chem.Mol
        Molecule with explicit hydrogens and conformers ``0..C-1`` (RDKit coordinates, Angstrom).
    energies_kj : numpy.ndarray, shape (C,)
        Force-field energies in kJ/mol relative to the lowest conformer.
    converged : numpy.ndarray, shape (C,), bool
        Whether the optimisation converged.
    temperature_k : float
        Temperature of :attr:`weights`.
    min_energy_kj : float
        Absolute force-field energy of the lowest conformer (kJ/mol).
    stereo_smiles : str
        Canonical isomeric SMILES of the embedded stereoisomer.
    """

    name: str
    smiles: str
    mol: Chem.Mol
    energies_kj: np.ndarray
    converged: np.ndarray
    temperature_k: float = 298.15
    min_energy_kj: float = 0.0
    stereo_smiles: str = ""

    @property
    def num_confs(self) -> int:
        return int(self.mol.GetNumConformers())

    @property
    def weights(self) -> np.ndarray:
        """Boltzmann weights at :attr:`temperature_k`, shape (C,)."""
        return boltzmann_weights(self.energies_kj, self.temperature_k)

    @property
    def atomic_numbers(self) -> np.ndarray:
        """Atomic numbers, shape (N,)."""
        return np.array([a.GetAtomicNum() for a in self.mol.GetAtoms()], dtype=np.int64)

    @property
    def positions_nm(self) -> np.ndarray:
        """Conformer positions in nm, shape (C, N, 3)."""
        return np.stack([c.GetPositions() for c in self.mol.GetConformers()]) * 0.1

    def to_graph(
        self,
        y: Sequence[float] | None = None,
        conf_y: np.ndarray | None = None,
        energies_kj: Sequence[float] | None = None,
        heavy_only: bool = False,
    ) -> EnsembleGraph:
        """The ensemble as an :class:`~sci_moe.molecules.graph.EnsembleGraph`.

        ``energies_kj`` replaces the force-field energies (e.g. by GFN2-xTB energies);
        weights are Boltzmann weights of whichever energies are used.
        """
        e = self.energies_kj if energies_kj is None else np.asarray(energies_kj, dtype=np.float64)
        return EnsembleGraph.from_rdkit(
            self.mol,
            conf_ids=[c.GetId() for c in self.mol.GetConformers()],
            energies_kj=e,
            temperature_k=self.temperature_k,
            y=y,
            conf_y=conf_y,
            heavy_only=heavy_only,
            name=self.name,
        )


class _Failure(Exception):
    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


def _parse(item) -> Chem.Mol:
    """SMILES string or RDKit molecule -> molecule with explicit hydrogens."""
    if isinstance(item, Chem.Mol):
        mol = Chem.Mol(item)
        mol.RemoveAllConformers()
    else:
        RDLogger.DisableLog("rdApp.*")
        try:
            mol = Chem.MolFromSmiles(str(item))
        finally:
            RDLogger.EnableLog("rdApp.*")
        if mol is None:
            raise _Failure("parse", f"invalid SMILES {item!r}")
    if mol.GetNumAtoms() == 0:
        raise _Failure("parse", "molecule has no atoms")
    return Chem.AddHs(mol)


def _prune(
    mol: Chem.Mol, order: list[int], rms: float, max_keep: int, max_matches: int
) -> list[int]:
    """Greedy symmetry-aware heavy-atom RMSD pruning over conformers in ``order``."""
    if rms <= 0:
        return order[:max_keep]
    heavy = Chem.RemoveHs(mol)
    kept: list[int] = []
    for cid in order:
        if len(kept) >= max_keep:
            break
        unique = True
        for ref in kept:
            probe = Chem.Mol(heavy)  # GetBestRMS aligns the probe in place
            r = rdMolAlign.GetBestRMS(probe, heavy, cid, ref, maxMatches=max_matches)
            if r < rms:
                unique = False
                break
        if unique:
            kept.append(cid)
    return kept


def _has_unspecified_stereo(mol: Chem.Mol) -> bool:
    return any(
        si.specified == Chem.StereoSpecified.Unspecified
        for si in Chem.FindPotentialStereo(Chem.RemoveHs(mol))
    )


def _assign_stereo_from_3d(mol: Chem.Mol, params) -> Chem.Mol:
    """Fix unspecified stereo elements to those of one seeded embedding.

    Enumerating stereoisomers can produce impossible ones (e.g. bridgeheads of
    bicyclo[2.2.2]octanes), on which ETKDG spends minutes and fails; a free embedding is
    always feasible, and its 3-D stereo is then imposed on the whole ensemble.
    """
    probe = Chem.Mol(mol)
    cid = rdDistGeom.EmbedMolecule(probe, params)
    if cid < 0:
        return mol
    Chem.AssignStereochemistryFrom3D(probe, confId=cid)
    probe.RemoveAllConformers()
    return probe


def _embed(item, cfg: ConformerConfig) -> dict:
    """Embed, optimise, prune; returns plain data (picklable) or raises _Failure."""
    parsed = _parse(item)
    if not AllChem.MMFFHasAllMoleculeParams(parsed):
        elements = sorted({a.GetSymbol() for a in parsed.GetAtoms()})
        raise _Failure(
            "forcefield",
            f"no {cfg.force_field.upper()} parameters for this molecule (elements {elements})",
        )
    p = rdDistGeom.ETKDGv3()
    p.randomSeed = int(cfg.seed)
    p.pruneRmsThresh = float(cfg.prune_rms) if cfg.prune_rms > 0 else -1.0
    p.numThreads = 1
    mol = parsed
    if cfg.assign_stereo and _has_unspecified_stereo(parsed):
        mol = _assign_stereo_from_3d(parsed, p)
    cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=cfg.num_attempts, params=p))
    if not cids:
        p.useRandomCoords = True
        cids = list(rdDistGeom.EmbedMultipleConfs(mol, numConfs=cfg.num_attempts, params=p))
    if not cids:
        raise _Failure("embed", f"ETKDGv3 embedded 0 of {cfg.num_attempts} attempts")
    res = AllChem.MMFFOptimizeMoleculeConfs(
        mol, numThreads=1, maxIters=cfg.max_iters, mmffVariant=cfg.force_field.upper()
    )
    energies = np.array([e for _, e in res], dtype=np.float64) * KJ_PER_KCAL
    converged = np.array([nc == 0 for nc, _ in res], dtype=bool)
    if not np.isfinite(energies).any():
        raise _Failure("optimize", "MMFF gave no finite energy")
    conf_ids = [c.GetId() for c in mol.GetConformers()]
    order = [i for i in np.argsort(energies, kind="stable") if np.isfinite(energies[i])]
    if cfg.energy_window_kj is not None:
        emin = energies[order[0]]
        order = [i for i in order if energies[i] - emin <= cfg.energy_window_kj]
    kept_idx = _prune(
        mol, [conf_ids[i] for i in order], cfg.prune_rms, cfg.max_confs, cfg.max_matches
    )
    pos_of = {c.GetId(): c.GetPositions() for c in mol.GetConformers()}
    idx_of = {cid: i for i, cid in enumerate(conf_ids)}
    kept_e = energies[[idx_of[c] for c in kept_idx]]
    out = Chem.Mol(mol)
    out.RemoveAllConformers()
    return {
        "mol_binary": np.frombuffer(out.ToBinary(), dtype=np.uint8).copy(),
        "positions": np.stack([pos_of[c] for c in kept_idx]),
        "energies_kj": kept_e,
        "converged": converged[[idx_of[c] for c in kept_idx]],
        "n_embedded": np.int64(len(cids)),
    }


def set_conformers(mol: Chem.Mol, positions) -> Chem.Mol:
    """Replace the conformers of ``mol`` (in place) by ``positions``.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
        ``N`` atoms (explicit H where the positions have them).
    positions : array_like, shape (C, N, 3)
        Coordinates in Angstrom; conformer ``k`` gets id ``k`` and is marked 3-D.

    Returns
    -------
    rdkit.Chem.Mol
        ``mol`` itself.
    """
    mol.RemoveAllConformers()
    for k, xyz in enumerate(np.asarray(positions)):
        conf = Chem.Conformer(mol.GetNumAtoms())
        for a, (x, y, z) in enumerate(xyz):
            conf.SetAtomPosition(a, (float(x), float(y), float(z)))
        conf.SetId(k)
        conf.Set3D(True)
        mol.AddConformer(conf, assignId=False)
    return mol


def ensemble_from_arrays(
    name: str, smiles: str, data: dict, temperature_k: float
) -> ConformerEnsemble:
    """Rebuild a :class:`ConformerEnsemble` from its stored (cached) arrays.

    The inverse of the cache record written by the ensemble generators, so that every
    cached ensemble (MMFF here, other force fields in the data builders) is rebuilt the
    same way.

    Parameters
    ----------
    name, smiles : str
        Molecule name and input SMILES.
    data : dict
        ``mol_binary`` (uint8, RDKit ``Mol.ToBinary()`` of the molecule with explicit H),
        ``positions`` (float, shape (C, N, 3), Angstrom), ``energies_kj`` (shape (C,),
        kJ/mol, any zero) and optionally ``converged`` (bool, shape (C,); all True when
        absent).
    temperature_k : float
        Temperature of the ensemble's Boltzmann weights (K).

    Returns
    -------
    ConformerEnsemble
        Energies relative to the lowest (kJ/mol); ``min_energy_kj`` keeps the offset.
    """
    mol = Chem.Mol(bytes(np.asarray(data["mol_binary"], dtype=np.uint8).tobytes()))
    set_conformers(mol, data["positions"])
    mol.SetProp("_Name", name)
    e = np.asarray(data["energies_kj"], dtype=np.float64)
    return ConformerEnsemble(
        name=name,
        smiles=smiles,
        mol=mol,
        energies_kj=e - e.min(),
        converged=(
            np.asarray(data["converged"], dtype=bool)
            if "converged" in data
            else np.ones(len(e), dtype=bool)
        ),
        temperature_k=temperature_k,
        min_energy_kj=float(e.min()),
        stereo_smiles=Chem.MolToSmiles(Chem.RemoveHs(mol)),
    )


def embed_ensemble(
    smiles_or_mol, config: ConformerConfig | None = None, name: str = ""
) -> ConformerEnsemble:
    """Conformer ensemble of one molecule (no cache, no parallelism).

    Parameters
    ----------
    smiles_or_mol : str or rdkit.Chem.Mol
        SMILES, or a molecule (its conformers, if any, are discarded).
    config : ConformerConfig, optional
    name : str

    Raises
    ------
    ValueError
        Invalid SMILES, no MMFF parameters or no embeddable conformer (message says which).
    """
    cfg = config or ConformerConfig()
    try:
        data = _embed(smiles_or_mol, cfg)
    except _Failure as err:
        raise ValueError(f"{name or smiles_or_mol}: {err.stage}: {err.reason}") from None
    return ensemble_from_arrays(name, _input_smiles(smiles_or_mol), data, cfg.temperature_k)


def _input_smiles(item) -> str:
    if isinstance(item, Chem.Mol):
        return Chem.MolToSmiles(Chem.RemoveHs(item))
    return str(item)

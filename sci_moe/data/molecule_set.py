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

    python -m sci_moe.data.molecule_set --full --out DIR

(~50 molecules by default; ``--full`` = 500). RDKit ensembles are a stand-in for MARCEL's
(Auto3D / CREST / DFT) ensembles, not the same distribution.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..molecules.conformers import (
    ConformerConfig,
    ConformerEnsemble,
    _atomic_write_bytes,
    generate_ensembles,
)
from ..molecules.graph import EnsembleDataset, EnsembleGraph, boltzmann_weights
from .xtb import XTBConfig, _ensemble_job, parallel_map

__all__ = [
    "TARGETS",
    "TARGET_UNITS",
    "MoleculeSet",
    "MoleculeSetConfig",
    "add_arguments",
    "build_molecule_set",
    "geometric_labels",
    "main",
    "nci_pool",
    "run_from_args",
]

#: Molecule-level targets, in column order.
TARGETS = ("dipole_debye", "gap_ev", "rg_nm", "sasa_nm2")
#: Units of :data:`TARGETS`.
TARGET_UNITS = {"dipole_debye": "D", "gap_ev": "eV", "rg_nm": "nm", "sasa_nm2": "nm^2"}
_FORMAT_VERSION = 1
_ALLOWED_ELEMENTS = ("H", "C", "N", "O", "F", "P", "S", "Cl", "Br", "I")
DATA_FILE = "molecule_set.npz"
REPORT_FILE = "report.json"
CHECKSUM_FILE = "checksums.sha256"


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


@dataclass
class MoleculeSetConfig:
    """Settings of :func:`build_molecule_set`.

    Parameters
    ----------
    n_molecules : int
        Molecules wanted in the set (failed ones are replaced by further candidates).
    seed : int
        Seed of the choice of molecules (the conformer seed is in ``conformers``).
    temperature_k : float
        Temperature of the Boltzmann averages (K).
    conformers : ConformerConfig
        Ensemble settings (default: 20 attempts, at most 10 conformers).
    xtb : XTBConfig
        GFN2-xTB settings.
    sasa_density : float
        Area per surface point of the SASA (A^2; smaller = more accurate, slower). The
        default 0.1 differs from 0.01 by 0.17 % on average (max 0.9 %, 80 conformers of
        10 molecules of the small set) at a third of the cost.
    min_rotatable, max_rotatable, min_heavy, max_heavy : int
        Filters of :func:`nci_pool`.
    """

    n_molecules: int = 50
    seed: int = 0
    temperature_k: float = 298.15
    conformers: ConformerConfig = field(
        default_factory=lambda: ConformerConfig(num_attempts=20, max_confs=10)
    )
    xtb: XTBConfig = field(default_factory=XTBConfig)
    sasa_density: float = 0.1
    min_rotatable: int = 4
    max_rotatable: int = 8
    min_heavy: int = 12
    max_heavy: int = 30

    def __post_init__(self) -> None:
        if isinstance(self.conformers, dict):
            self.conformers = ConformerConfig(**self.conformers)
        if isinstance(self.xtb, dict):
            self.xtb = XTBConfig(**self.xtb)
        if self.n_molecules < 1:
            raise ValueError(f"n_molecules must be >= 1, got {self.n_molecules}")
        if not self.temperature_k > 0:
            raise ValueError(f"temperature_k must be > 0 K, got {self.temperature_k}")
        if not self.sasa_density > 0:
            raise ValueError(f"sasa_density must be > 0 A^2, got {self.sasa_density}")
        if self.min_rotatable > self.max_rotatable or self.min_heavy > self.max_heavy:
            raise ValueError("min_* filters must not exceed max_* filters")


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


def _canonical(smiles: str) -> str | None:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        mol = Chem.MolFromSmiles(smiles)
    finally:
        RDLogger.EnableLog("rdApp.*")
    return None if mol is None else Chem.MolToSmiles(mol)


def _marcel_shuffle(n: int, seed: int) -> np.ndarray:
    """``sklearn.utils.shuffle(np.arange(n), random_state=seed)`` without importing sklearn."""
    idx = np.arange(n)
    np.random.RandomState(seed).shuffle(idx)  # the legacy stream sklearn uses
    return idx


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


def _label_key(ens: ConformerEnsemble, cfg: MoleculeSetConfig) -> str:
    import tblite

    h = hashlib.sha256()
    h.update(np.ascontiguousarray(ens.atomic_numbers, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(ens.positions_nm, dtype=np.float64).tobytes())
    meta = {
        "xtb": asdict(cfg.xtb),
        "sasa_density": cfg.sasa_density,
        "tblite": getattr(tblite, "__version__", "?"),
        "charge": _charge(ens),
        "v": _FORMAT_VERSION,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def _charge(ens: ConformerEnsemble) -> tuple[int, int]:
    atoms = list(ens.mol.GetAtoms())
    return sum(a.GetFormalCharge() for a in atoms), sum(a.GetNumRadicalElectrons() for a in atoms)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class MoleculeSet:
    """The built data set (see the module docstring); load with :meth:`load`.

    Attributes
    ----------
    names, smiles, stereo_smiles, molblocks : list of str, length M
        ``molblocks``: MDL mol block (explicit H, first conformer) fixing the atom order.
    atom_ptr, conf_ptr : numpy.ndarray, shape (M + 1,)
        Offsets of each molecule's atoms / conformers.
    numbers : numpy.ndarray, shape (A,)
        Atomic numbers.
    positions_nm : numpy.ndarray, shape (P, 3)
        Positions of all conformers, molecule by molecule, conformer-major.
    mmff_energy_kj, xtb_energy_kj : numpy.ndarray, shape (C,)
        Conformer energies relative to each molecule's lowest (kJ/mol).
    conf_targets : numpy.ndarray, shape (C, T)
        Per-conformer values of :data:`TARGETS`.
    targets : numpy.ndarray, shape (M, T)
        Boltzmann averages (GFN2 energies, ``temperature_k``).
    temperature_k : float
    target_names : list of str
    """

    names: list[str]
    smiles: list[str]
    stereo_smiles: list[str]
    molblocks: list[str]
    atom_ptr: np.ndarray
    conf_ptr: np.ndarray
    numbers: np.ndarray
    positions_nm: np.ndarray
    mmff_energy_kj: np.ndarray
    xtb_energy_kj: np.ndarray
    conf_targets: np.ndarray
    targets: np.ndarray
    temperature_k: float = 298.15
    target_names: list[str] = field(default_factory=lambda: list(TARGETS))

    def __len__(self) -> int:
        return len(self.names)

    def num_confs(self, i: int) -> int:
        return int(self.conf_ptr[i + 1] - self.conf_ptr[i])

    @property
    def point_ptr(self) -> np.ndarray:
        """Offsets of each molecule's points (conformer-atoms) in :attr:`positions_nm`."""
        sizes = np.diff(self.conf_ptr) * np.diff(self.atom_ptr)
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def conformer_positions(self, i: int) -> np.ndarray:
        """Positions of molecule ``i``, shape (C_i, N_i, 3), nm."""
        n = int(self.atom_ptr[i + 1] - self.atom_ptr[i])
        c = int(self.conf_ptr[i + 1] - self.conf_ptr[i])
        p0 = int(self.point_ptr[i])
        return self.positions_nm[p0 : p0 + c * n].reshape(c, n, 3)

    def conformer_weights(self, i: int) -> np.ndarray:
        """Boltzmann weights of molecule ``i`` from the GFN2 energies, shape (C_i,)."""
        c0, c1 = int(self.conf_ptr[i]), int(self.conf_ptr[i + 1])
        return boltzmann_weights(self.xtb_energy_kj[c0:c1], self.temperature_k)

    def lowest_energy_targets(self) -> np.ndarray:
        """Targets of each molecule's lowest-GFN2-energy conformer, shape (M, T)."""
        rows = []
        for i in range(len(self)):
            c0, c1 = int(self.conf_ptr[i]), int(self.conf_ptr[i + 1])
            rows.append(self.conf_targets[c0 + int(np.argmin(self.xtb_energy_kj[c0:c1]))])
        return np.stack(rows)

    def mol(self, i: int):
        """RDKit molecule ``i`` (explicit H) with all its conformers (Angstrom)."""
        from rdkit import Chem

        mol = Chem.MolFromMolBlock(self.molblocks[i], removeHs=False)
        if mol is None:
            raise ValueError(f"stored mol block of {self.names[i]} does not parse")
        mol.RemoveAllConformers()
        for k, xyz in enumerate(self.conformer_positions(i) * 10.0):
            conf = Chem.Conformer(mol.GetNumAtoms())
            for a, (x, y, z) in enumerate(xyz):
                conf.SetAtomPosition(a, (float(x), float(y), float(z)))
            conf.SetId(k)
            conf.Set3D(True)
            mol.AddConformer(conf, assignId=False)
        mol.SetProp("_Name", self.names[i])
        return mol

    def graphs(
        self, heavy_only: bool = False, targets: Sequence[str] | None = None
    ) -> list[EnsembleGraph]:
        """One :class:`~sci_moe.molecules.graph.EnsembleGraph` per molecule.

        Conformer energies and weights are the GFN2 ones; ``y`` / ``conf_y`` hold the
        chosen ``targets`` (default: all of :attr:`target_names`).
        """
        cols = self._columns(targets)
        out = []
        for i in range(len(self)):
            c0, c1 = int(self.conf_ptr[i]), int(self.conf_ptr[i + 1])
            out.append(
                EnsembleGraph.from_rdkit(
                    self.mol(i),
                    energies_kj=self.xtb_energy_kj[c0:c1],
                    temperature_k=self.temperature_k,
                    y=self.targets[i, cols],
                    conf_y=self.conf_targets[c0:c1][:, cols],
                    heavy_only=heavy_only,
                    name=self.names[i],
                )
            )
        return out

    def dataset(
        self, heavy_only: bool = False, targets: Sequence[str] | None = None
    ) -> EnsembleDataset:
        """:meth:`graphs` wrapped in an :class:`~sci_moe.molecules.graph.EnsembleDataset`."""
        cols = self._columns(targets)
        return EnsembleDataset(
            self.graphs(heavy_only, targets), [self.target_names[c] for c in cols]
        )

    def _columns(self, targets) -> list[int]:
        if targets is None:
            return list(range(len(self.target_names)))
        unknown = [t for t in targets if t not in self.target_names]
        if unknown:
            raise ValueError(f"unknown targets {unknown}; choose from {self.target_names}")
        return [self.target_names.index(t) for t in targets]

    def split(
        self, seed: int = 123, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Molecule-level train/validation/test indices (MARCEL protocol).

        ``sklearn.utils.shuffle(range(M), random_state=seed)``, then the first 70 %, the
        next 10 % and the rest.
        """
        if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-9:
            raise ValueError(
                f"fractions must be three non-negative numbers summing to 1, got {fractions}"
            )
        idx = _marcel_shuffle(len(self), seed)
        n_train = round(fractions[0] * len(self))
        n_val = round(fractions[1] * len(self))
        return idx[:n_train], idx[n_train : n_train + n_val], idx[n_train + n_val :]

    # ------------------------------------------------------------------ io
    def _arrays(self) -> dict:
        return {
            "format_version": np.int64(_FORMAT_VERSION),
            "names": np.array(self.names, dtype=str),
            "smiles": np.array(self.smiles, dtype=str),
            "stereo_smiles": np.array(self.stereo_smiles, dtype=str),
            "molblocks": np.array(self.molblocks, dtype=str),
            "atom_ptr": np.asarray(self.atom_ptr, dtype=np.int64),
            "conf_ptr": np.asarray(self.conf_ptr, dtype=np.int64),
            "numbers": np.asarray(self.numbers, dtype=np.int64),
            "positions_nm": np.asarray(self.positions_nm, dtype=np.float64),
            "mmff_energy_kj": np.asarray(self.mmff_energy_kj, dtype=np.float64),
            "xtb_energy_kj": np.asarray(self.xtb_energy_kj, dtype=np.float64),
            "conf_targets": np.asarray(self.conf_targets, dtype=np.float64),
            "targets": np.asarray(self.targets, dtype=np.float64),
            "temperature_k": np.float64(self.temperature_k),
            "target_names": np.array(self.target_names, dtype=str),
        }

    def content_sha256(self) -> str:
        """sha256 over the array contents (independent of zip timestamps)."""
        h = hashlib.sha256()
        for k, v in sorted(self._arrays().items()):
            h.update(k.encode())
            h.update(np.ascontiguousarray(v).tobytes())
        return h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Write a compressed ``.npz`` (atomically)."""
        buf = io.BytesIO()
        np.savez_compressed(buf, **self._arrays())
        _atomic_write_bytes(Path(path), buf.getvalue())

    @classmethod
    def load(cls, path: str | Path, verify: bool = True) -> MoleculeSet:
        """Load a set written by :func:`build_molecule_set`.

        Parameters
        ----------
        path : path
            The output directory (or the ``.npz`` file itself).
        verify : bool
            Check the file against ``checksums.sha256`` when that file is present.
        """
        path = Path(path)
        npz = path / DATA_FILE if path.is_dir() else path
        if not npz.exists():
            raise ValueError(
                f"no molecule set at {npz}; build one with "
                "`python -m sci_moe.data.molecule_set --out DIR`"
            )
        sums = npz.parent / CHECKSUM_FILE
        if verify and sums.exists():
            expected = {
                line.split()[1]: line.split()[0]
                for line in sums.read_text().splitlines()
                if line.strip()
            }
            if npz.name in expected and expected[npz.name] != _sha256_file(npz):
                raise ValueError(f"{npz} does not match its sha256 in {sums}; rebuild it")
        with np.load(npz, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files}
        if int(d.pop("format_version")) != _FORMAT_VERSION:
            raise ValueError(f"{npz} has an unsupported format version; rebuild it")
        for k in ("names", "smiles", "stereo_smiles", "molblocks", "target_names"):
            d[k] = [str(s) for s in d[k]]
        d["temperature_k"] = float(d["temperature_k"])
        return cls(**d)


def _assemble(ensembles, labels, cfg: MoleculeSetConfig) -> MoleculeSet:
    from rdkit import Chem

    names, smiles, stereo, blocks = [], [], [], []
    numbers, pos, e_mmff, e_xtb, conf_t, targets = [], [], [], [], [], []
    atom_ptr, conf_ptr = [0], [0]
    for ens, lab in zip(ensembles, labels, strict=True):
        names.append(ens.name)
        smiles.append(ens.smiles)
        stereo.append(ens.stereo_smiles)
        blocks.append(Chem.MolToMolBlock(ens.mol, confId=0))
        numbers.append(ens.atomic_numbers)
        p = ens.positions_nm
        pos.append(p.reshape(-1, 3))
        e = np.asarray(lab["energy_kj"])
        e_xtb.append(e - e.min())
        e_mmff.append(ens.energies_kj)
        ct = np.stack(
            [
                np.linalg.norm(lab["dipole_debye"], axis=1),
                lab["gap_ev"],
                lab["rg_nm"],
                lab["sasa_nm2"],
            ],
            axis=1,
        )
        conf_t.append(ct)
        targets.append(boltzmann_weights(e, cfg.temperature_k) @ ct)
        atom_ptr.append(atom_ptr[-1] + p.shape[1])
        conf_ptr.append(conf_ptr[-1] + p.shape[0])
    return MoleculeSet(
        names=names,
        smiles=smiles,
        stereo_smiles=stereo,
        molblocks=blocks,
        atom_ptr=np.array(atom_ptr),
        conf_ptr=np.array(conf_ptr),
        numbers=np.concatenate(numbers),
        positions_nm=np.concatenate(pos),
        mmff_energy_kj=np.concatenate(e_mmff),
        xtb_energy_kj=np.concatenate(e_xtb),
        conf_targets=np.concatenate(conf_t),
        targets=np.stack(targets),
        temperature_k=cfg.temperature_k,
    )


def _statistics(ms: MoleculeSet) -> dict:
    low = ms.lowest_energy_targets()
    stats = {}
    for t, name in enumerate(ms.target_names):
        within = [
            float(np.std(ms.conf_targets[ms.conf_ptr[i] : ms.conf_ptr[i + 1], t]))
            for i in range(len(ms))
        ]
        stats[name] = {
            "unit": TARGET_UNITS.get(name, ""),
            "mean": float(ms.targets[:, t].mean()),
            "std": float(ms.targets[:, t].std()),
            "min": float(ms.targets[:, t].min()),
            "max": float(ms.targets[:, t].max()),
            "median_within_ensemble_std": float(np.median(within)),
            "mae_lowest_conformer_vs_boltzmann": float(np.abs(low[:, t] - ms.targets[:, t]).mean()),
        }
    confs = np.diff(ms.conf_ptr)
    atoms = np.diff(ms.atom_ptr)
    stats["conformers_per_molecule"] = {
        "mean": float(confs.mean()),
        "min": int(confs.min()),
        "max": int(confs.max()),
    }
    stats["atoms_per_molecule"] = {
        "mean": float(atoms.mean()),
        "min": int(atoms.min()),
        "max": int(atoms.max()),
    }
    return stats


def _plot(ms: MoleculeSet, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    low = ms.lowest_energy_targets()
    T = len(ms.target_names)
    fig, axes = plt.subplots(2, T, figsize=(3.2 * T, 6))
    for t, name in enumerate(ms.target_names):
        ax = axes[0, t]
        ax.hist(ms.targets[:, t], bins=20, color="C0")
        ax.set_title(f"{name} (Boltzmann)")
        ax = axes[1, t]
        ax.scatter(ms.targets[:, t], low[:, t], s=8)
        lo, hi = ms.targets[:, t].min(), ms.targets[:, t].max()
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel("Boltzmann average")
        ax.set_ylabel("lowest-energy conformer")
    fig.suptitle(f"offline molecule set: {len(ms)} molecules, {ms.conf_ptr[-1]} conformers")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def build_molecule_set(
    out_dir: str | Path,
    config: MoleculeSetConfig | None = None,
    n_jobs: int | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    plot: bool = True,
    molecules: Sequence[tuple[str, str]] | None = None,
) -> MoleculeSet:
    """Build (or rebuild from the cache) the offline molecule set.

    Parameters
    ----------
    out_dir : path
        Output directory: ``molecule_set.npz``, ``report.json``, ``checksums.sha256``,
        ``labels.png``.
    config : MoleculeSetConfig, optional
        Default: 50 molecules.
    n_jobs : int, optional
        Worker processes (default: all CPUs); each uses one thread.
    cache_dir : path, optional
        Per-molecule cache (default ``out_dir/cache``); a rebuild with the same settings
        costs only the assembly.
    progress : bool
        tqdm progress bars.
    plot : bool
        Write ``labels.png`` (label histograms, lowest-conformer vs Boltzmann values).
    molecules : sequence of tuple, optional
        Your own candidates as ``(name, smiles)`` pairs, used in the given order, instead
        of the NCI pool.

    Returns
    -------
    MoleculeSet
    """
    cfg = config or MoleculeSetConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir is not None else out / "cache"
    n_jobs = n_jobs or os.cpu_count() or 1
    t0 = time.perf_counter()
    if molecules is None:
        pool = nci_pool(cfg.min_rotatable, cfg.max_rotatable, cfg.min_heavy, cfg.max_heavy)
        order = np.random.default_rng(cfg.seed).permutation(len(pool))
    else:
        pool = [(str(n), str(s)) for n, s in molecules]
        order = np.arange(len(pool))
        if len({n for n, _ in pool}) != len(pool):
            raise ValueError("molecule names must be unique")
    ensembles: list[ConformerEnsemble] = []
    labels: list[dict] = []
    failures: list[dict] = []
    timings = {"conformers_s": 0.0, "labels_s": 0.0, "conformers_cpu_s": 0.0, "labels_cpu_s": 0.0}
    n_cached = {"conformers": 0, "labels": 0}
    pos = 0
    seen: dict[str, str] = {}  # canonical SMILES -> name (the NCI file has duplicates)
    n_duplicates = 0
    while len(ensembles) < cfg.n_molecules and pos < len(pool):
        need = cfg.n_molecules - len(ensembles)
        chosen = []
        while len(chosen) < need and pos < len(pool):
            name, smi = pool[order[pos]]
            pos += 1
            key = _canonical(smi)
            if key is not None and key in seen:
                n_duplicates += 1
                failures.append(
                    {
                        "name": name,
                        "smiles": smi,
                        "stage": "duplicate",
                        "reason": f"same molecule as {seen[key]}",
                    }
                )
                continue
            if key is not None:
                seen[key] = name
            chosen.append((name, smi))
        if not chosen:
            break
        t1 = time.perf_counter()
        ens, rep = generate_ensembles(
            [s for _, s in chosen],
            cfg.conformers,
            names=[n for n, _ in chosen],
            n_jobs=n_jobs,
            cache_dir=cache / "conformers",
            progress=progress,
        )
        timings["conformers_s"] += time.perf_counter() - t1
        n_cached["conformers"] += rep.n_cached
        timings["conformers_cpu_s"] += rep.cpu_seconds
        failures += rep.failures
        t1 = time.perf_counter()
        lab = [None] * len(ens)
        keys = [_label_key(e, cfg) for e in ens]
        todo = []
        for i, k in enumerate(keys):
            f = cache / "labels" / k[:2] / f"{k}.npz"
            if f.exists():
                try:
                    with np.load(f, allow_pickle=False) as z:
                        lab[i] = {kk: z[kk] for kk in z.files}
                    n_cached["labels"] += 1
                    continue
                except Exception:
                    pass
            todo.append(i)

        def store(j, res, todo=todo, keys=keys):
            if res.get("failed"):
                return
            k = keys[todo[j]]
            buf = io.BytesIO()
            np.savez(buf, **res)
            _atomic_write_bytes(cache / "labels" / k[:2] / f"{k}.npz", buf.getvalue())

        jobs = [
            (
                ens[i].atomic_numbers,
                ens[i].positions_nm,
                *_charge(ens[i]),
                cfg.xtb,
                cfg.sasa_density,
            )
            for i in todo
        ]
        for j, res in enumerate(
            parallel_map(
                _label_job,
                jobs,
                n_jobs=n_jobs,
                progress=progress,
                desc="GFN2-xTB labels",
                on_result=store,
            )
        ):
            lab[todo[j]] = res
            timings["labels_cpu_s"] += float(res.get("cpu_s", 0.0))
        timings["labels_s"] += time.perf_counter() - t1
        for e, r in zip(ens, lab, strict=True):
            if r.get("failed"):
                failures.append(
                    {"name": e.name, "smiles": e.smiles, "stage": "xtb", "reason": r["reason"]}
                )
            else:
                ensembles.append(e)
                labels.append(r)
    if not ensembles:
        raise ValueError("no molecule could be built; see the failures in the report")
    # keep the seeded candidate order so the set does not depend on completion order
    rank = {pool[i][0]: r for r, i in enumerate(order)}
    both = sorted(zip(ensembles, labels, strict=True), key=lambda el: rank[el[0].name])
    ms = _assemble([b[0] for b in both], [b[1] for b in both], cfg)
    ms.save(out / DATA_FILE)
    import rdkit
    import tblite
    import torch

    from .. import __version__

    report = {
        "n_molecules": len(ms),
        "n_requested": cfg.n_molecules,
        "n_candidates_tried": pos,
        "n_duplicates_skipped": n_duplicates,
        "n_pool": len(pool),
        "n_conformers": int(ms.conf_ptr[-1]),
        "failures": failures,
        "seconds": time.perf_counter() - t0,
        "timings": timings,
        "cache_hits": n_cached,
        "n_jobs": n_jobs,
        "config": asdict(cfg),
        "targets": list(ms.target_names),
        "target_units": TARGET_UNITS,
        "statistics": _statistics(ms),
        "content_sha256": ms.content_sha256(),
        "versions": {
            "sci_moe": __version__,
            "rdkit": rdkit.__version__,
            "tblite": getattr(tblite, "__version__", "?"),
            "numpy": np.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "command": " ".join(sys.argv) if sys.argv else "",
    }
    (out / REPORT_FILE).write_text(json.dumps(report, indent=1))
    files = [DATA_FILE, REPORT_FILE]
    if plot:
        _plot(ms, out / "labels.png")
        files.append("labels.png")
    sums = "".join(f"{_sha256_file(out / f)}  {f}\n" for f in files)
    (out / CHECKSUM_FILE).write_text(sums)
    return ms


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``python -m sci_moe.data.molecule_set`` / ``sci-moe data molecules``."""
    p.add_argument("--out", required=True, help="output directory")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the full set (500 molecules)")
    size.add_argument("--n", type=int, help="number of molecules (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the molecule choice (default 0)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: all CPUs)")
    p.add_argument("--max-confs", type=int, default=10, help="conformers per molecule (default 10)")
    p.add_argument(
        "--temperature-k",
        type=float,
        default=298.15,
        dest="temperature_k",
        help="temperature of the Boltzmann averages (default 298.15)",
    )
    p.add_argument(
        "--smiles",
        metavar="FILE",
        help="your own candidates instead of the NCI pool: one 'SMILES name' per line",
    )
    p.add_argument("--cache", default=None, help="cache directory (default OUT/cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_from_args(args: argparse.Namespace) -> int:
    n = 500 if args.full else (args.n if args.n is not None else 50)
    cfg = MoleculeSetConfig(
        n_molecules=n,
        seed=args.seed,
        temperature_k=args.temperature_k,
        conformers=ConformerConfig(num_attempts=20, max_confs=args.max_confs),
    )
    molecules = None
    if args.smiles:
        path = Path(args.smiles)
        if not path.is_file():
            raise ValueError(f"--smiles file {args.smiles!r} does not exist")
        molecules = []
        for k, line in enumerate(path.read_text().splitlines()):
            parts = line.split()
            if parts and not parts[0].startswith("#"):
                molecules.append((parts[1] if len(parts) > 1 else f"line{k + 1}", parts[0]))
        if not molecules:
            raise ValueError(f"--smiles file {args.smiles!r} holds no SMILES")
    ms = build_molecule_set(
        args.out,
        cfg,
        n_jobs=args.jobs,
        cache_dir=args.cache,
        progress=not args.no_progress,
        molecules=molecules,
    )
    report = json.loads((Path(args.out) / REPORT_FILE).read_text())
    print(
        f"{len(ms)} molecules, {report['n_conformers']} conformers, "
        f"{len(report['failures'])} failures, {report['seconds']:.1f} s -> {args.out}"
    )
    for f in report["failures"]:
        print(f"  failed {f['name']}: {f['stage']}: {f['reason']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sci_moe.data.molecule_set [--full] --out DIR``."""
    p = argparse.ArgumentParser(
        prog="python -m sci_moe.data.molecule_set",
        description="Build the offline conformer-ensemble set (NCI molecules, RDKit "
        "ensembles, GFN2-xTB labels).",
    )
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run_from_args(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The offline conformer-ensemble set as stored on disk: :class:`MoleculeSet`.

One compressed ``molecule_set.npz`` (plain arrays, loads with ``allow_pickle=False``)
beside ``report.json`` and ``checksums.sha256`` (``sha256sum -c`` format); built by
:func:`sci_moe.data.molecule_set.build_molecule_set`. Positions in nm, energies in
kJ/mol.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util import atomic_save_npz, atomic_write_text, sha256_file
from ..molecules import EnsembleDataset, EnsembleGraph, boltzmann_weights

__all__ = [
    "CHECKSUM_FILE",
    "DATA_FILE",
    "ELECTRONIC_TARGETS",
    "ELECTRONIC_TARGET_UNITS",
    "REPORT_FILE",
    "TARGETS",
    "TARGET_UNITS",
    "MoleculeSet",
    "write_build_report",
]

#: Molecule-level targets, in column order.
TARGETS = ("dipole_debye", "gap_ev", "rg_nm", "sasa_nm2")
#: Units of :data:`TARGETS`.
TARGET_UNITS = {"dipole_debye": "D", "gap_ev": "eV", "rg_nm": "nm", "sasa_nm2": "nm^2"}
#: Optional electronic targets (MARCEL Drugs-75K names), after :data:`TARGETS`.
ELECTRONIC_TARGETS = ("ip", "ea", "chi")
#: Units of :data:`ELECTRONIC_TARGETS`.
ELECTRONIC_TARGET_UNITS = {"ip": "eV", "ea": "eV", "chi": "eV"}
_FORMAT_VERSION = 1
DATA_FILE = "molecule_set.npz"
REPORT_FILE = "report.json"
CHECKSUM_FILE = "checksums.sha256"


def write_build_report(
    out: Path, report: dict, extra_files: Sequence[str] = (), versions: dict | None = None
) -> None:
    """Write a builder's ``report.json`` and ``checksums.sha256`` into ``out``.

    Parameters
    ----------
    out : Path
        The set's folder; :data:`DATA_FILE` is already written there.
    report : dict
        The builder's own entries; the software versions (sci-moe, RDKit, tblite, numpy,
        ``versions``, Python), the machine and the command line are appended.
    extra_files : sequence of str
        Further files of ``out`` to checksum after :data:`DATA_FILE` and the report.
    versions : dict, optional
        Versions of further packages (name -> version), listed before Python's.
    """
    import rdkit
    import tblite

    from .. import __version__

    report = {
        **report,
        "versions": {
            "sci_moe": __version__,
            "rdkit": rdkit.__version__,
            "tblite": getattr(tblite, "__version__", "?"),
            "numpy": np.__version__,
            **(versions or {}),
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "command": " ".join(sys.argv) if sys.argv else "",
    }
    atomic_write_text(out / REPORT_FILE, json.dumps(report, indent=1))
    files = (DATA_FILE, REPORT_FILE, *extra_files)
    atomic_write_text(out / CHECKSUM_FILE, "".join(f"{sha256_file(out / f)}  {f}\n" for f in files))


def _marcel_shuffle(n: int, seed: int) -> np.ndarray:
    """``sklearn.utils.shuffle(np.arange(n), random_state=seed)`` without importing sklearn."""
    idx = np.arange(n)
    np.random.RandomState(seed).shuffle(idx)  # the legacy stream sklearn uses
    return idx


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

        from ..molecules import set_conformers

        mol = Chem.MolFromMolBlock(self.molblocks[i], removeHs=False)
        if mol is None:
            raise ValueError(f"stored mol block of {self.names[i]} does not parse")
        set_conformers(mol, self.conformer_positions(i) * 10.0)
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

    @classmethod
    def from_ensembles(
        cls,
        ensembles: Sequence,
        labels: Sequence[dict],
        temperature_k: float,
        columns,
        target_names: Sequence[str] | None = None,
    ) -> MoleculeSet:
        """Assemble a set from conformer ensembles and their per-conformer labels.

        Parameters
        ----------
        ensembles : sequence of ConformerEnsemble, length M
            Force-field energies (kJ/mol) and positions (nm) per conformer.
        labels : sequence of dict, length M
            Per-molecule label dicts; ``energy_kj`` (shape (C_i,), kJ/mol, GFN2) sets the
            Boltzmann weights.
        temperature_k : float
            Temperature of the Boltzmann weights (K).
        columns : callable
            ``columns(i, label, weights) -> (conf_targets, targets)`` with shapes
            (C_i, T) and (T,): the set's per-conformer values and molecule targets.
        target_names : sequence of str, optional
            Names of the T columns (default :data:`TARGETS`).
        """
        from rdkit import Chem

        names, smiles, stereo, blocks = [], [], [], []
        numbers, pos, e_ff, e_xtb, conf_t, targets = [], [], [], [], [], []
        atom_ptr, conf_ptr = [0], [0]
        for i, (ens, lab) in enumerate(zip(ensembles, labels, strict=True)):
            names.append(ens.name)
            smiles.append(ens.smiles)
            stereo.append(ens.stereo_smiles)
            blocks.append(Chem.MolToMolBlock(ens.mol, confId=0))
            numbers.append(ens.atomic_numbers)
            p = ens.positions_nm
            pos.append(p.reshape(-1, 3))
            e = np.asarray(lab["energy_kj"])
            e_xtb.append(e - e.min())
            e_ff.append(ens.energies_kj)
            ct, t = columns(i, lab, boltzmann_weights(e, temperature_k))
            conf_t.append(ct)
            targets.append(t)
            atom_ptr.append(atom_ptr[-1] + p.shape[1])
            conf_ptr.append(conf_ptr[-1] + p.shape[0])
        return cls(
            names=names,
            smiles=smiles,
            stereo_smiles=stereo,
            molblocks=blocks,
            atom_ptr=np.array(atom_ptr),
            conf_ptr=np.array(conf_ptr),
            numbers=np.concatenate(numbers),
            positions_nm=np.concatenate(pos),
            mmff_energy_kj=np.concatenate(e_ff),
            xtb_energy_kj=np.concatenate(e_xtb),
            conf_targets=np.concatenate(conf_t),
            targets=np.stack(targets),
            temperature_k=temperature_k,
            **({} if target_names is None else {"target_names": list(target_names)}),
        )

    def save(self, path: str | Path) -> None:
        """Write a compressed ``.npz`` (atomically)."""
        atomic_save_npz(path, self._arrays(), compressed=True)

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
                f"no molecule set at {npz}; build one with `sci-moe data molecules --out DIR`"
            )
        sums = npz.parent / CHECKSUM_FILE
        if verify and sums.exists():
            expected = {
                line.split()[1]: line.split()[0]
                for line in sums.read_text().splitlines()
                if line.strip()
            }
            if npz.name in expected and expected[npz.name] != sha256_file(npz):
                raise ValueError(f"{npz} does not match its sha256 in {sums}; rebuild it")
        with np.load(npz, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files}
        if int(d.pop("format_version")) != _FORMAT_VERSION:
            raise ValueError(f"{npz} has an unsupported format version; rebuild it")
        for k in ("names", "smiles", "stereo_smiles", "molblocks", "target_names"):
            d[k] = [str(s) for s in d[k]]
        d["temperature_k"] = float(d["temperature_k"])
        return cls(**d)

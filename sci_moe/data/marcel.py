"""Loaders for the real MARCEL benchmark files (Zhu et al., ICLR 2024).

For users who have the MARCEL archives (``Drugs.zip``, ``Kraken.zip``, ``BDE.zip``,
``EE.zip``; nothing is downloaded here). Each loader reads the archive directly (or a
directory holding the extracted files), groups conformer records by molecule, keeps the
same conformers as the reference code (SXKDZ/MARCEL ``benchmarks/data/*.py``) and returns
a :class:`MarcelDataset` of :class:`MarcelSample` whose parts are
:class:`~sci_moe.molecules.graph.EnsembleGraph` objects (positions in nm, energies in
kJ/mol):

- **Drugs-75K**: ``Drugs.sdf`` (one record per conformer; props ``_Name`` = molecule,
  ``ID``, ``smiles``, ``energy``, ``ip``, ``ea``, ``chi``, ...) and ``Drugs.csv``
  (``name`` and the Boltzmann-averaged ``energy, ip, ea, chi``); the ``max_confs``
  lowest-energy conformers are kept. One part; targets ``ip, ea, chi`` (eV).
- **Kraken**: ``Kraken.pickle`` = ``{ligand_id: (smiles, boltz_avg_properties,
  {conf_id: (molblock, boltz_weight, conformer_properties)})}``, read with a
  **restricted unpickler** (plain data only); the ``max_confs`` conformers of largest
  Boltzmann weight. One part; targets ``sterimol_B5, _L, _burB5, _burL`` (Angstrom).
- **BDE**: ``BDE.txt`` (two-space separated ``Name``, ``BindingEnergy``) with
  ``substrates.sdf`` and ``ligands.sdf`` (props ``Name``, ``Index``; hydrogens removed as
  in MARCEL). Parts ``substrate`` and ``ligand``; target ``BindingEnergy``.
- **EE**: ``EE.sdf`` (props ``id, energy, smiles, substrate_id, ligand_id, config_id``)
  and ``EE.csv`` (``MergeID``, ``de``); sample key ``substrate_id + '_' + ligand_id``,
  one excluded sample, conformers sorted by energy within each configuration. Parts
  ``config_0`` (pro-R) and ``config_1`` (pro-S); target ``de`` (%).

Energy units in the files are not all documented: Drugs conformer ``energy`` is taken as
eV (``energy_unit`` to change), EE's as kJ/mol; Kraken gives Boltzmann weights (turned
into relative energies :math:`-k_BT \\ln(w/w_\\max)`); BDE has none (uniform weights).
Records that cannot be used (unparsable block, atom order differing between conformers
of one molecule, missing label) are listed in :attr:`MarcelDataset.failures`.
"""

from __future__ import annotations

import csv
import io
import pickle
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._util import (
    BOLTZMANN_KJ_PER_MOL_K,
    KJ_PER_EV,
    KJ_PER_HARTREE,
    KJ_PER_KCAL,
    NUMPY_ARRAY_GLOBALS,
    restricted_loads,
)
from ..molecules import EnsembleDataset, EnsembleGraph
from .molecule_set_store import _marcel_shuffle

__all__ = [
    "EE_EXCLUDED",
    "MarcelDataset",
    "MarcelSample",
    "load_bde",
    "load_drugs",
    "load_ee",
    "load_kraken",
]

#: Sample excluded from EE by the reference code.
EE_EXCLUDED = ("atrop-merg-enamide-phe-bn-h-B_R10333",)
_ENERGY_TO_KJ = {"ev": KJ_PER_EV, "hartree": KJ_PER_HARTREE, "kcal": KJ_PER_KCAL, "kj": 1.0}


#: The globals Kraken's pickle may use (narrower than ``sci_moe._util.PLAIN_DATA_GLOBALS``):
#: ``set``, ``frozenset``, ``complex``, ``OrderedDict`` and numpy scalars / arrays of numeric
#: dtype; anything else (``os.system``, ``builtins.eval``, arbitrary classes) is refused.
_KRAKEN_GLOBALS: frozenset[tuple[str, str]] = NUMPY_ARRAY_GLOBALS | frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("collections", "OrderedDict"),
    }
)


@dataclass
class MarcelSample:
    """One MARCEL sample.

    Attributes
    ----------
    name : str
        Molecule / sample key.
    y : numpy.ndarray, shape (T,)
        Targets (file units).
    parts : dict of str -> EnsembleGraph
        One ensemble per part (``"mol"`` for single-part data sets).
    smiles : str
    """

    name: str
    y: np.ndarray
    parts: dict[str, EnsembleGraph]
    smiles: str = ""


@dataclass
class MarcelDataset:
    """A loaded MARCEL data set.

    Attributes
    ----------
    name : str
    target_names : list of str
    samples : list of MarcelSample
    failures : list of dict
        ``{"name", "reason"}`` per skipped record or sample.
    """

    name: str
    target_names: list[str]
    samples: list[MarcelSample]
    failures: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def part_names(self) -> list[str]:
        return list(self.samples[0].parts) if self.samples else []

    @property
    def y(self) -> np.ndarray:
        """Targets, shape (M, T)."""
        return np.stack([s.y for s in self.samples]) if self.samples else np.zeros((0, 0))

    def graphs(self, part: str | None = None) -> list[EnsembleGraph]:
        """The ensembles of one part (default: the only part) with ``y`` set."""
        parts = self.part_names
        if part is None:
            if len(parts) != 1:
                raise ValueError(f"{self.name} has parts {parts}: choose one with part=")
            part = parts[0]
        if part not in parts:
            raise ValueError(f"unknown part {part!r}; {self.name} has {parts}")
        return [s.parts[part] for s in self.samples]

    def dataset(self, part: str | None = None) -> EnsembleDataset:
        return EnsembleDataset(self.graphs(part), self.target_names)

    def split(
        self, seed: int = 123, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """MARCEL split: ``sklearn.utils.shuffle(range(M), random_state=seed)``, 70/10/20."""
        idx = _marcel_shuffle(len(self), seed)
        n_train = round(fractions[0] * len(self))
        n_val = round(fractions[1] * len(self))
        return idx[:n_train], idx[n_train : n_train + n_val], idx[n_train + n_val :]


# ----------------------------------------------------------------------------- file access
class _Source:
    """Files of an archive (.zip) or a directory."""

    def __init__(self, path: str | Path, expected: str):
        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(
                f"{self.path} does not exist; pass the MARCEL {expected} file or folder"
            )
        if self.path.is_dir():
            self.zip = None
        else:
            try:
                self.zip = zipfile.ZipFile(self.path)
            except zipfile.BadZipFile:
                raise ValueError(f"{self.path} is not a zip archive ({expected})") from None

    def open(self, name: str):
        if self.zip is None:
            p = self.path / name
            if not p.exists():
                found = next(self.path.rglob(name), None)
                if found is None:
                    raise ValueError(f"{name} not found under {self.path}")
                p = found
            return open(p, "rb")
        matches = [n for n in self.zip.namelist() if n == name or n.endswith("/" + name)]
        if not matches:
            raise ValueError(f"{name} not found in {self.path} (has {self.zip.namelist()[:10]})")
        return self.zip.open(matches[0])

    def text(self, name: str) -> str:
        with self.open(name) as fh:
            return fh.read().decode("utf-8", errors="replace")


def _sdf_records(src: _Source, name: str, remove_hs: bool) -> Iterator:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    try:
        with src.open(name) as fh:
            yield from enumerate(Chem.ForwardSDMolSupplier(fh, removeHs=remove_hs))
    finally:
        RDLogger.EnableLog("rdApp.*")


def _ensemble(
    mols: Sequence,
    energies_kj,
    weights,
    name: str,
    failures: list,
    y: np.ndarray,
    temperature_k: float = 298.15,
    conf_y: np.ndarray | None = None,
) -> EnsembleGraph | None:
    """Combine conformer records of one molecule (same atom order) into one graph.

    ``conf_y`` (C, T), optional: per-conformer target values, rows as ``mols``.
    """
    from rdkit import Chem

    ref = mols[0]
    z_ref = [a.GetAtomicNum() for a in ref.GetAtoms()]
    keep = []
    for k, m in enumerate(mols):
        if [a.GetAtomicNum() for a in m.GetAtoms()] != z_ref:
            failures.append({"name": name, "reason": f"conformer {k}: atom order differs; dropped"})
            continue
        keep.append(k)
    combined = Chem.Mol(ref)
    combined.RemoveAllConformers()
    for new_id, k in enumerate(keep):
        conf = Chem.Conformer(mols[k].GetConformer())
        conf.SetId(new_id)
        combined.AddConformer(conf, assignId=False)
    e = None if energies_kj is None else np.asarray(energies_kj, dtype=np.float64)[keep]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[keep]
    if w is not None and w.sum() <= 0:
        w = None
    try:
        return EnsembleGraph.from_rdkit(
            combined,
            energies_kj=e,
            weights=w,
            temperature_k=temperature_k,
            y=y,
            conf_y=None if conf_y is None else np.asarray(conf_y, dtype=np.float64)[keep],
            name=name,
        )
    except ValueError as err:
        failures.append({"name": name, "reason": str(err)})
        return None


def _read_csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def _finite(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _limit(names: list[str], limit: int | None) -> list[str]:
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    return names if limit is None else names[:limit]


# ----------------------------------------------------------------------------- loaders
def load_drugs(
    path: str | Path,
    max_confs: int = 20,
    targets: Sequence[str] = ("ip", "ea", "chi"),
    temperature_k: float = 298.15,
    energy_unit: str = "ev",
    limit: int | None = None,
) -> MarcelDataset:
    """Drugs-75K from ``Drugs.zip`` (or its folder).

    Parameters
    ----------
    path : path
        ``Drugs.zip`` or a folder with ``Drugs.sdf`` and ``Drugs.csv``.
    max_confs : int
        Keep the ``max_confs`` lowest-energy conformers per molecule (MARCEL: 20).
    targets : sequence of str
        Columns of ``Drugs.csv`` (``energy``, ``ip``, ``ea``, ``chi``).
    temperature_k : float
        Temperature of the conformer weights.
    energy_unit : {"ev", "hartree", "kcal", "kj"}
        Unit of the per-conformer ``energy`` property.
    limit : int, optional
        Only the first ``limit`` molecules (file order).
    """
    if energy_unit not in _ENERGY_TO_KJ:
        raise ValueError(f"energy_unit must be one of {list(_ENERGY_TO_KJ)}, got {energy_unit!r}")
    src = _Source(path, "Drugs.zip")
    labels = {r["name"]: r for r in _read_csv(src.text("Drugs.csv"))}
    failures: list[dict] = []
    groups: dict[str, list] = {}
    smiles: dict[str, str] = {}
    for k, mol in _sdf_records(src, "Drugs.sdf", remove_hs=False):
        if mol is None:
            failures.append({"name": f"record {k}", "reason": "unparsable SDF record"})
            continue
        name = mol.GetProp("_Name")
        if name not in groups and limit is not None and len(groups) >= limit:
            continue
        groups.setdefault(name, []).append(mol)
        if mol.HasProp("smiles"):
            smiles.setdefault(name, mol.GetProp("smiles"))
    to_kj = _ENERGY_TO_KJ[energy_unit]
    samples = []
    for name in _limit(list(groups), limit):
        row = labels.get(name)
        if row is None or any(t not in row for t in targets):
            failures.append({"name": name, "reason": "no label row in Drugs.csv"})
            continue
        mols = sorted(groups[name], key=lambda m: _finite(m.GetProp("energy")))[:max_confs]
        e = np.array([_finite(m.GetProp("energy")) for m in mols]) * to_kj
        if not np.isfinite(e).all():
            failures.append({"name": name, "reason": "non-numeric conformer energy"})
            continue
        y = np.array([_finite(row[t]) for t in targets])
        g = _ensemble(mols, e, None, name, failures, y, temperature_k)
        if g is None:
            continue
        samples.append(MarcelSample(name, y, {"mol": g}, smiles.get(name, "")))
    return MarcelDataset("Drugs-75K", list(targets), samples, failures)


def load_kraken(
    path: str | Path,
    max_confs: int = 20,
    targets: Sequence[str] = ("sterimol_B5", "sterimol_L", "sterimol_burB5", "sterimol_burL"),
    temperature_k: float = 298.15,
    limit: int | None = None,
) -> MarcelDataset:
    """Kraken from ``Kraken.zip`` (or its folder), unpickled as plain data only.

    Keeps the ``max_confs`` conformers of largest Boltzmann weight (weights renormalised;
    relative energies :math:`-k_BT\\ln(w/w_\\max)` at ``temperature_k``). When every kept
    conformer's property dict holds all ``targets``, the graphs carry them as ``conf_y``
    (like :meth:`MoleculeSet.graphs` of the ligand set).
    """
    from rdkit import Chem, RDLogger

    src = _Source(path, "Kraken.zip")
    with src.open("Kraken.pickle") as fh:
        try:
            data = restricted_loads(fh.read(), allowed=_KRAKEN_GLOBALS)
        except pickle.UnpicklingError as err:
            raise ValueError(f"Kraken.pickle rejected: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"Kraken.pickle must hold a dict, got {type(data).__name__}")
    failures: list[dict] = []
    samples = []
    RDLogger.DisableLog("rdApp.*")
    try:
        for lig in _limit(list(data), limit):
            name = f"mol{int(lig)}" if str(lig).lstrip("-").isdigit() else str(lig)
            try:
                smi, boltz, confs = data[lig]
                ids = sorted(confs, key=lambda c: confs[c][1], reverse=True)[:max_confs]
                mols, w, cy = [], [], []
                for cid in ids:
                    block, weight, props = confs[cid]
                    m = Chem.MolFromMolBlock(block, removeHs=False)
                    if m is None:
                        failures.append({"name": name, "reason": f"conformer {cid}: bad mol block"})
                        continue
                    mols.append(m)
                    w.append(float(weight))
                    has_all = isinstance(props, dict) and all(t in props for t in targets)
                    cy.append([float(props[t]) for t in targets] if has_all else None)
                y = np.array([float(boltz[t]) for t in targets])
            except (KeyError, TypeError, ValueError) as err:
                failures.append({"name": name, "reason": f"bad entry layout: {err!r}"})
                continue
            if not mols:
                failures.append({"name": name, "reason": "no usable conformer"})
                continue
            w = np.asarray(w)
            w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
            kt = BOLTZMANN_KJ_PER_MOL_K * temperature_k
            e = -kt * np.log(np.clip(w / w.max(), 1e-300, None))
            conf_y = None if any(c is None for c in cy) else np.array(cy)
            g = _ensemble(mols, e, w, name, failures, y, temperature_k, conf_y)
            if g is None:
                continue
            samples.append(MarcelSample(name, y, {"mol": g}, str(smi)))
    finally:
        RDLogger.EnableLog("rdApp.*")
    return MarcelDataset("Kraken", list(targets), samples, failures)


def load_bde(path: str | Path, max_confs: int = 20, limit: int | None = None) -> MarcelDataset:
    """BDE from ``BDE.zip`` (or its folder): parts ``substrate`` and ``ligand``.

    Hydrogens are removed (``removeHs=True``) as in the reference code; conformers have
    uniform weights (no energies in the files).
    """
    src = _Source(path, "BDE.zip")
    labels: dict[str, float] = {}
    lines = src.text("BDE.txt").splitlines()
    for line in lines[1:]:  # header
        parts = re.split(r"\s{2,}|\t", line.strip())
        if len(parts) >= 2:
            labels[parts[0]] = _finite(parts[-1])
    failures: list[dict] = []
    groups: dict[str, dict[str, list]] = {}
    for part, fname in (("substrate", "substrates.sdf"), ("ligand", "ligands.sdf")):
        for k, mol in _sdf_records(src, fname, remove_hs=True):
            if mol is None:
                failures.append({"name": f"{fname} record {k}", "reason": "unparsable SDF record"})
                continue
            name = mol.GetProp("Name")
            lst = groups.setdefault(name, {"substrate": [], "ligand": []})[part]
            if len(lst) < max_confs:
                lst.append(mol)
    samples = []
    for name in _limit(list(groups), limit):
        if name not in labels or not np.isfinite(labels[name]):
            failures.append({"name": name, "reason": "no BindingEnergy in BDE.txt"})
            continue
        parts = {}
        for part in ("substrate", "ligand"):
            mols = groups[name][part]
            if not mols:
                failures.append({"name": name, "reason": f"no {part} conformer"})
                break
            g = _ensemble(mols, None, None, f"{name}/{part}", failures, np.array([labels[name]]))
            if g is None:
                break
            parts[part] = g
        if len(parts) == 2:
            from rdkit import Chem

            smi = Chem.MolToSmiles(groups[name]["substrate"][0])
            samples.append(MarcelSample(name, np.array([labels[name]]), parts, smi))
    return MarcelDataset("BDE", ["BindingEnergy"], samples, failures)


def load_ee(
    path: str | Path,
    max_confs: int = 20,
    temperature_k: float = 298.15,
    energy_unit: str = "kj",
    limit: int | None = None,
) -> MarcelDataset:
    """EE from ``EE.zip`` (or its folder): parts ``config_0`` (pro-R) and ``config_1`` (pro-S).

    Conformers are sorted by (``config_id``, ``energy``); the ``max_confs`` lowest of each
    configuration are kept; the sample in :data:`EE_EXCLUDED` is skipped.
    """
    if energy_unit not in _ENERGY_TO_KJ:
        raise ValueError(f"energy_unit must be one of {list(_ENERGY_TO_KJ)}, got {energy_unit!r}")
    src = _Source(path, "EE.zip")
    labels = {r["MergeID"]: _finite(r["de"]) for r in _read_csv(src.text("EE.csv"))}
    failures: list[dict] = []
    groups: dict[str, dict[int, list]] = {}
    smiles: dict[str, str] = {}
    for k, mol in _sdf_records(src, "EE.sdf", remove_hs=False):
        if mol is None:
            failures.append({"name": f"record {k}", "reason": "unparsable SDF record"})
            continue
        name = mol.GetProp("substrate_id") + "_" + mol.GetProp("ligand_id")
        if name in EE_EXCLUDED:
            continue
        config = 1 if mol.GetProp("config_id") == "1" else 0
        groups.setdefault(name, {0: [], 1: []})[config].append(mol)
        if mol.HasProp("smiles"):
            smiles.setdefault(name, mol.GetProp("smiles"))
    to_kj = _ENERGY_TO_KJ[energy_unit]
    samples = []
    for name in _limit(list(groups), limit):
        if name not in labels or not np.isfinite(labels[name]):
            failures.append({"name": name, "reason": "no de in EE.csv"})
            continue
        parts = {}
        for config in (0, 1):
            mols = sorted(groups[name][config], key=lambda m: _finite(m.GetProp("energy")))
            mols = mols[:max_confs]
            if not mols:
                failures.append({"name": name, "reason": f"no conformer of config {config}"})
                break
            e = np.array([_finite(m.GetProp("energy")) for m in mols]) * to_kj
            if not np.isfinite(e).all():
                failures.append({"name": name, "reason": "non-numeric conformer energy"})
                break
            y = np.array([labels[name]])
            g = _ensemble(mols, e, None, f"{name}/config_{config}", failures, y, temperature_k)
            if g is None:
                break
            parts[f"config_{config}"] = g
        if len(parts) == 2:
            samples.append(
                MarcelSample(name, np.array([labels[name]]), parts, smiles.get(name, ""))
            )
    return MarcelDataset("EE", ["de"], samples, failures)

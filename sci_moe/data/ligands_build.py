"""Build the Kraken-like ligand set: ligands, ensembles, descriptors, ensemble targets.

Recipe (all offline, by code):

1. **Ligands**: :func:`~sci_moe.data.ligands.choose_ligands` (phosphines, phosphites,
   aminophosphines from substituent lists; seeded, classes interleaved); ``n_ligands``
   = 100 by default (the *small* set), 1,000 with ``--full``.
2. **Ensembles**: ETKDGv3 + MMFF94 (:func:`sci_moe.molecules.generate_ensembles`), UFF
   where MMFF lacks parameters (:mod:`~sci_moe.data.ligands_conformers`; counted in the
   report as ``n_uff_fallback``); at most 8 conformers within 10 kcal/mol.
3. **Per conformer** (:mod:`~sci_moe.data.ligands_descriptors`): GFN2-xTB energy, HOMO,
   Delta-SCF vertical IP; Sterimol B1/B5/L, %Vbur, solid angle, solid cone angle around
   P with a dummy metal 2.28 A from P on the lone-pair axis.
4. **Targets** as in MARCEL's Kraken: for each descriptor ``d`` the Boltzmann average
   ``d`` (GFN2 weights, 298.15 K; MARCEL's name for it), the ensemble minimum ``d_min``
   and maximum ``d_max``. ``conf_targets`` holds the per-conformer descriptor in every
   one of the three columns, so ``MoleculeSet.load(dir).graphs(targets=[...])`` works as
   for the NCI set. ``mmff_energy_kj`` holds the force-field energies (UFF ones for
   the fallback ligands); the Boltzmann weights always come from GFN2.

Stored as a :class:`~sci_moe.data.molecule_set_store.MoleculeSet` (``molecule_set.npz``,
``report.json`` with the oracle gap per target, ``checksums.sha256``); every ligand's
descriptors are cached under a content hash (``DIR/cache``), so a killed build resumes
where it stopped and gives the same checksum. Failures are listed by ligand name.

Path convention (as ``data/molecule_set_small`` for the NCI set in
``benchmarks/spice/run.py``): ``data/ligand_set_small`` (``sci-moe data ligands --out
data/ligand_set_small``) and ``data/ligand_set_full`` (``--full``); the built data are
never committed, only ``benchmarks/spice/results/ligand_set_small.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._util import atomic_save_npz
from ..molecules import ConformerConfig, generate_ensembles, parallel_map
from .ligands import LIGAND_CLASSES, choose_ligands
from .ligands_conformers import uff_ensemble
from .ligands_descriptors import DESCRIPTOR_UNITS, DESCRIPTORS, _ligand_label_job
from .ligands_oracle import target_statistics
from .molecule_set_store import DATA_FILE, MoleculeSet, write_build_report
from .xtb import XTBConfig

__all__ = [
    "FULL_LIGANDS",
    "LIGAND_TARGETS",
    "LIGAND_TARGET_UNITS",
    "LigandSetConfig",
    "build_ligand_set",
]

#: Ligands of the full set (``--full``).
FULL_LIGANDS = 1000
#: Molecule-level targets, in column order: per descriptor the Boltzmann average, min, max.
LIGAND_TARGETS = tuple(f"{d}{s}" for d in DESCRIPTORS for s in ("", "_min", "_max"))
#: Units of :data:`LIGAND_TARGETS`.
LIGAND_TARGET_UNITS = {
    t: DESCRIPTOR_UNITS[d] for d in DESCRIPTORS for t in LIGAND_TARGETS if t.startswith(d)
}
_KEY_VERSION = 2


@dataclass
class LigandSetConfig:
    """Settings of :func:`build_ligand_set`.

    Parameters
    ----------
    n_ligands : int
        Ligands wanted (failed ones are replaced by the next candidates).
    seed : int
        Seed of the ligand choice (the conformer seed is in ``conformers``).
    temperature_k : float
        Temperature of the Boltzmann averages (K).
    conformers : ConformerConfig
        Ensemble settings (default: 24 ETKDG attempts, at most 8 conformers).
    xtb : XTBConfig
        GFN2-xTB settings.
    vbur_density, solid_density : float
        Grid densities of the buried volume (A^3 per point) and the solid angle.
    classes : tuple of str
        Ligand classes (:data:`~sci_moe.data.ligands.LIGAND_CLASSES`).
    """

    n_ligands: int = 100
    seed: int = 0
    temperature_k: float = 298.15
    conformers: ConformerConfig = field(
        default_factory=lambda: ConformerConfig(num_attempts=24, max_confs=8)
    )
    xtb: XTBConfig = field(default_factory=XTBConfig)
    vbur_density: float = 0.005
    solid_density: float = 0.01
    classes: tuple = LIGAND_CLASSES

    def __post_init__(self) -> None:
        if isinstance(self.conformers, dict):
            self.conformers = ConformerConfig(**self.conformers)
        if isinstance(self.xtb, dict):
            self.xtb = XTBConfig(**self.xtb)
        self.classes = tuple(self.classes)
        if self.n_ligands < 1:
            raise ValueError(f"n_ligands must be >= 1, got {self.n_ligands}")
        if not self.temperature_k > 0:
            raise ValueError(f"temperature_k must be > 0 K, got {self.temperature_k}")
        if not (self.vbur_density > 0 and self.solid_density > 0):
            raise ValueError("vbur_density and solid_density must be > 0")
        bad = [c for c in self.classes if c not in LIGAND_CLASSES]
        if bad or not self.classes:
            raise ValueError(f"classes must be a non-empty subset of {LIGAND_CLASSES}, got {bad}")


def _phosphorus(ens) -> tuple[int, list[int]]:
    ps = [a for a in ens.mol.GetAtoms() if a.GetAtomicNum() == 15]
    if len(ps) != 1 or ps[0].GetDegree() != 3:
        raise ValueError("ligand must have exactly one three-coordinate P")
    return ps[0].GetIdx(), [n.GetIdx() for n in ps[0].GetNeighbors()]


def _key(ens, cfg: LigandSetConfig) -> str:
    import tblite

    h = hashlib.sha256()
    h.update(np.ascontiguousarray(ens.atomic_numbers, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(ens.positions_nm, dtype=np.float64).tobytes())
    meta = {
        "xtb": asdict(cfg.xtb),
        "densities": [cfg.vbur_density, cfg.solid_density],
        "tblite": getattr(tblite, "__version__", "?"),
        "v": _KEY_VERSION,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def _assemble(ensembles, labels, cfg: LigandSetConfig) -> MoleculeSet:
    def columns(k, lab, w):
        d = np.stack([lab[name] for name in DESCRIPTORS], axis=1)  # (C, D)
        # columns d, d_min, d_max: per conformer the descriptor itself
        return np.repeat(d, 3, axis=1), np.stack([w @ d, d.min(0), d.max(0)], axis=1).reshape(-1)

    return MoleculeSet.from_ensembles(ensembles, labels, cfg.temperature_k, columns, LIGAND_TARGETS)


def build_ligand_set(
    out_dir: str | Path,
    config: LigandSetConfig | None = None,
    n_jobs: int | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    ligands: Sequence[tuple[str, str]] | None = None,
    on_ligand: Callable[[str], None] | None = None,
) -> MoleculeSet:
    """Build (or rebuild from the cache) the Kraken-like ligand set.

    Parameters
    ----------
    out_dir : path
        Output directory: ``molecule_set.npz``, ``report.json``, ``checksums.sha256``.
    config : LigandSetConfig, optional
        Default: the 100-ligand small set.
    n_jobs : int, optional
        Worker processes (default: all CPUs), one thread each.
    cache_dir : path, optional
        Per-ligand cache (default ``out_dir/cache``).
    progress : bool
        Progress bars (plain lines when stderr is not a terminal).
    ligands : sequence of (name, smiles), optional
        Your own ligands (one three-coordinate P each) instead of the enumeration.
    on_ligand : callable, optional
        ``on_ligand(name)`` after each ligand's descriptors are cached (e.g. to stop a
        build midway in a test; an exception propagates, the cache stays).

    Returns
    -------
    MoleculeSet
        With :data:`LIGAND_TARGETS` as ``target_names``.
    """
    cfg = config or LigandSetConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir is not None else out / "cache"
    n_jobs = n_jobs or os.cpu_count() or 1
    t0 = time.perf_counter()
    if ligands is None:
        pool = [(n, s) for n, s, _ in choose_ligands(10**9, cfg.seed, cfg.classes)]
    else:
        pool = [(str(n), str(s)) for n, s in ligands]
        if len({n for n, _ in pool}) != len(pool):
            raise ValueError("ligand names must be unique")
    ensembles, labels, failures = [], [], []
    timings = {"conformers_s": 0.0, "labels_s": 0.0, "labels_cpu_s": 0.0}
    n_cached = {"conformers": 0, "labels": 0}
    uff_names: list[str] = []
    pos = 0
    while len(ensembles) < cfg.n_ligands and pos < len(pool):
        chosen = pool[pos : pos + cfg.n_ligands - len(ensembles)]
        pos += len(chosen)
        t1 = time.perf_counter()
        ens, rep = generate_ensembles(
            [s for _, s in chosen],
            cfg.conformers,
            names=[n for n, _ in chosen],
            n_jobs=n_jobs,
            cache_dir=cache / "conformers",
            progress=progress,
        )
        n_cached["conformers"] += rep.n_cached
        for f in rep.failures:
            if f.get("stage") != "forcefield":
                failures.append(f)
                continue
            try:
                ens.append(uff_ensemble(f["name"], f["smiles"], cfg.conformers, cache / "uff"))
                uff_names.append(f["name"])
            except ValueError as err:
                failures.append({**f, "stage": "uff", "reason": f"{f['reason']}; UFF: {err}"})
        timings["conformers_s"] += time.perf_counter() - t1
        t1 = time.perf_counter()
        jobs, todo, keys, lab = [], [], [], [None] * len(ens)
        for i, e in enumerate(ens):
            try:
                p, nb = _phosphorus(e)
            except ValueError as err:
                failures.append(
                    {"name": e.name, "smiles": e.smiles, "stage": "ligand", "reason": str(err)}
                )
                lab[i] = {"failed": True, "reason": str(err), "reported": True}
                continue
            k = _key(e, cfg)
            f = cache / "labels" / k[:2] / f"{k}.npz"
            if f.exists():
                with np.load(f, allow_pickle=False) as z:
                    lab[i] = {kk: z[kk] for kk in z.files}
                n_cached["labels"] += 1
                continue
            todo.append(i)
            keys.append(k)
            jobs.append(
                (e.atomic_numbers, e.positions_nm, p, nb, 0, cfg.xtb,
                 (cfg.vbur_density, cfg.solid_density))
            )  # fmt: skip

        def store(j, res, todo=todo, keys=keys, ens=ens):
            if not res.get("failed"):
                k = keys[j]
                atomic_save_npz(cache / "labels" / k[:2] / f"{k}.npz", res, fsync=False)
            if on_ligand is not None:
                on_ligand(ens[todo[j]].name)

        res = parallel_map(
            _ligand_label_job, jobs, n_jobs=n_jobs, progress=progress,
            desc="ligand descriptors", on_result=store,
        )  # fmt: skip
        for j, r in enumerate(res):
            lab[todo[j]] = r
            timings["labels_cpu_s"] += float(r.get("cpu_s", 0.0))
        timings["labels_s"] += time.perf_counter() - t1
        for e, r in zip(ens, lab, strict=True):
            if r.get("failed"):
                if not r.get("reported"):
                    failures.append(
                        {
                            "name": e.name,
                            "smiles": e.smiles,
                            "stage": "labels",
                            "reason": str(r["reason"]),
                        }
                    )
            else:
                ensembles.append(e)
                labels.append(r)
    if not ensembles:
        raise ValueError("no ligand could be built; see the failures in the report")
    rank = {n: r for r, (n, _) in enumerate(pool)}
    both = sorted(zip(ensembles, labels, strict=True), key=lambda el: rank[el[0].name])
    ms = _assemble([b[0] for b in both], [b[1] for b in both], cfg)
    ms.save(out / DATA_FILE)
    classes = {}
    for n in ms.names:
        classes[n.split("-")[0]] = classes.get(n.split("-")[0], 0) + 1
    report = {
        "kind": "ligand_set",
        "n_ligands": len(ms),
        "n_requested": cfg.n_ligands,
        "n_candidates_tried": pos,
        "n_conformers": int(ms.conf_ptr[-1]),
        "classes": classes,
        "n_mmff": len(ms) - sum(n in set(uff_names) for n in ms.names),
        "n_uff_fallback": sum(n in set(uff_names) for n in ms.names),
        "uff_fallback": sorted(uff_names),
        "failures": failures,
        "seconds": time.perf_counter() - t0,
        "timings": timings,
        "cache_hits": n_cached,
        "n_jobs": n_jobs,
        "config": asdict(cfg),
        "targets": list(ms.target_names),
        "target_units": LIGAND_TARGET_UNITS,
        "statistics": target_statistics(ms, LIGAND_TARGET_UNITS),
        "content_sha256": ms.content_sha256(),
    }
    write_build_report(out, report)
    return ms

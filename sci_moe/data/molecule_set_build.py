"""Build the offline conformer-ensemble set: candidates, ensembles, labels, report.

See :mod:`sci_moe.data.molecule_set` for the recipe. Work is parallel over molecules
(one thread per process), every molecule's result is cached under a content hash,
failures are listed in ``report.json``, and the output files get sha256 checksums.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._util import atomic_save_npz
from ..molecules import (
    ConformerConfig,
    ConformerEnsemble,
    generate_ensembles,
    parallel_map,
)
from .molecule_labels import _charge, _label_job, _label_key
from .molecule_set_store import (
    DATA_FILE,
    ELECTRONIC_TARGET_UNITS,
    ELECTRONIC_TARGETS,
    TARGET_UNITS,
    TARGETS,
    MoleculeSet,
    write_build_report,
)
from .nci import _canonical, nci_pool
from .xtb import XTBConfig, _electronic_job

__all__ = ["MoleculeSetConfig", "build_molecule_set"]


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
    electronic : bool
        Also label MARCEL Drugs-75K's electronic targets :data:`ELECTRONIC_TARGETS`
        (vertical IP, EA by Delta-SCF GFN2 with open-shell ions, electronegativity
        :math:`\\chi = (\\mathrm{IP} + \\mathrm{EA})/2`, eV, Boltzmann-averaged) as extra
        columns after the default four. Off by default: the default set, its cache and
        its numbers are unchanged.
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
    electronic: bool = False

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


def _assemble(ensembles, labels, cfg: MoleculeSetConfig, electronic=None) -> MoleculeSet:
    def columns(k, lab, w):
        ct = np.stack(
            [
                np.linalg.norm(lab["dipole_debye"], axis=1),
                lab["gap_ev"],
                lab["rg_nm"],
                lab["sasa_nm2"],
            ],
            axis=1,
        )
        if electronic is not None:
            el = electronic[k]
            ip, ea = np.asarray(el["ip_ev"]), np.asarray(el["ea_ev"])
            ct = np.concatenate([ct, np.stack([ip, ea, 0.5 * (ip + ea)], axis=1)], axis=1)
        return ct, w @ ct

    names = None if electronic is None else [*TARGETS, *ELECTRONIC_TARGETS]
    return MoleculeSet.from_ensembles(ensembles, labels, cfg.temperature_k, columns, names)


def _statistics(ms: MoleculeSet) -> dict:
    low = ms.lowest_energy_targets()
    stats = {}
    for t, name in enumerate(ms.target_names):
        within = [
            float(np.std(ms.conf_targets[ms.conf_ptr[i] : ms.conf_ptr[i + 1], t]))
            for i in range(len(ms))
        ]
        stats[name] = {
            "unit": {**TARGET_UNITS, **ELECTRONIC_TARGET_UNITS}.get(name, ""),
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


def _electronic_labels(ensembles, cfg: MoleculeSetConfig, cache: Path, n_jobs: int, progress: bool):
    """Per-conformer Delta-SCF IP / EA of every ensemble (cached like the labels)."""
    import hashlib

    out: list = [None] * len(ensembles)
    keys, todo = [], []
    for i, e in enumerate(ensembles):
        h = hashlib.sha256(_label_key(e, cfg.xtb, cfg.sasa_density).encode())
        h.update(b"electronic-v1")
        k = h.hexdigest()
        f = cache / "electronic" / k[:2] / f"{k}.npz"
        if f.exists():
            with np.load(f, allow_pickle=False) as z:
                out[i] = {kk: z[kk] for kk in z.files}
            continue
        keys.append(k)
        todo.append(i)

    def store(j, res):
        if not res.get("failed"):
            k = keys[j]
            atomic_save_npz(cache / "electronic" / k[:2] / f"{k}.npz", res, fsync=False)

    jobs = [
        (ensembles[i].atomic_numbers, ensembles[i].positions_nm, _charge(ensembles[i])[0], cfg.xtb)
        for i in todo
    ]
    failures = []
    for j, res in enumerate(
        parallel_map(
            _electronic_job,
            jobs,
            n_jobs=n_jobs,
            progress=progress,
            desc="GFN2 IP/EA",
            on_result=store,
        )
    ):
        e = ensembles[todo[j]]
        if res.get("failed"):
            failures.append(
                {"name": e.name, "smiles": e.smiles, "stage": "ip_ea", "reason": res["reason"]}
            )
        else:
            out[todo[j]] = res
    return out, failures


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
        keys = [_label_key(e, cfg.xtb, cfg.sasa_density) for e in ens]
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
            atomic_save_npz(cache / "labels" / k[:2] / f"{k}.npz", res, fsync=False)

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
    electronic = None
    if cfg.electronic:
        t1 = time.perf_counter()
        electronic, el_failed = _electronic_labels(
            [b[0] for b in both], cfg, cache, n_jobs, progress
        )
        timings["electronic_s"] = time.perf_counter() - t1
        failures += el_failed
        keep = [i for i, e in enumerate(electronic) if e is not None]
        both = [both[i] for i in keep]
        electronic = [electronic[i] for i in keep]
        if not both:
            raise ValueError("no molecule got IP/EA labels; see the failures in the report")
    ms = _assemble([b[0] for b in both], [b[1] for b in both], cfg, electronic)
    ms.save(out / DATA_FILE)
    import torch

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
        "target_units": {**TARGET_UNITS, **(ELECTRONIC_TARGET_UNITS if cfg.electronic else {})},
        "statistics": _statistics(ms),
        "content_sha256": ms.content_sha256(),
    }
    if plot:
        _plot(ms, out / "labels.png")
    write_build_report(
        out, report, ("labels.png",) if plot else (), versions={"torch": torch.__version__}
    )
    return ms
